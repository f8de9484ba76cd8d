"""Durable share-partition state in the compacted internal topic ``__share_group_state``.

Two kinds of records, both keyed so that compaction keeps what a reload needs:

    snapshot  key   int16 0 + UTF-8 "group \\0 topic \\0 partition"
              value JSON {"snapshot_id", "topic_id", "start_offset", "end_offset",
                          "state_epoch", "runs": [[first, last, state, delivery_count], ...]}
    delta     key   int16 1 + UTF-8 "group \\0 topic \\0 partition \\0 seq"
              value JSON {"snapshot_id", "start_offset", "end_offset", "runs": [...]}
    (a null snapshot value deletes the share-partition)

A state change appends a delta holding only the offsets that changed; every
``share.coordinator.snapshot.update.records.per.snapshot`` deltas (Kafka's name and
default) a full snapshot follows, with a new random ``snapshot_id``. Deltas are numbered
0..N-1 after each snapshot, so a share-partition has at most N + 1 live keys and
compaction keeps the newest of each; a reload takes the snapshot and replays, in order,
the deltas carrying its id (older cycles' deltas carry another id and are skipped). The
record is appended before the response that reports the change is sent, so an accepted
record is never redelivered after a crash; an acquisition is persisted with its delivery
count but as AVAILABLE (a lock does not survive a restart).
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from streamkit.broker.group.records import partition_for_group
from streamkit.log.records import Record, build_batch

__all__ = ["SHARE_STATE_TOPIC", "SNAPSHOT_EVERY", "ShareKey", "ShareStateStore"]

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_EVERY = 500  # share.coordinator.snapshot.update.records.per.snapshot
_VERSION = struct.Struct(">h")
_SNAPSHOT = 0
_DELTA = 1

ShareKey = tuple[str, str, int]  # group, topic, partition


class _Log(Protocol):
    def append(self, partition: int, batch: bytes) -> int | None: ...

    def records(self, partition: int) -> Iterable[Record]: ...


def encode_key(key: ShareKey, seq: int | None = None) -> bytes:
    group, topic, partition = key
    if seq is None:
        return _VERSION.pack(_SNAPSHOT) + f"{group}\0{topic}\0{partition}".encode()
    return _VERSION.pack(_DELTA) + f"{group}\0{topic}\0{partition}\0{seq}".encode()


def decode_key(raw: bytes) -> tuple[ShareKey, int | None] | None:
    """(share key, delta seq or None for a snapshot); None for a key of another kind."""
    if len(raw) < 2:
        return None
    kind = _VERSION.unpack_from(raw)[0]
    parts = raw[2:].decode().split("\0")
    if kind == _SNAPSHOT and len(parts) == 3:
        return (parts[0], parts[1], int(parts[2])), None
    if kind == _DELTA and len(parts) == 4:
        return (parts[0], parts[1], int(parts[2])), int(parts[3])
    return None


@dataclass(slots=True)
class _Cycle:
    snapshot_id: str
    deltas: int = 0


@dataclass(slots=True)
class Loaded:
    """A share-partition as stored: its snapshot and the deltas to replay over it."""

    snapshot: dict[str, Any]
    deltas: list[dict[str, Any]] = field(default_factory=list)


class ShareStateStore:
    def __init__(self, log: _Log, partitions: int, clock: Callable[[], int],
                 snapshot_every: int = SNAPSHOT_EVERY) -> None:
        self.log = log
        self.partitions = partitions
        self.clock = clock
        self.snapshot_every = snapshot_every
        self._cycles: dict[ShareKey, _Cycle] = {}
        self._batch: dict[int, list[Record]] | None = None  # per partition, while batch()

    def partition_for(self, group: str) -> int:
        """The partition of ``__share_group_state`` holding ``group``'s share-partitions."""
        return partition_for_group(group, self.partitions)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Append the records written inside as one batch per partition, at the end."""
        if self._batch is not None:
            yield
            return
        self._batch = {}
        try:
            yield
        finally:
            batches, self._batch = self._batch, None
            for partition, records in batches.items():
                self.log.append(partition, build_batch(records))

    def _append(self, group: str, key: bytes, value: dict[str, Any] | None) -> None:
        data = None if value is None else json.dumps(value, separators=(",", ":")).encode()
        record = Record(key, data, self.clock())
        if self._batch is not None:
            self._batch.setdefault(self.partition_for(group), []).append(record)
        else:
            self.log.append(self.partition_for(group), build_batch([record]))

    def needs_snapshot(self, key: ShareKey) -> bool:
        cycle = self._cycles.get(key)
        return cycle is None or cycle.deltas >= self.snapshot_every

    def write_snapshot(self, key: ShareKey, value: dict[str, Any]) -> None:
        cycle = _Cycle(uuid.uuid4().hex)
        self._append(key[0], encode_key(key), {"snapshot_id": cycle.snapshot_id, **value})
        self._cycles[key] = cycle

    def write_delta(self, key: ShareKey, value: dict[str, Any]) -> None:
        cycle = self._cycles[key]
        self._append(key[0], encode_key(key, cycle.deltas), {"snapshot_id": cycle.snapshot_id, **value})
        cycle.deltas += 1

    def delete(self, key: ShareKey) -> None:
        self._append(key[0], encode_key(key), None)
        self._cycles.pop(key, None)

    def forget(self, partition: int) -> None:
        """Drop what is known of the share-partitions stored in ``partition`` (another
        coordinator owns it now)."""
        for key in [k for k in self._cycles if self.partition_for(k[0]) == partition]:
            del self._cycles[key]

    def load(self, partition: int | None = None) -> dict[ShareKey, Loaded]:
        """Every share-partition stored in ``partition`` (None: in every partition), deleted
        ones left out."""
        snapshots: dict[ShareKey, dict[str, Any] | None] = {}
        deltas: dict[tuple[ShareKey, int], dict[str, Any]] = {}
        for p in range(self.partitions) if partition is None else (partition,):
            for record in self.log.records(p):
                decoded = decode_key(record.key or b"")
                if decoded is None:
                    continue
                key, seq = decoded
                value = None if record.value is None else json.loads(record.value)
                if seq is None:
                    snapshots[key] = value
                elif value is not None:
                    deltas[(key, seq)] = value
        out: dict[ShareKey, Loaded] = {}
        for key, snap in snapshots.items():
            if snap is None:
                continue
            sid = snap.get("snapshot_id")
            mine = sorted((seq, d) for (k, seq), d in deltas.items() if k == key and d.get("snapshot_id") == sid)
            out[key] = Loaded(snap, [d for _seq, d in mine])
            self._cycles[key] = _Cycle(str(sid), len(mine))
        return out
