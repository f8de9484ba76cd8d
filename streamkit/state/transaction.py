"""A transaction: the writes of one commit interval, buffered over a store partition.

Writes go to an in-memory cache (``key -> value``, ``None`` marking a delete), so a record
costs a dict operation, not a backend write. Reads see the cache first (read-your-writes),
range scans merge it with the backend. At the end of the interval the runtime takes
``changelog_records()`` (net changes, one per key) to produce to the changelog, then
``commit(offset)`` writes the cache and that offset in one atomic backend batch.

Lifecycle: OPEN -> (changelog_records) PREPARED -> COMMITTED; or ROLLED_BACK from OPEN or
PREPARED; FAILED if the commit write raised. Only OPEN accepts writes: once the changelog
records are taken, a later write would reach the store but never the changelog.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import NoReturn, Protocol

from streamkit.state.backend import Change
from streamkit.state.errors import TransactionStateError
from streamkit.state.sortedkeys import SortedKeys

__all__ = ["PartitionStore", "Transaction", "TransactionStatus"]


class PartitionStore(Protocol):
    """What a transaction needs of the store partition under it (``partition.StorePartition``):
    committed reads, the atomic write of a commit, and ending its turn."""

    def get(self, key: bytes) -> bytes | None: ...

    def iter_range(self, lo: bytes = b"", hi: bytes | None = None,
                   reverse: bool = False) -> Iterator[tuple[bytes, bytes]]: ...

    def write(self, changes: Iterable[Change], changelog_offset: int | None = None) -> None: ...

    def begin(self) -> Transaction: ...

    def _release(self, tx: Transaction) -> None: ...


class TransactionStatus(enum.Enum):
    OPEN = "open"
    PREPARED = "prepared"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    FAILED = "failed"


class _Missing(enum.Enum):
    TOKEN = 0


_MISSING = _Missing.TOKEN


class Transaction:
    """Buffered reads and writes over one store partition (``StorePartition``); get one from ``begin()``."""

    __slots__ = ("_cache", "_cache_bytes", "_index", "_partition", "_readable", "_status", "_writable")

    def __init__(self, partition: PartitionStore) -> None:
        self._partition = partition
        self._cache: dict[bytes, bytes | None] = {}
        # The cache's keys in order, built on the first range scan only: a transaction
        # that never scans pays nothing for it.
        self._index: SortedKeys | None = None
        # Key and value bytes held by the cache (statestore.cache.max.bytes is checked
        # against the sum over a worker's transactions).
        self._cache_bytes = 0
        self._status = TransactionStatus.OPEN
        # Plain booleans for the per-record checks (cheaper than comparing the status).
        self._writable = True
        self._readable = True

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Committing is always explicit (it needs the changelog offset): leaving the block
        # without it discards the writes.
        self.rollback()

    @property
    def status(self) -> TransactionStatus:
        return self._status

    @property
    def partition(self) -> PartitionStore:
        return self._partition

    @property
    def pending(self) -> int:
        """How many keys the transaction has written (sets and deletes)."""
        return len(self._cache)

    @property
    def cache_bytes(self) -> int:
        """Bytes of the keys and values the transaction holds (a delete counts its key)."""
        return self._cache_bytes

    def get(self, key: bytes) -> bytes | None:
        if not self._readable:
            self._refuse("read")
        value = self._cache.get(key, _MISSING)
        if value is _MISSING:
            return self._partition.get(key)
        return value

    def exists(self, key: bytes) -> bool:
        return self.get(key) is not None

    def set(self, key: bytes, value: bytes) -> None:
        if not self._writable:
            self._refuse("write")
        cache = self._cache
        old = cache.get(key, _MISSING)
        if old is _MISSING:
            if self._index is not None:
                self._index.add(key)
            self._cache_bytes += len(key) + len(value)
        else:
            self._cache_bytes += len(value) - (0 if old is None else len(old))
        cache[key] = value

    def delete(self, key: bytes) -> None:
        if not self._writable:
            self._refuse("write")
        cache = self._cache
        old = cache.get(key, _MISSING)
        if old is _MISSING:
            if self._index is not None:
                self._index.add(key)
            self._cache_bytes += len(key)
        elif old is not None:
            self._cache_bytes -= len(old)
        # The tombstone stays in the cache: it hides the stored value from reads and scans,
        # and becomes the changelog's delete record.
        cache[key] = None

    def iter_range(
        self, lo: bytes = b"", hi: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Items with ``lo <= key < hi`` (no upper bound if ``hi`` is None) as this
        transaction sees them: its writes merged over the committed data.

        The transaction's own writes are taken as of this call; writing while iterating is
        allowed but those writes may or may not show up in the running scan.
        """
        if not self._readable:
            self._refuse("read")
        stored = self._partition.iter_range(lo, hi, reverse)
        if not self._cache:
            return stored
        if self._index is None:
            self._index = SortedKeys(list(self._cache))
        keys = self._index.range(lo, hi)
        if not keys:
            return stored
        cache = self._cache
        cached = [(key, cache[key]) for key in keys]
        if reverse:
            cached.reverse()
        return _merge(stored, cached, reverse)

    def changelog_records(self) -> list[tuple[bytes, bytes | None]]:
        """The net changes, one ``(key, value)`` per written key (``None``: delete), in the
        order keys were first written. Takes the transaction to PREPARED: no more writes.

        A key set and then deleted within the transaction still yields a delete even if it
        never existed in the store: harmless, and knowing would cost a read per delete.
        """
        if self._status is TransactionStatus.OPEN:
            self._status = TransactionStatus.PREPARED
            self._writable = False
        elif self._status is not TransactionStatus.PREPARED:
            self._refuse("produce the changelog of")
        return list(self._cache.items())

    def commit(self, changelog_offset: int | None = None) -> None:
        """Write every change and ``changelog_offset`` (the offset of the last changelog
        record produced for this transaction) in one atomic backend batch.

        ``None`` leaves the stored offset unchanged (no changelog, or nothing produced).
        If the write raises, the transaction is FAILED and nothing was written.
        """
        if self._status not in (TransactionStatus.OPEN, TransactionStatus.PREPARED):
            self._refuse("commit")
        try:
            if self._cache or changelog_offset is not None:
                self._partition.write(self._cache.items(), changelog_offset)
        except BaseException:
            self._finish(TransactionStatus.FAILED)
            raise
        self._finish(TransactionStatus.COMMITTED)

    def rollback(self) -> None:
        """Discard every change. A no-op once the transaction has finished."""
        if self._status in (TransactionStatus.OPEN, TransactionStatus.PREPARED):
            self._finish(TransactionStatus.ROLLED_BACK)

    def _finish(self, status: TransactionStatus) -> None:
        self._status = status
        self._writable = False
        self._readable = False
        self._cache = {}
        self._cache_bytes = 0
        self._index = None
        self._partition._release(self)

    def _refuse(self, action: str) -> NoReturn:
        raise TransactionStateError(f"cannot {action} a {self._status.value} transaction")


def _merge(
    stored: Iterator[tuple[bytes, bytes]],
    cached: list[tuple[bytes, bytes | None]],
    reverse: bool,
) -> Iterator[tuple[bytes, bytes]]:
    """Merge two key-ordered streams; on equal keys the cached entry wins, and a cached
    ``None`` (a delete) hides the key."""
    pending = iter(cached)
    ckey, cvalue = next(pending)  # cached is never empty here
    exhausted = False
    for key, value in stored:
        # Emit the cached entries that come before this stored key.
        while not exhausted and (ckey > key if reverse else ckey < key):
            if cvalue is not None:
                yield ckey, cvalue
            nxt = next(pending, None)
            if nxt is None:
                exhausted = True
            else:
                ckey, cvalue = nxt
        if not exhausted and ckey == key:
            if cvalue is not None:
                yield ckey, cvalue
            nxt = next(pending, None)
            if nxt is None:
                exhausted = True
            else:
                ckey, cvalue = nxt
        else:
            yield key, value
    if not exhausted:
        if cvalue is not None:
            yield ckey, cvalue
        for ckey, cvalue in pending:
            if cvalue is not None:
                yield ckey, cvalue
