"""Long-poll support for Fetch: a fetch that found too little data waits here until a
produce appends to one of its partitions, or its max_wait runs out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

__all__ = ["AppendWaiters"]

TopicPartition = tuple[str, int]


class AppendWaiters:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """Wait for an append to any of ``partitions``; False on timeout."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for tp in keys:
            self._waiting.setdefault(tp, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
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
                if not future.done():
                    future.set_result(None)

    def notify_all(self) -> None:
        for tp in list(self._waiting):
            self.notify(tp)
