"""The asyncio edge of the group coordinator: futures for deferred JoinGroup/SyncGroup
answers and the timer that fires group deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from streamkit.broker.group.coordinator import GroupCoordinator
from streamkit.broker.group.group import Delivery, JoinResult, Outcome, SyncResult

__all__ = ["GroupRuntime"]

log = logging.getLogger(__name__)

_Key = tuple[str, str, str]  # group id, member id, "join" | "sync"
_TICK_S = 0.05


class GroupRuntime:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self._waiting: dict[_Key, asyncio.Future[JoinResult | SyncResult]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="streamkit-group-timer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()

    def deliver(self, deliveries: list[Delivery]) -> None:
        for d in deliveries:
            kind = "join" if isinstance(d.result, JoinResult) else "sync"
            future = self._waiting.pop((d.group_id, d.member_id, kind), None)
            if future is not None and not future.done():
                future.set_result(d.result)

    def fail_waiting(self, groups: Callable[[str], bool], error: ErrorCode) -> None:
        """Answer ``error`` to every JoinGroup/SyncGroup waiting in a group ``groups``
        accepts (this broker stopped coordinating them: NOT_COORDINATOR)."""
        for (group_id, member_id, kind), future in list(self._waiting.items()):
            if groups(group_id) and not future.done():
                future.set_result(JoinResult(error, member_id) if kind == "join" else SyncResult(error))

    async def settle(self, group_id: str, kind: str, outcome: Outcome) -> JoinResult | SyncResult:
        """Deliver ``outcome``'s side effects, then return the caller's answer (waiting for
        it when it is deferred)."""
        self.deliver(outcome.deliveries)
        result = outcome.result
        if isinstance(result, JoinResult | SyncResult):
            return result
        key = (group_id, outcome.member_id, kind)
        future: asyncio.Future[JoinResult | SyncResult] = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        try:
            return await future
        finally:
            if self._waiting.get(key) is future:
                del self._waiting[key]

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            try:
                self.deliver(self.coordinator.tick())
            except Exception:
                log.exception("group coordinator timer failed")
