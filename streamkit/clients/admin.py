"""Topic and consumer-group administration over the Kafka protocol (aiokafka)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError, for_code
from aiokafka.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "ClientError",
    "GroupMember",
    "PartitionLag",
    "TopicDescription",
    "admin_client",
    "alter_topic_config",
    "create_topic",
    "delete_topic",
    "describe_group",
    "describe_topic",
    "list_groups",
    "list_topics",
    "reset_offsets",
]


_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source of a topic-level override


class ClientError(Exception):
    """A failure worth one line to the user (unreachable broker, Kafka error code)."""


def _raise_for(code: int, what: str) -> None:
    if code:
        error = for_code(code)
        raise ClientError(f"{what}: {error.__name__} ({code})")


@asynccontextmanager
async def admin_client(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        await client.start()
    except KafkaError as exc:
        await client.close()
        raise ClientError(f"cannot reach a broker at {bootstrap}: {exc}") from exc
    try:
        yield client
    finally:
        await client.close()


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: int
    internal: bool
    configs: dict[str, str]


async def list_topics(bootstrap: str, include_internal: bool = False) -> list[str]:
    async with admin_client(bootstrap) as admin:
        names = await admin.list_topics()
    return sorted(n for n in names if include_internal or not n.startswith("__"))


async def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str],
                       if_not_exists: bool = False) -> None:
    async with admin_client(bootstrap) as admin:
        response = await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs)])
    for topic_error in response.topic_errors:  # (name, code, message)
        code = topic_error[1]
        if code == 36 and if_not_exists:  # TOPIC_ALREADY_EXISTS
            return
        message = topic_error[2] if len(topic_error) > 2 else None
        if code:
            raise ClientError(f"cannot create {name}: {message or for_code(code).__name__}")


async def delete_topic(bootstrap: str, name: str) -> None:
    async with admin_client(bootstrap) as admin:
        response = await admin.delete_topics([name])
    for _name, code, *_rest in response.topic_error_codes:
        _raise_for(code, f"cannot delete {name}")


async def describe_topic(bootstrap: str, name: str) -> TopicDescription:
    async with admin_client(bootstrap) as admin:
        # Check first: describe_topics sends Metadata with auto-creation on, and describing
        # a missing topic must not create it.
        if name not in await admin.list_topics():
            raise ClientError(f"topic {name} does not exist")
        topics = await admin.describe_topics([name])
        if not topics or topics[0]["error_code"]:
            raise ClientError(f"topic {name} does not exist")
        configs = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    entries = {}
    for response in configs:
        for resource in response.resources:
            _raise_for(resource[0], f"cannot describe configs of {name}")
            for entry in resource[4]:
                entries[entry[0]] = entry[1]
    topic = topics[0]
    return TopicDescription(name, len(topic["partitions"]), topic.get("is_internal", False), entries)


async def alter_topic_config(bootstrap: str, name: str, set_configs: dict[str, str],
                             delete: list[str]) -> None:
    """Change some overrides, keeping the others (AlterConfigs replaces the whole set)."""
    async with admin_client(bootstrap) as admin:
        current = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
        overrides: dict[str, str] = {}
        for response in current:
            for resource in response.resources:
                _raise_for(resource[0], f"cannot read configs of {name}")
                for entry in resource[4]:
                    # (name, value, read_only, config_source, ...) from DescribeConfigs v1+
                    if entry[3] == _DYNAMIC_TOPIC_CONFIG:
                        overrides[entry[0]] = entry[1]
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


async def describe_group(bootstrap: str, group: str) -> tuple[str, list[GroupMember], list[PartitionLag]]:
    """(state, members, committed offsets with lag) of a consumer group."""
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
    lags = await _lags(bootstrap, {tp: meta.offset for tp, meta in offsets.items()})
    return state, members, lags


async def _end_offsets(bootstrap: str, partitions: list[TopicPartition], earliest: bool = False) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        await consumer.start()
    except KafkaError as exc:
        raise ClientError(f"cannot reach a broker at {bootstrap}: {exc}") from exc
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


async def reset_offsets(bootstrap: str, group: str, topic: str, to: str, offset: int | None,
                        execute: bool) -> dict[TopicPartition, int]:
    """Compute (and with ``execute`` commit) new offsets for every partition of ``topic``.

    ``to`` is ``earliest``, ``latest`` or ``offset``. As with kafka-consumer-groups.sh the
    group must have no active members: the broker refuses the commit otherwise."""
    description = await describe_topic(bootstrap, topic)
    partitions = [TopicPartition(topic, p) for p in range(description.partitions)]
    if to == "offset":
        if offset is None or offset < 0:
            raise ClientError("--to-offset needs a non-negative offset")
        targets = dict.fromkeys(partitions, offset)
    else:
        targets = await _end_offsets(bootstrap, partitions, earliest=to == "earliest")
    if not execute:
        return targets
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(partitions)
        await consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in targets.items()})
    except KafkaError as exc:
        raise ClientError(f"cannot reset offsets of {group} (is the group still active?): {exc}") from exc
    finally:
        await consumer.stop()
    return targets
