"""One store for one (table, partition): a backend plus the changelog offset it mirrors.

Physical key layout inside the backend (one byte of namespace, so metadata can never
collide with a user key and a full scan of user data is one bounded range):

* ``b"\\x00" + name``  metadata: ``changelog-offset`` (8-byte big-endian signed, the last
  changelog offset whose record is reflected in the data) and ``identity`` (JSON: layout
  format and the changelog topic-partition, checked at open).
* ``b"\\x01" + key``   user data, keys as the transaction / changelog see them.

Every data write carries the offset it brings the store to in the *same* backend batch,
so after a crash data and offset are always in step; restore resumes after that offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from itertools import islice
from types import TracebackType
from typing import NamedTuple, TypeAlias

import orjson

from streamkit.state.backend import Change, KVBackend
from streamkit.state.errors import (
    InvalidChangelogOffsetError,
    StoreClosedError,
    StoreIdentityError,
    TransactionStateError,
)
from streamkit.state.transaction import Transaction

__all__ = ["FORMAT_VERSION", "ChangelogPartition", "ChangelogRecord", "StorePartition"]

FORMAT_VERSION = 1

_META = b"\x00"
_DATA = b"\x01"
_DATA_END = b"\x02"  # exclusive upper bound of the data namespace
_OFFSET_KEY = _META + b"changelog-offset"
_IDENTITY_KEY = _META + b"identity"

_OFFSET = struct.Struct(">q")

ChangelogRecord: TypeAlias = tuple[bytes, bytes | None, int]
"""``(key, value, offset)`` as consumed from the changelog; a ``None`` value deletes."""


class ChangelogPartition(NamedTuple):
    """The changelog topic-partition a store partition mirrors."""

    topic: str
    partition: int


class StorePartition:
    """Owns a backend: opens transactions on it and restores it from the changelog.

    At most one transaction is open at a time; the partition is single-writer, which is
    what lets a transaction buffer writes without any conflict detection.
    """

    def __init__(self, backend: KVBackend, changelog: ChangelogPartition | None = None) -> None:
        self._backend = backend
        self._changelog = changelog
        self._closed = False
        self._active: Transaction | None = None
        self._check_identity()
        raw = backend.get(_OFFSET_KEY)
        self._offset: int | None = None if raw is None else _OFFSET.unpack(raw)[0]

    def __enter__(self) -> StorePartition:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def backend(self) -> KVBackend:
        return self._backend

    @property
    def changelog(self) -> ChangelogPartition | None:
        return self._changelog

    @property
    def changelog_offset(self) -> int | None:
        """The last changelog offset reflected in the data (None: nothing applied yet).
        Restore consumes from ``changelog_offset + 1``."""
        return self._offset

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_transaction(self) -> bool:
        return self._active is not None

    def begin(self) -> Transaction:
        """Open the transaction for the next commit interval."""
        self._check_open()
        if self._active is not None:
            raise TransactionStateError("this partition already has an open transaction")
        tx = Transaction(self)
        self._active = tx
        return tx

    def get(self, key: bytes) -> bytes | None:
        """The committed value of ``key`` (not seeing any open transaction's writes)."""
        if self._closed:
            raise StoreClosedError("store partition is closed")
        return self._backend.get(_DATA + key)

    def iter_range(
        self, lo: bytes = b"", hi: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Committed items with ``lo <= key < hi`` (no upper bound if ``hi`` is None)."""
        self._check_open()
        items = self._backend.iter_range(
            _DATA + lo, _DATA_END if hi is None else _DATA + hi, reverse
        )
        return ((key[1:], value) for key, value in items)

    def write(self, changes: Iterable[Change], changelog_offset: int | None = None) -> None:
        """Apply ``changes`` and move the changelog offset, in one atomic backend write.

        ``changelog_offset=None`` leaves the stored offset alone. Restore then replays
        records the data already reflects, which is harmless: applying a changelog is
        idempotent per key, last write wins.
        """
        self._check_open()
        self._check_offset(changelog_offset)
        last = None if changelog_offset is None else (_OFFSET_KEY, _OFFSET.pack(changelog_offset))
        self._backend.write_prefixed(_DATA, changes, last)
        if changelog_offset is not None:
            self._offset = changelog_offset

    def apply_changelog(self, records: Iterable[ChangelogRecord], batch_size: int = 10_000) -> int:
        """Restore: apply changelog records in offset order; returns how many were applied.

        ``records`` must come in ascending offset order, as consumed from the changelog
        partition. Records at or below the offset already applied are skipped, so the
        runtime may re-feed an overlapping range (after a crash, or a retried fetch). Each
        ``batch_size`` records are one backend write together with their last offset, so an
        interrupted restore resumes where its last complete batch ended.
        """
        self._check_open()
        if self._active is not None:
            raise TransactionStateError("cannot restore while a transaction is open")
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        backend_write = self._backend.write_prefixed
        last = -1 if self._offset is None else self._offset
        applied = 0
        for chunk in _batches(records, batch_size):
            # Offsets ascend (one partition, consumed in order), so comparing the ends of a
            # chunk decides for all of it; only a chunk straddling the applied offset is
            # filtered. Keeps the per-record work to a list comprehension.
            if chunk[-1][2] <= last:
                continue
            if chunk[0][2] <= last:
                chunk = [record for record in chunk if record[2] > last]
            last = chunk[-1][2]
            backend_write(_DATA, chunk, (_OFFSET_KEY, _OFFSET.pack(last)))
            self._offset = last
            applied += len(chunk)
        return applied

    def close(self) -> None:
        """Close the backend (data stays). An open transaction is rolled back."""
        if self._closed:
            return
        if self._active is not None:
            self._active.rollback()
        self._closed = True
        self._backend.close()

    def destroy(self) -> None:
        """Close and delete the data (e.g. after ``StoreIdentityError``, or to re-restore)."""
        if self._active is not None:
            self._active.rollback()
        self._closed = True
        self._backend.destroy()

    def _release(self, tx: Transaction) -> None:
        # Called by the transaction when it commits, rolls back or fails.
        if self._active is tx:
            self._active = None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("store partition is closed")

    def _check_offset(self, offset: int | None) -> None:
        if offset is None:
            return
        if offset < 0:
            raise InvalidChangelogOffsetError(f"changelog offset {offset} is negative")
        if self._offset is not None and offset < self._offset:
            raise InvalidChangelogOffsetError(
                f"changelog offset {offset} is below the stored offset {self._offset}"
            )

    def _check_identity(self) -> None:
        raw = self._backend.get(_IDENTITY_KEY)
        changelog = None if self._changelog is None else list(self._changelog)
        if raw is None:
            identity = {"format": FORMAT_VERSION, "changelog": changelog}
            self._backend.write([(_IDENTITY_KEY, orjson.dumps(identity))])
            return
        stored = orjson.loads(raw)
        if stored.get("format") != FORMAT_VERSION:
            raise StoreIdentityError(
                f"store format {stored.get('format')!r}, expected {FORMAT_VERSION}"
            )
        # Opening without naming a changelog (inspection, tools) accepts any store.
        if changelog is not None and stored.get("changelog") != changelog:
            raise StoreIdentityError(
                f"store mirrors changelog {stored.get('changelog')!r}, not {changelog!r}"
            )


def _batches(records: Iterable[ChangelogRecord], size: int) -> Iterator[list[ChangelogRecord]]:
    """``records`` in lists of ``size``; a list that fits is passed on as it is (restore
    hands over such chunks, and copying them is a measurable part of the per-record cost)."""
    if isinstance(records, list) and len(records) <= size:
        if records:
            yield records
        return
    it = iter(records)
    while chunk := list(islice(it, size)):
        yield chunk
