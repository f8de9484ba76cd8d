"""Where the request handlers ask the authorizer: one wrapper per API, around the handler.

Each wrapper checks what Kafka's KafkaApis checks for that API with the connection's
principal and host, then either refuses the whole request (Kafka's error response: the
error code in every place that has one) or passes the handler only the topics, groups or
resources the principal may act on and adds the refused ones to its answer with
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED or
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. The handlers themselves know nothing of principals.

Without an authorizer every request goes straight to its handler; only the KIP-430
authorized-operations fields are filled (every operation, as Kafka does without one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from streamkit.broker.build import build
from streamkit.broker.codec import Request, response_type_for
from streamkit.broker.error_reply import error_response
from streamkit.broker.errors import ErrorCode
from streamkit.broker.handlers.common import Handler, Reply, field
from streamkit.broker.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    Operation,
    ResourceType,
)
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = ["guarded"]

Inner = Handler
Wrapper = Callable[["_Gate", Request, Inner], Any]

_TOPIC_DENIED = ErrorCode.topic_authorization_failed
_GROUP_DENIED = ErrorCode.group_authorization_failed
_CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
_TXN_DENIED = ErrorCode.transactional_id_authorization_failed
_MESSAGES: Mapping[ErrorCode, str] = {
    _TOPIC_DENIED: "not authorized to access this topic",
    _GROUP_DENIED: "not authorized to access this group",
    _CLUSTER_DENIED: "not authorized to perform this cluster action",
    _TXN_DENIED: "not authorized to use this transactional id",
}
_NONE = ErrorCode.none


class _Gate:
    """One request's view of the authorizer: the principal, its host, and the handler's state."""

    def __init__(self, state: BrokerState, client: ClientInfo) -> None:
        self.state = state
        self.client = client
        authorizer = state.authorizer
        assert authorizer is not None
        self.authorizer = authorizer

    def allows(self, op: Operation, rtype: ResourceType, name: str = CLUSTER_NAME) -> bool:
        return self.authorizer.authorize(self.client.principal, self.client.host, op, rtype, name)

    def topic(self, op: Operation) -> Callable[[str], ErrorCode]:
        return lambda name: _NONE if self.allows(op, ResourceType.TOPIC, name) else _TOPIC_DENIED

    def group(self, op: Operation) -> Callable[[str], ErrorCode]:
        return lambda name: _NONE if self.allows(op, ResourceType.GROUP, name) else _GROUP_DENIED

    def operations(self, rtype: ResourceType, name: str) -> int:
        return self.authorizer.authorized_operations(self.client.principal, self.client.host, rtype, name)

    async def call(self, inner: Inner, req: Request) -> Reply:
        return await inner(self.state, req, self.client)


def _all_operations(rtype: ResourceType) -> int:
    bits = 0
    for op in SUPPORTED_OPERATIONS[rtype]:
        bits |= 1 << int(op)
    return bits


def refuse(req: Request, code: ErrorCode) -> Reply:
    body = error_response(req, code, _MESSAGES[code])
    assert body is not None, f"api {req.api_key} has no error code to refuse with"
    return {"__body__": body}


def _with(req: Request, **fields: Any) -> Request:
    return dataclasses.replace(req, body=dataclasses.replace(req.body, **fields))


def _as_body(req: Request, reply: Mapping[str, Any]) -> Any:
    return reply["__body__"] if "__body__" in reply else build(response_type_for(req), reply)


async def _split(gate: _Gate, req: Request, inner: Inner, array: str, answer: str,
                 name_of: Callable[[Any], str | None], check: Callable[[str], ErrorCode]) -> Reply:
    """Pass ``inner`` the elements of the request's ``array`` whose name ``check`` allows;
    answer the others in the response's ``answer`` array with the code it gave them."""
    def decide(item: Any) -> ErrorCode:
        name = name_of(item)
        return _NONE if name is None else check(name)  # an unknown topic id: the handler answers
    return await _split_items(gate, req, inner, array, answer, decide)


async def _split_items(gate: _Gate, req: Request, inner: Inner, array: str, answer: str,
                       decide: Callable[[Any], ErrorCode]) -> Reply:
    items = getattr(req.body, array, None)
    if items is None:
        return await gate.call(inner, req)
    allowed: list[Any] = []
    denied: dict[ErrorCode, list[Any]] = {}
    for item in items:
        code = decide(item)
        if code == _NONE:
            allowed.append(item)
        else:
            denied.setdefault(code, []).append(item)
    if not denied:
        return await gate.call(inner, req)
    reply = await gate.call(inner, _with(req, **{array: tuple(allowed)}))
    if reply is None:
        return None
    body = _as_body(req, reply)
    merged = list(getattr(body, answer))
    for code, refused in denied.items():
        err = error_response(_with(req, **{array: tuple(refused)}), code, _MESSAGES[code])
        assert err is not None
        merged.extend(getattr(err, answer))
    return {"__body__": dataclasses.replace(body, **{answer: tuple(merged)})}


def _name(item: Any) -> str:
    return item if isinstance(item, str) else str(field(item, "name", None) or field(item, "topic", ""))


def _topic_by_id(gate: _Gate) -> Callable[[Any], str | None]:
    def name_of(item: Any) -> str | None:
        if isinstance(item, str):
            return item
        name = field(item, "name", None) or field(item, "topic", None)
        if name:
            return str(name)
        info = gate.state.topics.by_id(field(item, "topic_id", None))
        return None if info is None else info.name
    return name_of


def _replica_id(body: Any) -> int:
    replica_state = field(body, "replica_state")
    if replica_state is not None:
        return int(replica_state.replica_id)
    return int(field(body, "replica_id", -1))


# -- the data path -----------------------------------------------------------------------------


async def _produce(gate: _Gate, req: Request, inner: Inner) -> Reply:
    txn_id = field(req.body, "transactional_id")
    if txn_id is not None and not gate.allows(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return None if int(req.body.acks) == 0 else refuse(req, _TXN_DENIED)
    return await _split(gate, req, inner, "topic_data", "responses", _name, gate.topic(Operation.WRITE))


async def _fetch(gate: _Gate, req: Request, inner: Inner) -> Reply:
    if _replica_id(req.body) >= 0:
        if not gate.allows(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
            # Kafka's answer to a follower without CLUSTER_ACTION: every partition refused.
            refused = refuse(req, _TOPIC_DENIED)
            assert refused is not None
            body = refused["__body__"]
            return {"__body__": dataclasses.replace(body, error_code=_NONE) if hasattr(body, "error_code") else body}
        return await gate.call(inner, req)
    return await _split(gate, req, inner, "topics", "responses", _name, gate.topic(Operation.READ))


async def _list_offsets(gate: _Gate, req: Request, inner: Inner) -> Reply:
    return await _split(gate, req, inner, "topics", "topics", _name, gate.topic(Operation.DESCRIBE))


async def _offset_for_leader_epoch(gate: _Gate, req: Request, inner: Inner) -> Reply:
    if _replica_id(req.body) >= 0 and not gate.allows(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return refuse(req, _CLUSTER_DENIED)
    return await _split(gate, req, inner, "topics", "topics", _name, gate.topic(Operation.DESCRIBE))


async def _delete_records(gate: _Gate, req: Request, inner: Inner) -> Reply:
    return await _split(gate, req, inner, "topics", "topics", _name, gate.topic(Operation.DELETE))


# -- metadata and cluster ------------------------------------------------------------------------


def _exists(state: BrokerState, name: str) -> bool:
    if state.cluster is not None:
        return name in state.cluster.metadata.topics
    return state.topics.get(name) is not None


async def _metadata(gate: _Gate, req: Request, inner: Inner) -> Reply:
    """Only topics the principal may DESCRIBE are listed; a named one it may not gets
    TOPIC_AUTHORIZATION_FAILED, and so does one that would be auto-created without CREATE
    on the cluster or the topic."""
    body = req.body
    state = gate.state
    auto_create = bool(field(body, "allow_auto_topic_creation", True)) and state.config.auto_create_topics_enable
    create_any = gate.allows(Operation.CREATE, ResourceType.CLUSTER)

    def check(name: str) -> ErrorCode:
        if not gate.allows(Operation.DESCRIBE, ResourceType.TOPIC, name):
            return _TOPIC_DENIED
        if auto_create and not create_any and not _exists(state, name) \
                and not gate.allows(Operation.CREATE, ResourceType.TOPIC, name):
            return _TOPIC_DENIED
        return _NONE

    if field(body, "topics") is None:
        reply = await gate.call(inner, req)
        assert reply is not None
        topics = [t for t in reply["topics"] if gate.allows(Operation.DESCRIBE, ResourceType.TOPIC, t["name"])]
        return _metadata_operations(gate, req, {**reply, "topics": topics})
    reply = await _split(gate, req, _operations_filled(inner), "topics", "topics", _topic_by_id(gate), check)
    return reply


def _operations_filled(inner: Inner) -> Inner:
    async def call(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
        reply = await inner(state, req, client)
        assert reply is not None
        return _metadata_operations(_Gate(state, client), req, reply)
    return call


def _metadata_operations(gate: _Gate, req: Request, reply: Mapping[str, Any]) -> Reply:
    out = dict(reply)
    if field(req.body, "include_topic_authorized_operations", False):
        out["topics"] = [{**t, "topic_authorized_operations": gate.operations(ResourceType.TOPIC, t["name"])}
                         if t["error_code"] == _NONE else t for t in reply["topics"]]
    if field(req.body, "include_cluster_authorized_operations", False):
        out["cluster_authorized_operations"] = gate.operations(ResourceType.CLUSTER, CLUSTER_NAME)
    return out


async def _describe_cluster(gate: _Gate, req: Request, inner: Inner) -> Reply:
    if not gate.allows(Operation.DESCRIBE, ResourceType.CLUSTER):
        return refuse(req, _CLUSTER_DENIED)
    reply = await gate.call(inner, req)
    assert reply is not None
    if field(req.body, "include_cluster_authorized_operations", False):
        return {**reply, "cluster_authorized_operations": gate.operations(ResourceType.CLUSTER, CLUSTER_NAME)}
    return reply


def _cluster(op: Operation) -> Wrapper:
    async def wrapper(gate: _Gate, req: Request, inner: Inner) -> Reply:
        if not gate.allows(op, ResourceType.CLUSTER):
            return refuse(req, _CLUSTER_DENIED)
        return await gate.call(inner, req)
    return wrapper


async def _find_coordinator(gate: _Gate, req: Request, inner: Inner) -> Reply:
    key_type = int(field(req.body, "key_type", 0))
    if key_type == 0:
        check, code = gate.group(Operation.DESCRIBE), _GROUP_DENIED
    elif key_type == 1:
        def check(name: str) -> ErrorCode:
            return _NONE if gate.allows(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, name) else _TXN_DENIED
        code = _TXN_DENIED
    else:
        return await gate.call(inner, req)
    if field(req.body, "coordinator_keys") is not None:
        return await _split(gate, req, inner, "coordinator_keys", "coordinators", _name, check)
    if check(str(field(req.body, "key", ""))) != _NONE:
        return refuse(req, code)
    return await gate.call(inner, req)


# -- topics and configs ------------------------------------------------------------------------


async def _create_topics(gate: _Gate, req: Request, inner: Inner) -> Reply:
    if gate.allows(Operation.CREATE, ResourceType.CLUSTER):
        return await gate.call(inner, req)
    return await _split(gate, req, inner, "topics", "topics", _name, gate.topic(Operation.CREATE))


async def _delete_topics(gate: _Gate, req: Request, inner: Inner) -> Reply:
    array = "topic_names" if field(req.body, "topic_names") is not None else "topics"
    return await _split(gate, req, inner, array, "responses", _topic_by_id(gate), gate.topic(Operation.DELETE))


async def _create_partitions(gate: _Gate, req: Request, inner: Inner) -> Reply:
    return await _split(gate, req, inner, "topics", "results", _name, gate.topic(Operation.ALTER))


_CONFIG_TOPIC = 2
_CONFIG_GROUP = 32


def _configs(op: Operation, answer: str) -> Wrapper:
    def check(gate: _Gate) -> Callable[[Any], ErrorCode]:
        def of(resource: Any) -> ErrorCode:
            kind = int(resource.resource_type)
            if kind == _CONFIG_TOPIC:
                return gate.topic(op)(resource.resource_name)
            if kind == _CONFIG_GROUP:
                return gate.group(op)(resource.resource_name)
            return _NONE if gate.allows(op, ResourceType.CLUSTER) else _CLUSTER_DENIED
        return of

    async def wrapper(gate: _Gate, req: Request, inner: Inner) -> Reply:
        return await _split_items(gate, req, inner, "resources", answer, check(gate))
    return wrapper


# -- groups ----------------------------------------------------------------------------------


def _group_whole(op: Operation, topic_op: Operation | None = None, topics: str = "topics",
                 answer: str = "topics") -> Wrapper:
    """The request names one group (``group_id``): refused whole without ``op`` on it; with
    ``topic_op``, its ``topics`` array is split by that operation on each topic."""
    async def wrapper(gate: _Gate, req: Request, inner: Inner) -> Reply:
        if not gate.allows(op, ResourceType.GROUP, str(req.body.group_id)):
            return refuse(req, _GROUP_DENIED)
        if topic_op is None:
            return await gate.call(inner, req)
        return await _split(gate, req, inner, topics, answer, _topic_by_id(gate), gate.topic(topic_op))
    return wrapper


async def _offset_fetch(gate: _Gate, req: Request, inner: Inner) -> Reply:
    body = req.body
    if field(body, "groups") is not None:  # v8+: several groups
        reply = await _split(gate, req, inner, "groups", "groups", lambda g: str(g.group_id),
                             gate.group(Operation.DESCRIBE))
        if reply is None:
            return None
        out = _as_body(req, reply)
        groups = tuple(dataclasses.replace(g, topics=tuple(
            t for t in g.topics if gate.allows(Operation.DESCRIBE, ResourceType.TOPIC, t.name))) for g in out.groups)
        return {"__body__": dataclasses.replace(out, groups=groups)}
    if not gate.allows(Operation.DESCRIBE, ResourceType.GROUP, str(body.group_id)):
        return refuse(req, _GROUP_DENIED)
    if field(body, "topics") is not None:
        return await _split(gate, req, inner, "topics", "topics", _name, gate.topic(Operation.DESCRIBE))
    reply = await gate.call(inner, req)
    assert reply is not None
    return {**reply, "topics": [t for t in reply["topics"]
                                if gate.allows(Operation.DESCRIBE, ResourceType.TOPIC, t["name"])]}


def _described_groups(array: str, op: Operation = Operation.DESCRIBE) -> Wrapper:
    """DescribeGroups and the like: groups the principal may not DESCRIBE are answered
    GROUP_AUTHORIZATION_FAILED; the others carry their KIP-430 authorized operations when
    the request asks for them."""
    async def wrapper(gate: _Gate, req: Request, inner: Inner) -> Reply:
        asked = bool(field(req.body, "include_authorized_operations", False))

        async def described(state: BrokerState, sub: Request, client: ClientInfo) -> Reply:
            reply = await inner(state, sub, client)
            if not asked or reply is None or "__body__" in reply:
                return reply
            return {**reply, "groups": [
                {**g, "authorized_operations": gate.operations(ResourceType.GROUP, g["group_id"])}
                if g["error_code"] == _NONE else g for g in reply["groups"]]}

        return await _split(gate, req, described, array, "groups",
                            lambda g: g if isinstance(g, str) else str(g.group_id), gate.group(op))
    return wrapper


async def _list_groups(gate: _Gate, req: Request, inner: Inner) -> Reply:
    reply = await gate.call(inner, req)
    if reply is None or gate.allows(Operation.DESCRIBE, ResourceType.CLUSTER):
        return reply
    return {**reply, "groups": [g for g in reply["groups"]
                                if gate.allows(Operation.DESCRIBE, ResourceType.GROUP, g["group_id"])]}


async def _delete_groups(gate: _Gate, req: Request, inner: Inner) -> Reply:
    return await _split(gate, req, inner, "groups_names", "results", _name, gate.group(Operation.DELETE))


def _group_heartbeat(subscribed: str) -> Wrapper:
    """KIP-848/932 heartbeats: READ on the group, DESCRIBE on every subscribed topic."""
    async def wrapper(gate: _Gate, req: Request, inner: Inner) -> Reply:
        if not gate.allows(Operation.READ, ResourceType.GROUP, str(req.body.group_id)):
            return refuse(req, _GROUP_DENIED)
        for topic in field(req.body, subscribed) or ():
            if not gate.allows(Operation.DESCRIBE, ResourceType.TOPIC, topic):
                return refuse(req, _TOPIC_DENIED)
        return await gate.call(inner, req)
    return wrapper


async def _describe_share_offsets(gate: _Gate, req: Request, inner: Inner) -> Reply:
    return await _split(gate, req, inner, "groups", "groups", lambda g: str(g.group_id),
                        gate.group(Operation.DESCRIBE))


# -- transactions and producer ids -------------------------------------------------------------


def _txn_allowed(gate: _Gate, txn_id: str) -> bool:
    return gate.allows(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)


async def _init_producer_id(gate: _Gate, req: Request, inner: Inner) -> Reply:
    txn_id = field(req.body, "transactional_id")
    if txn_id is not None:
        if not _txn_allowed(gate, txn_id):
            return refuse(req, _TXN_DENIED)
    elif not (gate.allows(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
              or gate.authorizer.authorize_any(gate.client.principal, gate.client.host, Operation.WRITE,
                                               ResourceType.TOPIC)):
        return refuse(req, _CLUSTER_DENIED)  # KIP-679: WRITE on any topic is enough
    return await gate.call(inner, req)


async def _add_partitions_to_txn(gate: _Gate, req: Request, inner: Inner) -> Reply:
    body = req.body
    if not _txn_allowed(gate, body.v3_and_below_transactional_id):
        return refuse(req, _TXN_DENIED)
    topics = body.v3_and_below_topics
    denied = {t.name for t in topics if not gate.allows(Operation.WRITE, ResourceType.TOPIC, t.name)}
    if not denied:
        return await gate.call(inner, req)
    # Kafka adds nothing then: the refused topics fail, the others were not attempted.
    return {"throttle_time": 0, "results_by_topic_v3_and_below": [
        {"name": t.name, "results_by_partition": [
            {"partition_index": int(p),
             "partition_error_code": _TOPIC_DENIED if t.name in denied else ErrorCode.operation_not_attempted}
            for p in t.partitions]} for t in topics]}


async def _add_offsets_to_txn(gate: _Gate, req: Request, inner: Inner) -> Reply:
    if not _txn_allowed(gate, req.body.transactional_id):
        return refuse(req, _TXN_DENIED)
    if not gate.allows(Operation.READ, ResourceType.GROUP, req.body.group_id):
        return refuse(req, _GROUP_DENIED)
    return await gate.call(inner, req)


async def _end_txn(gate: _Gate, req: Request, inner: Inner) -> Reply:
    if not _txn_allowed(gate, req.body.transactional_id):
        return refuse(req, _TXN_DENIED)
    return await gate.call(inner, req)


async def _txn_offset_commit(gate: _Gate, req: Request, inner: Inner) -> Reply:
    if not _txn_allowed(gate, req.body.transactional_id):
        return refuse(req, _TXN_DENIED)
    if not gate.allows(Operation.READ, ResourceType.GROUP, req.body.group_id):
        return refuse(req, _GROUP_DENIED)
    return await _split(gate, req, inner, "topics", "topics", _name, gate.topic(Operation.READ))


async def _describe_transactions(gate: _Gate, req: Request, inner: Inner) -> Reply:
    def check(txn_id: str) -> ErrorCode:
        return _NONE if gate.allows(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id) else _TXN_DENIED
    return await _split(gate, req, inner, "transactional_ids", "transaction_states", _name, check)


async def _list_transactions(gate: _Gate, req: Request, inner: Inner) -> Reply:
    reply = await gate.call(inner, req)
    assert reply is not None
    return {**reply, "transaction_states": [
        t for t in reply["transaction_states"]
        if gate.allows(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"])]}


_WRAPPERS: Mapping[int, Wrapper] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _group_whole(Operation.READ, Operation.READ),
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group_whole(Operation.READ),
    12: _group_whole(Operation.READ),
    13: _group_whole(Operation.READ),
    14: _group_whole(Operation.READ),
    15: _described_groups("groups"),
    16: _list_groups,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _end_txn,
    27: _cluster(Operation.CLUSTER_ACTION),
    28: _txn_offset_commit,
    29: _cluster(Operation.DESCRIBE),  # DescribeAcls
    30: _cluster(Operation.ALTER),  # CreateAcls
    31: _cluster(Operation.ALTER),  # DeleteAcls
    32: _configs(Operation.DESCRIBE_CONFIGS, "results"),
    33: _configs(Operation.ALTER_CONFIGS, "responses"),
    37: _create_partitions,
    42: _delete_groups,
    43: _cluster(Operation.ALTER),  # ElectLeaders
    44: _configs(Operation.ALTER_CONFIGS, "responses"),
    45: _cluster(Operation.ALTER),  # AlterPartitionReassignments
    46: _cluster(Operation.DESCRIBE),  # ListPartitionReassignments
    48: _cluster(Operation.DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: _cluster(Operation.ALTER_CONFIGS),  # AlterClientQuotas
    60: _describe_cluster,
    65: _describe_transactions,
    66: _list_transactions,
    68: _group_heartbeat("subscribed_topic_names"),
    69: _described_groups("group_ids"),
    76: _group_heartbeat("subscribed_topic_names"),
    77: _described_groups("group_ids"),
    78: _group_whole(Operation.READ, Operation.READ, "topics", "responses"),
    79: _group_whole(Operation.READ, Operation.READ, "topics", "responses"),
    90: _describe_share_offsets,
    91: _group_whole(Operation.READ, Operation.READ, "topics", "responses"),
    92: _group_whole(Operation.DELETE, Operation.READ, "topics", "responses"),
}

# The authorized-operations fields (KIP-430) without an authorizer: every operation.
_ALL_TOPIC_OPS = _all_operations(ResourceType.TOPIC)
_ALL_GROUP_OPS = _all_operations(ResourceType.GROUP)
_ALL_CLUSTER_OPS = _all_operations(ResourceType.CLUSTER)


# The APIs whose requests can ask for authorized operations (KIP-430): Metadata,
# DescribeGroups, DescribeCluster, ConsumerGroupDescribe, ShareGroupDescribe.
_ASK_OPERATIONS = frozenset({3, 15, 60, 69, 77})


def _open_operations(req: Request, reply: Reply) -> Reply:
    if reply is None or req.api_key not in _ASK_OPERATIONS or "__body__" in reply:
        return reply
    body = req.body
    topics = req.api_key == 3 and field(body, "include_topic_authorized_operations", False)
    cluster = field(body, "include_cluster_authorized_operations", False)
    groups = req.api_key in (15, 69, 77) and field(body, "include_authorized_operations", False)
    if not (topics or cluster or groups):
        return reply  # nothing asked for: no copy on the hot path
    out = dict(reply)
    if topics:
        out["topics"] = [{**t, "topic_authorized_operations": _ALL_TOPIC_OPS} for t in reply["topics"]]
    if cluster:
        out["cluster_authorized_operations"] = _ALL_CLUSTER_OPS
    if groups:
        out["groups"] = [{**g, "authorized_operations": _ALL_GROUP_OPS} for g in reply["groups"]]
    return out


def _guard(api_key: int, inner: Inner) -> Handler:
    wrapper = _WRAPPERS.get(api_key)
    if wrapper is None:
        return inner

    async def handle(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
        if state.authorizer is None:
            return _open_operations(req, await inner(state, req, client))
        result: Reply = await wrapper(_Gate(state, client), req, inner)
        return result
    return handle


def guarded(handlers: Mapping[int, Handler]) -> dict[int, Handler]:
    """``handlers`` with the authorizer asked before each (the APIs Kafka checks)."""
    return {api_key: _guard(api_key, inner) for api_key, inner in handlers.items()}
