"""ApiVersions, Metadata, DescribeCluster, FindCoordinator, InitProducerId."""

from __future__ import annotations

import logging
from typing import Any

from streamkit.broker.codec import Request, api_versions_response
from streamkit.broker.errors import BrokerError, ErrorCode
from streamkit.broker.handlers.common import LEADER_EPOCH, NO_OPERATIONS, Reply, field
from streamkit.broker.handlers.txn import fenced_for
from streamkit.broker.state import BrokerState, ClientInfo
from streamkit.broker.topics import TopicInfo

__all__ = ["api_versions", "describe_cluster", "find_coordinator", "init_producer_id", "metadata"]

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


async def metadata(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    requested = field(body, "topics")
    allow_create = field(body, "allow_auto_topic_creation", True) and state.config.auto_create_topics_enable
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
    return {"key": key, "node_id": state.node_id, "host": state.advertised_host,
            "port": state.advertised_port, "error_code": ErrorCode.none, "error_message": None}


async def find_coordinator(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    key_type = int(field(body, "key_type", 0))
    keys = field(body, "coordinator_keys")
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
    if txn_id is not None:
        result = state.txns.init_producer_id(
            txn_id, int(body.transaction_timeout.total_seconds() * 1000), producer_id, epoch)
        return {"throttle_time": 0, "error_code": fenced_for(req, result.error),
                "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}
    if producer_id >= 0 and 0 <= epoch < _MAX_EPOCH:
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "producer_id": producer_id, "producer_epoch": epoch + 1}
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "producer_id": state.producer_ids.next_id(), "producer_epoch": 0}
