"""ProcessingGate and AckTracker: how a commit sees a consistent cut of the processing.

A commit must include exactly the effects (table writes, produced records) of the events
whose offsets it commits. Agents process events concurrently with the runtime, so the
runtime closes the gate before committing: every agent finishes the event it holds and
parks before taking the next one. With the gate closed, "acknowledged" is exactly "fully
processed", and the commit is consistent.
"""

from __future__ import annotations

import asyncio

__all__ = ["AckTracker", "ProcessingGate"]

TopicPartition = tuple[str, int]


class ProcessingGate:
    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def is_open(self) -> bool:
        """No commit is running or waiting: an agent inside may go on to its next event
        without leaving (``leave`` then ``try_enter`` would only undo each other)."""
        return self._open.is_set()

    def try_enter(self) -> bool:
        """Enter without waiting if no commit is running (the per-event fast path); False
        means the caller must ``await enter()``."""
        if not self._open.is_set():
            return False
        self._busy += 1
        if self._busy == 1:
            self._idle.clear()
        return True

    async def enter(self) -> None:
        """An agent is about to process an event: wait while a commit is running."""
        # Re-check after every wake-up: reopen() wakes the parked agents, but another commit
        # (a rebalance's, a stop's) may close the gate again before they run; entering then
        # would process an event in the middle of that commit.
        while not self.try_enter():
            await self._open.wait()

    def leave(self) -> None:
        self._busy -= 1
        if self._busy == 0:
            self._idle.set()

    async def close(self) -> None:
        """Stop new events from starting and wait until no event is in progress."""
        self._open.clear()
        await self._idle.wait()

    def reopen(self) -> None:
        self._open.set()


class AckTracker:
    """Committable offsets: for each partition, the lowest acknowledged position across the
    readers of its topic (every reader of a topic sees every record of it, in order)."""

    def __init__(self) -> None:
        self._acked: dict[TopicPartition, dict[object, int]] = {}

    def register(self, reader: object, tp: TopicPartition) -> None:
        """A reader will acknowledge records of ``tp`` (called when records are delivered)."""
        readers = self._acked.setdefault(tp, {})
        readers.setdefault(reader, -1)

    def ack(self, reader: object, tp: TopicPartition, offset: int) -> None:
        readers = self._acked.setdefault(tp, {})
        if offset > readers.get(reader, -1):
            readers[reader] = offset

    def committable(self) -> dict[TopicPartition, int]:
        """Next offset to consume per partition (Kafka's committed-offset convention)."""
        out = {}
        for tp, readers in self._acked.items():
            low = min(readers.values())
            if low >= 0:
                out[tp] = low + 1
        return out

    def forget(self, partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            self._acked.pop(tp, None)
