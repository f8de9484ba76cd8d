"""Share groups (KIP-932): membership, share-partition delivery state and its durable store."""

from __future__ import annotations

from streamkit.broker.share.coordinator import ShareCoordinator, ShareSession, ShareSettings
from streamkit.broker.share.group import HeartbeatResult, ShareGroup, ShareMember, assign_uniform
from streamkit.broker.share.partition import (
    AckType,
    AcquiredRange,
    InvalidAcknowledgement,
    RecordState,
    SharePartition,
)
from streamkit.broker.share.store import SHARE_STATE_TOPIC, ShareKey, ShareStateStore

__all__ = [
    "SHARE_STATE_TOPIC",
    "AckType",
    "AcquiredRange",
    "HeartbeatResult",
    "InvalidAcknowledgement",
    "RecordState",
    "ShareCoordinator",
    "ShareGroup",
    "ShareKey",
    "ShareMember",
    "SharePartition",
    "ShareSession",
    "ShareSettings",
    "ShareStateStore",
    "assign_uniform",
]
