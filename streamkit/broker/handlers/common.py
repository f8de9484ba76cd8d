"""What every handler module shares: the handler signature and small helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.group.group import Delivery, JoinResult, SyncResult
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = [
    "LEADER_EPOCH",
    "NO_OPERATIONS",
    "Handler",
    "Reply",
    "failed_answer",
    "failed_deliveries",
    "field",
    "group_error",
    "high_watermark_stale",
    "share_error",
    "txn_error",
]

# A handler returns the response as plain data (see streamkit.broker.build), or None for
# a request that gets no response (Produce with acks=0).
Reply = Mapping[str, Any] | None
Handler = Callable[[BrokerState, Request, ClientInfo], Awaitable[Reply]]

LEADER_EPOCH = 0  # one broker, never re-elected: the leader epoch stays 0
NO_OPERATIONS = -2147483648  # authorized_operations when the client did not ask for them


def field(body: Any, name: str, default: Any = None) -> Any:
    """A request field that only some versions have."""
    return getattr(body, name, default)


def ok() -> ErrorCode:
    return ErrorCode.none


# Is this broker the coordinator of a key, and ready? NONE, NOT_COORDINATOR or
# COORDINATOR_LOAD_IN_PROGRESS (a single broker coordinates every key, once loaded).


def group_error(state: BrokerState, group_id: str) -> ErrorCode:
    co = state.coordinator
    return co.owned.error(co.partition_of(group_id))


def txn_error(state: BrokerState, transactional_id: str) -> ErrorCode:
    return state.txns.owned.error(state.txns.partition_for(transactional_id))


def share_error(state: BrokerState, group_id: str) -> ErrorCode:
    return state.share.owned.error(state.share.partition_of(group_id))


def failed_answer(result: JoinResult | SyncResult, error: ErrorCode) -> JoinResult | SyncResult:
    return JoinResult(error, result.member_id) if isinstance(result, JoinResult) else SyncResult(error)


def failed_deliveries(deliveries: list[Delivery], error: ErrorCode) -> list[Delivery]:
    """The JoinGroup/SyncGroup answers ``deliveries`` carry, turned into ``error`` (the
    write they follow was not made durable)."""
    return [Delivery(d.group_id, d.member_id, failed_answer(d.result, error)) for d in deliveries]


def high_watermark_stale(state: BrokerState, topic: str, index: int) -> bool:
    """Whether this broker leads (topic, index) with a high watermark that may be stale
    (``Replica.high_watermark_stale``): the latest offset cannot be answered yet. Never
    for a single broker."""
    cluster = state.cluster
    replica = None if cluster is None else cluster.replicas.replicas.get((topic, index))
    return replica is not None and replica.high_watermark_stale
