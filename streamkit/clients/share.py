"""Share groups (KIP-932) for the CLI: ShareGroupDescribe and DescribeShareGroupOffsets.

No Python Kafka admin client speaks these APIs yet, so this sends them itself: kio encodes
the requests and decodes the responses over one connection to the bootstrap broker, with
the command's TLS and SASL settings (``streamkit.clients.kio_calls``)
(the group's coordinator on a single broker; on a cluster, ask the coordinator's address).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiokafka.errors import KafkaConnectionError
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.errors import ErrorCode
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from streamkit.clients.kio_calls import kio_connection
from streamkit.clients.security import command_security

__all__ = [
    "ShareGroupDescription",
    "ShareMember",
    "SharePartitionLag",
    "alter_share_group_offsets",
    "describe_share_group",
]


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class SharePartitionLag:
    topic: str
    partition: int
    start_offset: int
    lag: int


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    state: str
    group_epoch: int
    members: list[ShareMember]
    lags: list[SharePartitionLag]


async def alter_share_group_offsets(bootstrap: str, group: str, topic: str, offsets: dict[int, int],
                                    timeout_s: float = 15) -> None:
    """Set the share start offset of partitions of an empty share group (-1 latest,
    -2 earliest); raises ValueError with the broker's message when refused."""
    async with kio_connection(bootstrap, command_security(), timeout_s) as call:
        reply = await asyncio.wait_for(call(AlterShareGroupOffsetsRequest(
            group_id=GroupId(group), topics=(AlterShareGroupOffsetsRequestTopic(topic_name=TopicName(topic), partitions=tuple(
                AlterShareGroupOffsetsRequestPartition(partition_index=i32(p), start_offset=i64(o))
                for p, o in sorted(offsets.items()))),))), timeout_s)
    if reply.error_code != ErrorCode.none:
        raise ValueError(f"share group {group}: {reply.error_message or reply.error_code.name}")
    for t in reply.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                raise ValueError(f"{topic}-{p.partition_index}: {p.error_message or p.error_code.name}")


async def describe_share_group(bootstrap: str, group: str, timeout_s: float = 15) -> ShareGroupDescription | None:
    """The share group's state, members and per-partition start offset and lag; None when
    the broker knows no share group of that name (or speaks no share-group APIs)."""
    try:
        async with kio_connection(bootstrap, command_security(), timeout_s) as call:
            described = await asyncio.wait_for(call(ShareGroupDescribeRequest(
                group_ids=(GroupId(group),), include_authorized_operations=False)), timeout_s)
            g = described.groups[0]
            if g.error_code != ErrorCode.none:
                return None
            offsets = await asyncio.wait_for(call(DescribeShareGroupOffsetsRequest(groups=(
                DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group), topics=None),))), timeout_s)
    except KafkaConnectionError:
        return None  # a broker without share groups closes the connection
    members = [ShareMember(m.member_id, m.client_id, m.client_host, int(m.member_epoch),
                           [(t.topic_name, int(p)) for t in m.assignment.topic_partitions for p in t.partitions])
               for m in g.members]
    lags = [SharePartitionLag(t.topic_name, int(p.partition_index), int(p.start_offset), int(p.lag))
            for og in offsets.groups for t in og.topics for p in t.partitions]
    return ShareGroupDescription(g.group_state, int(g.group_epoch), members, lags)
