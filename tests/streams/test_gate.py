"""ProcessingGate and AckTracker (gate.py): the two pieces that make a commit a consistent
cut of the processing. Pure asyncio, no broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from streamkit.streams.agent import Agent
from streamkit.streams.app import App
from streamkit.streams.event import Event
from streamkit.streams.gate import AckTracker, ProcessingGate


async def spin(rounds: int = 5) -> None:
    """Let every ready task run a few steps (no wall-clock wait)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


# -- ProcessingGate --------------------------------------------------------------------


async def test_enter_passes_while_open() -> None:
    gate = ProcessingGate()
    await asyncio.wait_for(gate.enter(), 1)
    await asyncio.wait_for(gate.enter(), 1)
    gate.leave()
    gate.leave()
    await asyncio.wait_for(gate.close(), 1)  # idle: closes at once


async def test_close_waits_for_events_in_progress() -> None:
    gate = ProcessingGate()
    await gate.enter()
    await gate.enter()
    closing = asyncio.ensure_future(gate.close())
    await spin()
    assert not closing.done(), "close() returned while two events were in progress"
    gate.leave()
    await spin()
    assert not closing.done(), "close() returned while one event was in progress"
    gate.leave()
    await asyncio.wait_for(closing, 1)


async def test_try_enter_is_the_fast_path_and_counts_like_enter() -> None:
    gate = ProcessingGate()
    assert gate.try_enter()
    closing = asyncio.ensure_future(gate.close())
    await spin()
    assert not closing.done(), "close() returned while a try_enter()ed event was in progress"
    assert not gate.try_enter(), "try_enter() let an event start during a commit"
    gate.leave()
    await asyncio.wait_for(closing, 1)
    gate.reopen()
    assert gate.try_enter()
    gate.leave()


async def test_enter_waits_while_closed_and_resumes_on_reopen() -> None:
    gate = ProcessingGate()
    await gate.close()
    entering = asyncio.ensure_future(gate.enter())
    await spin()
    assert not entering.done(), "an agent started an event during a commit"
    gate.reopen()
    await asyncio.wait_for(entering, 1)
    gate.leave()


async def test_no_event_starts_between_reopen_and_an_immediate_second_close() -> None:
    """A commit reopens the gate and another one (a rebalance's, a stop's) closes it again
    before the parked agent ran: the agent must stay parked. Otherwise it processes an event
    in the middle of the second commit, writing to a transaction whose changelog records were
    already taken (TransactionStateError), or past the offsets being committed."""
    gate = ProcessingGate()
    await gate.close()
    entering = asyncio.ensure_future(gate.enter())
    await spin()
    gate.reopen()
    # The second commit closes the gate in the same step (as a commit that finds the routing
    # lock free does): the parked agent has been woken but has not run yet.
    await gate.close()
    await spin()
    assert not entering.done(), "an agent entered while the gate was closed"
    gate.reopen()
    await asyncio.wait_for(entering, 1)
    gate.leave()
    await asyncio.wait_for(gate.close(), 1)


async def test_many_agents_park_and_all_resume() -> None:
    gate = ProcessingGate()
    await gate.close()
    entering = [asyncio.ensure_future(gate.enter()) for _ in range(5)]
    await spin()
    assert not any(e.done() for e in entering)
    gate.reopen()
    await asyncio.wait_for(asyncio.gather(*entering), 1)
    closing = asyncio.ensure_future(gate.close())
    for _ in range(4):
        gate.leave()
    await spin()
    assert not closing.done()
    gate.leave()
    await asyncio.wait_for(closing, 1)


# -- AckTracker ------------------------------------------------------------------------

TP = ("t", 0)


def test_nothing_is_committable_before_an_ack() -> None:
    acks = AckTracker()
    assert acks.committable() == {}
    acks.register("agent", TP)
    assert acks.committable() == {}


def test_committable_is_the_next_offset_after_the_last_ack() -> None:
    acks = AckTracker()
    acks.register("agent", TP)
    acks.ack("agent", TP, 0)
    assert acks.committable() == {TP: 1}
    acks.ack("agent", TP, 7)
    assert acks.committable() == {TP: 8}


def test_acks_never_go_back() -> None:
    acks = AckTracker()
    acks.ack("agent", TP, 7)
    acks.ack("agent", TP, 3)
    assert acks.committable() == {TP: 8}


def test_the_slowest_reader_of_a_partition_decides() -> None:
    acks = AckTracker()
    acks.register("fast", TP)
    acks.register("slow", TP)
    acks.ack("fast", TP, 10)
    assert acks.committable() == {}, "committed past records a reader has not processed"
    acks.ack("slow", TP, 4)
    assert acks.committable() == {TP: 5}
    acks.ack("slow", TP, 12)
    assert acks.committable() == {TP: 11}


def test_registering_again_keeps_progress() -> None:
    acks = AckTracker()
    acks.register("agent", TP)
    acks.ack("agent", TP, 5)
    acks.register("agent", TP)
    assert acks.committable() == {TP: 6}


def test_partitions_are_independent_and_forgotten_on_revoke() -> None:
    acks = AckTracker()
    other = ("t", 1)
    acks.ack("a", TP, 1)
    acks.ack("a", other, 9)
    assert acks.committable() == {TP: 2, other: 10}
    acks.forget({TP})
    assert acks.committable() == {other: 10}
    acks.register("a", TP)
    assert TP not in acks.committable()


@pytest.mark.parametrize("readers", [1, 3])
def test_committable_never_exceeds_any_readers_progress(readers: int) -> None:
    acks = AckTracker()
    names = [f"r{i}" for i in range(readers)]
    progress = dict.fromkeys(names, -1)
    for name in names:
        acks.register(name, TP)
    for step in range(30):
        name = names[step % readers]
        progress[name] += step % 4
        acks.ack(name, TP, progress[name])
        low = min(progress.values())
        expected = {TP: low + 1} if low >= 0 else {}
        assert acks.committable() == expected


# -- an agent at the gate across a revoke ------------------------------------------------


class _Worker:
    """What an AgentStream needs of the runtime: the gate, acks, and ownership."""

    def __init__(self) -> None:
        self.gate = ProcessingGate()
        self.owned = {("t", 0), ("t", 1)}
        self.acked: list[int] = []

    def ack(self, stream: object, event: Event, count: int = 1) -> None:
        self.acked.append(event.offset)

    def owns(self, event: Event) -> bool:
        return (event.topic, event.partition) in self.owned


async def test_an_event_taken_before_a_revoke_is_not_processed_after_it(tmp_path: Path) -> None:
    """An agent that took an event and waits at the gate (closed by the rebalance's commit)
    must not process it once the commit reopens the gate if its partition was revoked
    meanwhile: the new owner processes it (here it met tables, and under exactly-once a
    producer, that were gone)."""
    worker = _Worker()
    app = App("gate-test", data_dir=tmp_path)
    agent = Agent(app, _noop, app.topic("t"), name="a")
    (stream,) = agent.new_streams()
    stream.runtime = worker
    events = stream.events().__aiter__()
    await worker.gate.close()  # the revoke's commit
    nxt = asyncio.ensure_future(events.__anext__())
    stream.inbox.offer(Event("k", "revoked", 0, [], "t", 1, 7))
    await spin()
    assert not nxt.done()  # taken from the inbox, parked at the gate
    worker.owned.discard(("t", 1))  # the revoke
    worker.gate.reopen()
    stream.inbox.offer(Event("k", "kept", 0, [], "t", 0, 3))
    got = await asyncio.wait_for(nxt, 1)
    assert (got.value, got.partition) == ("kept", 0)
    assert worker.gate._busy == 1  # "kept" is being processed; "revoked" left the gate


async def _noop(stream: object) -> None:
    return None
