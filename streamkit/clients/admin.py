"""Topic and consumer-group administration over the Kafka protocol (aiokafka)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError, for_code
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from streamkit.clients.errors import ClientError
from streamkit.clients.lifecycle import start_client
from streamkit.clients.names import InvalidTopicName, check_topic_name
from streamkit.clients.security import command_security
from streamkit.hints import did_you_mean

__all__ = [
    "ClientError",
    "ClusterDescription",
    "GroupMember",
    "OffsetReset",
    "PartitionLag",
    "PartitionOffsets",
    "PartitionReplicas",
    "TopicDescription",
    "admin_client",
    "alter_topic_config",
    "create_topic",
    "delete_topic",
    "describe_cluster",
    "describe_group",
    "describe_topic",
    "list_groups",
    "list_topics",
    "reset_offsets",
    "topic_name",
]


_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source of a topic-level override


def topic_name(name: str) -> str:
    """``name`` if it is a legal Kafka topic name; ``ClientError`` at once otherwise."""
    try:
        return check_topic_name(name)
    except InvalidTopicName as exc:
        raise ClientError(str(exc)) from None


def _raise_for(code: int, what: str) -> None:
    if code:
        error = for_code(code)
        raise ClientError(f"{what}: {error.__name__} ({code})")


@asynccontextmanager
async def admin_client(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000, **command_security())
    await start_client(client)
    try:
        yield client
    finally:
        await client.close()


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    partition: int
    earliest: int
    latest: int


@dataclass(frozen=True, slots=True)
class PartitionReplicas:
    """Who holds a partition: its leader (-1: none), replicas, in-sync and offline replicas."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: int
    internal: bool
    configs: dict[str, str]
    overrides: frozenset[str] = frozenset()  # the configs set on the topic itself
    offsets: list[PartitionOffsets] = field(default_factory=list)
    replicas: list[PartitionReplicas] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller: int
    brokers: list[tuple[int, str, int, str | None]]  # id, host, port, rack
    under_replicated: list[tuple[str, int]]
    offline: list[tuple[str, int]]


async def list_topics(bootstrap: str, include_internal: bool = False) -> list[str]:
    async with admin_client(bootstrap) as admin:
        names = await admin.list_topics()
    return sorted(n for n in names if include_internal or not n.startswith("__"))


async def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str],
                       if_not_exists: bool = False, replication_factor: int = -1) -> None:
    """``replication_factor`` -1: the broker's default.replication.factor."""
    topic_name(name)
    async with admin_client(bootstrap) as admin:
        if replication_factor == -1:
            replication_factor = await _default_replication_factor(admin)
        response = await admin.create_topics([NewTopic(name, partitions, replication_factor,
                                                       topic_configs=configs)])
    for topic_error in response.topic_errors:  # (name, code, message)
        code = topic_error[1]
        if code == 36 and if_not_exists:  # TOPIC_ALREADY_EXISTS
            return
        message = topic_error[2] if len(topic_error) > 2 else None
        if code:
            raise ClientError(f"cannot create {name}: {message or for_code(code).__name__}")


async def _default_replication_factor(admin: AIOKafkaAdminClient) -> int:
    """A broker's default.replication.factor (what CreateTopics v4+ applies for -1; asked
    for, because the client sends older versions): 1 if the broker does not say."""
    cluster = await admin.describe_cluster()
    brokers = sorted(int(b["node_id"]) for b in cluster.get("brokers", []))
    if not brokers:
        return 1
    responses = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, str(brokers[0]), {"default.replication.factor": None})])
    for response in responses:
        for resource in response.resources:
            for entry in resource[4]:
                if entry[0] == "default.replication.factor" and str(entry[1]).isdigit():
                    return int(entry[1])
    return 1


async def delete_topic(bootstrap: str, name: str) -> None:
    topic_name(name)
    async with admin_client(bootstrap) as admin:
        response = await admin.delete_topics([name])
    for _name, code, *_rest in response.topic_error_codes:
        _raise_for(code, f"cannot delete {name}")


async def _config_entries(admin: AIOKafkaAdminClient, name: str) -> list[tuple[str, str, bool]]:
    """(name, value, is an override of the topic) of every config DescribeConfigs reports."""
    responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    out: list[tuple[str, str, bool]] = []
    for response in responses:
        for resource in response.resources:
            _raise_for(resource[0], f"cannot describe configs of {name}")
            # entries: (name, value, read_only, config_source, ...) from DescribeConfigs v1+
            out.extend((entry[0], entry[1], entry[3] == _DYNAMIC_TOPIC_CONFIG) for entry in resource[4])
    return out


async def describe_topic(bootstrap: str, name: str, offsets: bool = False) -> TopicDescription:
    """A topic's partitions and configs (``offsets``: with each partition's earliest and
    latest offset); ``ClientError`` if it does not exist."""
    topic_name(name)
    async with admin_client(bootstrap) as admin:
        # Check first: describe_topics sends Metadata with auto-creation on, and describing
        # a missing topic must not create it.
        if name not in await admin.list_topics():
            raise ClientError(f"topic {name} does not exist")
        topics = await admin.describe_topics([name])
        if not topics or topics[0]["error_code"]:
            raise ClientError(f"topic {name} does not exist")
        entries = await _config_entries(admin, name)
    topic = topics[0]
    count = len(topic["partitions"])
    replicas = sorted((_replicas(p) for p in topic["partitions"]), key=lambda r: r.partition)
    ranges: list[PartitionOffsets] = []
    if offsets and count:
        tps = [TopicPartition(name, p) for p in range(count)]
        earliest = await _end_offsets(bootstrap, tps, earliest=True)
        latest = await _end_offsets(bootstrap, tps)
        ranges = [PartitionOffsets(tp.partition, earliest[tp], latest[tp]) for tp in tps]
    return TopicDescription(name, count, topic.get("is_internal", False),
                            {key: value for key, value, _ in entries},
                            frozenset(key for key, _, override in entries if override), ranges, replicas)


def _replicas(p: dict[str, Any]) -> PartitionReplicas:
    return PartitionReplicas(int(p["partition"]), int(p["leader"]), tuple(p.get("replicas") or ()),
                             tuple(p.get("isr") or ()), tuple(p.get("offline_replicas") or ()))


async def describe_cluster(bootstrap: str) -> ClusterDescription:
    """The brokers, the controller, and the partitions with fewer in-sync replicas than
    replicas (under-replicated) or without a live leader (offline), from Metadata: it works
    against any Kafka cluster."""
    async with admin_client(bootstrap) as admin:
        cluster = await admin.describe_cluster()
        names = await admin.list_topics()
        topics = await admin.describe_topics(sorted(names)) if names else []
    brokers = sorted((int(b["node_id"]), str(b["host"]), int(b["port"]), b.get("rack"))
                     for b in cluster.get("brokers", []))
    live = {b[0] for b in brokers}
    under: list[tuple[str, int]] = []
    offline: list[tuple[str, int]] = []
    for topic in topics:
        if topic["error_code"]:
            continue
        for p in topic["partitions"]:
            r = _replicas(p)
            if r.leader < 0 or r.leader not in live:
                offline.append((topic["topic"], r.partition))
            elif len(r.isr) < len(r.replicas):
                under.append((topic["topic"], r.partition))
    return ClusterDescription(cluster.get("cluster_id"), int(cluster.get("controller_id", -1)), brokers,
                              sorted(under), sorted(offline))


async def alter_topic_config(bootstrap: str, name: str, set_configs: dict[str, str],
                             delete: list[str]) -> None:
    """Change some overrides, keeping the others (AlterConfigs replaces the whole set).
    Names the broker does not report for the topic are refused, with the closest one."""
    topic_name(name)
    async with admin_client(bootstrap) as admin:
        entries = await _config_entries(admin, name)
        known = sorted(key for key, _, _ in entries)
        for key in [*set_configs, *delete]:
            if key not in known:
                raise ClientError(f"unknown topic config {key!r}{did_you_mean(key, known)}")
        overrides = {key: value for key, value, override in entries if override}
        overrides.update(set_configs)
        for key in delete:
            overrides.pop(key, None)
        result = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, overrides)])
    for response in result:
        for resource in response.resources:
            _raise_for(resource[0], f"cannot alter configs of {name} ({resource[1]})")


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int
    end_offset: int

    @property
    def lag(self) -> int:
        return max(self.end_offset - self.committed, 0) if self.committed >= 0 else self.end_offset


async def list_groups(bootstrap: str) -> list[tuple[str, str]]:
    async with admin_client(bootstrap) as admin:
        groups = await admin.list_consumer_groups()
    return sorted((g[0], g[1]) for g in groups)


def _assignment(data: bytes) -> list[TopicPartition]:
    if not data:
        return []
    decoded: Any = ConsumerProtocolMemberAssignment.decode(data)
    return [TopicPartition(t, p) for t, ps in decoded.assignment for p in ps]


async def describe_group(bootstrap: str, group: str,
                         must_exist: bool = True) -> tuple[str, list[GroupMember], list[PartitionLag]]:
    """(state, members, committed offsets with lag) of a consumer group. A KIP-848 group
    reads as Dead with no members here (DescribeGroups is the classic protocol's); the
    caller that knows it exists from ConsumerGroupDescribe passes ``must_exist=False``."""
    async with admin_client(bootstrap) as admin:
        described = await admin.describe_consumer_groups([group])
        offsets = await admin.list_consumer_group_offsets(group)
    state = "Dead"
    members: list[GroupMember] = []
    for response in described:
        for g in response.groups:
            _raise_for(g[0], f"cannot describe group {group}")
            state = g[2]
            for m in g[5]:
                members.append(GroupMember(m[0], m[-4] if len(m) > 5 else m[1], m[-3] if len(m) > 5 else m[2],
                                           _assignment(m[-1])))
    if must_exist and state == "Dead" and not members and not offsets:
        # Kafka answers Dead, not an error, for a group it never heard of.
        raise ClientError(f"consumer group {group} does not exist")
    lags = await _lags(bootstrap, {tp: meta.offset for tp, meta in offsets.items()})
    return state, members, lags


async def _end_offsets(bootstrap: str, partitions: list[TopicPartition], earliest: bool = False) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **command_security())
    await start_client(consumer)
    try:
        if earliest:
            return dict(await consumer.beginning_offsets(partitions))
        return dict(await consumer.end_offsets(partitions))
    finally:
        await consumer.stop()


async def _lags(bootstrap: str, committed: dict[TopicPartition, int]) -> list[PartitionLag]:
    if not committed:
        return []
    ends = await _end_offsets(bootstrap, list(committed))
    return [PartitionLag(tp.topic, tp.partition, committed[tp], ends.get(tp, -1))
            for tp in sorted(committed, key=lambda t: (t.topic, t.partition))]


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """One row of a reset: where the group is (``current``, -1: nothing committed) and where
    it goes (``new``), within the partition's ``earliest``..``latest``."""

    topic: str
    partition: int
    current: int
    new: int
    earliest: int
    latest: int


async def reset_offsets(bootstrap: str, group: str, topic: str, to: str, value: int | None,
                        execute: bool, partitions: list[int] | None = None) -> list[OffsetReset]:
    """Compute (and with ``execute`` commit) new offsets for the partitions of ``topic``
    (all of them, or ``partitions``).

    ``to`` is ``earliest``, ``latest``, ``offset`` (``value`` is the offset) or
    ``timestamp`` (``value`` in epoch milliseconds: the first offset whose record timestamp
    is at or after it, the end when there is none, as kafka-consumer-groups.sh does). An
    offset outside a partition's earliest..latest is refused: the group would otherwise
    skip records it never saw, or start before the data that exists. As with
    kafka-consumer-groups.sh the group must have no active members: the broker refuses the
    commit otherwise."""
    description = await describe_topic(bootstrap, topic, offsets=True)
    chosen = list(range(description.partitions)) if partitions is None else sorted(set(partitions))
    missing = [p for p in chosen if not 0 <= p < description.partitions]
    if missing:
        raise ClientError(f"topic {topic} has no partition {missing[0]} (it has {description.partitions})")
    ranges = {r.partition: r for r in description.offsets}
    tps = [TopicPartition(topic, p) for p in chosen]
    if to == "offset":
        if value is None or value < 0:
            raise ClientError("--to-offset needs a non-negative offset")
        for tp in tps:
            r = ranges[tp.partition]
            if not r.earliest <= value <= r.latest:
                raise ClientError(f"offset {value} is outside {topic}-{tp.partition}, which holds offsets "
                                  f"{r.earliest} to {r.latest} (its end); nothing was changed")
        targets = dict.fromkeys(tps, value)
    elif to == "timestamp":
        if value is None:
            raise ClientError("--to-timestamp needs epoch milliseconds")
        targets = await _offsets_for_time(bootstrap, tps, value, {tp: ranges[tp.partition].latest for tp in tps})
    else:
        targets = {tp: getattr(ranges[tp.partition], to) for tp in tps}
    async with admin_client(bootstrap) as admin:
        current = await admin.list_consumer_group_offsets(group, partitions=tps)
    rows = [OffsetReset(topic, tp.partition, current[tp].offset if tp in current else -1, targets[tp],
                        ranges[tp.partition].earliest, ranges[tp.partition].latest) for tp in tps]
    if not execute:
        return rows
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                **command_security())
    await start_client(consumer)
    try:
        consumer.assign(tps)
        await consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in targets.items()})
    except KafkaError as exc:
        raise ClientError(f"cannot reset offsets of {group} (is the group still active?): {exc}") from exc
    finally:
        await consumer.stop()
    return rows


async def _offsets_for_time(bootstrap: str, tps: list[TopicPartition], timestamp_ms: int,
                            ends: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **command_security())
    await start_client(consumer)
    try:
        found = await consumer.offsets_for_times(dict.fromkeys(tps, timestamp_ms))
    except KafkaError as exc:
        raise ClientError(f"cannot look up offsets by time: {exc}") from exc
    finally:
        await consumer.stop()
    return {tp: found[tp].offset if found.get(tp) is not None else ends[tp] for tp in tps}
