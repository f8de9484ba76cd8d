"""Following a ZooKeeper change-notice path: reload something whenever a sequential notice
appears under it (Kafka's ZkNodeChangeNotificationListener), and after a new session, which
loses the watches."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from streamkit.broker.cluster.zk import SessionEvent, ZkClient

__all__ = ["ZkFollower", "notify"]

log = logging.getLogger(__name__)


async def notify(zk: ZkClient, parent: str, prefix: str, data: bytes) -> None:
    """Adds a sequential change notice ``parent/prefixNNNNNNNNNN``."""
    await asyncio.to_thread(zk.client.create, f"{parent}/{prefix}", data, sequence=True, makepath=True)


class ZkFollower:
    def __init__(self, zk: ZkClient, watched: tuple[str, ...], reload: Callable[[], Awaitable[None]],
                 name: str) -> None:
        self.zk = zk
        self.watched = watched
        self.reload = reload
        self.name = name
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        for path in self.watched:
            await self.zk.create(path)
        await self.refresh()
        self.zk.on_session(self._session)
        self._task = asyncio.create_task(self._follow(), name=f"streamkit-{self.name}-changes")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _session(self, event: SessionEvent) -> None:
        if event.new_session:
            self._changed.set()

    async def _follow(self) -> None:
        while True:
            await self._changed.wait()
            try:
                await self.refresh()
            except Exception:
                log.exception("could not reload the %s from ZooKeeper; retrying", self.name)
                await asyncio.sleep(1)
                self._changed.set()

    async def refresh(self) -> None:
        """Re-arms the watches, then reloads."""
        self._changed.clear()
        for path in self.watched:
            await self.zk.children(path, self._changed.set)
        await self.reload()
