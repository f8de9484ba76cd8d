"""The classic consumer protocol's embedded subscription and assignment (what JoinGroup's
protocol metadata and SyncGroup's assignment carry for ``protocol_type=consumer``), decoded
and encoded with kio's ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``.

    Subscription: int16 version, then the fields of that version (v0: topics, user_data;
        v1 adds owned_partitions, v2 generation_id, v3 rack_id)
    Assignment:   int16 version, then assigned_partitions, user_data (same layout in v0-v3)

The coordinator needs them where a group changes protocol (KIP-848 migration): to read a
classic member's topics and owned partitions, and to hand it the partitions the consumer
group's reconciliation gave it. A version above the newest kio knows is read with the newest
layout and its extra fields are ignored, as Kafka's ConsumerProtocol does.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription import v0 as subscription_v0
from kio.schema.consumer_protocol_subscription import v1 as subscription_v1
from kio.schema.consumer_protocol_subscription import v2 as subscription_v2
from kio.schema.consumer_protocol_subscription import v3 as subscription_v3
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

__all__ = ["PROTOCOL_TYPE", "ConsumerSubscription", "MalformedProtocol", "decode_assignment",
           "decode_subscription", "encode_assignment", "protocol_version"]

PROTOCOL_TYPE = "consumer"
TopicPartition = tuple[str, int]
_VERSION = struct.Struct(">h")

_SUBSCRIPTIONS: tuple[Any, ...] = (
    subscription_v0.ConsumerProtocolSubscription, subscription_v1.ConsumerProtocolSubscription,
    subscription_v2.ConsumerProtocolSubscription, subscription_v3.ConsumerProtocolSubscription)
_ASSIGNMENT_MODULES: tuple[Any, ...] = (assignment_v0, assignment_v1, assignment_v2, assignment_v3)
_ASSIGNMENTS: tuple[Any, ...] = tuple(m.ConsumerProtocolAssignment for m in _ASSIGNMENT_MODULES)
_SUBSCRIPTION_READERS = tuple(entity_reader(t) for t in _SUBSCRIPTIONS)
_ASSIGNMENT_READERS = tuple(entity_reader(t) for t in _ASSIGNMENTS)
_ASSIGNMENT_WRITERS = tuple(entity_writer(t) for t in _ASSIGNMENTS)


class MalformedProtocol(ValueError):
    """Protocol metadata or an assignment that is not the consumer protocol's layout."""


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    version: int
    topics: tuple[str, ...]
    owned: frozenset[TopicPartition]
    rack_id: str | None


def protocol_version(data: bytes) -> int:
    if len(data) < 2:
        raise MalformedProtocol("consumer protocol data shorter than its version")
    return int(_VERSION.unpack_from(data)[0])


def _read(readers: tuple[Any, ...], data: bytes) -> tuple[int, Any]:
    version = protocol_version(data)
    if version < 0:
        raise MalformedProtocol(f"negative consumer protocol version {version}")
    try:
        value, _used = readers[min(version, len(readers) - 1)](data, 2)
    except Exception as exc:  # kio raises struct/index/unicode errors on short or bad data
        raise MalformedProtocol(f"malformed consumer protocol data: {exc}") from exc
    return version, value


def decode_subscription(data: bytes) -> ConsumerSubscription:
    version, value = _read(_SUBSCRIPTION_READERS, bytes(data))
    owned = frozenset((str(tp.topic), int(p)) for tp in getattr(value, "owned_partitions", ())
                      for p in tp.partitions)
    return ConsumerSubscription(version, tuple(str(t) for t in value.topics), owned, getattr(value, "rack_id", None))


def decode_assignment(data: bytes) -> frozenset[TopicPartition]:
    """An empty assignment (a member that got nothing in a classic rebalance) is no error."""
    if not data:
        return frozenset()
    _version, value = _read(_ASSIGNMENT_READERS, bytes(data))
    return frozenset((str(tp.topic), int(p)) for tp in value.assigned_partitions for p in tp.partitions)


def encode_assignment(partitions: Iterable[TopicPartition], version: int) -> bytes:
    """In the member's own subscription version (capped at the newest we know), as Kafka does,
    so an old client reads it."""
    version = max(0, min(version, len(_ASSIGNMENT_MODULES) - 1))
    module = _ASSIGNMENT_MODULES[version]
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    value = module.ConsumerProtocolAssignment(assigned_partitions=tuple(
        module.TopicPartition(topic=TopicName(t), partitions=tuple(i32(p) for p in sorted(ps)))
        for t, ps in sorted(by_topic.items())), user_data=b"")
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    _ASSIGNMENT_WRITERS[version](buf, value)
    return buf.getvalue()
