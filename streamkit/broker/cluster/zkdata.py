"""The cluster's state in ZooKeeper: paths and JSON, in Kafka's ZooKeeper-mode layout.

Kafka's own tools (``zookeeper-shell``, Cruise Control, Kafka Manager) read this layout, and
it is documented: keeping it makes a streamkit cluster's ZooKeeper as readable as Kafka's.

- ``/brokers/ids/{id}``: a broker's registration (ephemeral: it lives as long as the broker's
  ZooKeeper session).
- ``/brokers/topics/{topic}``: a topic's id and replica assignment.
- ``/brokers/topics/{topic}/partitions/{p}/state``: a partition's leader, leader epoch, ISR and
  the epoch of the controller that wrote it. Only ever written by a compare-and-set on the
  znode's data version (``PartitionState.version``), so a writer that read an older state
  (a stale controller, a deposed leader) fails instead of overwriting a newer one.
- ``/config/topics/{topic}``: a topic's config overrides.
- ``/controller`` (ephemeral) and ``/controller_epoch``: who the controller is, and how many
  controllers there have been.
- ``/admin/...``: requests for the controller (topic deletion, reassignment, leader election,
  controlled shutdown).
- ``/latest_producer_id_block``: the last block of producer ids a broker took (each broker
  takes the next one by compare-and-set, so no two brokers hand out the same id).

Everything here is pure: bytes in, values out.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "ADMIN",
    "BROKER_IDS",
    "CLUSTER_ID",
    "CONTROLLED_SHUTDOWN",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DELETE_TOPICS",
    "PERSISTENT_PATHS",
    "PREFERRED_ELECTION",
    "PRODUCER_ID_BLOCK",
    "REASSIGN",
    "TOPICS",
    "TOPIC_CONFIGS",
    "BrokerRegistration",
    "PartitionState",
    "ProducerIdBlock",
    "TopicAssignment",
    "broker_path",
    "decode_controller",
    "decode_json",
    "decode_topic_configs",
    "encode_controller",
    "encode_topic_configs",
    "partition_state_path",
    "partitions_path",
    "topic_config_path",
    "topic_path",
]

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN = "/admin/reassign_partitions"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
# Not Kafka's: its ControlledShutdown request is gone from Kafka 4's protocol, so a broker asks
# the controller through ZooKeeper, as it asks for everything else.
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

PERSISTENT_PATHS = (BROKER_IDS, TOPICS, TOPIC_CONFIGS, DELETE_TOPICS, CONTROLLED_SHUTDOWN)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def decode_json(data: bytes) -> Any:
    return json.loads(data.decode()) if data else None


def _encode(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka's form of a topic id: URL-safe base64 of its 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _topic_id_from(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """``/latest_producer_id_block``: ``{"version":1,"broker":id,"block_start":"n",
    "block_end":"m"}``, the ids n to m (inclusive) taken by broker ``id``. Kafka writes the
    two ids as strings (JSON numbers lose precision past 2^53 in many readers); numbers are
    read too."""

    broker: int
    start: int
    end: int  # the block's last id

    def to_bytes(self) -> bytes:
        return _encode({"version": 1, "broker": self.broker, "block_start": str(self.start),
                        "block_end": str(self.end)})

    @classmethod
    def from_bytes(cls, data: bytes) -> ProducerIdBlock:
        value = decode_json(data)
        return cls(int(value["broker"]), int(value["block_start"]), int(value["block_end"]))


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """``/brokers/ids/{id}``: where a live broker listens (the inter-broker listener first)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[str, ...] = ()  # "NAME://host:port", the advertised listeners
    timestamp: int = 0
    # Not in the JSON: the registration znode's creation zxid, Kafka's "broker epoch". A
    # broker that lost its session and registered again has a new one.
    epoch: int = -1

    def to_bytes(self) -> bytes:
        endpoints = list(self.endpoints) or [f"PLAINTEXT://{self.host}:{self.port}"]
        protocols = {e.split("://", 1)[0]: "PLAINTEXT" for e in endpoints}
        return _encode({"version": 5, "host": self.host, "port": self.port, "endpoints": endpoints,
                        "listener_security_protocol_map": protocols, "rack": self.rack, "jmx_port": -1,
                        "features": {}, "timestamp": str(self.timestamp)})

    @classmethod
    def from_bytes(cls, broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
        raw = decode_json(data)
        return cls(broker_id, str(raw.get("host") or ""), int(raw.get("port", -1)), raw.get("rack"),
                   tuple(raw.get("endpoints", ())), int(raw.get("timestamp", 0) or 0), epoch)


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/{topic}``: the topic id and each partition's replicas, preferred
    leader first; during a reassignment, the replicas being added and removed."""

    topic_id: uuid.UUID
    partitions: Mapping[int, tuple[int, ...]]
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        def listed(m: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items())}

        return _encode({"version": 3, "topic_id": _topic_id_text(self.topic_id),
                        "partitions": listed(self.partitions), "adding_replicas": listed(self.adding),
                        "removing_replicas": listed(self.removing)})

    @classmethod
    def from_bytes(cls, data: bytes) -> TopicAssignment:
        raw = decode_json(data)

        def parsed(m: Mapping[str, list[int]] | None) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(int(b) for b in r) for p, r in (m or {}).items()}

        topic_id = _topic_id_from(raw["topic_id"]) if raw.get("topic_id") else uuid.UUID(int=0)
        return cls(topic_id, parsed(raw.get("partitions")), parsed(raw.get("adding_replicas")),
                   parsed(raw.get("removing_replicas")))


@dataclass(frozen=True, slots=True)
class PartitionState:
    """``/brokers/topics/{topic}/partitions/{p}/state``. ``version`` is the znode's data
    version (not in the JSON): the compare-and-set token for the next write. Leader -1: no
    leader (the partition is offline)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = -1

    def to_bytes(self) -> bytes:
        return _encode({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                        "leader_epoch": self.leader_epoch, "isr": list(self.isr)})

    @classmethod
    def from_bytes(cls, data: bytes, version: int) -> PartitionState:
        raw = decode_json(data)
        return cls(int(raw["leader"]), int(raw["leader_epoch"]), tuple(int(b) for b in raw["isr"]),
                   int(raw.get("controller_epoch", 0)), version)

    def with_isr(self, isr: tuple[int, ...]) -> PartitionState:
        return replace(self, isr=isr)

    @property
    def online(self) -> bool:
        return self.leader >= 0


def encode_topic_configs(configs: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(configs)})


def decode_topic_configs(data: bytes) -> dict[str, str]:
    raw = decode_json(data) or {}
    return {str(k): str(v) for k, v in (raw.get("config") or {}).items()}


def encode_controller(broker_id: int, timestamp: int) -> bytes:
    return _encode({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp)})


def decode_controller(data: bytes) -> int:
    raw = decode_json(data)
    return int(raw["brokerid"]) if raw else -1
