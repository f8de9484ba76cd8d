"""Inbox (inbox.py): the bounded FIFO between the runtime and an agent. Pure asyncio."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.streams.inbox import Inbox


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
