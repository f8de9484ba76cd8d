"""Long-poll support for Fetch: a fetch that found too little data waits here until a
produce appends to one of its partitions, or its max_wait runs out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

__all__ = ["AppendWaiters"]

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


def _resolve(future: asyncio.Future[bool], appended: bool) -> None:
    if not future.done():
        future.set_result(appended)
