"""A cluster's client quotas in ZooKeeper, where Kafka's ZooKeeper mode keeps them:
``/config/users/U``, ``/config/users/U/clients/C`` and ``/config/clients/C`` (``<default>``
for the default entity; names URL-encoded as Kafka's Sanitizer does), each holding
``{"version": 1, "config": {"producer_byte_rate": "1048576"}}``. A change adds
``/config/changes/config_change_NNNNNNNNNN`` naming the entity; every broker follows those
notices and reloads. Keys other than the quotas (a user's SCRAM credentials) are kept as
they are.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from typing import Final

from streamkit.broker.cluster.zk import ZkClient
from streamkit.broker.security.quotas import CLIENT_ID, QUOTA_KEYS, REQUEST_PERCENTAGE, USER, Entity
from streamkit.broker.security.zk_follow import ZkFollower, notify

__all__ = ["ZkQuotaStore", "entity_path"]

CONFIG: Final = "/config"
CHANGES: Final = "/config/changes"
_CHANGE: Final = "config_change_"
_DEFAULT: Final = "<default>"


def _sanitize(name: str | None) -> str:
    if name is None:
        return _DEFAULT
    return urllib.parse.quote(name, safe="~")


def _desanitize(part: str) -> str | None:
    return None if part == _DEFAULT else urllib.parse.unquote(part)


def entity_path(ent: Entity) -> str:
    """``users/U/clients/C`` and the like, below /config."""
    names = dict(ent)
    parts = []
    if USER in names:
        parts += ["users", _sanitize(names[USER])]
    if CLIENT_ID in names:
        parts += ["clients", _sanitize(names[CLIENT_ID])]
    return "/".join(parts)


def _value_text(key: str, value: float) -> str:
    # Kafka keeps the byte rates as longs and request_percentage as a double.
    return repr(value) if key == REQUEST_PERCENTAGE else str(int(value))


def _config(data: bytes) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in (json.loads(data).get("config") or {}).items()}


class ZkQuotaStore:
    """The cluster's client quotas; ``on_change(entries)`` gets them all after each load."""

    def __init__(self, zk: ZkClient, on_change: Callable[[dict[Entity, dict[str, float]]], None]) -> None:
        self.zk = zk
        self.on_change = on_change
        self._follower = ZkFollower(zk, (f"{CONFIG}/users", f"{CONFIG}/clients", CHANGES), self._reload,
                                    "client quotas")

    async def start(self) -> None:
        await self._follower.start()

    async def stop(self) -> None:
        await self._follower.stop()

    async def _reload(self) -> None:
        self.on_change(await self.load())

    async def _quotas(self, path: str) -> dict[str, float]:
        got = await self.zk.get(path)
        config = _config(got[0]) if got is not None else {}
        return {k: float(v) for k, v in config.items() if k in QUOTA_KEYS}

    async def load(self) -> dict[Entity, dict[str, float]]:
        out: dict[Entity, dict[str, float]] = {}
        for user in await self.zk.children(f"{CONFIG}/users"):
            base: Entity = ((USER, _desanitize(user)),)
            out[base] = await self._quotas(f"{CONFIG}/users/{user}")
            for client in await self.zk.children(f"{CONFIG}/users/{user}/clients"):
                out[(*base, (CLIENT_ID, _desanitize(client)))] = await self._quotas(
                    f"{CONFIG}/users/{user}/clients/{client}")
        for client in await self.zk.children(f"{CONFIG}/clients"):
            out[((CLIENT_ID, _desanitize(client)),)] = await self._quotas(f"{CONFIG}/clients/{client}")
        return {ent: values for ent, values in out.items() if values}

    async def change(self, changes: list[tuple[Entity, list[tuple[str, float | None]]]]) -> None:
        """Sets (value) or removes (None) keys of each entity by compare-and-set, notifies
        every broker, and reloads."""
        for ent, ops in changes:
            path = f"{CONFIG}/{entity_path(ent)}"
            while True:
                got = await self.zk.get(path)
                config = _config(got[0]) if got is not None else {}
                for key, value in ops:
                    if value is None:
                        config.pop(key, None)
                    else:
                        config[key] = _value_text(key, value)
                data = json.dumps({"version": 1, "config": config}).encode()
                if await self.zk.create(path, data) if got is None else await self.zk.compare_and_set(
                        path, data, got[1]):
                    break
            await notify(self.zk, CHANGES, _CHANGE,
                         json.dumps({"version": 2, "entity_path": entity_path(ent)}).encode())
        await self._follower.refresh()
