"""Long-poll support for Fetch: a fetch that found too little data waits here until a
produce appends to one of its partitions, or its max_wait runs out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

__all__ = ["AppendWaiters", "Deadline"]

TopicPartition = tuple[str, int]


class AppendWaiters:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[bool]]] = {}

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """Wait for an append to any of ``partitions``; False on timeout.

        The waiting task awaits the future itself, with a timer that resolves it: an append
        wakes it in the next turn of the loop (``asyncio.wait_for`` would add a hop).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        keys = list(partitions)
        for tp in keys:
            self._waiting.setdefault(tp, set()).add(future)
        timer = loop.call_later(max(0.0, timeout_s), _resolve, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            for tp in keys:
                waiters = self._waiting.get(tp)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiting[tp]

    def notify(self, tp: TopicPartition) -> None:
        waiters = self._waiting.pop(tp, None)
        if waiters:
            for future in waiters:
                _resolve(future, True)

    def notify_all(self) -> None:
        for tp in list(self._waiting):
            self.notify(tp)


class Deadline:
    """The end of a long poll's max_wait, on the monotonic clock the event loop's timers use.

    Not the broker's millisecond wall clock: a deadline taken from a truncated millisecond
    ends up to a millisecond before max_wait has passed, and a wall clock can step.
    """

    __slots__ = ("_at",)

    def __init__(self, wait_ms: int) -> None:
        self._at = time.monotonic() + max(wait_ms, 0) / 1000

    def remaining_s(self) -> float:
        """Seconds left; zero or less once it has passed."""
        return self._at - time.monotonic()


def _resolve(future: asyncio.Future[bool], appended: bool) -> None:
    if not future.done():
        future.set_result(appended)
