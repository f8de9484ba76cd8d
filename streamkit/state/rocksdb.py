"""A ``KVBackend`` over RocksDB (``rocksdict`` in raw-bytes mode).

Durability: the WAL stays on and writes are not fsynced (``sync_writes=False``).
The changelog topic is the source of truth and the local store a cache of it, so the only
thing that must hold after a crash is that data and the changelog offset stored with it
agree. Every ``write`` is one ``WriteBatch``, and RocksDB replays the WAL to a
point-in-time-consistent prefix of whole batches, so:

* a process crash loses nothing: the WAL is in the OS page cache before ``write`` returns;
* an OS crash or power loss may lose the last batches, but never part of one, so the store
  comes back older, with the offset that matches its data, and restore replays the rest.

Disabling the WAL would not keep that promise cheaply (unflushed memtables vanish, and the
caller would have to flush at every commit); ``sync_writes=True`` buys surviving power loss
without replay at the price of an fsync per commit.
"""

from __future__ import annotations

import shutil
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, cast

from rocksdict import (
    BlockBasedOptions,
    Cache,
    DbClosedError,
    DBCompressionType,
    DBRecoveryMode,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from streamkit.state.backend import Change
from streamkit.state.errors import StateError, StoreClosedError

__all__ = ["Compression", "RocksDBBackend", "RocksDBOptions"]

Compression = Literal["none", "lz4", "snappy", "zstd"]

_MiB = 1024 * 1024

_by_key = itemgetter(0)

_COMPRESSION = {
    "none": DBCompressionType.none,
    "lz4": DBCompressionType.lz4,
    "snappy": DBCompressionType.snappy,
    "zstd": DBCompressionType.zstd,
}


@dataclass(frozen=True, slots=True)
class RocksDBOptions:
    """Tuning for one partition's database. The defaults favour write throughput (cheap
    LZ4, no fsync) and point reads (bloom filters), and stay modest in memory since an
    application opens one database per assigned partition of every table.

    Memtables of 16 MiB (Kafka Streams' default) rather than larger ones: inserts into a
    smaller skiplist miss the CPU cache less, which measurably speeds up restore; the price
    is more, smaller L0 files for compaction to merge.
    """

    write_buffer_size: int = 16 * _MiB
    max_write_buffer_number: int = 3
    target_file_size_base: int = 64 * _MiB
    block_cache_size: int = 16 * _MiB
    bloom_bits_per_key: int = 10
    compression: Compression = "lz4"
    max_background_jobs: int = 2
    max_open_files: int = 256
    sync_writes: bool = False  # see the module docstring
    # Windows expire by deleting runs of adjacent keys; compact a file early when a sliding
    # window of this many entries holds this many tombstones, so later range scans do not
    # wade through them.
    deletion_compaction_window: int = 32_768
    deletion_compaction_trigger: int = 16_384

    def build(self) -> Options:
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_write_buffer_size(self.write_buffer_size)
        opts.set_max_write_buffer_number(self.max_write_buffer_number)
        opts.set_target_file_size_base(self.target_file_size_base)
        opts.set_max_background_jobs(self.max_background_jobs)
        opts.set_max_open_files(self.max_open_files)
        opts.set_level_compaction_dynamic_level_bytes(True)
        opts.set_compression_type(_COMPRESSION[self.compression]())
        # Explicit, although it is RocksDB's default: recovery stops at the first torn
        # batch, which is what keeps data and changelog offset in step (module docstring).
        opts.set_wal_recovery_mode(DBRecoveryMode.point_in_time())
        opts.set_keep_log_file_num(2)  # the text LOG files, not the WAL
        opts.add_compact_on_deletion_collector_factory(
            self.deletion_compaction_window, self.deletion_compaction_trigger, 0.0
        )
        table = BlockBasedOptions()
        table.set_block_cache(Cache(self.block_cache_size))
        if self.bloom_bits_per_key > 0:
            table.set_bloom_filter(self.bloom_bits_per_key, False)
        opts.set_block_based_table_factory(table)
        return opts


class RocksDBBackend:
    """Implements ``KVBackend`` with one RocksDB database in the directory ``path``."""

    __slots__ = ("_closed", "_db", "_options", "_path", "_scans", "_write_options")

    def __init__(self, path: Path, options: RocksDBOptions | None = None) -> None:
        self._path = Path(path)
        self._options = options or RocksDBOptions()
        self._path.mkdir(parents=True, exist_ok=True)
        try:
            self._db = Rdict(str(self._path), options=self._options.build())
        except Exception as exc:  # rocksdict raises plain Exception (e.g. the LOCK is held)
            raise StateError(f"cannot open RocksDB at {self._path}: {exc}") from exc
        self._write_options = WriteOptions()
        self._write_options.sync = self._options.sync_writes
        self._write_options.memtable_insert_hint_per_batch = True
        self._closed = False
        self._scans: weakref.WeakSet[_Scan] = weakref.WeakSet()

    @property
    def path(self) -> Path:
        return self._path

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self, key: bytes) -> bytes | None:
        try:
            return cast("bytes | None", self._db.get(key))
        except DbClosedError as exc:
            raise StoreClosedError(f"RocksDB at {self._path} is closed") from exc

    def write(self, batch: Sequence[Change]) -> None:
        if len(batch) > 1:
            # Inserting into the memtable (a skiplist) in key order costs about half as much
            # CPU as in random order: the search path stays in cache, and the per-batch
            # insert hint applies. sorted() is stable, so a later change to a key still wins.
            batch = sorted(batch, key=_by_key)
        wb = WriteBatch(raw_mode=True)
        put = wb.put
        delete = wb.delete
        for key, value in batch:
            if value is None:
                delete(key)
            else:
                put(key, value)
        try:
            self._db.write(wb, self._write_options)
        except DbClosedError as exc:
            raise StoreClosedError(f"RocksDB at {self._path} is closed") from exc

    def write_prefixed(self, prefix: bytes, items: Iterable[Sequence[Any]], last: Change | None = None) -> None:
        # ``write`` in one loop: sorted by key (the prefix is common to all), put with the prefix.
        items = sorted(items, key=_by_key)
        if not items and last is None:
            return
        wb = WriteBatch(raw_mode=True)
        put = wb.put
        delete = wb.delete
        if last is not None:  # first: the store's own keys sort before the prefixed ones
            if last[1] is None:
                delete(last[0])
            else:
                put(last[0], last[1])
        for item in items:
            value = item[1]
            if value is None:
                delete(prefix + item[0])
            else:
                put(prefix + item[0], value)
        try:
            self._db.write(wb, self._write_options)
        except DbClosedError as exc:
            raise StoreClosedError(f"RocksDB at {self._path} is closed") from exc

    def iter_range(
        self, lo: bytes, hi: bytes, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        self._check_open()
        if lo >= hi:
            return iter(())
        # Only the upper bound goes in ReadOptions: rocksdict 0.3.29 mishandles a lower and
        # an upper bound set together (the scan is cut at the wrong one). The lower bound is
        # the seek key going forwards and a key comparison going backwards.
        read_opt = ReadOptions()
        read_opt.set_iterate_upper_bound(hi)
        if reverse:
            items = self._db.items(backwards=True, read_opt=read_opt)
        else:
            items = self._db.items(from_key=lo, read_opt=read_opt)
        scan = _Scan(items, lo if reverse else None, (read_opt, lo, hi))
        self._scans.add(scan)
        return scan

    def iter_all(self) -> Iterator[tuple[bytes, bytes]]:
        self._check_open()
        scan = _Scan(self._db.items(), None, ())
        self._scans.add(scan)
        return scan

    def flush(self) -> None:
        """Write the memtables to SST files (shortens WAL replay at the next open)."""
        self._check_open()
        self._db.flush(wait=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A live rocksdict iterator keeps the database open, and its LOCK held, past
        # close(): a reopen (the partition assigned back) would fail. Cut every scan loose.
        for scan in list(self._scans):
            scan.cut()
        self._db.close()

    def destroy(self) -> None:
        self.close()
        if self._path.exists():
            Rdict.destroy(str(self._path), self._options.build())
            # Rdict.destroy removes RocksDB's files but may leave the directory behind.
            shutil.rmtree(self._path, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"RocksDB at {self._path} is closed")


class _Closed:
    """Stands in for the rocksdict iterator of a scan whose backend was closed."""

    def __next__(self) -> tuple[bytes, bytes]:
        raise StoreClosedError("the RocksDB backend was closed during this scan")


class _Scan:
    """An iterator over a rocksdict scan that the backend can cut off when it closes.

    ``down_to`` ends a reverse scan below the lower bound. ``keep_alive`` (the ReadOptions
    and the bound keys) is otherwise unused but must stay referenced until the scan ends:
    rocksdict keeps a pointer to the bound's buffer rather than a copy, and once the bytes
    object is collected the iterator runs on a dangling upper bound (seen in practice as a
    scan that ignores its bound).
    """

    __slots__ = ("__weakref__", "_down_to", "_items", "_keep_alive")

    def __init__(self, items: Any, down_to: bytes | None, keep_alive: tuple[object, ...]) -> None:
        self._items: Any = items
        self._down_to = down_to
        self._keep_alive = keep_alive

    def __iter__(self) -> _Scan:
        return self

    def __next__(self) -> tuple[bytes, bytes]:
        item: tuple[bytes, bytes] = next(self._items)
        if self._down_to is not None and item[0] < self._down_to:
            self._items = iter(())  # finished: release the rocksdict iterator now
            self._keep_alive = ()
            raise StopIteration
        return item

    def cut(self) -> None:
        self._items = _Closed()
        self._keep_alive = ()
