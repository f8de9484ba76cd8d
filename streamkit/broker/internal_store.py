"""An internal topic (``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``) as a coordinator's store: appends, and the replay of a partition.

A single broker appends and is done: its log is the only copy. A cluster member appends as
the partition's leader (stamping its leader epoch, waking the followers' fetches) and a
coordinator's answer waits until the write is replicated, as Kafka's coordinators append
with acks=-1 (offsets.commit.required.acks, the transaction log's min ISR): ``capture``
collects what one coordinator call appended, and ``replicated`` waits for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from streamkit.broker.cluster.replica import ReplicaError, ReplicaManager
from streamkit.broker.topics import TopicManager
from streamkit.log.batch import BatchHeader, iter_batch_spans
from streamkit.log.partition import PartitionLog
from streamkit.log.producer_state import AppendOrigin
from streamkit.log.records import Record, decode_batch

__all__ = ["InternalStore", "Writes", "coordinator_error", "stored_batches"]

TP = tuple[str, int]


@dataclass(slots=True)
class Writes:
    """What one coordinator call appended: per partition, the offset after its last record."""

    ends: dict[int, int] = field(default_factory=dict)


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """A replication outcome as a coordinator answers it (Kafka's mapping): leadership
    moved is NOT_COORDINATOR (the client finds the new coordinator), too few replicas or a
    timeout is COORDINATOR_NOT_AVAILABLE (the client retries)."""
    if code == ErrorCode.none:
        return code
    if code == ErrorCode.not_leader_or_follower:
        return ErrorCode.not_coordinator
    return ErrorCode.coordinator_not_available


class InternalStore:
    """The partitions of one internal topic (see the module docstring)."""

    def __init__(self, topics: TopicManager, topic: str) -> None:
        self.topics = topics
        self.topic = topic
        # A cluster member's replicas and its fetch waiters (``attach``); None on a single broker.
        self.replicas: ReplicaManager | None = None
        self._notify: Callable[[TP], None] = lambda _tp: None
        self._writes: Writes | None = None

    def attach(self, replicas: ReplicaManager, notify: Callable[[TP], None]) -> None:
        """Append as the leader of a cluster's partitions from now on."""
        self.replicas = replicas
        self._notify = notify

    def append(self, partition: int, batch: bytes) -> int:
        """Append ``batch``; its last offset. Only the coordinator of ``partition`` appends,
        and a cluster member coordinates the partitions it leads."""
        if self.replicas is None:
            plog = self.topics.partition(self.topic, partition)
            assert plog is not None, f"{self.topic} is created at start"
            last = plog.append(batch).last_offset
        else:
            replica = self.replicas.leading(self.topic, partition)
            last = replica.plog.append(batch, leader_epoch=replica.leader_epoch,
                                       origin=AppendOrigin.COORDINATOR).last_offset
            self.replicas.appended(replica)
            self._notify((self.topic, partition))
        if self._writes is not None:
            self._writes.ends[partition] = last + 1
        return last

    @contextlib.contextmanager
    def capture(self) -> Iterator[Writes]:
        """Collect the appends made inside the block (one synchronous coordinator call)."""
        writes, previous = Writes(), self._writes
        self._writes = writes
        try:
            yield writes
        finally:
            self._writes = previous

    async def replicated(self, writes: Writes, timeout_ms: int) -> ErrorCode:
        """Wait until ``writes`` are replicated to the in-sync replicas: NONE, or the code a
        coordinator answers (``coordinator_error``). At once on a single broker."""
        if self.replicas is None:
            return ErrorCode.none
        for partition, end in writes.ends.items():
            try:
                replica = self.replicas.leading(self.topic, partition)
            except ReplicaError:
                return ErrorCode.not_coordinator
            code = await self.replicas.wait_replicated(replica, end, timeout_ms)
            if code != ErrorCode.none:
                return coordinator_error(code)
        return ErrorCode.none

    def end_offset(self, partition: int) -> int:
        plog = self.topics.partition(self.topic, partition)
        return -1 if plog is None else plog.log_end_offset

    async def replicated_since(self, partition: int, mark: int, timeout_ms: int) -> ErrorCode:
        """Wait for whatever was appended to ``partition`` since its end offset was ``mark``
        (``end_offset``): for an answer that depends on another request's writes."""
        end = self.end_offset(partition)
        if end <= mark:
            return ErrorCode.none
        return await self.replicated(Writes({partition: end}), timeout_ms)

    def batches(self, partition: int) -> Iterable[tuple[BatchHeader, list[Record]]]:
        return stored_batches(self.topics.partition(self.topic, partition))

    def records(self, partition: int) -> Iterable[Record]:
        for _header, records in self.batches(partition):
            yield from records


def stored_batches(plog: PartitionLog | None) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Every stored batch of an internal topic's partition, decoded (a coordinator's replay),
    up to the log end offset as it is when the replay gets there: what is appended while it
    runs is read too."""
    if plog is None:
        return
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data, next_offset = plog.read_chunk(offset, 1 << 20)
        if not data:
            return
        for pos, size, _base, _last in iter_batch_spans(data):
            header, records = decode_batch(data[pos : pos + size], verify=False)
            yield header, [r for r in records if r.offset >= offset]
        offset = max(next_offset, offset + 1)
