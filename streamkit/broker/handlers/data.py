"""Produce, Fetch, ListOffsets, DeleteRecords: the data path.

Produce hands each partition's record batch to the log, which validates framing, CRC-32C
and size, checks an idempotent producer's epoch and sequence numbers against the
partition's producer state (a retried duplicate gets its original offset back), and stores
it verbatim; Fetch returns stored bytes. Neither decodes records.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode, error_code_for
from streamkit.broker.handlers.common import LEADER_EPOCH, Reply, field
from streamkit.broker.state import BrokerState, ClientInfo
from streamkit.log.batch import HEADER_SIZE, peek_offsets
from streamkit.log.errors import LogError
from streamkit.log.partition import PartitionLog
from streamkit.log.producer_state import AppendOrigin

__all__ = ["delete_records", "fetch", "list_offsets", "produce"]

log = logging.getLogger(__name__)

_LATEST = -1
_EARLIEST = -2
_MAX_TIMESTAMP = -3
_READ_COMMITTED = 1


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
    error = state.txns.check_ongoing(txn_id, producer_id, epoch, (topic, partition))
    if error == ErrorCode.none:
        return error, None
    return error, f"{topic}-{partition} is not part of an open transaction of {txn_id!r} (producer {producer_id} epoch {epoch})"


# -- Produce -------------------------------------------------------------------------------


def _append(state: BrokerState, topic: str, partition: int, records: bytes | None,
            txn_id: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"index": partition, "base_offset": -1, "log_append_time": -1,
                              "log_start_offset": -1, "record_errors": [], "error_message": None}
    info = state.topics.get(topic)
    plog = state.topics.partition(topic, partition)
    if info is None or plog is None:
        return {**result, "error_code": ErrorCode.unknown_topic_or_partition}
    if info.internal:
        return {**result, "error_code": ErrorCode.invalid_topic_exception,
                "error_message": f"cannot produce to internal topic {topic}"}
    if not records or len(records) < HEADER_SIZE:
        return {**result, "error_code": ErrorCode.corrupt_message, "error_message": "no record batch"}
    _base, size, _last = peek_offsets(records, 0)
    if size < len(records):
        return {**result, "error_code": ErrorCode.invalid_record,
                "error_message": "a produce request carries exactly one record batch per partition"}
    code, message = _check_transactional(state, txn_id, topic, partition, records)
    if code != ErrorCode.none:
        log.info("refused batch for %s-%d: %s (%s)", topic, partition, message, code.name)
        return {**result, "error_code": code, "error_message": message}
    try:
        appended = plog.append(records, origin=AppendOrigin.CLIENT)
    except LogError as exc:
        log.info("rejected batch for %s-%d: %s", topic, partition, exc)
        return {**result, "error_code": error_code_for(exc), "error_message": str(exc)}
    except OSError as exc:
        log.error("storage error appending to %s-%d: %s", topic, partition, exc)
        return {**result, "error_code": ErrorCode.kafka_storage_error, "error_message": str(exc)}
    state.waiters.notify((topic, partition))
    return {**result, "error_code": ErrorCode.none, "base_offset": appended.base_offset,
            "log_append_time": appended.log_append_time, "log_start_offset": plog.log_start_offset}


async def produce(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    acks = int(body.acks)
    txn_id = field(body, "transactional_id")
    responses = []
    for topic in body.topic_data:
        partitions = []
        for p in topic.partition_data:
            if acks not in (0, 1, -1):
                partitions.append({"index": p.index, "error_code": ErrorCode.invalid_required_acks,
                                   "base_offset": -1, "log_append_time": -1, "log_start_offset": -1,
                                   "record_errors": [], "error_message": f"acks={acks}"})
            else:
                partitions.append(_append(state, topic.name, int(p.index), p.records, txn_id))
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        return None
    return {"throttle_time": 0, "responses": responses}


# -- Fetch ---------------------------------------------------------------------------------


def _fetch_partition(state: BrokerState, topic: str, p: Any, budget: int, first: bool,
                     read_committed: bool) -> tuple[dict[str, Any], int]:
    index = int(p.partition)
    out: dict[str, Any] = {"partition_index": index, "high_watermark": -1, "last_stable_offset": -1,
                           "log_start_offset": -1, "preferred_read_replica": -1,
                           "aborted_transactions": [] if read_committed else None, "records": b""}
    plog = state.topics.partition(topic, index)
    if plog is None:
        return {**out, "error_code": ErrorCode.unknown_topic_or_partition}, 0
    leader_epoch = int(field(p, "current_leader_epoch", -1))
    if leader_epoch > LEADER_EPOCH:
        return {**out, "error_code": ErrorCode.unknown_leader_epoch}, 0
    hw = plog.high_watermark
    lso = _last_stable_offset(plog)
    out.update(high_watermark=hw, last_stable_offset=lso, log_start_offset=plog.log_start_offset)
    offset = int(p.fetch_offset)
    if offset < plog.log_start_offset or offset > plog.log_end_offset:
        return {**out, "error_code": ErrorCode.offset_out_of_range}, 0
    limit = min(int(p.partition_max_bytes), budget)
    upper = lso if read_committed else hw
    if limit <= 0 or offset >= upper:
        return {**out, "error_code": ErrorCode.none}, 0
    try:
        data, next_offset = plog.read_chunk(offset, limit, max_offset=upper)
    except LogError as exc:
        return {**out, "error_code": error_code_for(exc)}, 0
    if len(data) > limit and not first:
        data = b""  # only the response's first partition may exceed the limits (KIP-74)
    if read_committed and data:
        out["aborted_transactions"] = [
            {"producer_id": a.producer_id, "first_offset": a.first_offset}
            for a in plog.aborted_transactions(offset, min(next_offset, upper))]
    return {**out, "error_code": ErrorCode.none, "records": data}, len(data)


def _read_all(state: BrokerState, body: Any, max_bytes: int,
              read_committed: bool) -> tuple[list[dict[str, Any]], int, bool]:
    """(topic responses, bytes returned, whether any partition has an error)."""
    responses = []
    total = 0
    failed = False
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            part, size = _fetch_partition(state, topic.topic, p, max_bytes - total, total == 0, read_committed)
            total += size
            failed = failed or part["error_code"] != ErrorCode.none
            partitions.append(part)
        responses.append({"topic": topic.topic, "partitions": partitions})
    return responses, total, failed


async def fetch(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    max_bytes = min(int(field(body, "max_bytes", state.config.fetch_max_bytes)), state.config.fetch_max_bytes)
    min_bytes = int(body.min_bytes)
    read_committed = int(field(body, "isolation_level", 0)) == _READ_COMMITTED
    wait_ms = int(body.max_wait.total_seconds() * 1000)
    deadline = state.clock() + wait_ms
    partitions = [(t.topic, int(p.partition)) for t in body.topics for p in t.partitions]
    while True:
        responses, total, failed = _read_all(state, body, max_bytes, read_committed)
        remaining = deadline - state.clock()
        # Kafka answers at once when any partition has an error (out of range, unknown...):
        # waiting would only delay the client's reaction to it.
        if total >= min_bytes or failed or remaining <= 0 or not partitions:
            break
        if not await state.waiters.wait(partitions, remaining / 1000):
            responses, _total, _failed = _read_all(state, body, max_bytes, read_committed)
            break
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses}


# -- ListOffsets -----------------------------------------------------------------------------


def _list_offset(plog: PartitionLog, timestamp: int, read_committed: bool) -> tuple[int, int]:
    if timestamp == _LATEST:
        return -1, _last_stable_offset(plog) if read_committed else plog.high_watermark
    if timestamp == _EARLIEST:
        return -1, plog.log_start_offset
    if timestamp == _MAX_TIMESTAMP:
        newest = plog.max_timestamp
        found = plog.offset_for_timestamp(newest) if newest >= 0 else None
        return found[1] if found else -1, found[0] if found else -1
    found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    return found[1], found[0]


async def list_offsets(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    read_committed = int(field(body, "isolation_level", 0)) == _READ_COMMITTED
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition_index)
            plog = state.topics.partition(topic.name, index)
            if plog is None:
                partitions.append({"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            ts, offset = _list_offset(plog, int(p.timestamp), read_committed)
            partitions.append({"partition_index": index, "error_code": ErrorCode.none, "timestamp": ts,
                               "offset": offset, "leader_epoch": LEADER_EPOCH})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


# -- DeleteRecords ---------------------------------------------------------------------------


async def delete_records(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    topics = []
    for topic in req.body.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition_index)
            plog = state.topics.partition(topic.name, index)
            if plog is None:
                partitions.append({"partition_index": index, "low_watermark": -1,
                                   "error_code": ErrorCode.unknown_topic_or_partition})
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
