"""Client quotas as Kafka keeps them: ``producer_byte_rate``, ``consumer_byte_rate`` and
``request_percentage`` for a user, a client id, or both, with defaults, durable in
``<data dir>/.meta/client-quotas.json``.

Which quota applies follows Kafka's precedence (the first entity that sets the key):

    /users/U/clients/C, /users/U/clients/<default>, /users/U,
    /users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
    /clients/C, /clients/<default>

and clients share a quota as its entity says: a quota on ``user=U`` alone is shared by all
of U's clients; a default gives each user (or client id) its own.

Usage is measured as Kafka's ``Rate`` does (``quota.window.num`` samples of
``quota.window.size.seconds``; the window counts as at least num-1 samples long), and a
client over its quota is throttled for ``(rate - quota) / quota * window`` milliseconds, at
most one sample window for ``request_percentage`` and the whole sampled span for the byte
rates.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from streamkit.log.checkpoint import write_atomically

__all__ = [
    "CLIENT_ID",
    "QUOTA_KEYS",
    "USER",
    "ClientQuotas",
    "Entity",
    "QuotaError",
    "RateSensor",
    "entity",
    "matches",
]

USER: Final = "user"
CLIENT_ID: Final = "client-id"
PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
QUOTA_KEYS: Final = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
_FILE = "client-quotas.json"

# An entity: (entity type, name) pairs in the order user, client-id; name None is <default>.
Entity = tuple[tuple[str, str | None], ...]


class RemoteQuotas(Protocol):
    """Where a cluster keeps its quotas; it calls ``ClientQuotas.replace`` with what it holds."""

    async def change(self, changes: list[tuple[Entity, list[tuple[str, float | None]]]]) -> None: ...


class QuotaError(ValueError):
    """An entity or quota Kafka refuses (INVALID_REQUEST on the wire)."""


def entity(components: Iterable[tuple[str, str | None]]) -> Entity:
    """A checked entity from (type, name) pairs in any order."""
    seen: dict[str, str | None] = {}
    for kind, name in components:
        if kind not in (USER, CLIENT_ID):
            raise QuotaError(f"unsupported quota entity type {kind!r}: user or client-id")
        if kind in seen:
            raise QuotaError(f"the entity names {kind} twice")
        if name is not None and name == "":
            raise QuotaError(f"an empty {kind} name (null is the default entity)")
        seen[kind] = name
    if not seen:
        raise QuotaError("an entity needs a user, a client-id or both")
    return tuple((k, seen[k]) for k in (USER, CLIENT_ID) if k in seen)


def _precedence(user: str, client_id: str) -> list[Entity]:
    return [
        ((USER, user), (CLIENT_ID, client_id)), ((USER, user), (CLIENT_ID, None)), ((USER, user),),
        ((USER, None), (CLIENT_ID, client_id)), ((USER, None), (CLIENT_ID, None)), ((USER, None),),
        ((CLIENT_ID, client_id),), ((CLIENT_ID, None),),
    ]


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


@dataclass(slots=True)
class RateSensor:
    """Kafka's ``Rate`` over ``samples`` windows of ``window_ms``, per second."""

    samples: int
    window_ms: int
    _data: deque[_Sample] = field(default_factory=deque)

    def _purge(self, now_ms: int) -> None:
        horizon = now_ms - self.samples * self.window_ms
        while self._data and self._data[0].start_ms <= horizon:
            self._data.popleft()

    def record(self, value: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self._data or now_ms >= self._data[-1].start_ms + self.window_ms:
            self._data.append(_Sample(now_ms))
            if len(self._data) > self.samples:
                self._data.popleft()
        self._data[-1].value += value

    def elapsed_ms(self, now_ms: int) -> int:
        oldest = self._data[0].start_ms if self._data else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._data) * 1000 / self.elapsed_ms(now_ms)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """How long a client over ``bound`` waits: Kafka's ``(rate - bound) / bound * window``."""
        rate = self.rate(now_ms)
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * self.elapsed_ms(now_ms))


class ClientQuotas:
    def __init__(self, meta_dir: Path | None, samples: int = 11, window_s: int = 1) -> None:
        self.path = None if meta_dir is None else meta_dir / _FILE
        self.samples = samples
        self.window_ms = window_s * 1000
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._sensors: dict[tuple[str, str, str], RateSensor] = {}
        self._lock = threading.Lock()
        self.remote: RemoteQuotas | None = None

    # -- store -----------------------------------------------------------------------------

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        for e in json.loads(self.path.read_text()):
            self._quotas[entity((k, v) for k, v in e["entity"])] = {k: float(v) for k, v in e["values"].items()}

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = [{"entity": [list(c) for c in ent], "values": values} for ent, values in self._quotas.items()]
        write_atomically(self.path, json.dumps(data, indent=1).encode())

    @property
    def active(self) -> bool:
        return bool(self._quotas)

    @property
    def entries(self) -> dict[Entity, dict[str, float]]:
        return {ent: dict(values) for ent, values in self._quotas.items()}

    @staticmethod
    def check(ops: Iterable[tuple[str, float | None]]) -> None:
        for key, value in ops:
            if key not in QUOTA_KEYS:
                raise QuotaError(f"unsupported quota key {key!r}: one of {', '.join(QUOTA_KEYS)}")
            if value is not None and value <= 0:
                raise QuotaError(f"{key} must be positive, not {value}")

    def replace(self, entries: Mapping[Entity, Mapping[str, float]]) -> None:
        """All quotas, as the cluster's store holds them (not written locally)."""
        self._quotas = {ent: dict(values) for ent, values in entries.items() if values}
        self._sensors.clear()

    async def apply(self, changes: list[tuple[Entity, list[tuple[str, float | None]]]]) -> None:
        """AlterClientQuotas: into the cluster's store when there is one, else ``alter``."""
        if self.remote is not None:
            await self.remote.change(changes)
        else:
            self.alter(changes)

    def alter(self, changes: list[tuple[Entity, list[tuple[str, float | None]]]]) -> None:
        """Sets (value) or removes (None) each key of each entity; one durable write."""
        with self._lock:
            for ent, ops in changes:
                values = self._quotas.setdefault(ent, {})
                for key, value in ops:
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = value
                if not values:
                    del self._quotas[ent]
            self._sensors.clear()  # a changed quota may now group clients differently
            self._save()

    # -- enforcement -----------------------------------------------------------------------

    def quota(self, user: str, client_id: str, key: str) -> tuple[float, tuple[str, str, str]] | None:
        """The quota on ``key`` for this client and the sensor it shares, if any applies."""
        for ent in _precedence(user, client_id):
            values = self._quotas.get(ent)
            if values is not None and key in values:
                kinds = dict(ent)
                return values[key], (user if USER in kinds else "", client_id if CLIENT_ID in kinds else "", key)
        return None

    def max_throttle_ms(self, key: str) -> int:
        """Kafka's bound on one throttle: a sample window for the request quota
        (ClientRequestQuotaManager), the whole sampled span for the byte rates."""
        return self.window_ms if key == REQUEST_PERCENTAGE else self.window_ms * self.samples

    def record(self, user: str, client_id: str, key: str, value: float, now_ms: int) -> int:
        """Records usage; the throttle time (ms) the client now owes, 0 within its quota."""
        found = self.quota(user, client_id, key)
        if found is None:
            return 0
        bound, sensor_key = found
        sensor = self._sensors.get(sensor_key)
        if sensor is None:
            sensor = self._sensors[sensor_key] = RateSensor(self.samples, self.window_ms)
        sensor.record(value, now_ms)
        return min(sensor.throttle_ms(bound, now_ms), self.max_throttle_ms(key))


def matches(ent: Entity, filters: Mapping[str, tuple[int, str | None]], strict: bool) -> bool:
    """DescribeClientQuotas' filter: per entity type, EXACT (0) a name, DEFAULT (1) or
    SPECIFIED (2) any non-default name; ``strict`` wants no other entity types."""
    kinds = dict(ent)
    if strict and set(kinds) != set(filters):
        return False
    for kind, (match_type, name) in filters.items():
        if kind not in kinds:
            return False
        value = kinds[kind]
        if (match_type == 0 and value != name) or (match_type == 1 and value is not None) \
                or (match_type == 2 and value is None):
            return False
    return True
