"""The broker's SCRAM credentials, durable in ``<data dir>/.meta/scram-credentials.json``:
per user and mechanism the salt, StoredKey, ServerKey and iterations (never a password),
written atomically on every change so a crash leaves the old or the new file."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

from streamkit.broker.security.scram import ScramCredential
from streamkit.log.checkpoint import write_atomically

__all__ = ["ScramCredentials"]

_FILE = "scram-credentials.json"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramCredentials:
    def __init__(self, meta_dir: Path) -> None:
        self.path = meta_dir / _FILE
        self._users: dict[str, dict[str, ScramCredential]] = {}
        # In a cluster: writes changed users to ZooKeeper (streamkit.broker.cluster.scram_sync).
        self.publisher: Callable[[list[str]], Awaitable[None]] | None = None

    def load(self) -> None:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        self._users = {
            user: {mech: ScramCredential(base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                                         base64.b64decode(c["server_key"]), int(c["iterations"]))
                   for mech, c in mechs.items()}
            for user, mechs in raw.items()}

    def _save(self) -> None:
        data = {user: {mech: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                              "server_key": _b64(c.server_key), "iterations": c.iterations}
                       for mech, c in mechs.items()}
                for user, mechs in self._users.items() if mechs}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True).encode())

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def mechanisms(self, user: str) -> dict[str, int]:
        """The user's mechanisms and their iterations (empty for an unknown user)."""
        return {m: c.iterations for m, c in sorted(self._users.get(user, {}).items())}

    def credentials(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def replace_user(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        """Set all of ``user``'s credentials (as ZooKeeper has them), then write the file."""
        if self._users.get(user, {}) == credentials:
            return
        self._users[user] = dict(credentials)
        self._save()

    def users(self) -> list[str]:
        return sorted(u for u, m in self._users.items() if m)

    def apply(self, upserts: list[tuple[str, str, ScramCredential]], deletes: list[tuple[str, str]]) -> None:
        """Change several credentials, then write the file once."""
        for user, mechanism in deletes:
            self._users.get(user, {}).pop(mechanism, None)
        for user, mechanism, credential in upserts:
            self._users.setdefault(user, {})[mechanism] = credential
        self._save()
