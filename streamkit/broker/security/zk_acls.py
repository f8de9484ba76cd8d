"""ACLs kept in ZooKeeper, where Kafka's ZooKeeper mode keeps them, for a cluster
(``zookeeper.connect``): every broker serves the same ACLs, whichever broker took the change.

The layout is Kafka's (AclAuthorizer): one znode per resource pattern,
``/kafka-acl/Topic/orders`` (LITERAL) or ``/kafka-acl-extended/prefixed/Topic/pay-``
(PREFIXED), holding ``{"version": 1, "acls": [{"principal": "User:alice", "permissionType":
"Allow", "operation": "Read", "host": "*"}]}``, changed by compare-and-set. Each change adds
a sequential node under ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``; every
broker watches both and reloads the ACLs when one appears.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Final

from streamkit.broker.cluster.zk import ZkClient
from streamkit.broker.security.acl import (
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from streamkit.broker.security.zk_follow import ZkFollower, notify

__all__ = ["ZkAclStore", "decode_acls", "encode_acls", "resource_path"]

LITERAL_ROOT: Final = "/kafka-acl"
PREFIXED_ROOT: Final = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES: Final = "/kafka-acl-changes"
EXTENDED_CHANGES: Final = "/kafka-acl-extended-changes"
_CHANGE: Final = "acl_changes_"

_TYPE_NAMES: Final = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                      ResourceType.TRANSACTIONAL_ID: "TransactionalId",
                      ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}
_TYPES_BY_NAME: Final = {v: k for k, v in _TYPE_NAMES.items()}
_ROOTS: Final = ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED))

Resource = tuple[ResourceType, str, PatternType]


def _camel(name: str) -> str:
    """Kafka's spelling in ZooKeeper: CLUSTER_ACTION -> ClusterAction."""
    return "".join(word.capitalize() for word in name.split("_"))


_OPERATIONS: Final = {_camel(op.name): op for op in Operation}
_PERMISSIONS: Final = {_camel(p.name): p for p in Permission}


def resource_path(resource: Resource) -> str:
    rtype, name, pattern = resource
    root = PREFIXED_ROOT if pattern == PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{_TYPE_NAMES[rtype]}/{name}"


def encode_acls(bindings: Iterable[AclBinding]) -> bytes:
    acls = [{"principal": b.principal, "permissionType": _camel(b.permission.name),
             "operation": _camel(b.operation.name), "host": b.host} for b in bindings]
    return json.dumps({"version": 1, "acls": acls}).encode()


def decode_acls(resource: Resource, data: bytes) -> list[AclBinding]:
    rtype, name, pattern = resource
    if not data:
        return []
    return [AclBinding(rtype, name, pattern, a["principal"], a["host"], _OPERATIONS[a["operation"]],
                       _PERMISSIONS[a["permissionType"]]) for a in json.loads(data).get("acls", [])]


def _resource(b: AclBinding) -> Resource:
    return b.resource_type, b.resource_name, b.pattern_type


class ZkAclStore:
    """The cluster's ACLs in ZooKeeper; ``on_change(bindings)`` gets the whole set after
    each load."""

    def __init__(self, zk: ZkClient, on_change: Callable[[list[AclBinding]], None]) -> None:
        self.zk = zk
        self.on_change = on_change
        self._follower = ZkFollower(zk, (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES),
                                    self._reload, "ACLs")

    async def start(self) -> None:
        await self._follower.start()

    async def stop(self) -> None:
        await self._follower.stop()

    async def _reload(self) -> None:
        self.on_change(await self.load())

    async def load(self) -> list[AclBinding]:
        out: list[AclBinding] = []
        for root, pattern in _ROOTS:
            for type_name in await self.zk.children(root):
                rtype = _TYPES_BY_NAME.get(type_name)
                if rtype is None:
                    continue
                for name in await self.zk.children(f"{root}/{type_name}"):
                    got = await self.zk.get(f"{root}/{type_name}/{name}")
                    if got is not None:
                        out.extend(decode_acls((rtype, name, pattern), got[0]))
        return out

    async def change(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> None:
        """Adds and removes bindings, one compare-and-set per resource, then tells every
        broker (this one included) through a change node."""
        adding: dict[Resource, list[AclBinding]] = {}
        removing: dict[Resource, set[AclBinding]] = {}
        for b in add:
            adding.setdefault(_resource(b), []).append(b)
        for b in remove:
            removing.setdefault(_resource(b), set()).add(b)
        for resource in {*adding, *removing}:
            await self._update(resource, adding.get(resource, []), removing.get(resource, set()))
            await self._notify(resource)
        await self._follower.refresh()

    async def _update(self, resource: Resource, add: list[AclBinding], remove: set[AclBinding]) -> None:
        path = resource_path(resource)
        while True:
            got = await self.zk.get(path)
            current = decode_acls(resource, got[0]) if got is not None else []
            wanted = list(dict.fromkeys(b for b in [*current, *add] if b not in remove))
            if got is None:
                if not wanted or await self.zk.create(path, encode_acls(wanted)):
                    return
            elif await self.zk.compare_and_set(path, encode_acls(wanted), got[1]):
                return

    async def _notify(self, resource: Resource) -> None:
        rtype, name, pattern = resource
        if pattern == PatternType.LITERAL:
            parent, data = LITERAL_CHANGES, f"{_TYPE_NAMES[rtype]}:{name}".encode()
        else:
            parent = EXTENDED_CHANGES
            data = json.dumps({"version": 1, "resourceType": _TYPE_NAMES[rtype], "name": name,
                               "patternType": pattern.name}).encode()
        await notify(self.zk, parent, _CHANGE, data)
