"""Sparse offset and time indexes of one segment.

Both live in memory as sorted lists (bisect) and are appended to their files on flush, roll
and close; after an unclean shutdown the segments past the recovery point rebuild them from
the log, so an index file never has to be written before the data it points to.

    .index      entries of 8 bytes:  relativeOffset int32, position int32
                maps the base offset of a batch to its byte position in the .log file
    .timeindex  entries of 12 bytes: timestamp int64, relativeOffset int32
                "every batch before the one at relativeOffset has records no newer than
                timestamp, and that batch holds a record with it"; added when the segment's
                max timestamp grows
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left, bisect_right
from pathlib import Path

__all__ = ["OffsetIndex", "TimeIndex"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _read_entries(path: Path, entry: struct.Struct) -> list[tuple[int, ...]] | None:
    """All entries of an index file, or None when it is missing or torn."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) % entry.size:
        return None
    return list(entry.iter_unpack(data))


def _write_entries(path: Path, entry: struct.Struct, rows: list[tuple[int, int]], mode: str,
                   fsync: bool) -> None:
    with open(path, mode) as f:
        f.write(b"".join(entry.pack(*row) for row in rows))
        if fsync:
            f.flush()
            os.fsync(f.fileno())


class OffsetIndex:
    """Base offset of a batch -> byte position, one entry per ``index.interval.bytes``."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.offsets: list[int] = []
        self.positions: list[int] = []
        self._persisted = 0

    @classmethod
    def load(cls, path: Path, base_offset: int, log_size: int) -> OffsetIndex | None:
        """Load and sanity-check an index; None means it must be rebuilt from the log."""
        rows = _read_entries(path, _OFFSET_ENTRY)
        if rows is None:
            return None
        index = cls(path, base_offset)
        last_pos = -1
        for rel, pos in rows:
            if rel < 0 or pos <= last_pos or pos >= log_size:
                return None
            if index.offsets and base_offset + rel <= index.offsets[-1]:
                return None
            index.offsets.append(base_offset + rel)
            index.positions.append(pos)
            last_pos = pos
        index._persisted = len(rows)
        return index

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, offset: int, position: int) -> None:
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch starting at or before ``offset`` (0 if none)."""
        i = bisect_right(self.offsets, offset)
        return self.positions[i - 1] if i else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position``."""
        i = bisect_left(self.positions, position)
        if i < len(self.positions):
            del self.offsets[i:], self.positions[i:]
            self._persisted = min(self._persisted, i)
            self.rewrite(fsync=False)

    def flush(self, fsync: bool) -> None:
        rows = [
            (self.offsets[i] - self.base_offset, self.positions[i])
            for i in range(self._persisted, len(self.offsets))
        ]
        if rows or fsync or not self.path.exists():
            _write_entries(self.path, _OFFSET_ENTRY, rows, "ab", fsync)
        self._persisted = len(self.offsets)

    def rewrite(self, fsync: bool) -> None:
        rows = [(o - self.base_offset, p) for o, p in zip(self.offsets, self.positions, strict=True)]
        _write_entries(self.path, _OFFSET_ENTRY, rows, "wb", fsync)
        self._persisted = len(rows)


class TimeIndex:
    """Max timestamp so far -> base offset of the batch that reached it."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.offsets: list[int] = []
        self._persisted = 0

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TimeIndex | None:
        rows = _read_entries(path, _TIME_ENTRY)
        if rows is None:
            return None
        index = cls(path, base_offset)
        for ts, rel in rows:
            if rel < 0 or (index.timestamps and ts <= index.timestamps[-1]):
                return None
            if index.offsets and base_offset + rel <= index.offsets[-1]:
                return None
            index.timestamps.append(ts)
            index.offsets.append(base_offset + rel)
        index._persisted = len(rows)
        return index

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def max_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if not self.timestamps or timestamp > self.timestamps[-1]:
            self.timestamps.append(timestamp)
            self.offsets.append(offset)

    def lookup(self, timestamp: int) -> int | None:
        """Offset to start scanning from for the first record with ts >= ``timestamp``:
        the last entry strictly older than it (None: scan from the segment's start)."""
        i = bisect_left(self.timestamps, timestamp)
        return self.offsets[i - 1] if i else None

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for batches at or past ``offset``."""
        i = bisect_left(self.offsets, offset)
        if i < len(self.offsets):
            del self.timestamps[i:], self.offsets[i:]
            self._persisted = min(self._persisted, i)
            self.rewrite(fsync=False)

    def flush(self, fsync: bool) -> None:
        rows = [
            (self.timestamps[i], self.offsets[i] - self.base_offset)
            for i in range(self._persisted, len(self.offsets))
        ]
        if rows or fsync or not self.path.exists():
            _write_entries(self.path, _TIME_ENTRY, rows, "ab", fsync)
        self._persisted = len(self.offsets)

    def rewrite(self, fsync: bool) -> None:
        rows = [(t, o - self.base_offset) for t, o in zip(self.timestamps, self.offsets, strict=True)]
        _write_entries(self.path, _TIME_ENTRY, rows, "wb", fsync)
        self._persisted = len(rows)
