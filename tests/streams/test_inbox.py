"""Inbox (inbox.py): the bounded FIFO between the runtime and an agent. Pure asyncio."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.streams.inbox import Inbox, RecordInbox
from streamkit.streams.records import Cursor, DecodedRecords


async def spin(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_needs_room_for_one_item() -> None:
    with pytest.raises(ValueError, match="at least one item"):
        Inbox(0)


async def test_offer_refuses_when_full_and_take_makes_room() -> None:
    inbox: Inbox[int] = Inbox(2)
    assert inbox.offer(1) and inbox.offer(2)
    assert not inbox.offer(3)
    assert len(inbox) == 2
    assert inbox.take() == 1
    assert inbox.offer(3)
    assert [inbox.take(), inbox.take()] == [2, 3]
    assert not inbox


async def test_put_waits_for_room_and_get_waits_for_an_item() -> None:
    inbox: Inbox[int] = Inbox(1)
    await inbox.put(1)
    putting = asyncio.ensure_future(inbox.put(2))
    await spin()
    assert not putting.done(), "put() went past a full inbox"
    assert await inbox.get() == 1
    await asyncio.wait_for(putting, 1)
    assert await inbox.get() == 2
    getting = asyncio.ensure_future(inbox.get())
    await spin()
    assert not getting.done(), "get() returned from an empty inbox"
    assert inbox.offer(3)
    assert await asyncio.wait_for(getting, 1) == 3


async def test_remove_if_keeps_order_and_wakes_a_waiting_put() -> None:
    inbox: Inbox[int] = Inbox(3)
    for i in (1, 2, 3):
        inbox.offer(i)
    putting = asyncio.ensure_future(inbox.put(4))
    await spin()
    assert not putting.done()
    assert inbox.remove_if(lambda i: i == 2) == 1
    await asyncio.wait_for(putting, 1)
    assert [inbox.take() for _ in range(len(inbox))] == [1, 3, 4]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(), max_size=200), st.integers(1, 8))
def test_a_slow_consumer_gets_everything_in_order(items: list[int], maxsize: int) -> None:
    async def run() -> list[int]:
        inbox: Inbox[int] = Inbox(maxsize)
        got: list[int] = []

        async def consume() -> None:
            for _ in items:
                got.append(await inbox.get())
                await asyncio.sleep(0)

        consumer = asyncio.ensure_future(consume())
        for item in items:
            if not inbox.offer(item):
                await inbox.put(item)
            assert len(inbox) <= maxsize
        await asyncio.wait_for(consumer, 5)
        return got

    assert asyncio.run(run()) == items


# -- RecordInbox: whole decoded batches in, one record at a time out ----------------------


def _records(partition: int, offsets: list[int]) -> DecodedRecords:
    return DecodedRecords("t", partition, [f"k{o}" for o in offsets], [f"v{o}" for o in offsets],
                          [1000 + o for o in offsets], offsets, [f"k{o}".encode() for o in offsets],
                          [None] * len(offsets))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 10**6), min_size=1, max_size=30), max_size=12), st.integers(1, 8),
       st.lists(st.integers(1, 5), min_size=1, max_size=5))
def test_record_inbox_hands_out_every_record_in_order_within_its_bound(
        batches: list[list[int]], maxsize: int, takes: list[int]) -> None:
    """Batches put whole (waiting for room, a part at a time) come out record by record,
    through the cursor or as events (``take_many``, a ``take()`` batch), in order, the
    inbox never holding more than ``maxsize`` records; the cursor reads each record's
    fields and builds its event."""

    async def run() -> list[tuple[int, int, str, int, int]]:
        inbox = RecordInbox(maxsize)
        cursor = Cursor()
        got: list[tuple[int, int, str, int, int]] = []
        total = sum(map(len, batches))

        async def consume() -> None:
            turn = 0
            while len(got) < total:
                await inbox.wait()
                n = takes[turn % len(takes)]
                turn += 1
                if n == 1:
                    inbox.advance(cursor)
                    event = cursor.event()
                    assert (event.offset, event.value, event.timestamp) == (cursor.offset, cursor.value,
                                                                            cursor.timestamp)
                    assert (event.raw_key, event.partition) == (cursor.raw_key, cursor.partition)
                    got.append((cursor.partition, cursor.offset, cursor.value, cursor.timestamp, 1))
                else:
                    got.extend((e.partition, e.offset, e.value, e.timestamp, n) for e in inbox.take_many(n))
                await asyncio.sleep(0)

        consumer = asyncio.ensure_future(consume())
        for p, offsets in enumerate(batches):
            await inbox.put_records(_records(p, offsets))
            assert len(inbox) <= maxsize
        await asyncio.wait_for(consumer, 5)
        assert not inbox
        return got

    got = asyncio.run(run())
    assert [g[:4] for g in got] == [(p, o, f"v{o}", 1000 + o) for p, offsets in enumerate(batches) for o in offsets]


async def test_record_inbox_drops_revoked_partitions_and_wakes_a_waiting_put() -> None:
    inbox = RecordInbox(4)
    inbox.offer_records(_records(0, [1, 2]), 0, 2)
    inbox.offer_records(_records(1, [3, 4]), 0, 2)
    putting = asyncio.ensure_future(inbox.put_records(_records(0, [5])))
    await spin()
    assert not putting.done(), "put_records() went past a full inbox"
    assert inbox.remove_partitions({("t", 1)}) == 2
    await asyncio.wait_for(putting, 1)
    assert len(inbox) == 3
    assert [e.offset for e in inbox.take_many(10)] == [1, 2, 5]
