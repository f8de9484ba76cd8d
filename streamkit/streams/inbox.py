"""Inbox: the bounded FIFO between the runtime and one agent instance.

One producer (the runtime's consume loop) and one consumer (the agent's task). It exists
instead of ``asyncio.Queue`` because it is on the per-record path: ``offer`` and ``take``
are plain calls when there is room or something to take, and only a full or an empty inbox
costs an ``await``. A bounded inbox is the back-pressure: when an agent falls behind, the
consume loop waits in ``put`` instead of buffering the topic in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Inbox"]

T = TypeVar("T")


class Inbox(Generic[T]):
    __slots__ = ("_items", "_maxsize", "_readable", "_writable")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"an inbox holds at least one item, not {maxsize}")
        self._items: deque[T] = deque()
        self._maxsize = maxsize
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()

    def __len__(self) -> int:
        return len(self._items)

    def offer(self, item: T) -> bool:
        """Append ``item`` if there is room; False (nothing appended) when full."""
        if len(self._items) >= self._maxsize:
            return False
        self._items.append(item)
        if not self._readable.is_set():
            self._readable.set()
        return True

    def offer_many(self, items: list[T]) -> int:
        """Append as many of ``items`` as there is room for, in order; how many."""
        n = min(self._maxsize - len(self._items), len(items))
        if n <= 0:
            return 0
        self._items.extend(items if n == len(items) else items[:n])
        if not self._readable.is_set():
            self._readable.set()
        return n

    async def put(self, item: T) -> None:
        """Append ``item``, waiting while the inbox is full."""
        while not self.offer(item):
            self._writable.clear()
            await self._writable.wait()

    def take(self) -> T:
        """The oldest item; the inbox must not be empty (check ``len`` first)."""
        item = self._items.popleft()
        if not self._writable.is_set():
            self._writable.set()
        return item

    def take_many(self, n: int) -> list[T]:
        """Up to ``n`` of the oldest items (fewer if the inbox holds fewer)."""
        items = self._items
        popleft = items.popleft
        out = [popleft() for _ in range(min(n, len(items)))]
        if out and not self._writable.is_set():
            self._writable.set()
        return out

    async def wait_readable(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for an item; whether there is one."""
        if not self._items:
            self._readable.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._readable.wait(), timeout)
        return bool(self._items)

    async def get(self) -> T:
        """The oldest item, waiting while the inbox is empty."""
        while not self._items:
            self._readable.clear()
            await self._readable.wait()
        return self.take()

    def remove_if(self, predicate: Callable[[T], bool]) -> int:
        """Drop the items ``predicate`` selects (order of the rest kept); how many went."""
        kept = deque(item for item in self._items if not predicate(item))
        removed = len(self._items) - len(kept)
        self._items = kept
        if removed and not self._writable.is_set():
            self._writable.set()
        return removed
