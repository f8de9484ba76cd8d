"""ACLs over the Admin API (CreateAcls, DescribeAcls, DeleteAcls), for ``streamkit acls``.

``bindings`` turns kafka-acls.sh's options (principals, hosts, operations, one resource,
the pattern type, ``--producer``/``--consumer``) into Kafka's ACL bindings; the three
coroutines send them to a broker with aiokafka's protocol classes (v1: pattern types).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.errors import for_code
from aiokafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from streamkit.broker.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    check_binding,
    parse_principal,
)
from streamkit.clients.admin import admin_client
from streamkit.clients.errors import ClientError

__all__ = ["AclOptions", "bindings", "create_acls", "delete_acls", "describe_acls", "filters"]


@dataclass(frozen=True, slots=True)
class AclOptions:
    """kafka-acls.sh's options, as given (names are case-insensitive, as there)."""

    allow_principals: Sequence[str] = ()
    deny_principals: Sequence[str] = ()
    allow_hosts: Sequence[str] = ()
    deny_hosts: Sequence[str] = ()
    operations: Sequence[str] = ()
    topic: str | None = None
    group: str | None = None
    transactional_id: str | None = None
    cluster: bool = False
    pattern_type: str = "literal"
    producer: bool = False
    consumer: bool = False
    principal: str | None = None  # list/remove: only this principal's ACLs


def _choice(kind: Any, value: str, what: str) -> Any:
    name = value.strip().upper().replace("-", "_")
    # kafka-acls.sh's spellings: Read, IdempotentWrite, DescribeConfigs...
    by_name = {m.name.replace("_", ""): m for m in kind}
    found = by_name.get(name.replace("_", ""))
    if found is None or found.name in ("UNKNOWN",):
        choices = ", ".join(m.name.lower() for m in kind if m.name not in ("UNKNOWN", "ANY", "MATCH"))
        raise ClientError(f"unknown {what} {value!r}: one of {choices}")
    return found


def _resources(o: AclOptions) -> list[tuple[ResourceType, str]]:
    out = []
    if o.topic is not None:
        out.append((ResourceType.TOPIC, o.topic))
    if o.group is not None:
        out.append((ResourceType.GROUP, o.group))
    if o.transactional_id is not None:
        out.append((ResourceType.TRANSACTIONAL_ID, o.transactional_id))
    if o.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _operations(o: AclOptions, rtype: ResourceType) -> list[Operation]:
    if o.producer or o.consumer:
        if o.operations:
            raise ClientError("--operation cannot go with --producer or --consumer")
        ops: list[Operation] = []
        if rtype == ResourceType.TOPIC:
            ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE] if o.producer else []
            ops += [Operation.READ, Operation.DESCRIBE] if o.consumer else []
        elif rtype == ResourceType.GROUP and o.consumer:
            ops.append(Operation.READ)
        elif rtype == ResourceType.TRANSACTIONAL_ID and o.producer:
            ops += [Operation.WRITE, Operation.DESCRIBE]
        elif rtype == ResourceType.CLUSTER and o.producer:
            ops.append(Operation.IDEMPOTENT_WRITE)
        return list(dict.fromkeys(ops))
    return [_choice(Operation, op, "operation") for op in o.operations] or [Operation.ALL]


def bindings(o: AclOptions) -> list[AclBinding]:
    """The bindings ``streamkit acls add`` creates: each principal and host, each operation,
    on the one resource given (kafka-acls.sh's rules); ClientError says what is off."""
    resources = _resources(o)
    if (o.producer and o.topic is None) or (o.consumer and (o.topic is None or o.group is None)):
        raise ClientError("--producer needs --topic; --consumer needs --topic and --group")
    if not resources:
        raise ClientError("name a resource: --topic, --group, --transactional-id or --cluster")
    if len(resources) > 1 and not (o.producer or o.consumer):
        raise ClientError("name one resource at a time (--producer/--consumer may name a topic and a group)")
    if not o.allow_principals and not o.deny_principals:
        raise ClientError("give --allow-principal or --deny-principal (e.g. User:alice)")
    pattern = _choice(PatternType, o.pattern_type, "resource pattern type")
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ClientError("--resource-pattern-type for add is literal or prefixed")
    out = []
    for permission, principals, hosts in ((Permission.ALLOW, o.allow_principals, o.allow_hosts),
                                          (Permission.DENY, o.deny_principals, o.deny_hosts)):
        for principal in principals:
            for host in hosts or ["*"]:
                for rtype, name in resources:
                    for op in _operations(o, rtype):
                        out.append(AclBinding(rtype, name, pattern, principal, host, op, permission))
    try:
        for b in out:
            parse_principal(b.principal)
            check_binding(b)
    except AclError as exc:
        raise ClientError(str(exc)) from None
    return out


def filters(o: AclOptions) -> list[AclBindingFilter]:
    """What ``list`` and ``remove`` select: the resource given (any when none), with the
    pattern type (``any`` by default for them, ``match`` for everything that applies),
    the principal and operations given."""
    pattern = _choice(PatternType, o.pattern_type, "resource pattern type")
    principals: list[str | None] = [*o.allow_principals, *o.deny_principals] or [o.principal]
    ops = [_choice(Operation, op, "operation") for op in o.operations] or [Operation.ANY]
    resources: list[tuple[ResourceType, str | None]] = [*_resources(o)] or [(ResourceType.ANY, None)]
    out = []
    for rtype, name in resources:
        for principal in principals:
            for op in ops:
                permission = Permission.ANY
                if o.allow_principals and not o.deny_principals:
                    permission = Permission.ALLOW
                elif o.deny_principals and not o.allow_principals:
                    permission = Permission.DENY
                out.append(AclBindingFilter(rtype, name, pattern, principal, None, op, permission))
    return out


def _check(code: int, message: str | None, what: str) -> None:
    if code:
        raise ClientError(f"{what}: {message or for_code(code).__name__} ({for_code(code).__name__})")


async def create_acls(bootstrap: str, wanted: list[AclBinding]) -> None:
    async with admin_client(bootstrap) as admin:
        for b in wanted:
            response = await admin._send_request(CreateAclsRequest(
                int(b.resource_type), b.resource_name, int(b.pattern_type), b.principal, b.host,
                int(b.operation), int(b.permission)))
            for result in response.to_object()["creation_responses"]:
                _check(result["error_code"], result["error_message"], "cannot create the ACL")


def _binding(resource: dict[str, Any], acl: dict[str, Any]) -> AclBinding:
    return AclBinding(ResourceType(resource["resource_type"]), resource["resource_name"],
                      PatternType(resource["resource_pattern_type"]), acl["principal"], acl["host"],
                      Operation(acl["operation"]), Permission(acl["permission_type"]))


async def describe_acls(bootstrap: str, selected: list[AclBindingFilter]) -> list[AclBinding]:
    found: dict[AclBinding, None] = {}
    async with admin_client(bootstrap) as admin:
        for f in selected:
            response = (await admin._send_request(DescribeAclsRequest(
                int(f.resource_type), f.resource_name, int(f.pattern_type), f.principal, f.host,
                int(f.operation), int(f.permission)))).to_object()
            _check(response["error_code"], response["error_message"], "cannot list ACLs")
            for resource in response["resources"]:
                for acl in resource["acls"]:
                    found[_binding(resource, acl)] = None
    return list(found)


async def delete_acls(bootstrap: str, selected: list[AclBindingFilter]) -> list[AclBinding]:
    removed: dict[AclBinding, None] = {}
    async with admin_client(bootstrap) as admin:
        for f in selected:
            response = (await admin._send_request(DeleteAclsRequest(
                int(f.resource_type), f.resource_name, int(f.pattern_type), f.principal, f.host,
                int(f.operation), int(f.permission)))).to_object()
            for result in response["filter_responses"]:
                _check(result["error_code"], result["error_message"], "cannot remove ACLs")
                for m in result["matching_acls"]:
                    removed[_binding(m, m)] = None
    return list(removed)
