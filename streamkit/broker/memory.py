"""One memory budget for the requests every connection holds: Kafka's
``queued.max.request.bytes``.

``socket.request.max.bytes`` caps one request; without an overall cap N connections could
each hold a partly received request that size. Every connection is charged for the bytes it
has read but not yet answered (a partial frame, and the complete requests being handled).
Before each socket read a connection asks for room; when the budget is spent it stops
reading (the client's TCP window closes: back-pressure) until another connection frees
memory, instead of allocating.

Rules:

- While ``used < capacity`` a read may take at most what is left (never more than the
  read size), so reads alone never exceed the budget.
- When the budget is spent, connections holding a partial frame could each be waiting for
  the others to free memory. To keep one moving, a single connection that holds a partial
  frame may read past the budget (the overdraft) until it has completed a request; the
  budget is then exceeded by at most one request (``socket.request.max.bytes``), as Kafka's
  non-strict memory pool allows.
- A capacity of -1 means unbounded (Kafka's default; streamkit's default is 500 MiB).
"""

from __future__ import annotations

import asyncio
import logging

__all__ = ["RequestMemory"]

log = logging.getLogger(__name__)


class RequestMemory:
    def __init__(self, capacity: int, read_size: int) -> None:
        self.capacity = capacity
        self.read_size = read_size
        self.used = 0
        self._charges: dict[object, int] = {}
        self._overdraft: object | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._exhausted_logged = False

    @property
    def unbounded(self) -> bool:
        return self.capacity < 0

    def charge_of(self, owner: object) -> int:
        return self._charges.get(owner, 0)

    def try_reserve(self, owner: object) -> int:
        """Charge ``owner`` for a read and return its size; 0 means wait for memory."""
        if self.unbounded:
            n = self.read_size
        elif self.used < self.capacity:
            n = min(self.read_size, self.capacity - self.used)
        elif self.charge_of(owner) > 0 and self._overdraft in (None, owner):
            self._overdraft = owner
            n = self.read_size
        else:
            if not self._exhausted_logged:
                log.warning("queued.max.request.bytes (%d) reached: pausing reads until requests "
                            "complete", self.capacity)
                self._exhausted_logged = True
            return 0
        self._set(owner, self.charge_of(owner) + n)
        return n

    async def reserve(self, owner: object) -> int:
        """Wait for room, then charge ``owner`` for a read; returns the read size."""
        while not (n := self.try_reserve(owner)):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return n

    def hold(self, owner: object, nbytes: int, completed: bool = False) -> None:
        """``owner`` now holds ``nbytes`` of unanswered request data; ``completed``: it
        answered a request since its last read (its overdraft, if any, ends)."""
        if completed and self._overdraft is owner:
            self._overdraft = None
            self._wake()
        self._set(owner, nbytes)

    def release(self, owner: object) -> None:
        """The connection is gone: everything it held is free."""
        if self._overdraft is owner:
            self._overdraft = None
        self._set(owner, 0)
        self._charges.pop(owner, None)
        self._wake()

    def _set(self, owner: object, nbytes: int) -> None:
        before = self._charges.get(owner, 0)
        self._charges[owner] = nbytes
        self.used += nbytes - before
        if nbytes < before:
            self._wake()

    def _wake(self) -> None:
        if not self.unbounded and self.used < self.capacity:
            if self._exhausted_logged:
                log.info("queued.max.request.bytes: memory freed, reading again")
            self._exhausted_logged = False
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
