"""JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups,
ListGroups, DeleteGroups: thin translations to and from the group coordinator.

Each first asks whether this broker coordinates the group (``group_error``: a cluster
member coordinates the groups of the ``__consumer_offsets`` partitions it leads), and
answers once what the coordinator wrote is replicated (``Coordinators.write_groups``):
an answer never reports a state a failover could lose."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.group.coordinator import CommitRequest
from streamkit.broker.group.group import JoinRequest, JoinResult, Outcome, SyncResult
from streamkit.broker.handlers.common import (
    NO_OPERATIONS,
    Reply,
    failed_answer,
    failed_deliveries,
    field,
    group_error,
)
from streamkit.broker.handlers.consumer_groups import describe_as_classic
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = [
    "delete_groups",
    "describe_groups",
    "heartbeat",
    "join_group",
    "leave_group",
    "list_groups",
    "offset_commit",
    "offset_fetch",
    "sync_group",
]

_MEMBER_ID_REQUIRED_SINCE = 4


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


async def _rebalance(state: BrokerState, group_id: str, kind: str,
                     call: Callable[[], Outcome]) -> JoinResult | SyncResult:
    """A JoinGroup or SyncGroup: the coordinator's outcome, delivered once its writes are
    replicated; a deferred answer (made later by another member's request) waits for that
    request's writes too."""
    mark = state.coordinators.group_mark(group_id)
    outcome, error = await state.coordinators.write_groups(call)
    if error != ErrorCode.none:
        result = outcome.result
        outcome = Outcome(failed_answer(result, error) if isinstance(result, JoinResult | SyncResult) else result,
                          failed_deliveries(outcome.deliveries, error), outcome.member_id)
    deferred = outcome.result is None
    answer = await state.groups.settle(group_id, kind, outcome)
    if deferred and answer.error == ErrorCode.none:
        error = await state.coordinators.group_writes_since(group_id, mark)
        if error != ErrorCode.none:
            return failed_answer(answer, error)
    return answer


async def join_group(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    session = _ms(body.session_timeout)
    rebalance = field(body, "rebalance_timeout")
    join = JoinRequest(
        member_id=body.member_id,
        group_instance_id=field(body, "group_instance_id"),
        client_id=client.client_id,
        client_host=client.host,
        session_timeout_ms=session,
        rebalance_timeout_ms=_ms(rebalance) if rebalance is not None else session,
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        require_known_member_id=req.api_version >= _MEMBER_ID_REQUIRED_SINCE,
    )
    error = group_error(state, body.group_id)
    if error != ErrorCode.none:
        result: JoinResult | SyncResult = JoinResult(error, body.member_id)
    else:
        result = await _rebalance(state, body.group_id, "join", lambda: state.coordinator.join(body.group_id, join))
    assert isinstance(result, JoinResult)
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": meta} for m, i, meta in result.members],
    }


async def sync_group(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    error = group_error(state, body.group_id)
    if error != ErrorCode.none:
        result: JoinResult | SyncResult = SyncResult(error)
    else:
        result = await _rebalance(state, body.group_id, "sync", lambda: state.coordinator.sync(
            body.group_id, body.member_id, field(body, "group_instance_id"), int(body.generation_id), assignments))
    assert isinstance(result, SyncResult)
    return {"throttle_time": 0, "error_code": result.error, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment}


async def heartbeat(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    error = group_error(state, body.group_id)
    if error == ErrorCode.none:
        error = state.coordinator.heartbeat(body.group_id, body.member_id, field(body, "group_instance_id"),
                                            int(body.generation_id))
    return {"throttle_time": 0, "error_code": error}


async def leave_group(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    members = field(body, "members")
    if members is None:  # v0-v2: one dynamic member
        pairs: list[tuple[str, str | None]] = [(body.member_id, None)]
    else:
        pairs = [(m.member_id, m.group_instance_id) for m in members]
    error = group_error(state, body.group_id)
    top: ErrorCode
    errors: list[ErrorCode]
    if error != ErrorCode.none:
        top, errors = error, [error] * len(pairs)
    else:
        (top, errors, deliveries), error = await state.coordinators.write_groups(
            lambda: state.coordinator.leave(body.group_id, pairs))
        if error != ErrorCode.none:
            top, errors, deliveries = error, [error] * len(pairs), failed_deliveries(deliveries, error)
        state.groups.deliver(deliveries)
    return {
        "throttle_time": 0,
        "error_code": top,
        "members": [{"member_id": m, "group_instance_id": i, "error_code": e}
                    for (m, i), e in zip(pairs, errors, strict=True)],
    }


async def offset_commit(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    commits = []
    unknown: set[tuple[str, int]] = set()
    for topic in body.topics:
        info = state.topics.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            if info is None or tp[1] >= info.partitions:
                unknown.add(tp)
                continue
            commits.append(CommitRequest(topic.name, tp[1], int(p.committed_offset),
                                         int(field(p, "committed_leader_epoch", -1)), p.committed_metadata))
    error = group_error(state, body.group_id)
    results: dict[tuple[str, int], ErrorCode] = {}
    if error == ErrorCode.none:
        (error, results), durable = await state.coordinators.write_groups(lambda: state.coordinator.commit(
            body.group_id, body.member_id, field(body, "group_instance_id"),
            int(body.generation_id_or_member_epoch), commits))
        if durable != ErrorCode.none:
            error = durable
    topics = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            code = ErrorCode.unknown_topic_or_partition if tp in unknown else (
                error if error != ErrorCode.none else results.get(tp, ErrorCode.none))
            parts.append({"partition_index": tp[1], "error_code": code})
        topics.append({"name": topic.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _fetch_group(state: BrokerState, group_id: str, topics: Any, require_stable: bool) -> list[dict[str, Any]]:
    wanted = None
    if topics is not None:
        wanted = [(t.name, int(i)) for t in topics for i in t.partition_indexes]
    found = state.coordinator.fetch(group_id, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in found.items():
        # KIP-447: a read_committed consumer asks for stable offsets; one an open
        # transaction is about to change is UNSTABLE_OFFSET_COMMIT (retriable) until it ends.
        unstable = require_stable and state.coordinator.has_pending(group_id, (topic, partition))
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": -1 if unstable or not value else value.offset,
            "committed_leader_epoch": value.leader_epoch if value and not unstable else -1,
            "metadata": value.metadata if value and not unstable else "",
            "error_code": ErrorCode.unstable_offset_commit if unstable else ErrorCode.none,
        })
    return [{"name": t, "partitions": sorted(ps, key=lambda x: x["partition_index"])} for t, ps in by_topic.items()]


def _fetch_one(state: BrokerState, g: Any, stable: bool) -> dict[str, Any]:
    error = group_error(state, g.group_id)
    if error != ErrorCode.none:
        return {"group_id": g.group_id, "topics": [], "error_code": error}
    # v9: a consumer group (KIP-848) member fetches with its current epoch.
    if g.group_id in state.coordinator.consumer.groups:
        error = state.coordinator.consumer.validate_offset_fetch(
            g.group_id, field(g, "member_id"), int(field(g, "member_epoch", -1)))
        if error != ErrorCode.none:
            return {"group_id": g.group_id, "topics": [], "error_code": error}
    return {"group_id": g.group_id, "topics": _fetch_group(state, g.group_id, g.topics, stable),
            "error_code": ErrorCode.none}


async def offset_fetch(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    stable = bool(field(body, "require_stable", False))
    groups = field(body, "groups")
    if groups is not None:  # v8+: several groups in one request
        return {"throttle_time": 0, "groups": [
            _fetch_one(state, g, stable) for g in groups]}
    error = group_error(state, body.group_id)
    if error != ErrorCode.none:
        # v2+ has a top-level error code; before it, each partition asked for carries it.
        return {"throttle_time": 0, "error_code": error, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": int(i), "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                 "error_code": error} for i in t.partition_indexes]}
            for t in body.topics or ()]}
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "topics": _fetch_group(state, body.group_id, body.topics, stable)}


async def describe_groups(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    groups = []
    for group_id in req.body.groups:
        error = group_error(state, group_id)
        if error != ErrorCode.none:
            groups.append({"error_code": error, "group_id": group_id, "group_state": "", "protocol_type": "",
                           "protocol_data": "", "members": [], "authorized_operations": NO_OPERATIONS})
            continue
        modern = describe_as_classic(state, group_id)
        if modern is not None:
            groups.append(modern)
            continue
        d = state.coordinator.describe(group_id)
        groups.append({
            "error_code": ErrorCode.none,
            "group_id": group_id,
            "group_state": d.state,
            "protocol_type": d.protocol_type,
            "protocol_data": d.protocol_name,
            "members": [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": m.metadata(d.protocol_name), "member_assignment": m.assignment,
            } for m in d.members],
            "authorized_operations": NO_OPERATIONS,
        })
    return {"throttle_time": 0, "groups": groups}


async def list_groups(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    states = set(field(req.body, "states_filter", ()) or ())
    # v5: the group type (KIP-848), filtered case-insensitively as Kafka does.
    types = {t.lower() for t in field(req.body, "types_filter", ()) or ()}
    if state.coordinator.owned.loading or state.share.owned.loading:
        # Kafka's answer while any coordinator partition of this broker is loading.
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress, "groups": []}
    listed = [(g, pt, st, state.coordinator.group_type(g) or "classic")
              for g, pt, st in state.coordinator.list_groups(states or None)]
    listed += [(g, "share", st, "share") for g, st in state.share.list_groups() if not states or st in states]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": [
        {"group_id": g, "protocol_type": pt, "group_state": st, "group_type": kind}
        for g, pt, st, kind in listed if not types or kind in types]}


async def delete_groups(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    async def delete(group_id: str) -> ErrorCode:
        if state.coordinator.get(group_id) is None and group_id in state.share.group_ids():
            mark = state.coordinators.share_mark(group_id)
            error = state.share.delete_group(group_id)
            durable = await state.coordinators.share_writes_since(group_id, mark)
            return error if durable == ErrorCode.none else durable
        error = group_error(state, group_id)
        if error != ErrorCode.none:
            return error
        error, durable = await state.coordinators.write_groups(lambda: state.coordinator.delete(group_id))
        return error if durable == ErrorCode.none else durable

    return {"throttle_time": 0, "results": [
        {"group_id": g, "error_code": await delete(g)} for g in req.body.groups_names]}
