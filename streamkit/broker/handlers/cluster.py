"""ApiVersions, Metadata, DescribeCluster, FindCoordinator, InitProducerId."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from streamkit.broker.codec import Request, api_versions_response
from streamkit.broker.errors import BrokerError, ErrorCode
from streamkit.broker.group.coordinator import OFFSETS_TOPIC
from streamkit.broker.group.records import partition_for_group
from streamkit.broker.handlers.common import LEADER_EPOCH, NO_OPERATIONS, Reply, field, txn_error
from streamkit.broker.handlers.txn import fenced_for
from streamkit.broker.producers import ProducerIdsUnavailable
from streamkit.broker.share.store import SHARE_STATE_TOPIC
from streamkit.broker.state import BrokerState, ClientInfo
from streamkit.broker.topics import INTERNAL_TOPICS, TopicInfo
from streamkit.broker.txn.coordinator import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from streamkit.broker.cluster.node import ClusterNode

__all__ = ["api_versions", "describe_cluster", "ensure_share_state_topic", "find_coordinator", "init_producer_id",
           "metadata"]

log = logging.getLogger(__name__)


async def api_versions(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    # The codec builds the version-specific body (listing codec.ADVERTISED_VERSIONS); it is
    # returned as-is, already a kio object.
    return {"__body__": api_versions_response(req.api_version)}


def _broker(state: BrokerState) -> dict[str, Any]:
    return {"node_id": state.node_id, "broker_id": state.node_id, "host": state.advertised_host,
            "port": state.advertised_port, "rack": None}


def _topic_metadata(state: BrokerState, info: TopicInfo) -> dict[str, Any]:
    node = state.node_id
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [
            {"error_code": ErrorCode.none, "partition_index": p, "leader_id": node,
             "leader_epoch": LEADER_EPOCH, "replica_nodes": [node], "isr_nodes": [node],
             "offline_replicas": []}
            for p in range(info.partitions)
        ],
        "topic_authorized_operations": NO_OPERATIONS,
    }


def _missing(name: str | None, topic_id: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": NO_OPERATIONS}


def _cluster_brokers(cluster: ClusterNode) -> list[dict[str, Any]]:
    return [{"node_id": b, "broker_id": b, "host": r.host, "port": r.port, "rack": r.rack}
            for b, r in sorted(cluster.metadata.brokers.items())]


def _cluster_topic(cluster: ClusterNode, name: str) -> dict[str, Any]:
    md = cluster.metadata
    assignment = md.topics[name]
    partitions = []
    for p, replicas in sorted(assignment.partitions.items()):
        s = md.states.get((name, p))
        confirmed = s is not None and (name, p) not in md.unconfirmed
        leader = s.leader if confirmed and s is not None and s.leader in md.brokers else -1
        partitions.append({
            "error_code": ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
            "partition_index": p, "leader_id": leader, "leader_epoch": s.leader_epoch if s is not None else -1,
            "replica_nodes": list(replicas), "isr_nodes": list(s.isr) if s is not None else [],
            "offline_replicas": md.offline_replicas(name, p)})
    return {"error_code": ErrorCode.none, "name": name, "topic_id": assignment.topic_id,
            "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
            "topic_authorized_operations": NO_OPERATIONS}


async def _cluster_metadata(state: BrokerState, cluster: ClusterNode, requested: Any, allow_create: bool) -> Reply:
    md = cluster.metadata
    topics: list[dict[str, Any]] = []
    if requested is None:
        topics = [_cluster_topic(cluster, name) for name in sorted(md.topics)]
    else:
        for entry in requested:
            name = field(entry, "name")
            topic_id = field(entry, "topic_id")
            if name is None and topic_id is not None:
                name = next((n for n, a in md.topics.items() if a.topic_id == topic_id), None)
                if name is None:
                    topics.append(_missing(None, topic_id, ErrorCode.unknown_topic_id))
                    continue
            if name not in md.topics and allow_create:
                try:
                    await cluster.create_topic(name, state.config.num_partitions,
                                               state.config.default_replication_factor, {})
                except BrokerError as exc:
                    if exc.error_code != ErrorCode.topic_already_exists:
                        topics.append(_missing(name, None, exc.error_code))
                        continue
                topics.append(_missing(name, None, ErrorCode.leader_not_available))  # clients ask again
                continue
            if name not in md.topics:
                topics.append(_missing(name, None, ErrorCode.unknown_topic_or_partition))
                continue
            topics.append(_cluster_topic(cluster, name))
    return {"throttle_time": 0, "brokers": _cluster_brokers(cluster), "cluster_id": cluster.cluster_id,
            "controller_id": md.controller, "topics": topics, "cluster_authorized_operations": NO_OPERATIONS}


async def metadata(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    requested = field(body, "topics")
    allow_create = field(body, "allow_auto_topic_creation", True) and state.config.auto_create_topics_enable
    if state.cluster is not None:
        return await _cluster_metadata(state, state.cluster, requested, allow_create)
    topics: list[dict[str, Any]] = []
    if requested is None:
        topics = [_topic_metadata(state, info) for info in state.topics.topics.values()]
    else:
        for entry in requested:
            name = field(entry, "name")
            topic_id = field(entry, "topic_id")
            info = state.topics.get(name) if name else None
            if info is None and name is None and topic_id is not None:
                info = state.topics.by_id(topic_id)
                if info is None:
                    topics.append(_missing(None, topic_id, ErrorCode.unknown_topic_id))
                    continue
            if info is None and name is not None and allow_create:
                try:
                    info = state.topics.create(name, state.config.num_partitions)
                except BrokerError as exc:
                    topics.append(_missing(name, None, exc.error_code))
                    continue
            if info is None:
                topics.append(_missing(name, None, ErrorCode.unknown_topic_or_partition))
                continue
            topics.append(_topic_metadata(state, info))
    return {
        "throttle_time": 0,
        "brokers": [_broker(state)],
        "cluster_id": state.cluster_id,
        "controller_id": state.node_id,
        "topics": topics,
        "cluster_authorized_operations": NO_OPERATIONS,
    }


async def describe_cluster(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    cluster = state.cluster
    if cluster is not None:
        return {
            "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "cluster_id": cluster.cluster_id, "controller_id": cluster.metadata.controller,
            "brokers": _cluster_brokers(cluster), "cluster_authorized_operations": NO_OPERATIONS,
        }
    return {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
        "cluster_id": state.cluster_id, "controller_id": state.node_id,
        "brokers": [_broker(state)], "cluster_authorized_operations": NO_OPERATIONS,
    }


_GROUP_KEY = 0
_TRANSACTION_KEY = 1


def _coordinator(state: BrokerState, key: str, key_type: int) -> dict[str, Any]:
    if key_type not in (_GROUP_KEY, _TRANSACTION_KEY):
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": ErrorCode.invalid_request,
                "error_message": f"unknown coordinator key type {key_type}"}
    if not key:
        code = ErrorCode.invalid_group_id if key_type == _GROUP_KEY else ErrorCode.invalid_request
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": code, "error_message": "empty coordinator key"}
    if state.cluster is not None:
        return _cluster_coordinator(state, state.cluster, key, key_type)
    return {"key": key, "node_id": state.node_id, "host": state.advertised_host,
            "port": state.advertised_port, "error_code": ErrorCode.none, "error_message": None}


def _cluster_coordinator(state: BrokerState, cluster: ClusterNode, key: str, key_type: int) -> dict[str, Any]:
    """The leader of the coordinator's partition of its internal topic (Kafka's rule:
    the key's hash modulo the topic's partition count)."""
    topic = OFFSETS_TOPIC if key_type == _GROUP_KEY else TRANSACTION_STATE_TOPIC
    md = cluster.metadata
    count = md.partition_count(topic)
    leader = md.leader(topic, partition_for_group(key, count)) if count else -1
    registration = md.brokers.get(leader)
    if registration is None:
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": ErrorCode.coordinator_not_available,
                "error_message": f"{topic} has no leader for this key yet"}
    return {"key": key, "node_id": leader, "host": registration.host, "port": registration.port,
            "error_code": ErrorCode.none, "error_message": None}


async def _ensure_coordinator_topic(state: BrokerState, cluster: ClusterNode, key_type: int) -> None:
    cfg = state.config
    if key_type == _GROUP_KEY:
        await cluster.ensure_internal_topic(OFFSETS_TOPIC, cfg.offsets_topic_num_partitions,
                                            cluster.settings.offsets_topic_replication_factor, {
                                                "cleanup.policy": "compact",
                                                "segment.bytes": str(cfg.offsets_topic_segment_bytes),
                                                "min.insync.replicas": str(cfg.offsets_topic_min_insync_replicas)})
    elif key_type == _TRANSACTION_KEY:
        await cluster.ensure_internal_topic(
            TRANSACTION_STATE_TOPIC, cfg.transaction_state_log_num_partitions,
            cluster.settings.transaction_state_log_replication_factor, {
                "cleanup.policy": "compact", "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
                "min.insync.replicas": str(cluster.settings.transaction_state_log_min_isr)})


async def ensure_share_state_topic(state: BrokerState, cluster: ClusterNode) -> bool:
    """``__share_group_state`` exists (created on first need, as Kafka does)."""
    cfg = state.config
    return await cluster.ensure_internal_topic(
        SHARE_STATE_TOPIC, cfg.share_coordinator_state_topic_num_partitions,
        cfg.share_coordinator_state_topic_replication_factor, {
            "cleanup.policy": "compact", "segment.bytes": str(cfg.offsets_topic_segment_bytes),
            "min.insync.replicas": str(cfg.share_coordinator_state_topic_min_isr)})


async def find_coordinator(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    key_type = int(field(body, "key_type", 0))
    keys = field(body, "coordinator_keys")
    if state.cluster is not None:
        await _ensure_coordinator_topic(state, state.cluster, key_type)
    if keys is not None:  # v4+: a batch of keys
        return {"throttle_time": 0, "coordinators": [_coordinator(state, k, key_type) for k in keys]}
    one = _coordinator(state, field(body, "key", ""), key_type)
    return {"throttle_time": 0, **one}


_MAX_EPOCH = 32767


async def init_producer_id(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    producer_id = int(field(body, "producer_id", -1))
    epoch = int(field(body, "producer_epoch", -1))
    txn_id = field(body, "transactional_id")
    unavailable = {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress,
                   "producer_id": -1, "producer_epoch": -1}
    if txn_id is not None:
        error = txn_error(state, txn_id)
        if error != ErrorCode.none:
            return {"throttle_time": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}
        timeout_ms = int(body.transaction_timeout.total_seconds() * 1000)
        try:
            result, durable = await state.coordinators.write_txns(
                lambda: state.txns.init_producer_id(txn_id, timeout_ms, producer_id, epoch))
        except ProducerIdsUnavailable:
            return unavailable
        if durable != ErrorCode.none:
            return {"throttle_time": 0, "error_code": durable, "producer_id": -1, "producer_epoch": -1}
        return {"throttle_time": 0, "error_code": fenced_for(req, result.error),
                "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}
    if producer_id >= 0 and 0 <= epoch < _MAX_EPOCH:
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "producer_id": producer_id, "producer_epoch": epoch + 1}
    try:
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "producer_id": state.producer_ids.next_id(), "producer_epoch": 0}
    except ProducerIdsUnavailable:
        return unavailable
