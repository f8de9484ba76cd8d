"""A long poll's wait: it ends when an append arrives, or not before its max_wait."""

from __future__ import annotations

import asyncio

import pytest

from streamkit.broker import waiters as waiters_module
from streamkit.broker.waiters import AppendWaiters, Deadline


async def test_a_wait_that_times_out_ends_at_its_deadline_not_before() -> None:
    # A deadline on the broker's millisecond wall clock ended up to a millisecond early
    # (the millisecond it was taken in was truncated): a Fetch with min_bytes unmet was
    # answered after 0.9999 s of its 1 s max_wait.
    waiters = AppendWaiters()
    for wait_ms in (1, 7, 30):
        deadline = Deadline(wait_ms)
        assert not await waiters.wait([("t", 0)], deadline.remaining_s())
        assert deadline.remaining_s() < 1e-6


async def test_an_append_ends_the_wait_before_its_deadline() -> None:
    waiters = AppendWaiters()
    deadline = Deadline(60_000)
    waiting = asyncio.ensure_future(waiters.wait([("t", 0), ("t", 1)], deadline.remaining_s()))
    await asyncio.sleep(0)
    waiters.notify(("t", 1))
    assert await waiting
    assert deadline.remaining_s() > 50


def test_a_deadline_counts_max_wait_on_the_monotonic_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(waiters_module.time, "monotonic", lambda: now[0])
    deadline = Deadline(1500)
    assert deadline.remaining_s() == pytest.approx(1.5)
    now[0] = 101.4999
    assert deadline.remaining_s() > 0
    now[0] = 101.5
    assert deadline.remaining_s() <= 0
    assert Deadline(-5).remaining_s() <= 0
