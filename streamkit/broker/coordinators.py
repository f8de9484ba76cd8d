"""The asyncio edge of the group, transaction and share-group coordinators: which
partitions of their internal topics they own, and writes that answer once durable.

A single broker owns every partition: ``load_all`` replays them at start. A cluster member
owns the partitions it leads: ``leadership`` (a ``ReplicaManager`` leadership listener)
starts loading a partition when this broker becomes its leader, on the event loop, a few
batches at a time (requests for its keys get COORDINATOR_LOAD_IN_PROGRESS meanwhile), and
drops it when another broker takes over (NOT_COORDINATOR from then on; JoinGroup and
SyncGroup requests waiting in its groups are answered NOT_COORDINATOR at once).

A handler runs a coordinator call inside ``write``: what the call appended is replicated
before the handler answers (at once on a single broker).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode

from streamkit.broker.group.coordinator import OFFSETS_TOPIC
from streamkit.broker.group.runtime import GroupRuntime
from streamkit.broker.internal_store import InternalStore
from streamkit.broker.share.coordinator import ShareCoordinator
from streamkit.broker.share.store import SHARE_STATE_TOPIC
from streamkit.broker.txn.coordinator import TRANSACTION_STATE_TOPIC, TransactionCoordinator

__all__ = ["Coordinators"]

log = logging.getLogger(__name__)

T = TypeVar("T")
TP = tuple[str, int]
_STEPS_PER_YIELD = 32  # batches replayed between two turns of the event loop


class _Owner(Protocol):
    def load_partition(self, partition: int) -> Iterator[None]: ...


class Coordinators:
    """See the module docstring."""

    def __init__(self, groups: GroupRuntime, txns: TransactionCoordinator, share: ShareCoordinator,
                 offsets_log: InternalStore, txn_log: InternalStore, share_log: InternalStore,
                 offsets_timeout_ms: int, txn_timeout_ms: int) -> None:
        self.groups = groups
        self.txns = txns
        self.share = share
        self.offsets_log = offsets_log
        self.txn_log = txn_log
        self.share_log = share_log
        self.offsets_timeout_ms = offsets_timeout_ms  # offsets.commit.timeout.ms
        self.txn_timeout_ms = txn_timeout_ms  # request.timeout.ms
        # Called with a partition of __transaction_state this broker stops coordinating
        # (its marker sender stops there).
        self.txn_partition_dropped: Callable[[int], None] = lambda _p: None
        self._loading: dict[TP, asyncio.Task[None]] = {}

    @property
    def _owners(self) -> dict[str, _Owner]:
        return {OFFSETS_TOPIC: self.groups.coordinator, TRANSACTION_STATE_TOPIC: self.txns,
                SHARE_STATE_TOPIC: self.share}

    # -- ownership -------------------------------------------------------------------------

    def load_all(self) -> None:
        """A single broker: every partition, loaded now."""
        self.groups.coordinator.load()
        self.txns.load()
        if loaded := self.share.load():
            log.info("loaded the state of %d share-partitions", loaded)

    def partition_count(self, topic: str, count: int) -> None:
        """``topic`` has ``count`` partitions (a cluster's internal topic exists with a count
        of its own: keys hash over that count, as FindCoordinator's do)."""
        co = self.groups.coordinator
        if topic == OFFSETS_TOPIC and count != co.num_partitions:
            co.num_partitions = count
            self.txns.settings = replace(self.txns.settings, offsets_partitions=count)
        elif topic == TRANSACTION_STATE_TOPIC:
            self.txns.num_partitions = count
        elif topic == SHARE_STATE_TOPIC:
            self.share.store.partitions = count

    def leadership(self, topic: str, partition: int, leading: bool) -> None:
        """This broker started (``leading``) or stopped leading ``topic``-``partition``."""
        owner = self._owners.get(topic)
        if owner is None:
            return
        tp = (topic, partition)
        task = self._loading.pop(tp, None)
        if task is not None:
            task.cancel()
        if leading:
            steps = owner.load_partition(partition)  # loading from now on
            self._loading[tp] = asyncio.create_task(self._load(tp, steps), name=f"coordinator-load-{topic}-{partition}")
        else:
            self._unload(topic, partition)

    def _unload(self, topic: str, partition: int) -> None:
        if topic == OFFSETS_TOPIC:
            co = self.groups.coordinator
            co.unload_partition(partition)
            self.groups.fail_waiting(lambda group_id: co.partition_of(group_id) == partition, ErrorCode.not_coordinator)
        elif topic == TRANSACTION_STATE_TOPIC:
            self.txns.unload_partition(partition)
            self.txn_partition_dropped(partition)
        else:
            self.share.unload_partition(partition)
        log.info("no longer coordinating %s-%d", topic, partition)

    async def _load(self, tp: TP, steps: Iterator[None]) -> None:
        started = time.monotonic()
        try:
            for n, _ in enumerate(steps, 1):
                if n % _STEPS_PER_YIELD == 0:
                    await asyncio.sleep(0)
        except Exception:
            log.exception("loading the coordinator state of %s-%d failed", *tp)
            self._unload(*tp)
            return
        finally:
            if self._loading.get(tp) is asyncio.current_task():
                del self._loading[tp]
        log.info("coordinating %s-%d (loaded in %d ms)", tp[0], tp[1], (time.monotonic() - started) * 1000)

    async def stop(self) -> None:
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- durable writes ----------------------------------------------------------------------

    async def _write(self, log_: InternalStore, timeout_ms: int, call: Callable[[], T]) -> tuple[T, ErrorCode]:
        with log_.capture() as writes:
            result = call()
        return result, await log_.replicated(writes, timeout_ms)

    def group_mark(self, group_id: str) -> int:
        """Where the log of ``group_id``'s partition ends now (for ``group_writes_since``)."""
        return self.offsets_log.end_offset(self.groups.coordinator.partition_of(group_id))

    async def group_writes_since(self, group_id: str, mark: int) -> ErrorCode:
        """Wait until what any request wrote to ``group_id``'s partition since ``mark`` is
        replicated: a deferred JoinGroup/SyncGroup answer, made by another member's request
        (whose write must be durable before this member acts on it)."""
        return await self.offsets_log.replicated_since(self.groups.coordinator.partition_of(group_id), mark,
                                                       self.offsets_timeout_ms)

    def share_mark(self, group_id: str) -> int:
        return self.share_log.end_offset(self.share.partition_of(group_id))

    async def share_writes_since(self, group_id: str, mark: int) -> ErrorCode:
        """The same for a share group: its state changes happen across a share request's
        waits (a ShareFetch acquires as records arrive), so its answer waits for them all."""
        return await self.share_log.replicated_since(self.share.partition_of(group_id), mark,
                                                     self.offsets_timeout_ms)

    async def write_groups(self, call: Callable[[], T]) -> tuple[T, ErrorCode]:
        """Run a group coordinator call; its result and NONE once what it wrote to
        ``__consumer_offsets`` is replicated, else the error to answer."""
        return await self._write(self.offsets_log, self.offsets_timeout_ms, call)

    async def write_txns(self, call: Callable[[], T]) -> tuple[T, ErrorCode]:
        """The same for the transaction coordinator and ``__transaction_state``."""
        return await self._write(self.txn_log, self.txn_timeout_ms, call)

