"""ACLs and SCRAM users, as the console shows them, and whether the cluster has them at all:
the ACL pages need a broker with an authorizer (DescribeAcls answers SECURITY_DISABLED
without one), the users pages a broker with a SASL listener (its ``listener.security.protocol.map``
and ``listeners``). What the broker has is asked once a minute, not on every page."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from streamkit.broker.security.acl import AclBinding
from streamkit.clients import acls, users
from streamkit.clients.errors import ClientError
from streamkit.console.broker import AdminPool, kafka_errors

__all__ = ["Features", "SecurityFeatures", "acl_list", "binding_filter"]

_TTL_S = 60.0


@dataclass(frozen=True, slots=True)
class Features:
    acls: bool
    users: bool


class SecurityFeatures:
    """What the cluster has, asked at most once a ``_TTL_S``; a broker that does not answer
    has nothing for now (the pages come back once it does)."""

    def __init__(self, pool: AdminPool) -> None:
        self.pool = pool
        self._found: Features | None = None
        self._at = 0.0
        self._lock = asyncio.Lock()
        self._refresh: asyncio.Task[None] | None = None

    async def get(self) -> Features:
        """What the cluster has; once known, a stale answer is refreshed in the background
        (no page waits for the probe but the very first)."""
        if self._found is not None:
            if time.monotonic() - self._at > _TTL_S and (self._refresh is None or self._refresh.done()):
                self._refresh = asyncio.create_task(self._update(), name="console-features")
            return self._found
        await self._update()
        assert self._found is not None
        return self._found

    async def _update(self) -> None:
        async with self._lock:
            if self._found is None or time.monotonic() - self._at > _TTL_S:
                self._found = await self._probe()
                self._at = time.monotonic()

    async def _probe(self) -> Features:
        try:
            await acls.describe_acls(self.pool.bootstrap, acls.filters(acls.AclOptions(pattern_type="any")))
            has_acls = True
        except ClientError as exc:
            has_acls = "SecurityDisabled" not in str(exc) and "SECURITY_DISABLED" not in str(exc)
        except Exception:  # an unreachable broker: no pages until it answers
            has_acls = False
        try:
            has_users = await self._sasl_listener()
        except Exception:
            has_users = False
        return Features(has_acls, has_users)

    async def _sasl_listener(self) -> bool:
        async with self.pool.admin() as client:
            cluster = await client.describe_cluster()
            brokers = sorted(int(b["node_id"]) for b in cluster.get("brokers", []))
            if not brokers:
                return False
            names = {"listeners": None, "listener.security.protocol.map": None}
            responses = await client.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(brokers[0]),
                                                                      names)])
        values = {str(e[0]): str(e[1] or "") for r in responses for res in r.resources for e in res[4]}
        protocols = dict(pair.split(":", 1) for pair in values.get("listener.security.protocol.map", "").split(",")
                         if ":" in pair)
        for listener in values.get("listeners", "").split(","):
            name = listener.split("://", 1)[0].strip()
            if protocols.get(name, name).upper().startswith("SASL_"):
                return True
        return False


def binding_filter(resource_type: str, name: str, pattern_type: str, principal: str, host: str,
                   operation: str, permission: str) -> list[AclBinding]:
    """The one binding a form describes (kafka-acls.sh's names; errors are ClientError)."""
    option = acls.AclOptions(
        allow_principals=[principal] if permission.lower() == "allow" else [],
        deny_principals=[principal] if permission.lower() == "deny" else [],
        allow_hosts=[host] if permission.lower() == "allow" else [],
        deny_hosts=[host] if permission.lower() == "deny" else [],
        operations=[operation], pattern_type=pattern_type or "literal",
        topic=name if resource_type == "topic" else None, group=name if resource_type == "group" else None,
        transactional_id=name if resource_type == "transactional-id" else None,
        cluster=resource_type == "cluster")
    if permission.lower() not in ("allow", "deny"):
        raise ClientError(f"permission must be allow or deny, not {permission!r}")
    return acls.bindings(option)


async def acl_list(bootstrap: str) -> list[AclBinding]:
    with kafka_errors():
        found = await acls.describe_acls(bootstrap, acls.filters(acls.AclOptions(pattern_type="any")))
    return sorted(found, key=lambda b: (b.resource_type.name, b.resource_name, b.principal, b.operation.name))


async def user_list(bootstrap: str, client_config: Mapping[str, str]) -> list[users.UserCredentials]:
    with kafka_errors():
        return await asyncio.to_thread(users.describe_users, bootstrap, None, client_config)
