"""Transaction markers written into a partition by its leader: the end of a transaction
there (COMMIT or ABORT), from the transaction coordinator.

A single broker's coordinator writes them straight into its own partitions
(``write_marker``, the coordinator's ``MarkerWriter``). In a cluster the coordinator sends
them to each partition's leader with WriteTxnMarkers (``cluster/markers.py``), and the leader
(or the coordinator, for the partitions it leads itself) writes them with
``write_as_leader``: appended at the leader epoch, answered once replicated, as Kafka's
leaders answer WriteTxnMarkers (acks=-1).

A marker in ``__consumer_offsets`` also ends the transactional offset commits of the groups
there: the group coordinator settles them, or, while it is loading that partition, reads
the marker with the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from kio.schema.errors import ErrorCode

from streamkit.broker.cluster.replica import Replica, ReplicaError, ReplicaManager
from streamkit.broker.errors import error_code_for
from streamkit.broker.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
from streamkit.broker.topics import TopicManager
from streamkit.log.errors import LogError
from streamkit.log.partition import PartitionLog
from streamkit.log.producer_state import AppendOrigin
from streamkit.log.records import ControlType, build_control_batch

__all__ = ["MarkerAppender"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


class MarkerAppender:
    """Writes transaction markers into this broker's partitions (see the module docstring)."""

    def __init__(self, topics: TopicManager, groups: GroupCoordinator, notify: Callable[[TP], None],
                 clock: Callable[[], int]) -> None:
        self.topics = topics
        self.groups = groups
        self.notify = notify  # wakes the fetches waiting on the partition
        self.clock = clock
        self.replicas: ReplicaManager | None = None  # a cluster member's (it writes as leader)

    def _append(self, plog: PartitionLog, topic: str, partition: int, producer_id: int, producer_epoch: int,
                commit: bool, coordinator_epoch: int, replica: Replica | None) -> int:
        marker = build_control_batch(ControlType.COMMIT if commit else ControlType.ABORT,
                                     producer_id=producer_id, producer_epoch=producer_epoch,
                                     coordinator_epoch=coordinator_epoch, timestamp=self.clock())
        appended = plog.append(marker, leader_epoch=None if replica is None else replica.leader_epoch,
                               origin=AppendOrigin.COORDINATOR)
        if topic == OFFSETS_TOPIC and self.groups.owned.is_active(partition):
            self.groups.complete_txn(producer_id, commit, partition)
        self.notify((topic, partition))
        return appended.last_offset

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool) -> None:
        """A single broker's marker, written at once (the coordinator's ``MarkerWriter``)."""
        plog = self.topics.partition(topic, partition)
        if plog is None:
            log.info("no marker for %s-%d: the partition no longer exists", topic, partition)
            return
        self._append(plog, topic, partition, producer_id, producer_epoch, commit, 0, None)

    async def write_as_leader(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                              partitions: Iterable[TP], timeout_ms: int) -> dict[TP, ErrorCode]:
        """Write one transaction's marker into each of ``partitions`` this broker leads, and
        wait until they are replicated: each partition's error code (NOT_LEADER_OR_FOLLOWER
        where it is not the leader: the coordinator asks the current one)."""
        results: dict[TP, ErrorCode] = {}
        waits: list[tuple[TP, Awaitable[ErrorCode]]] = []
        for tp in partitions:
            topic, partition = tp
            replica = None
            if self.replicas is None:
                plog = self.topics.partition(topic, partition)
                if plog is None:
                    results[tp] = ErrorCode.unknown_topic_or_partition
                    continue
            else:
                try:
                    replica = self.replicas.leader(topic, partition)
                except ReplicaError as exc:
                    results[tp] = exc.code
                    continue
                plog = replica.plog
            try:
                last = self._append(plog, topic, partition, producer_id, producer_epoch, commit, coordinator_epoch,
                                    replica)
            except (LogError, OSError) as exc:
                log.info("marker for %s-%d refused: %s", topic, partition, exc)
                results[tp] = error_code_for(exc)
                continue
            results[tp] = ErrorCode.none
            if replica is not None and self.replicas is not None:
                self.replicas.appended(replica)
                waits.append((tp, self.replicas.wait_replicated(replica, last + 1, timeout_ms)))
        codes = await asyncio.gather(*(w for _tp, w in waits))
        for (tp, _w), code in zip(waits, codes, strict=True):
            # Written and replicated to the ISR is written, whatever the ISR's size now.
            if code not in (ErrorCode.none, ErrorCode.not_enough_replicas_after_append):
                results[tp] = code
        return results
