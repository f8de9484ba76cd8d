"""A cluster's SCRAM credentials live in ZooKeeper, where Kafka keeps them:
``/config/users/<name>`` = ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
server_key=...,iterations=4096"}}``. Every broker mirrors them into its local store (so a
login is checked locally) and watches them; AlterUserScramCredentials on any broker writes
the user's znode, which every broker then sees."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import Coroutine
from typing import Any

from kazoo.exceptions import KazooException

from streamkit.broker.cluster.zk import SessionEvent, ZkClient
from streamkit.broker.security.credentials import ScramCredentials
from streamkit.broker.security.scram import HASHES, ScramCredential

__all__ = ["USERS_PATH", "ScramSync", "decode_user", "encode_user"]

log = logging.getLogger(__name__)

USERS_PATH = "/config/users"


def encode_user(credentials: dict[str, ScramCredential]) -> bytes:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {m: f"salt={b64(c.salt)},stored_key={b64(c.stored_key)},server_key={b64(c.server_key)},"
                 f"iterations={c.iterations}" for m, c in sorted(credentials.items())}
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()


def decode_user(data: bytes) -> dict[str, ScramCredential]:
    """The user's SCRAM credentials (its other configs, e.g. quotas, are not ours)."""
    out = {}
    for mechanism, text in json.loads(data or b"{}").get("config", {}).items():
        if mechanism not in HASHES:
            continue
        fields = dict(part.split("=", 1) for part in str(text).split(","))
        out[mechanism] = ScramCredential(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                                         base64.b64decode(fields["server_key"]), int(fields["iterations"]))
    return out


class ScramSync:
    def __init__(self, zk: ZkClient, store: ScramCredentials) -> None:
        self.zk = zk
        self.store = store
        self._watched: set[str] = set()  # users whose znode has a data watch
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.zk.on_session(self._session)
        await self.zk.create(USERS_PATH)  # a children watch needs the znode (Kafka creates it too)
        await self._load_all()
        self.store.publisher = self.publish

    async def stop(self) -> None:
        self.store.publisher = None
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _soon(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _session(self, event: SessionEvent) -> None:
        if event.state == "connected" and event.new_session:  # a new session lost our watches
            self._watched.clear()
            self._soon(self._load_all())

    async def _load_all(self) -> None:
        try:
            names = set(await self.zk.children(USERS_PATH, watch=lambda: self._soon(self._load_all())))
            for name in sorted(names - self._watched):
                self._watched.add(name)
                await self._load(name)
            for name in set(self.store.users()) - names:  # deleted while we were not watching
                self.store.replace_user(name, {})
        except KazooException:
            log.warning("could not read the SCRAM credentials in ZooKeeper; retried on the next change")

    async def _load(self, name: str) -> None:
        try:
            got = await self.zk.get(f"{USERS_PATH}/{name}", watch=lambda: self._soon(self._load(name)))
        except KazooException:
            log.warning("could not read the SCRAM credentials of %s in ZooKeeper", name)
            return
        self.store.replace_user(name, decode_user(got[0]) if got is not None else {})

    async def publish(self, users: list[str]) -> None:
        """Write these users' credentials (as the local store now has them) to ZooKeeper."""
        for user in users:
            await self.zk.set(f"{USERS_PATH}/{user}", encode_user(self.store.credentials(user)))
