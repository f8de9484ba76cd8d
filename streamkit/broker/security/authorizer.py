"""The authorizer: Kafka's StandardAuthorizer / AclAuthorizer rules over a durable set of
ACL bindings.

A request is allowed when its principal is one of ``super.users``; otherwise DENY wins: a
matching DENY of the operation (or of ALL) refuses it, then a matching ALLOW of the
operation, of ALL, or of an operation that implies it (READ/WRITE/DELETE/ALTER imply
DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS) grants it. A binding matches when its
pattern covers the resource (LITERAL name, LITERAL ``*``, or a PREFIXED prefix), its
principal is the request's or ``User:*``, and its host is the client's or ``*``. When no
binding at all covers the resource, ``allow.everyone.if.no.acl.found`` decides.

The bindings live in ``<data dir>/.meta/acls.json``, written atomically on each change; a
cluster member keeps them in ZooKeeper instead (``remote``, see ``zk_acls``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Protocol

from streamkit.broker.security.acl import (
    IMPLIED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from streamkit.log.checkpoint import write_atomically

__all__ = ["AUTHORIZER_CLASSES", "Authorizer", "authorizer_enabled"]

# authorizer.class.name values that turn the authorizer on: Kafka's own class names (KRaft
# and ZooKeeper mode), so a Kafka server.properties works unchanged.
AUTHORIZER_CLASSES: Final = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)
_FILE = "acls.json"


class RemoteAcls(Protocol):
    """Where a cluster keeps its ACLs; it calls ``Authorizer.replace`` with what it holds."""

    async def change(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> None: ...


def authorizer_enabled(class_name: str) -> bool:
    return class_name.strip() in AUTHORIZER_CLASSES


def _superusers(value: str) -> frozenset[str]:
    # Kafka separates super.users with semicolons (a principal may contain a comma).
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class Authorizer:
    def __init__(self, meta_dir: Path | None, super_users: str = "", allow_everyone_if_no_acl_found: bool = False) -> None:
        self.path = None if meta_dir is None else meta_dir / _FILE
        self.super_users = _superusers(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._bindings: dict[AclBinding, None] = {}  # insertion-ordered set
        # Looked up on every request: LITERAL bindings by (type, name), PREFIXED by type.
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}
        self._lock = threading.Lock()
        self.remote: RemoteAcls | None = None

    # -- store -----------------------------------------------------------------------------

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        entries = json.loads(self.path.read_text())
        self._set({_binding(e): None for e in entries})

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = [_entry(b) for b in self._bindings]
        write_atomically(self.path, json.dumps(data, indent=1).encode())

    @property
    def bindings(self) -> list[AclBinding]:
        return list(self._bindings)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Adds the (already checked) bindings; one durable write for all of them."""
        with self._lock:
            self._set({**self._bindings, **dict.fromkeys(bindings)})
            self._save()

    def _set(self, bindings: dict[AclBinding, None]) -> None:
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[ResourceType, list[AclBinding]] = {}
        for b in bindings:
            if b.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(b.resource_type, []).append(b)
            else:
                literal.setdefault((b.resource_type, b.resource_name), []).append(b)
        # One assignment each: a request on the loop never sees half of a change.
        self._bindings, self._literal, self._prefixed = bindings, literal, prefixed

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        """The whole set, as the cluster's store holds it (not written locally)."""
        self._set(dict.fromkeys(bindings))

    async def create(self, bindings: list[AclBinding]) -> None:
        """CreateAcls: into the cluster's store when there is one, else the local file."""
        if self.remote is not None:
            await self.remote.change(add=bindings)
        else:
            self.add(bindings)

    async def remove(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """DeleteAcls: what each filter matched, removed (see ``delete``)."""
        if self.remote is None:
            return self.delete(filters)
        removed = [self.describe(f) for f in filters]
        await self.remote.change(remove={b for group in removed for b in group})
        return removed

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._bindings if flt.matches(b)]

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Removes what each filter matches; returns the removed bindings per filter (a
        binding two filters match is reported under both, as Kafka does)."""
        with self._lock:
            removed = [[b for b in self._bindings if f.matches(b)] for f in filters]
            gone = {b for group in removed for b in group}
            if gone:
                self._set({b: None for b in self._bindings if b not in gone})
                self._save()
            return removed

    # -- decisions -------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        covering = [*self._literal.get((resource_type, name), ()), *self._literal.get((resource_type, WILDCARD), ()),
                    *(b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.resource_name))]
        if not covering:
            return self.allow_everyone_if_no_acl_found
        matching = [b for b in covering if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)]
        if any(b.permission == Permission.DENY and b.operation in (operation, Operation.ALL) for b in matching):
            return False
        granting = {operation, Operation.ALL} | IMPLIED_BY.get(operation, frozenset())
        return any(b.permission == Permission.ALLOW and b.operation in granting for b in matching)

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on at least one resource of the type (Kafka's
        ``authorizeByResourceType``: KIP-679's idempotent producer with WRITE on any topic).
        An ALLOW counts unless a DENY covers every resource its pattern does."""
        if principal in self.super_users:
            return True
        matching = [b for b in self._bindings if b.resource_type == resource_type
                    and b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)]
        granting = {operation, Operation.ALL} | IMPLIED_BY.get(operation, frozenset())
        denies = [b for b in matching if b.permission == Permission.DENY and b.operation in (operation, Operation.ALL)]
        for allow in matching:
            if allow.permission != Permission.ALLOW or allow.operation not in granting:
                continue
            if not any(_covers(deny, allow) for deny in denies):
                return True
        if self.allow_everyone_if_no_acl_found:
            return not any(b.resource_type == resource_type for b in self._bindings)
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The KIP-430 bit set: bit ``op`` set for each operation of the type allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << int(op)
        return bits


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether ``deny`` covers every resource ``allow`` selects."""
    if deny.pattern_type == PatternType.LITERAL and deny.resource_name == WILDCARD:
        return True
    if deny.pattern_type == PatternType.PREFIXED:
        return allow.resource_name.startswith(deny.resource_name) and not (
            allow.pattern_type == PatternType.LITERAL and allow.resource_name == WILDCARD)
    return allow.pattern_type == PatternType.LITERAL and allow.resource_name == deny.resource_name


def _entry(b: AclBinding) -> dict[str, str]:
    return {"resource_type": b.resource_type.name, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permission": b.permission.name}


def _binding(e: dict[str, str]) -> AclBinding:
    return AclBinding(ResourceType[e["resource_type"]], e["resource_name"], PatternType[e["pattern_type"]],
                      e["principal"], e["host"], Operation[e["operation"]], Permission[e["permission"]])
