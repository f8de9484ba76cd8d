"""AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions,
ListTransactions: the transaction APIs, answered by the transaction coordinator
(``streamkit.broker.txn``) and, for TxnOffsetCommit, the group coordinator; and
WriteTxnMarkers, a coordinator's markers for the partitions this broker leads.

As the group APIs, each first asks whether this broker coordinates the transactional.id
(``txn_error``) and answers once what the coordinator wrote is replicated.

Kafka answers a fenced producer with PRODUCER_FENCED since KIP-588, and with
INVALID_PRODUCER_EPOCH in the versions before it (older clients do not know the new code):
``_fenced`` does that mapping in one place.
"""

from __future__ import annotations

import datetime
from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode, error_code_for
from streamkit.broker.group.coordinator import CommitRequest
from streamkit.broker.handlers.common import Reply, field, group_error, txn_error
from streamkit.broker.state import BrokerState, ClientInfo
from streamkit.log.errors import LogError

__all__ = [
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "describe_transactions",
    "end_txn",
    "fenced_for",
    "list_transactions",
    "txn_check",
    "txn_offset_commit",
    "write_txn_markers",
]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _instant(ms: int) -> datetime.datetime:
    """Epoch milliseconds as kio's datetime. Kafka sends -1 when no transaction ever
    started, which kio (and so any kio-based client) refuses to read: 0 says the same."""
    return _EPOCH + datetime.timedelta(milliseconds=max(ms, 0))


# The first version of each API whose clients understand PRODUCER_FENCED (KIP-588).
_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}


def fenced_for(req: Request, error: ErrorCode) -> ErrorCode:
    if error == ErrorCode.producer_fenced and req.api_version < _FENCED_SINCE.get(req.api_key, 0):
        return ErrorCode.invalid_producer_epoch
    return error


def txn_check(state: BrokerState, transactional_id: str, producer_id: int, producer_epoch: int,
              partition: tuple[str, int] | None = None) -> ErrorCode:
    """May this producer write to ``partition`` in its open transaction (a transactional
    Produce, a TxnOffsetCommit)? Asked of the transaction coordinator when it is this broker.
    In a cluster it often is not: then the partition's own producer-epoch check is all, as
    on Kafka's leaders before KIP-890."""
    if state.cluster is not None and txn_error(state, transactional_id) != ErrorCode.none:
        return ErrorCode.none
    return state.txns.check_ongoing(transactional_id, producer_id, producer_epoch, partition)


async def add_partitions_to_txn(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    topics = body.v3_and_below_topics
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    unknown = set()
    for topic, partition in wanted:
        info = state.topics.get(topic)
        if info is None or partition >= info.partitions or partition < 0:
            unknown.add((topic, partition))
    if unknown:
        # Kafka adds nothing when any partition is unknown; the others were not attempted.
        codes = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                 for tp in wanted}
    else:
        txn_id = body.v3_and_below_transactional_id
        error = txn_error(state, txn_id)
        if error == ErrorCode.none:
            error, durable = await state.coordinators.write_txns(lambda: state.txns.add_partitions(
                txn_id, int(body.v3_and_below_producer_id), int(body.v3_and_below_producer_epoch), wanted))
            error = durable if durable != ErrorCode.none else error
        codes = dict.fromkeys(wanted, fenced_for(req, error))
    results = [{"name": t.name, "results_by_partition": [
        {"partition_index": int(p), "partition_error_code": codes[(t.name, int(p))]} for p in t.partitions]}
        for t in topics]
    return {"throttle_time": 0, "results_by_topic_v3_and_below": results}


async def add_offsets_to_txn(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    error = txn_error(state, body.transactional_id)
    if error == ErrorCode.none:
        error, durable = await state.coordinators.write_txns(lambda: state.txns.add_offsets(
            body.transactional_id, int(body.producer_id), int(body.producer_epoch), body.group_id))
        error = durable if durable != ErrorCode.none else error
    return {"throttle_time": 0, "error_code": fenced_for(req, error)}


async def txn_offset_commit(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    producer_id, epoch = int(body.producer_id), int(body.producer_epoch)
    offsets_tp = state.txns.offsets_partition(body.group_id)
    error = group_error(state, body.group_id)
    if error == ErrorCode.none:
        error = txn_check(state, body.transactional_id, producer_id, epoch, offsets_tp)
    results: dict[tuple[str, int], ErrorCode] = {}
    if error == ErrorCode.none:
        commits = []
        for topic in body.topics:
            info = state.topics.get(topic.name)
            for p in topic.partitions:
                tp = (topic.name, int(p.partition_index))
                if info is None or tp[1] >= info.partitions:
                    results[tp] = ErrorCode.unknown_topic_or_partition
                    continue
                commits.append(CommitRequest(topic.name, tp[1], int(p.committed_offset),
                                             int(field(p, "committed_leader_epoch", -1)), p.committed_metadata))
        try:
            (error, accepted), durable = await state.coordinators.write_groups(lambda: state.coordinator.commit_txn(
                body.group_id, field(body, "member_id", "") or "", field(body, "group_instance_id"),
                int(field(body, "generation_id", -1)), producer_id, epoch, commits))
            error = durable if durable != ErrorCode.none else error
        except (LogError, OSError) as exc:  # the offsets partition refused it (a fenced epoch)
            error, accepted = error_code_for(exc), {}
        results.update(accepted)
    error = fenced_for(req, error)
    return {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": int(p.partition_index),
             "error_code": error if error != ErrorCode.none else results.get((t.name, int(p.partition_index)),
                                                                             ErrorCode.none)}
            for p in t.partitions]}
        for t in body.topics]}


async def end_txn(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    error = txn_error(state, body.transactional_id)
    if error == ErrorCode.none:
        error, durable = await state.coordinators.write_txns(lambda: state.txns.end_txn(
            body.transactional_id, int(body.producer_id), int(body.producer_epoch), bool(body.committed)))
        error = durable if durable != ErrorCode.none else error
    return {"throttle_time": 0, "error_code": fenced_for(req, error)}


async def describe_transactions(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    out: list[dict[str, Any]] = []
    for txn_id in req.body.transactional_ids:
        error = txn_error(state, txn_id)
        md = state.txns.describe(txn_id) if error == ErrorCode.none else None
        if md is None:
            out.append({"error_code": error if error != ErrorCode.none else ErrorCode.transactional_id_not_found,
                        "transactional_id": txn_id,
                        "transaction_state": "", "transaction_timeout": 0, "transaction_start_time": _instant(-1),
                        "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(md.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append({"error_code": ErrorCode.none, "transactional_id": txn_id,
                    "transaction_state": md.state.kafka_name, "transaction_timeout": md.timeout_ms,
                    "transaction_start_time": _instant(md.start_ms), "producer_id": md.producer_id,
                    "producer_epoch": md.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"throttle_time": 0, "transaction_states": out}


_STATE_NAMES = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                "Dead", "PrepareEpochFence"}


async def list_transactions(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    states = set(body.state_filters or ())
    pids = {int(p) for p in body.producer_id_filters or ()}
    duration = int(field(body, "duration_filter", -1))
    now = state.clock()
    if state.txns.owned.loading:
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress,
                "unknown_state_filters": [], "transaction_states": []}
    listed = [md for md in state.txns.list(states or None, pids or None)
              if duration < 0 or (md.start_ms >= 0 and now - md.start_ms >= duration)]
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "unknown_state_filters": sorted(states - _STATE_NAMES),
            "transaction_states": [{"transactional_id": md.transactional_id, "producer_id": md.producer_id,
                                    "transaction_state": md.state.kafka_name} for md in listed]}


async def write_txn_markers(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    """A transaction coordinator's markers: written into each partition this broker leads
    (NOT_LEADER_OR_FOLLOWER elsewhere), answered once replicated."""
    timeout_ms = state.config.request_timeout_ms
    markers = []
    for m in req.body.markers:
        wanted = [(t.name, int(p)) for t in m.topics for p in t.partition_indexes]
        codes = await state.markers.write_as_leader(int(m.producer_id), int(m.producer_epoch),
                                                    bool(m.transaction_result), int(m.coordinator_epoch), wanted,
                                                    timeout_ms)
        markers.append({"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": int(p), "error_code": codes[(t.name, int(p))]}
                                            for p in t.partition_indexes]} for t in m.topics]})
    return {"markers": markers}
