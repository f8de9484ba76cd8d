"""ConsumerGroupDescribe (KIP-848) for the CLI: member epochs and the group's protocol.

aiokafka has no request class for it, so this speaks the two requests it needs
(FindCoordinator v4, ConsumerGroupDescribe v0) with kio's codecs over one connection each
(``streamkit.clients.kio_calls``: with the command's TLS and SASL settings). A broker that does not know the API (Kafka before 3.7) or a group of the
classic protocol gives ``None``: the caller then shows the classic view.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka.errors import KafkaError
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.types import GroupId
from kio.static.primitive import i8

from streamkit.clients.errors import ClientError
from streamkit.clients.kio_calls import kio_connection
from streamkit.clients.lifecycle import bootstrap_addresses
from streamkit.clients.security import command_security

__all__ = ["ModernGroup", "ModernMember", "describe_modern_groups"]

_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ModernMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    member_epoch: int
    assignment: tuple[tuple[str, int], ...]
    target_assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ModernGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ModernMember, ...]


async def _call(host: str, port: int, body: Any) -> Any:
    """One request on its own connection, logged in as the command's clients are."""
    async with kio_connection(f"{host}:{port}", command_security(), _TIMEOUT_S) as call:
        return await asyncio.wait_for(call(body), _TIMEOUT_S)


def _partitions(assignment: Any) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((t.topic_name, int(p)) for t in assignment.topic_partitions for p in t.partitions))


async def describe_modern_groups(bootstrap: str, groups: list[str]) -> dict[str, ModernGroup | None]:
    """Each group's KIP-848 description, or None for a classic (or unknown) group and for
    every group when the brokers do not serve ConsumerGroupDescribe."""
    out: dict[str, ModernGroup | None] = dict.fromkeys(groups)
    if not groups:
        return out
    try:
        host, port = bootstrap_addresses(bootstrap)[0]
        found = await _call(host, port, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=tuple(groups)))
        by_node: dict[tuple[str, int], list[str]] = {}
        for c in found.coordinators:
            if c.error_code == ErrorCode.none:
                by_node.setdefault((c.host, int(c.port)), []).append(c.key)
        for (h, p), ids in by_node.items():
            described = await _call(h, p, ConsumerGroupDescribeRequest(
                group_ids=tuple(GroupId(i) for i in ids), include_authorized_operations=False))
            for g in described.groups:
                if g.error_code != ErrorCode.none:
                    continue
                out[g.group_id] = ModernGroup(
                    g.group_id, g.group_state, int(g.group_epoch), int(g.assignment_epoch), g.assignor_name,
                    tuple(ModernMember(m.member_id, m.instance_id, m.client_id, m.client_host, int(m.member_epoch),
                                       _partitions(m.assignment), _partitions(m.target_assignment))
                          for m in g.members))
    except (TimeoutError, OSError, EOFError, ValueError, KafkaError, ClientError):
        return dict.fromkeys(groups)
    return out
