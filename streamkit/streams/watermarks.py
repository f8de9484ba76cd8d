"""Event-time watermarks: what "now" is for windows, grace, sessions and joins.

Flink's model, carried through repartition topics in-band:

* The watermark of a partition of an external topic is the largest record timestamp seen on
  it (Kafka's per-partition stream time).
* A task that writes to a repartition topic stamps every record with the header
  ``__streamkit.wm``: which partition of its input it comes from and that partition's
  watermark. When it has nothing to send to some partition of the repartition topic, it
  still sends it a *watermark-only* record (no key, no value, kind ``MARK``) once the
  watermark moved, after each batch, so downstream partitions hear of progress at least once
  per commit.
* A task reading partition r of a repartition topic keeps one watermark per upstream
  partition (their number is the upstream topic's partition count) and its stream time is
  their *minimum*: a far-future record on one upstream partition closes nothing until the
  others have caught up, so a backlog drained one partition after the other gives the same
  results as the batch computation.
* An upstream partition that never had a record (an empty source partition) would hold the
  minimum forever: its writer marks it ``IDLE`` once it is caught up, and it is left out
  until it sends data. With ``window.idle.close.ms`` any input that has not moved for that
  long (wall clock) is left out too; when every input is idle, stream time follows the wall
  clock from the last watermark.
* Lateness is per record and relative to the record's own upstream partition: a record is
  late when its window closed by its own partition's watermark (``own``), which the header
  carries along every hop. Whether a record is late therefore depends only on the order of
  its own partition, never on how partitions interleave.

Everything here is pure: the clock (wall milliseconds) is an argument.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamkit.streams.windows import MIN_TIMESTAMP

__all__ = [
    "DATA",
    "IDLE",
    "MARK",
    "WM_HEADER",
    "InputClock",
    "Stamp",
    "carries_data",
    "decode_stamp",
    "encode_stamp",
    "unpack_stamp",
]

WM_HEADER = "__streamkit.wm"

DATA = 0  # a data record; own watermark equals the sender's watermark
DATA_OWN = 2  # a data record whose own-partition watermark differs from the sender's
MARK = 1  # watermark only: not data
IDLE = 3  # the sender's partition is empty and caught up: leave it out of the minimum

# kind, upstream partition, watermark [, own watermark]
_STAMP = struct.Struct(">biq")
_OWN = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class Stamp:
    kind: int
    partition: int
    watermark: int
    own: int

    @property
    def is_data(self) -> bool:
        return self.kind in (DATA, DATA_OWN)


def encode_stamp(kind: int, partition: int, watermark: int, own: int | None = None) -> bytes:
    if kind == DATA and own is not None and own != watermark:
        return _STAMP.pack(DATA_OWN, partition, watermark) + _OWN.pack(own)
    return _STAMP.pack(kind, partition, watermark)


def unpack_stamp(raw: bytes) -> tuple[int, int, int, int]:
    """(kind, partition, watermark, own): ``decode_stamp`` without the object, per record."""
    kind, partition, watermark = _STAMP.unpack_from(raw)
    return kind, partition, watermark, _OWN.unpack_from(raw, _STAMP.size)[0] if kind == DATA_OWN else watermark


def carries_data(headers: Sequence[tuple[str, bytes]] | None) -> bool:
    """Whether a consumed record is data: anything but a watermark-only record (``MARK``,
    ``IDLE``), which has nothing to deserialize."""
    if not headers or headers[-1][0] != WM_HEADER:
        return True
    return _STAMP.unpack_from(headers[-1][1])[0] not in (MARK, IDLE)


def decode_stamp(raw: bytes) -> Stamp:
    kind, partition, watermark = _STAMP.unpack_from(raw)
    own = _OWN.unpack_from(raw, _STAMP.size)[0] if kind == DATA_OWN else watermark
    return Stamp(kind, partition, watermark, own)


class InputClock:
    """Stream time of one consumed topic partition: the minimum watermark over the upstream
    partitions feeding it (``upstream`` of them; ``None`` for an external topic, whose one
    input is the partition itself, keyed ``0``).

    ``value(now_wall, idle_ms)`` never goes back: an input that comes back from idleness
    behind the others holds stream time where it is until it catches up."""

    __slots__ = ("_last", "idle", "marks", "moved", "started", "upstream")

    def __init__(self, upstream: int | None, now_wall: int) -> None:
        self.upstream = upstream
        self.marks: dict[int, int] = {}
        self.moved: dict[int, int] = {}  # input -> wall ms its watermark last advanced
        self.idle: set[int] = set()  # inputs that declared themselves empty
        self.started = now_wall
        self._last = MIN_TIMESTAMP

    def inputs(self) -> Iterable[int]:
        return range(self.upstream) if self.upstream else (0,)

    def observe(self, source: int, watermark: int, now_wall: int) -> int:
        """An input's watermark (a record's timestamp for an external topic); returns the
        input's watermark after it."""
        self.idle.discard(source)
        old = self.marks.get(source, MIN_TIMESTAMP)
        if watermark > old:
            self.marks[source] = watermark
            self.moved[source] = now_wall
            return watermark
        return old

    def mark_idle(self, source: int) -> None:
        if source not in self.marks:
            self.idle.add(source)

    def value(self, now_wall: int, idle_ms: int = 0) -> int:
        low: int | None = None
        drifting = MIN_TIMESTAMP
        for i in self.inputs():
            if i in self.idle:
                continue
            mark = self.marks.get(i, MIN_TIMESTAMP)
            if idle_ms:
                since = self.moved.get(i, self.started)
                if now_wall - since >= idle_ms:
                    if mark != MIN_TIMESTAMP:
                        drifting = max(drifting, mark + (now_wall - since))
                    continue
            low = mark if low is None else min(low, mark)
        if low is None:  # every input idle: follow the wall clock from the last watermark
            low = drifting
        if low > self._last:
            self._last = low
        return self._last

    def lag(self, now_wall: int, idle_ms: int = 0) -> int:
        """How far stream time is behind the furthest input (ms): what the slowest input holds back."""
        if not self.marks:
            return 0
        return max(0, max(self.marks.values()) - self.value(now_wall, idle_ms))

    # -- persistence (with the state of the operators it feeds) --------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"marks": {str(k): v for k, v in self.marks.items()}, "last": self._last}

    def restore(self, saved: Mapping[str, Any], now_wall: int) -> None:
        """Merge what an operator stored (watermarks only grow, so the larger wins); the
        idle clock of a restored input starts now."""
        for key, mark in saved.get("marks", {}).items():
            i = int(key)
            if mark > self.marks.get(i, MIN_TIMESTAMP):
                self.marks[i] = mark
                self.moved[i] = now_wall
                self.idle.discard(i)
        self._last = max(self._last, int(saved.get("last", MIN_TIMESTAMP)))
