"""RecordInbox (inbox.py): the bounded FIFO between the runtime and an agent. Pure asyncio."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.streams.inbox import RecordInbox
from streamkit.streams.records import Cursor, DecodedRecords


async def spin(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_needs_room_for_one_record() -> None:
    with pytest.raises(ValueError, match="at least one"):
        RecordInbox(0)


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
