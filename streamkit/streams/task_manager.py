"""TaskManager: the tasks a worker owns or keeps warm, and bringing their state up to date.

Task *p* is partition *p* of every input topic and of every table (``streams.assignor``).
When the group assigns tasks, their input partitions are paused before anything else, then
(under exactly-once) their transactional producers are started, which fences their previous
owners; standby followers change over, and each table partition is restored from its
changelog before its inputs resume. When tasks are revoked, their restores are cancelled and
their table partitions closed. Standby tasks follow their changelogs (``streams.follower``)
without serving them.

The runtime drives it (``assign``/``revoke``/``stop``) and keeps routing, committing and the
consumer's lifecycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from aiokafka.structs import TopicPartition

from streamkit import logfmt
from streamkit.streams.follower import ChangelogFollower
from streamkit.streams.table import StateDefinitionError
from streamkit.tasks import cancel_and_wait

if TYPE_CHECKING:
    from streamkit.streams.collector import RecordCollector
    from streamkit.streams.table import Table

__all__ = ["TaskManager"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


class TaskManager:
    """Restores and standbys of one worker. ``tables()`` gives the app's tables; a failed
    restore is reported to ``on_failure`` (the runtime stops the worker)."""

    def __init__(self, tables: Callable[[], Iterable[Table]], *, app_id: str, bootstrap: Callable[[], str | None],
                 security: Callable[[], Mapping[str, Any]], read_committed: bool, on_failure: Callable[[BaseException], None]) -> None:
        self._tables = tables
        self._app_id = app_id
        self._bootstrap = bootstrap
        self._security = security
        self._read_committed = read_committed
        self._on_failure = on_failure
        self.restores: dict[int, asyncio.Task[None]] = {}
        # Restores cancelled by a revoke, until they have closed their changelog readers:
        # stop() awaits them, or they closed their connections after the loop was gone.
        self._cancelled: set[asyncio.Task[None]] = set()
        self._standby_follower: ChangelogFollower | None = None
        self.stopping = False

    def local_tables(self) -> list[Table]:
        return [t for t in self._tables() if not t.is_global]

    def local_tasks(self) -> set[int]:
        """Tasks whose table partitions have a store on this machine (for the assignor)."""
        out: set[int] = set()
        for table in self.local_tables():
            with contextlib.suppress(OSError):
                out |= table.local_partitions()
        return out

    # -- assignment ------------------------------------------------------------------------

    async def assign(self, new: set[TP], assigned: set[TP], standby: Iterable[int], consumer: Any,
                     collector: RecordCollector | None) -> None:
        """Tasks ``new`` were assigned (``assigned`` is everything owned now). Their input
        partitions are paused before the first await: records of a partition must not reach
        an agent before its tables are restored (and, under exactly-once, its producer is
        ready); fetched meanwhile, they were processed against tables without that partition."""
        partitions = {p for _t, p in new}
        needs = {p for p in partitions if any(p < t.partitions for t in self.local_tables())}
        exactly_once = collector is not None and collector.exactly_once
        paused = [TopicPartition(t, p) for t, p in assigned if p in needs or (exactly_once and (t, p) in new)]
        consumer.pause(*paused)
        if exactly_once and collector is not None:
            # Each new task's producer fences its previous owner and aborts that owner's
            # open transaction before this worker reads the task's changelogs or committed
            # offsets: both then stand as that owner last committed them.
            try:
                await collector.open_tasks({p for _t, p in assigned})
            except Exception as exc:
                log.error("cannot start the exactly-once producers of tasks %s: %s", logfmt.ranges(partitions), exc)
                self._on_failure(exc)
                return
        # Before the restores: a standby that became active must stop following first.
        await self._update_standbys(set(standby), {p for _t, p in assigned})
        if self.stopping:
            return
        consumer.resume(*(tp for tp in paused if tp.partition not in needs))
        for p in needs:
            self.restores[p] = asyncio.create_task(self._restore(p, consumer, assigned), name=f"restore-{p}")

    def cancel_restores(self, kept: set[TP]) -> None:
        """Cancel the restores of tasks with no partition in ``kept`` (a revoke)."""
        for p, task in list(self.restores.items()):
            if not any(tp[1] == p for tp in kept):
                task.cancel()
                self.restores.pop(p, None)
                self._cancelled.add(task)
                task.add_done_callback(self._cancelled.discard)

    def revoke(self, gone: set[int]) -> None:
        """Close the table partitions of tasks this worker no longer owns."""
        for table in self._tables():
            table.revoke(gone)

    def work(self) -> list[asyncio.Task[None]]:
        """Restores (revoked ones too) that may still run."""
        return [*self.restores.values(), *self._cancelled]

    async def _restore(self, partition: int, consumer: Any, assigned: set[TP]) -> None:
        """Bring every table's partition up to its changelog's end, then resume input."""
        tables = [t for t in self._tables() if not t.is_global and partition < t.partitions]
        try:
            for table in tables:
                await table.restore(partition)
        except asyncio.CancelledError:
            return
        except Exception as exc:
            if isinstance(exc, StateDefinitionError):
                log.error("%s", exc)  # the message says what to do; a traceback would bury it
            else:
                log.exception("restoring partition %d failed; stopping the worker", partition)
            # Recorded like any failure: without it the worker stopped as if asked to, and
            # `streamkit worker` exited 0, indistinguishable from a clean stop.
            self._on_failure(exc)
            return
        finally:
            # Only our own entry: a restore cancelled by a revoke may end (its consumer.stop()
            # takes a while) after the next assignment registered a new restore of the same
            # partition; popping that one left it untracked, so the next revoke could not
            # cancel it and it ran on against a closed store.
            if self.restores.get(partition) is asyncio.current_task():
                del self.restores[partition]
        if not self.stopping:
            # ``assigned`` is the runtime's live set: what it owns now, not at the assignment.
            consumer.resume(*(TopicPartition(t, p) for t, p in assigned if p == partition))

    # -- standbys --------------------------------------------------------------------------

    async def _update_standbys(self, standby: set[int], active: set[int]) -> None:
        """Follow the changelogs of this worker's standby tasks, and only those."""
        standby -= active
        follower = self._standby_follower
        if follower is None:
            bootstrap = self._bootstrap()
            if not standby or self.stopping or bootstrap is None:
                return
            follower = ChangelogFollower(bootstrap, client_id=f"{self._app_id}-standby",
                                         read_committed=self._read_committed, security=self._security())
            await follower.start()
            self._standby_follower = follower
        for table in self.local_tables():
            table.set_standby(standby, active, follower)
        if standby:
            log.info("standby tasks: %s", logfmt.ranges(standby))

    def standby_tasks(self) -> set[int]:
        """The tasks whose table partitions this worker keeps warm for another worker."""
        follower = self._standby_follower
        return {p for _topic, p in follower.followed()} if follower is not None else set()

    def standby_lag(self) -> dict[tuple[str, int], int]:
        """Per standby table partition: changelog records not applied yet."""
        follower = self._standby_follower
        if follower is None:
            return {}
        tables = {t.changelog.name: t.name for t in self.local_tables()}
        return {(tables[topic], p): n for (topic, p), n in follower.lag().items() if topic in tables}

    # -- stop ------------------------------------------------------------------------------

    async def stop_restores(self) -> None:
        """End every restore (awaited: each stops its changelog reader on the way out)."""
        self.stopping = True
        await cancel_and_wait(self.work())

    async def stop(self) -> None:
        """After the consumer stopped: what an assignment started meanwhile, then the standby
        follower; the tables close after this."""
        await self.stop_restores()
        if self._standby_follower is not None:
            await self._standby_follower.stop()
