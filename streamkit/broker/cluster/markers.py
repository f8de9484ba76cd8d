"""The transaction coordinator's marker sender: a cluster member's ``send_markers``.

For each transaction that reached PrepareCommit or PrepareAbort (EndTxn, a timeout, a
fenced producer, or a coordinator that took over a transaction in that state), a task:

1. waits until the Prepare record is replicated: the decision is durable before any
   partition sees it, so a coordinator that takes over finishes it the same way;
2. writes the marker into every partition of the transaction, through its current leader:
   directly where this broker leads, with WriteTxnMarkers elsewhere. A partition whose
   leader does not have it yet (no leader, a leader that moved, a broker that is down) is
   retried with the leader the metadata names then, for as long as it takes, as Kafka's
   coordinator does; a partition of a deleted topic needs none;
3. completes the transaction (CompleteCommit/CompleteAbort).

A task stops as soon as this broker no longer coordinates the transaction: the new
coordinator loads it in its Prepare state and sends the markers itself. One task per
transactional.id: a transaction's markers are never written after its completion, when the
producer may have started its next transaction at the same epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from streamkit.broker.cluster.client import BrokerUnavailable, PeerClient
from streamkit.broker.cluster.metadata import ClusterMetadata
from streamkit.broker.cluster.replica import ReplicaError, ReplicaManager
from streamkit.broker.internal_store import Writes
from streamkit.broker.txn.coordinator import (
    TRANSACTION_STATE_TOPIC,
    MarkerJob,
    TransactionCoordinator,
)

__all__ = ["MarkerSender"]

log = logging.getLogger(__name__)

TP = tuple[str, int]
_WRITE_TXN_MARKERS = 27
_VERSION = 1
_RETRY_S = 0.1  # Kafka's retry.backoff.ms
# Markers for these partitions are retried with the current leader; others end the task.
_RETRIABLE = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
                        ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
                        ErrorCode.request_timed_out, ErrorCode.kafka_storage_error,
                        ErrorCode.coordinator_load_in_progress, ErrorCode.unknown_server_error})


class LocalMarkers(Protocol):
    """Writes markers into the partitions this broker leads (``MarkerAppender``)."""

    def write_as_leader(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                        partitions: Iterable[TP], timeout_ms: int) -> Awaitable[dict[TP, ErrorCode]]: ...


class TxnLog(Protocol):
    """``__transaction_state`` (an ``InternalStore``): where the Prepare record waits."""

    def replicated(self, writes: Writes, timeout_ms: int) -> Awaitable[ErrorCode]: ...


class MarkerSender:
    """See the module docstring."""

    def __init__(self, broker_id: int, metadata: ClusterMetadata, replicas: ReplicaManager,
                 txns: TransactionCoordinator, txn_log: TxnLog, local: LocalMarkers, timeout_ms: int) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.replicas = replicas
        self.txns = txns
        self.txn_log = txn_log
        self.local = local
        self.timeout_ms = timeout_ms  # request.timeout.ms: one round of WriteTxnMarkers
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._clients: dict[int, PeerClient] = {}

    def __call__(self, job: MarkerJob) -> None:
        """Take ``job`` (called by the coordinator right after it appended the Prepare
        record, which the task waits for: the log end offset now)."""
        try:
            replica = self.replicas.leading(TRANSACTION_STATE_TOPIC, job.txn_partition)
        except ReplicaError:
            return  # no longer coordinating: the next coordinator sends them
        prepared = replica.plog.log_end_offset
        previous = self._tasks.pop(job.transactional_id, None)
        if previous is not None:
            previous.cancel()
        task = asyncio.create_task(self._send(job, prepared, previous, replica.leader_epoch),
                                   name=f"txn-markers-{job.transactional_id}")
        self._tasks[job.transactional_id] = task
        task.add_done_callback(lambda t: self._done(job.transactional_id, t))

    def _done(self, txn_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(txn_id) is task:
            del self._tasks[txn_id]
        if not task.cancelled() and task.exception() is not None:
            log.error("markers of transactional id %r failed", txn_id, exc_info=task.exception())

    def _current(self, job: MarkerJob) -> bool:
        """Is ``job`` still the transaction this broker coordinates, in its Prepare state?"""
        md = self.txns.txns.get(job.transactional_id)
        return (md is not None and (md.producer_id, md.producer_epoch) == (job.producer_id, job.producer_epoch)
                and md.state.is_preparing and self.txns.owned.is_active(job.txn_partition))

    async def _send(self, job: MarkerJob, prepared: int, previous: asyncio.Task[None] | None,
                    coordinator_epoch: int) -> None:
        if previous is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await previous  # its requests in flight are answered first
        while True:
            if not self._current(job):
                return
            code = await self.txn_log.replicated(Writes({job.txn_partition: prepared}), self.timeout_ms)
            if code == ErrorCode.none:
                break
            if code == ErrorCode.not_coordinator:
                return
            await asyncio.sleep(_RETRY_S)
        pending: set[TP] | None = set(job.partitions)
        while pending:
            if not self._current(job):
                return
            pending = await self._round(job, pending, coordinator_epoch)
            if pending:
                await asyncio.sleep(_RETRY_S)
        if pending is None:
            return
        if self._current(job):
            try:
                self.txns.markers_written(job)
            except ReplicaError:
                return  # leadership moved in between: the next coordinator completes it
            log.debug("transaction of %r complete: markers written to %d partition(s)", job.transactional_id,
                      len(job.partitions))

    async def _round(self, job: MarkerJob, pending: set[TP], coordinator_epoch: int) -> set[TP] | None:
        """Send each pending marker to its partition's leader once: the ones still pending
        after (None: the transaction's markers must stop, its producer epoch moved on)."""
        by_leader: dict[int, list[TP]] = {}
        for topic, partition in sorted(pending):
            if topic not in self.metadata.topics:
                log.info("no marker for %s-%d: the topic was deleted", topic, partition)
                pending.discard((topic, partition))
                continue
            leader = self.metadata.leader(topic, partition)
            if leader in self.metadata.brokers:
                by_leader.setdefault(leader, []).append((topic, partition))
        rounds = [self._write(job, leader, tps, coordinator_epoch) for leader, tps in by_leader.items()]
        for results in await asyncio.gather(*rounds):
            for tp, code in results.items():
                if code == ErrorCode.none:
                    pending.discard(tp)
                elif code in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced,
                              ErrorCode.transaction_coordinator_fenced):
                    log.info("markers of %r stop at %s-%d: %s", job.transactional_id, tp[0], tp[1], code.name)
                    return None
                elif code not in _RETRIABLE:
                    log.warning("marker of %r for %s-%d failed with %s; retrying", job.transactional_id,
                                tp[0], tp[1], code.name)
        return pending

    async def _write(self, job: MarkerJob, leader: int, partitions: list[TP],
                     coordinator_epoch: int) -> dict[TP, ErrorCode]:
        if leader == self.broker_id:
            return await self.local.write_as_leader(job.producer_id, job.producer_epoch, job.commit,
                                                    coordinator_epoch, partitions, self.timeout_ms)
        client = await self._client(leader)
        if client is None:
            return {}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        body = {"markers": [{"producer_id": job.producer_id, "producer_epoch": job.producer_epoch,
                             "transaction_result": job.commit, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
        try:
            response: Any = await client.request(_WRITE_TXN_MARKERS, _VERSION, body, self.timeout_ms + 5_000)
        except BrokerUnavailable as exc:
            log.info("markers of %r to broker %d: %s", job.transactional_id, leader, exc)
            return {}
        return {(t.name, int(p.partition_index)): ErrorCode(p.error_code)
                for marker in response.markers for t in marker.topics for p in t.partitions}

    async def _client(self, broker: int) -> PeerClient | None:
        registration = self.metadata.brokers.get(broker)
        if registration is None:
            return None
        client = self._clients.get(broker)
        if client is None or (client.host, client.port) != (registration.host, registration.port):
            if client is not None:
                await client.close()
            client = self._clients[broker] = PeerClient(registration.host, registration.port,
                                                        f"broker-{self.broker_id}-txn-markers")
        return client

    def stop_partition(self, partition: int) -> None:
        """This broker no longer coordinates ``partition`` of ``__transaction_state``."""
        for txn_id, task in list(self._tasks.items()):
            if self.txns.partition_for(txn_id) == partition:
                task.cancel()

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
