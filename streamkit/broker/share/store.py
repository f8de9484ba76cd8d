"""Durable share-partition state in the compacted internal topic ``__share_group_state``.

Each state change of a share-partition appends one record:

    key   int16 version (0) + UTF-8 "group \\0 topic \\0 partition"
    value JSON: {"topic_id", "start_offset", "end_offset", "state_epoch",
                 "runs": [[first, last, state, delivery_count], ...]}   (null: deleted)

The value is a full snapshot of the in-flight window, which stays small (it is bounded by
the in-flight limit and stored as runs), so compaction keeps exactly one record per
share-partition and a reload is one replay with the last value winning. The record is
appended before the response that reports the change is sent, so an acknowledged record is
never redelivered after a crash; an acquisition is persisted with its delivery count but as
AVAILABLE (a lock does not survive a restart).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from streamkit.broker.group.records import partition_for_group
from streamkit.log.records import Record, build_batch

__all__ = ["SHARE_STATE_TOPIC", "ShareKey", "ShareStateStore"]

SHARE_STATE_TOPIC = "__share_group_state"
_VERSION = struct.Struct(">h")

ShareKey = tuple[str, str, int]  # group, topic, partition


class _Log(Protocol):
    def append(self, partition: int, batch: bytes) -> None: ...

    def records(self, partition: int) -> Iterable[Record]: ...


def encode_key(key: ShareKey) -> bytes:
    group, topic, partition = key
    return _VERSION.pack(0) + f"{group}\0{topic}\0{partition}".encode()


def decode_key(raw: bytes) -> ShareKey | None:
    if len(raw) < 2 or _VERSION.unpack_from(raw)[0] != 0:
        return None
    group, topic, partition = raw[2:].decode().split("\0")
    return group, topic, int(partition)


class ShareStateStore:
    def __init__(self, log: _Log, partitions: int, clock: Callable[[], int]) -> None:
        self.log = log
        self.partitions = partitions
        self.clock = clock

    def _partition(self, group: str) -> int:
        return partition_for_group(group, self.partitions)

    def write(self, key: ShareKey, value: dict[str, Any] | None) -> None:
        data = None if value is None else json.dumps(value, separators=(",", ":")).encode()
        batch = build_batch([Record(encode_key(key), data, self.clock())])
        self.log.append(self._partition(key[0]), batch)

    def load(self) -> dict[ShareKey, dict[str, Any]]:
        """The latest state of every share-partition (deleted ones left out)."""
        out: dict[ShareKey, dict[str, Any]] = {}
        for p in range(self.partitions):
            for record in self.log.records(p):
                key = decode_key(record.key or b"")
                if key is None:
                    continue
                if record.value is None:
                    out.pop(key, None)
                else:
                    out[key] = json.loads(record.value)
        return out
