"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848): translations between the wire
(topics by id) and the consumer group state machine (topics by name)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.group.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    HeartbeatRequest,
    new_member_id,
)
from streamkit.broker.handlers.common import (
    NO_OPERATIONS,
    Reply,
    failed_deliveries,
    field,
    group_error,
)
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = ["consumer_group_describe", "consumer_group_heartbeat", "describe_as_classic"]

TopicPartition = tuple[str, int]
_MEMBER_TYPE_CLASSIC = 0
_MEMBER_TYPE_CONSUMER = 1


def _ms(value: Any) -> int:
    return -1 if value is None else int(value.total_seconds() * 1000)


def _owned(state: BrokerState, topic_partitions: Any) -> frozenset[TopicPartition] | None:
    if topic_partitions is None:
        return None
    out: set[TopicPartition] = set()
    for tp in topic_partitions:
        info = state.topics.by_id(tp.topic_id) if tp.topic_id is not None else None
        if info is not None:  # a deleted topic's partitions are no longer owned
            out.update((info.name, int(p)) for p in tp.partitions)
    return frozenset(out)


def _by_topic(state: BrokerState, partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    grouped: dict[str, list[int]] = {}
    for topic, p in partitions:
        grouped.setdefault(topic, []).append(p)
    out = []
    for topic in sorted(grouped):
        info = state.topics.get(topic)
        if info is not None:
            out.append({"topic_id": info.topic_id, "topic_name": topic, "partitions": sorted(grouped[topic])})
    return out


async def consumer_group_heartbeat(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    member_id = body.member_id
    if not member_id and req.api_version == 0 and int(body.member_epoch) == 0:
        member_id = new_member_id()  # v0: the coordinator may choose the id
    names = field(body, "subscribed_topic_names")
    request = HeartbeatRequest(
        group_id=body.group_id,
        member_id=member_id,
        member_epoch=int(body.member_epoch),
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=_ms(body.rebalance_timeout),
        subscribed_topic_names=tuple(names) if names is not None else None,
        subscribed_topic_regex=field(body, "subscribed_topic_regex"),
        server_assignor=body.server_assignor,
        owned=_owned(state, body.topic_partitions),
        client_id=client.client_id,
        client_host=client.host,
    )
    error = group_error(state, body.group_id)
    if error != ErrorCode.none:
        return {"throttle_time": 0, "error_code": error, "error_message": None, "member_id": member_id,
                "member_epoch": int(body.member_epoch), "heartbeat_interval": 0, "assignment": None}
    (result, deliveries), error = await state.coordinators.write_groups(
        lambda: state.coordinator.consumer_heartbeat(request))
    if error != ErrorCode.none:
        state.groups.deliver(failed_deliveries(deliveries, error))
        return {"throttle_time": 0, "error_code": error, "error_message": None, "member_id": result.member_id,
                "member_epoch": int(body.member_epoch), "heartbeat_interval": 0, "assignment": None}
    state.groups.deliver(deliveries)
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [
            {"topic_id": t["topic_id"], "partitions": t["partitions"]} for t in _by_topic(state, result.assignment)]}
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "error_message": result.message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval": result.heartbeat_interval_ms,
        "assignment": assignment,
    }


def _member(state: BrokerState, group: ConsumerGroup, m: ConsumerMember) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "instance_id": m.instance_id,
        "rack_id": m.rack_id,
        "member_epoch": m.member_epoch,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": list(m.topic_names),
        "subscribed_topic_regex": m.topic_regex,
        "assignment": {"topic_partitions": _by_topic(state, m.assigned)},
        "target_assignment": {"topic_partitions": _by_topic(state, group.target.get(m.member_id, ()))},
        "member_type": _MEMBER_TYPE_CONSUMER if m.classic is None else _MEMBER_TYPE_CLASSIC,
    }


async def consumer_group_describe(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    groups = []
    for group_id in req.body.group_ids:
        error = group_error(state, group_id)
        if error != ErrorCode.none:
            groups.append({"error_code": error, "error_message": None, "group_id": group_id, "group_state": "",
                           "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
                           "authorized_operations": NO_OPERATIONS})
            continue
        group = state.coordinator.consumer.get(group_id)
        if group is None:
            # Kafka's answers: a classic group is "not a consumer group", any other unknown.
            message = (f"Group {group_id} is not a consumer group." if state.coordinator.get(group_id)
                       else f"Group {group_id} not found.")
            groups.append({"error_code": ErrorCode.group_id_not_found, "error_message": message,
                           "group_id": group_id, "group_state": "Dead", "group_epoch": -1,
                           "assignment_epoch": -1, "assignor_name": "", "members": [],
                           "authorized_operations": NO_OPERATIONS})
            continue
        groups.append({
            "error_code": ErrorCode.none,
            "group_id": group_id,
            "group_state": group.state,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.assignor_name or state.coordinator.consumer.settings.assignors[0],
            "members": [_member(state, group, m) for m in group.members.values()],
            "authorized_operations": NO_OPERATIONS,
        })
    return {"throttle_time": 0, "groups": groups}


def describe_as_classic(state: BrokerState, group_id: str) -> dict[str, Any] | None:
    """DescribeGroups (up to v5) for a consumer group: Kafka 4 answers such a group as
    Dead, with no members and no error (v6 would say GROUP_ID_NOT_FOUND, "Group g is not a
    classic group."); ConsumerGroupDescribe is the API that describes it."""
    if state.coordinator.consumer.get(group_id) is None:
        return None
    return {"error_code": ErrorCode.none, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
            "protocol_data": "", "members": [], "authorized_operations": NO_OPERATIONS}
