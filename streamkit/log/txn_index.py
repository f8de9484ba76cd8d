"""The transaction index of one segment: the aborted transactions whose ABORT marker it holds.

A read_committed fetch must tell the client which producers' records in the returned range
were aborted (``aborted_transactions``: producer id and first offset), so that the client
skips them. Finding that by decoding batches would put record work on the fetch path, so,
as in Kafka, every ABORT marker appended to a segment adds one entry to the segment's
``{base_offset:020d}.txnindex`` file, and a fetch reads the (few) entries instead.

Entry layout (34 bytes, big-endian, Kafka's own)::

    version int16 (0)  producer_id int64  first_offset int64  last_offset int64
    last_stable_offset int64

``first_offset`` is the transaction's first offset in this partition, ``last_offset`` the
offset of its ABORT marker, ``last_stable_offset`` the partition's LSO once the marker was
written: when an entry's LSO is past a fetch's upper bound, every transaction that began
below that bound has ended, so no later segment can hold a marker the fetch needs.

The file is created with the first entry, so partitions without aborted transactions have
none. Entries are appended in marker order; a torn tail (less than a whole entry) is cut on
load, and recovery rebuilds the entries of the replayed range (see ``PartitionLog.open``).
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Final, NamedTuple

__all__ = ["AbortedTxn", "TxnIndex", "collect_aborted", "txn_index_path"]

_ENTRY: Final = struct.Struct(">hqqqq")
_VERSION: Final = 0
SUFFIX: Final = ".txnindex"


def txn_index_path(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / f"{base_offset:020d}{SUFFIX}{suffix}"


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


_LAST_OFFSET = attrgetter("last_offset")


class TxnIndex:
    """The entries of one segment, kept in memory and appended to the file."""

    def __init__(self, path: Path, entries: list[AbortedTxn] | None = None) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = entries or []

    @classmethod
    def load(cls, path: Path) -> TxnIndex:
        """Read the file (absent: no entries); a partial last entry is cut."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path)
        whole = len(data) - len(data) % _ENTRY.size
        entries = []
        for pos in range(0, whole, _ENTRY.size):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != _VERSION:
                whole = pos
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        if whole != len(data):
            os.truncate(path, whole)
        return cls(path, entries)

    def append(self, entry: AbortedTxn, fsync: bool = False) -> None:
        self.entries.append(entry)
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(_VERSION, *entry))
            if fsync:
                f.flush()
                os.fsync(f.fileno())

    def truncate_from(self, offset: int) -> None:
        """Drop the entries whose marker is at or past ``offset`` (their batches are gone or
        about to be replayed)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.rewrite(keep)

    def rewrite(self, entries: Iterable[AbortedTxn]) -> None:
        self.entries = list(entries)
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(_ENTRY.pack(_VERSION, *e) for e in self.entries))
        os.replace(tmp, self.path)

    def delete(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)


def collect_aborted(indexes: Sequence[TxnIndex], start: int, upper: int) -> list[AbortedTxn]:
    """The aborted transactions that overlap the offsets [start, upper), from the indexes of
    the segments holding ``start`` and everything after it (oldest first)."""
    out: list[AbortedTxn] = []
    for index in indexes:
        # Entries are in marker order: skip those whose marker lies below ``start`` at once.
        first = bisect_left(index.entries, start, key=_LAST_OFFSET)
        for entry in index.entries[first:]:
            if entry.first_offset < upper:
                out.append(entry)
            if entry.last_stable_offset >= upper:
                return out
    return out
