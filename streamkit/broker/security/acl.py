"""Kafka's ACL model as plain values: resource types, pattern types, operations, permission
types (with Kafka's wire codes), one ACL binding, and the filters DescribeAcls and
DeleteAcls match bindings with.

The codes are Kafka's ``ResourceType``, ``PatternType``, ``AclOperation`` and
``AclPermissionType`` (org.apache.kafka.common.*), so they go on the wire as they are.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CLUSTER_NAME",
    "IMPLIED_BY",
    "SUPPORTED_OPERATIONS",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclBinding",
    "AclBindingFilter",
    "AclError",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
    "check_binding",
    "parse_principal",
]

WILDCARD: Final = "*"  # a LITERAL resource name or a host matching every one
WILDCARD_PRINCIPAL: Final = "User:*"
CLUSTER_NAME: Final = "kafka-cluster"  # the one CLUSTER resource's name


class AclError(ValueError):
    """A binding or filter that Kafka refuses (INVALID_REQUEST on the wire)."""


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW of any of these grants the key too (Kafka's AclEntry / StandardAuthorizer rule);
# a DENY denies only its own operation (and ALL).
IMPLIED_BY: Final[dict[Operation, frozenset[Operation]]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}

# The operations each resource type has (Kafka's AclEntry.supportedOperations); they make
# the KIP-430 authorized-operations bit sets.
SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[Operation, ...]]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER,
                           Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE, Operation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
    ResourceType.USER: (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS),
}


def parse_principal(principal: str) -> tuple[str, str]:
    """("User", "alice") from "User:alice"; AclError when there is no type."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"principal {principal!r} must be TYPE:NAME, e.g. User:alice")
    return kind, name


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: ``principal`` (``User:alice``, ``User:*``) from ``host`` (``*``) is
    ``permission`` to do ``operation`` on the resources ``pattern`` selects."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern covers the resource ``name``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


def check_binding(binding: AclBinding) -> None:
    """Kafka's checks on a binding to create (CreateAcls answers INVALID_REQUEST)."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise AclError(f"an ACL needs a concrete resource type, not {binding.resource_type.name}")
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"an ACL's pattern type is LITERAL or PREFIXED, not {binding.pattern_type.name}")
    if binding.operation in (Operation.UNKNOWN, Operation.ANY):
        raise AclError(f"an ACL needs a concrete operation, not {binding.operation.name}")
    if binding.permission not in (Permission.ALLOW, Permission.DENY):
        raise AclError(f"an ACL's permission is ALLOW or DENY, not {binding.permission.name}")
    if not binding.resource_name:
        raise AclError("an ACL needs a resource name")
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        raise AclError(f"the CLUSTER resource is named {CLUSTER_NAME!r}, not {binding.resource_name!r}")
    if binding.pattern_type == PatternType.PREFIXED and binding.resource_name == WILDCARD:
        raise AclError("a PREFIXED pattern cannot be '*': use a LITERAL '*' for every resource")
    allowed = SUPPORTED_OPERATIONS[binding.resource_type]
    if binding.operation != Operation.ALL and binding.operation not in allowed:
        raise AclError(f"{binding.operation.name} is not an operation on {binding.resource_type.name} "
                       f"(it has {', '.join(o.name for o in allowed)})")
    parse_principal(binding.principal)
    if not binding.host:
        raise AclError("an ACL needs a host ('*' for any)")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: ``None`` and the ANY codes match anything;
    pattern type MATCH selects the bindings that apply to the named resource (the literal
    name, the ``*`` wildcard and every prefix of it)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def check(self) -> None:
        for value, label in ((self.resource_type, "resource type"), (self.pattern_type, "pattern type"),
                             (self.operation, "operation"), (self.permission, "permission type")):
            if value.name == "UNKNOWN":
                raise AclError(f"a filter's {label} cannot be UNKNOWN")

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if not self._matches_pattern(b):
            return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == Operation.ANY or self.operation == b.operation)
                and (self.permission == Permission.ANY or self.permission == b.permission))

    def _matches_pattern(self, b: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type == PatternType.PREFIXED:
                return name.startswith(b.resource_name)
            return b.resource_name in (name, WILDCARD)
        if self.pattern_type != PatternType.ANY and b.pattern_type != self.pattern_type:
            return False
        return name is None or b.resource_name == name
