"""Produce, Fetch, ListOffsets, DeleteRecords: the data path.

Produce hands each partition's record batch to the log, which validates framing, CRC-32C
and size, checks an idempotent producer's epoch and sequence numbers against the
partition's producer state (a retried duplicate gets its original offset back), and stores
it verbatim; Fetch returns stored bytes. Neither decodes records.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable
from typing import Any

from streamkit.broker.cluster.replica import ReplicaError, Role
from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode, error_code_for
from streamkit.broker.handlers.common import LEADER_EPOCH, Reply, field, high_watermark_stale
from streamkit.broker.handlers.txn import txn_check
from streamkit.broker.state import BrokerState, ClientInfo
from streamkit.broker.waiters import Deadline
from streamkit.log.batch import HEADER_SIZE, peek_offsets
from streamkit.log.errors import LogError
from streamkit.log.partition import PartitionLog
from streamkit.log.producer_state import AppendOrigin

__all__ = ["delete_records", "fetch", "list_offsets", "offset_for_leader_epoch", "produce"]

log = logging.getLogger(__name__)

_LATEST = -1
_EARLIEST = -2
_MAX_TIMESTAMP = -3
_READ_COMMITTED = 1
_CONSUMER_REPLICA_ID = -1
_OFFSET_NOT_AVAILABLE_SINCE = 5  # the ListOffsets version


_TRANSACTIONAL = 0x10  # the attributes bit of a transactional batch (low byte at 22)
_ATTRIBUTES_LOW = 22
_PRODUCER = struct.Struct(">qh")  # producerId, producerEpoch at byte 43


def _last_stable_offset(plog: PartitionLog) -> int:
    return plog.last_stable_offset


def _check_transactional(state: BrokerState, txn_id: str | None, topic: str, partition: int,
                         records: bytes) -> tuple[ErrorCode, str | None]:
    """A Produce's batch against its transaction: a transactional.id needs transactional
    batches of its current producer, to partitions added to the open transaction; without
    one, no batch may claim to be transactional."""
    transactional = bool(records[_ATTRIBUTES_LOW] & _TRANSACTIONAL)
    if txn_id is None:
        if transactional:
            return ErrorCode.transactional_id_authorization_failed, "a transactional batch needs a transactional.id"
        return ErrorCode.none, None
    if not transactional:
        return ErrorCode.invalid_record, f"transactional.id {txn_id!r} sent a batch that is not transactional"
    producer_id, epoch = _PRODUCER.unpack_from(records, 43)
    error = txn_check(state, txn_id, producer_id, epoch, (topic, partition))
    if error == ErrorCode.none:
        return error, None
    return error, f"{topic}-{partition} is not part of an open transaction of {txn_id!r} (producer {producer_id} epoch {epoch})"


# -- Produce -------------------------------------------------------------------------------


def _append(state: BrokerState, topic: str, partition: int, records: bytes | None,
            txn_id: str | None, acks: int, timeout_ms: int) -> tuple[dict[str, Any], Awaitable[ErrorCode] | None]:
    """Append one partition's batch; with acks=all on a cluster, also what to wait for
    (the high watermark passing the batch)."""
    result: dict[str, Any] = {"index": partition, "base_offset": -1, "log_append_time": -1,
                              "log_start_offset": -1, "record_errors": [], "error_message": None}
    info = state.topics.get(topic)
    cluster = state.cluster
    replica = None
    if cluster is not None:
        try:
            replica = cluster.replicas.leader(topic, partition)
        except ReplicaError as exc:
            known = topic in cluster.metadata.topics
            return {**result, "error_code": exc.code if known else ErrorCode.unknown_topic_or_partition}, None
        plog: PartitionLog | None = replica.plog
        if acks == -1 and not cluster.replicas.enough_replicas(replica):
            return {**result, "error_code": ErrorCode.not_enough_replicas,
                    "error_message": f"{topic}-{partition} has {len(replica.isr)} in-sync replica(s), fewer than "
                                     f"min.insync.replicas={replica.min_isr}"}, None
    else:
        plog = state.topics.partition(topic, partition)
    if info is None or plog is None:
        return {**result, "error_code": ErrorCode.unknown_topic_or_partition}, None
    if info.internal:
        return {**result, "error_code": ErrorCode.invalid_topic_exception,
                "error_message": f"cannot produce to internal topic {topic}"}, None
    if not records or len(records) < HEADER_SIZE:
        return {**result, "error_code": ErrorCode.corrupt_message, "error_message": "no record batch"}, None
    _base, size, _last = peek_offsets(records, 0)
    if size < len(records):
        return {**result, "error_code": ErrorCode.invalid_record,
                "error_message": "a produce request carries exactly one record batch per partition"}, None
    code, message = _check_transactional(state, txn_id, topic, partition, records)
    if code != ErrorCode.none:
        log.info("refused batch for %s-%d: %s (%s)", topic, partition, message, code.name)
        return {**result, "error_code": code, "error_message": message}, None
    try:
        appended = plog.append(records, leader_epoch=None if replica is None else replica.leader_epoch,
                               origin=AppendOrigin.CLIENT)
    except LogError as exc:
        log.info("rejected batch for %s-%d: %s", topic, partition, exc)
        return {**result, "error_code": error_code_for(exc), "error_message": str(exc)}, None
    except OSError as exc:
        log.error("storage error appending to %s-%d: %s", topic, partition, exc)
        return {**result, "error_code": ErrorCode.kafka_storage_error, "error_message": str(exc)}, None
    state.waiters.notify((topic, partition))
    wait = None
    if cluster is not None and replica is not None:
        cluster.replicas.appended(replica)
        if acks == -1:
            wait = cluster.replicas.wait_replicated(replica, appended.last_offset + 1, timeout_ms)
    return {**result, "error_code": ErrorCode.none, "base_offset": appended.base_offset,
            "log_append_time": appended.log_append_time, "log_start_offset": plog.log_start_offset}, wait


async def produce(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    acks = int(body.acks)
    txn_id = field(body, "transactional_id")
    timeout_ms = int(body.timeout.total_seconds() * 1000) if hasattr(body, "timeout") else 30_000
    if state.metrics is not None:
        state.metrics.produces.inc()
    responses = []
    waits: list[tuple[dict[str, Any], Awaitable[ErrorCode]]] = []
    for topic in body.topic_data:
        partitions = []
        for p in topic.partition_data:
            if acks not in (0, 1, -1):
                partitions.append({"index": p.index, "error_code": ErrorCode.invalid_required_acks,
                                   "base_offset": -1, "log_append_time": -1, "log_start_offset": -1,
                                   "record_errors": [], "error_message": f"acks={acks}"})
                continue
            result, wait = _append(state, topic.name, int(p.index), p.records, txn_id, acks, timeout_ms)
            partitions.append(result)
            if wait is not None:
                waits.append((result, wait))
        responses.append({"name": topic.name, "partition_responses": partitions})
    if waits:
        codes = await asyncio.gather(*(w for _r, w in waits))
        for (result, _w), code in zip(waits, codes, strict=True):
            if code != ErrorCode.none:
                result["error_code"] = code
                result["error_message"] = _REPLICATION_ERRORS.get(code)
    if acks == 0:
        return None
    return {"throttle_time": 0, "responses": responses}


_REPLICATION_ERRORS = {
    ErrorCode.not_enough_replicas_after_append: "written, but the ISR shrank below min.insync.replicas before "
                                                "it was replicated",
    ErrorCode.not_leader_or_follower: "leadership moved before the write was replicated",
    ErrorCode.request_timed_out: "not replicated to the ISR within the request's timeout",
}


# -- Fetch ---------------------------------------------------------------------------------


_RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _cluster_log(state: BrokerState, topic: str, index: int, epoch: int, out: dict[str, Any],
                 replica_id: int, rack: str) -> tuple[PartitionLog | None, dict[str, Any] | None]:
    """The log this broker reads (topic, index) from, or the answer that sends the client
    elsewhere: the leader it knows of (NOT_LEADER_OR_FOLLOWER), or, for a consumer in
    another rack than the leader, the in-sync follower in its rack (KIP-392,
    ``replica.selector.class=RackAwareReplicaSelector``). A follower serves consumers
    what it has replicated up to its high watermark."""
    cluster = state.cluster
    assert cluster is not None
    rack_aware = state.config.replica_selector_class == _RACK_AWARE_SELECTOR and replica_id < 0
    replica = cluster.replicas.replicas.get((topic, index))
    if replica is not None and rack_aware and replica.role is Role.FOLLOWER and not cluster.replicas.fenced:
        code = cluster.replicas.check_epoch(replica, epoch)
        return (replica.plog, None) if code == ErrorCode.none else (None, {**out, "error_code": code})
    try:
        replica = cluster.replicas.leader(topic, index)
    except ReplicaError as exc:
        if topic not in cluster.metadata.topics:
            return None, {**out, "error_code": ErrorCode.unknown_topic_or_partition}
        known = cluster.metadata.states.get((topic, index))
        current = {"leader_id": known.leader, "leader_epoch": known.leader_epoch} if known else None
        return None, {**out, "error_code": exc.code, "current_leader": current}
    code = cluster.replicas.check_epoch(replica, epoch)
    if code != ErrorCode.none:
        return None, {**out, "error_code": code}
    if rack_aware and rack:
        preferred = _replica_in_rack(state, replica.isr, rack)
        if preferred is not None and preferred != cluster.broker_id:
            plog = replica.plog
            return None, {**out, "error_code": ErrorCode.none, "preferred_read_replica": preferred,
                          "high_watermark": plog.high_watermark, "last_stable_offset": plog.last_stable_offset,
                          "log_start_offset": plog.log_start_offset}
    return replica.plog, None


def _replica_in_rack(state: BrokerState, isr: tuple[int, ...], rack: str) -> int | None:
    """The in-sync replica in ``rack`` (this broker first, then the lowest id), if any."""
    cluster = state.cluster
    assert cluster is not None
    brokers = cluster.metadata.brokers
    in_rack = sorted(b for b in isr if b in brokers and brokers[b].rack == rack)
    if not in_rack:
        return None
    return cluster.broker_id if cluster.broker_id in in_rack else in_rack[0]


def _fetch_partition(state: BrokerState, topic: str, p: Any, budget: int, first: bool,
                     read_committed: bool, replica_id: int, rack: str) -> tuple[dict[str, Any], int]:
    index = int(p.partition)
    out: dict[str, Any] = {"partition_index": index, "high_watermark": -1, "last_stable_offset": -1,
                           "log_start_offset": -1, "preferred_read_replica": -1,
                           "aborted_transactions": [] if read_committed else None, "records": b""}
    leader_epoch = int(field(p, "current_leader_epoch", -1))
    if state.cluster is not None:
        plog, error = _cluster_log(state, topic, index, leader_epoch, out, replica_id, rack)
        if error is not None:
            return error, 0
    else:
        plog = state.topics.partition(topic, index)
        if plog is not None and leader_epoch > LEADER_EPOCH:
            return {**out, "error_code": ErrorCode.unknown_leader_epoch}, 0
    if plog is None:
        return {**out, "error_code": ErrorCode.unknown_topic_or_partition}, 0
    hw = plog.high_watermark
    lso = _last_stable_offset(plog)
    out.update(high_watermark=hw, last_stable_offset=lso, log_start_offset=plog.log_start_offset)
    offset = int(p.fetch_offset)
    if offset < plog.log_start_offset or offset > plog.log_end_offset:
        return {**out, "error_code": ErrorCode.offset_out_of_range}, 0
    limit = min(int(p.partition_max_bytes), budget)
    # A follower copies everything the leader has; a consumer reads what is replicated.
    upper = plog.log_end_offset if replica_id >= 0 else lso if read_committed else hw
    throttle = None
    if replica_id >= 0 and state.cluster is not None and state.cluster.leader_throttle.limited \
            and plog.config.leader_throttled(index, replica_id):
        throttle = state.cluster.leader_throttle
        if throttle.exceeded():
            return {**out, "error_code": ErrorCode.none}, 0  # held back: leader.replication.throttled.rate
    if limit <= 0 or offset >= upper:
        return {**out, "error_code": ErrorCode.none}, 0
    try:
        data, next_offset = plog.read_chunk(offset, limit, max_offset=upper)
    except LogError as exc:
        return {**out, "error_code": error_code_for(exc)}, 0
    if len(data) > limit and not first:
        data = b""  # only the response's first partition may exceed the limits (KIP-74)
    if throttle is not None:
        throttle.record(len(data))
    if read_committed and data:
        out["aborted_transactions"] = [
            {"producer_id": a.producer_id, "first_offset": a.first_offset}
            for a in plog.aborted_transactions(offset, min(next_offset, upper))]
    return {**out, "error_code": ErrorCode.none, "records": data}, len(data)


def _read_all(state: BrokerState, body: Any, max_bytes: int, read_committed: bool,
              replica_id: int) -> tuple[list[dict[str, Any]], int, bool]:
    """(topic responses, bytes returned, whether any partition has an error or sends the
    client to another replica: answered at once, not long-polled)."""
    responses = []
    total = 0
    failed = False
    rack = str(field(body, "rack_id", "") or "")
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            part, size = _fetch_partition(state, topic.topic, p, max_bytes - total, total == 0, read_committed,
                                          replica_id, rack)
            total += size
            failed = failed or part["error_code"] != ErrorCode.none or part["preferred_read_replica"] >= 0
            partitions.append(part)
        responses.append({"topic": topic.topic, "partitions": partitions})
    return responses, total, failed


def _replica_id(body: Any) -> int:
    replica_state = field(body, "replica_state")
    if replica_state is not None:  # v15+
        return int(replica_state.replica_id)
    return int(field(body, "replica_id", -1))


def _followers_fetched(state: BrokerState, body: Any, follower: int) -> None:
    """A follower's fetch offsets are its log end offsets: the leader's view of its progress."""
    cluster = state.cluster
    if cluster is None:
        return
    replicas = cluster.replicas
    for topic in body.topics:
        for p in topic.partitions:
            replica = replicas.replicas.get((topic.topic, int(p.partition)))
            if replica is not None and replicas.is_leader(replica):
                replicas.follower_fetched(replica, follower, int(p.fetch_offset))


async def fetch(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    max_bytes = min(int(field(body, "max_bytes", state.config.fetch_max_bytes)), state.config.fetch_max_bytes)
    min_bytes = int(body.min_bytes)
    read_committed = int(field(body, "isolation_level", 0)) == _READ_COMMITTED
    replica_id = _replica_id(body)
    if replica_id >= 0:
        _followers_fetched(state, body, replica_id)
    if state.metrics is not None:
        state.metrics.fetches.labels("follower" if replica_id >= 0 else "consumer").inc()
    deadline = Deadline(int(body.max_wait.total_seconds() * 1000))
    partitions = [(t.topic, int(p.partition)) for t in body.topics for p in t.partitions]
    while True:
        responses, total, failed = _read_all(state, body, max_bytes, read_committed, replica_id)
        remaining = deadline.remaining_s()
        # Kafka answers at once when any partition has an error (out of range, unknown...):
        # waiting would only delay the client's reaction to it.
        if total >= min_bytes or failed or remaining <= 0 or not partitions:
            break
        if not await state.waiters.wait(partitions, remaining):
            responses, _total, _failed = _read_all(state, body, max_bytes, read_committed, replica_id)
            break
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses}


# -- ListOffsets -----------------------------------------------------------------------------


def _list_offset(plog: PartitionLog, timestamp: int, read_committed: bool,
                 hw_stale: bool) -> tuple[int, int] | None:
    """(timestamp, offset) of ListOffsets, as Kafka's Partition.fetchOffsetForTimestamp: a
    lookup by time finds only offsets below the last fetchable one (the high watermark, or
    the last stable offset with read_committed). None: the leader cannot answer yet
    (``hw_stale``, see ``Replica.high_watermark_stale``) for the latest offset, or for a
    time that no fetchable record reaches; the earliest offset does not depend on it."""
    last_fetchable = _last_stable_offset(plog) if read_committed else plog.high_watermark
    if timestamp == _LATEST:
        return None if hw_stale else (-1, last_fetchable)
    if timestamp == _EARLIEST:
        return -1, plog.log_start_offset
    if timestamp == _MAX_TIMESTAMP:
        newest = plog.max_timestamp
        found = plog.offset_for_timestamp(newest) if newest >= 0 else None
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is not None and found[0] < last_fetchable:
        return found[1], found[0]
    return None if hw_stale else (-1, -1)


def _leader_log(state: BrokerState, topic: str, index: int, epoch: int = -1) -> tuple[PartitionLog | None, ErrorCode, int]:
    """(the log this broker answers for, error code, its leader epoch) for the APIs only a
    partition's leader serves (ListOffsets, DeleteRecords, OffsetForLeaderEpoch)."""
    cluster = state.cluster
    if cluster is None:
        plog = state.topics.partition(topic, index)
        return plog, ErrorCode.none if plog is not None else ErrorCode.unknown_topic_or_partition, LEADER_EPOCH
    try:
        replica = cluster.replicas.leader(topic, index)
    except ReplicaError as exc:
        known = topic in cluster.metadata.topics
        return None, exc.code if known else ErrorCode.unknown_topic_or_partition, -1
    code = cluster.replicas.check_epoch(replica, epoch)
    return (replica.plog if code == ErrorCode.none else None), code, replica.leader_epoch


async def list_offsets(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    read_committed = int(field(body, "isolation_level", 0)) == _READ_COMMITTED
    # Kafka holds back a stale answer from consumers only (replica id -1), with the code
    # ListOffsets v5 brought, and LEADER_NOT_AVAILABLE (retriable too) before it.
    from_consumer = int(field(body, "replica_id", -1)) == _CONSUMER_REPLICA_ID
    not_available = ErrorCode.offset_not_available if req.api_version >= _OFFSET_NOT_AVAILABLE_SINCE \
        else ErrorCode.leader_not_available
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition_index)
            plog, code, epoch = _leader_log(state, topic.name, index, int(field(p, "current_leader_epoch", -1)))
            found = None
            if plog is not None:
                hw_stale = from_consumer and high_watermark_stale(state, topic.name, index)
                found = _list_offset(plog, int(p.timestamp), read_committed, hw_stale)
                if found is None:
                    code = not_available
                    log.debug("ListOffsets of %s-%d: the high watermark %d is below the start of leader epoch "
                              "%d; %s", topic.name, index, plog.high_watermark, epoch, code.name)
            if found is None:
                partitions.append({"partition_index": index, "error_code": code,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            ts, offset = found
            partitions.append({"partition_index": index, "error_code": ErrorCode.none, "timestamp": ts,
                               "offset": offset, "leader_epoch": epoch})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


# -- DeleteRecords ---------------------------------------------------------------------------


async def delete_records(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    topics = []
    for topic in req.body.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition_index)
            plog, code, _epoch = _leader_log(state, topic.name, index)
            if plog is None:
                partitions.append({"partition_index": index, "low_watermark": -1, "error_code": code})
                continue
            offset = int(p.offset)
            try:
                low = plog.delete_records_before(plog.high_watermark if offset == -1 else offset)
            except LogError as exc:
                partitions.append({"partition_index": index, "low_watermark": -1, "error_code": error_code_for(exc)})
                continue
            partitions.append({"partition_index": index, "low_watermark": low, "error_code": ErrorCode.none})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------


async def offset_for_leader_epoch(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    """Where a leader epoch ends in this leader's log (KIP-101/279): followers truncate to
    it, and consumers (KIP-320) detect a log that was truncated under them."""
    topics = []
    for topic in req.body.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition)
            plog, code, _epoch = _leader_log(state, topic.topic, index, int(field(p, "current_leader_epoch", -1)))
            if plog is None:
                partitions.append({"error_code": code, "partition": index, "leader_epoch": -1, "end_offset": -1})
                continue
            epoch, end = plog.end_offset_for_epoch(int(p.leader_epoch))
            partitions.append({"error_code": ErrorCode.none, "partition": index, "leader_epoch": epoch,
                               "end_offset": end})
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
