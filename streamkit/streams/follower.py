"""Following changelog partitions continuously into local store partitions.

Global tables follow every partition of their changelog, and standby replicas follow the
changelog partitions of the tasks they keep warm for another worker. Both apply records as
they arrive, each store partition recording the last offset it applied in the same write as
the data, so a standby that becomes active restores only the tail after that offset.

One ``ChangelogFollower`` is one plain consumer (no group) whose set of partitions may change
at any time (``follow``/``unfollow``); a change takes effect at its next fetch, and records
fetched for a partition that is no longer followed are dropped, so a partition handed over
to a restore is never written by the follower again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from streamkit import logfmt
from streamkit.state.partition import StorePartition
from streamkit.streams.clients import start_client, stop_client
from streamkit.tasks import cancel_and_wait

__all__ = ["ChangelogFollower"]

log = logging.getLogger(__name__)

_FETCH_TIMEOUT_MS = 200
_MAX_RECORDS = 20_000


class ChangelogFollower:
    """Applies the records of followed changelog partitions to their store partitions."""

    def __init__(self, bootstrap: str, *, client_id: str, read_committed: bool = False,
                 security: Mapping[str, Any] | None = None) -> None:
        # read_committed under exactly-once: a changelog's aborted writes never reach a store.
        self._consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                          **(security or {}),
                                          auto_offset_reset="earliest", client_id=client_id,
                                          isolation_level="read_committed" if read_committed else "read_uncommitted")
        self._parts: dict[TopicPartition, StorePartition] = {}
        self._positions: dict[TopicPartition, int] = {}
        self._changed = asyncio.Event()
        self._dirty = False
        self._task: asyncio.Task[None] | None = None
        self._started = False
        self.applied_total = 0
        self.failure: BaseException | None = None

    def __repr__(self) -> str:
        return f"ChangelogFollower({sorted((tp.topic, tp.partition) for tp in self._parts)})"

    async def start(self) -> None:
        await start_client(self._consumer)
        self._started = True
        self._task = asyncio.create_task(self._run(), name="streamkit-changelog-follower")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        if self._started:
            await stop_client(self._consumer)

    def follow(self, topic: str, partition: int, part: StorePartition) -> None:
        """Apply ``topic``-``partition`` to ``part`` from the offset after its last applied one."""
        self._parts[TopicPartition(topic, partition)] = part
        self._dirty = True
        self._changed.set()

    def unfollow(self, topic: str, partition: int) -> None:
        """Stop applying ``topic``-``partition`` (at once: nothing fetched for it is applied)."""
        tp = TopicPartition(topic, partition)
        if self._parts.pop(tp, None) is not None:
            self._positions.pop(tp, None)
            self._dirty = True
            self._changed.set()

    def followed(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self._parts}

    def lag(self) -> dict[tuple[str, int], int]:
        """Per followed partition: records between what was applied and the log's end
        (as of the last fetch; partitions not fetched yet are left out)."""
        out: dict[tuple[str, int], int] = {}
        for tp in self._parts:
            position = self._positions.get(tp)
            if position is None:
                continue
            try:
                high = self._consumer.highwater(tp)
            except AssertionError:  # not assigned yet (the change is applied at the next fetch)
                continue
            if high is not None:
                out[(tp.topic, tp.partition)] = max(high - position, 0)
        return out

    async def wait_caught_up(self, topic: str, timeout_ms: int | None = None) -> None:
        """Wait until every followed partition of ``topic`` has applied the records its
        log had when this was called (its end offset then)."""
        tps = [tp for tp in self._parts if tp.topic == topic]
        if not tps:
            return
        ends = await self._consumer.end_offsets(tps)
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        while True:
            if self.failure is not None:
                raise self.failure
            behind = [tp for tp, end in ends.items() if tp in self._parts and self._positions.get(tp, -1) < end]
            if not behind:
                return
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not caught up within {timeout_ms} ms: "
                                   f"{sorted(tp.partition for tp in behind)} behind")
            await asyncio.sleep(0.02)

    # -- the fetch loop ---------------------------------------------------------------------

    def _reassign(self) -> None:
        consumer = self._consumer
        self._dirty = False
        consumer.assign(list(self._parts))
        # assign() forgets every position: seek them all again from the stores' offsets,
        # which are exactly where the data stands.
        for tp, part in self._parts.items():
            applied = part.changelog_offset
            position = 0 if applied is None else applied + 1
            consumer.seek(tp, position)  # below the log start: auto_offset_reset=earliest
            self._positions[tp] = position

    async def _run(self) -> None:
        consumer = self._consumer
        try:
            while True:
                if self._dirty:
                    self._reassign()
                if not self._parts:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                batch = await consumer.getmany(timeout_ms=_FETCH_TIMEOUT_MS, max_records=_MAX_RECORDS)
                if self._dirty:
                    continue  # fetched for the previous set of partitions
                for tp, records in batch.items():
                    part = self._parts.get(tp)
                    if part is None or part.closed or not records:
                        continue
                    self.applied_total += part.apply_changelog([(r.key, r.value, r.offset) for r in records])
                    self._positions[tp] = records[-1].offset + 1
                for tp in list(self._parts):
                    # Past compacted-away records and control batches too: the consumer's
                    # position is where the next record would be.
                    with contextlib.suppress(Exception):
                        position = await consumer.position(tp)
                        if tp in self._parts and not self._dirty:
                            self._positions[tp] = max(self._positions.get(tp, 0), position)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("following changelogs %s failed", logfmt.assignment(self.followed()))
            self.failure = exc
