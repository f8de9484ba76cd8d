"""One segment: a ``{base_offset:020d}.log`` file of whole batches and its two sparse indexes.

A segment never decodes records. Appends rewrite the batch's base offset in the same
``pwritev`` that stores it; reads find a start position through the offset index and hand
back stored bytes cut at batch boundaries.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from streamkit.log.batch import (
    HEADER_SIZE,
    MAGIC,
    crc_of,
    iter_batch_spans,
    parse_header,
    peek_offsets,
)
from streamkit.log.index import OffsetIndex, TimeIndex
from streamkit.log.txn_index import TxnIndex, txn_index_path

__all__ = ["Segment", "segment_path"]

log = logging.getLogger(__name__)

_SCAN_CHUNK = 8 * 1024 * 1024
_B8 = 8
_PEEK = 27  # bytes that peek_offsets reads
_WALK_READ = 65536  # walk batch headers from one read of up to this many bytes


def segment_path(directory: Path, base_offset: int, suffix: str = ".log") -> Path:
    return directory / f"{base_offset:020d}{suffix}"


@dataclass(slots=True)
class _Tail:
    """What a scan of a segment's batches found."""

    size: int
    next_offset: int
    max_timestamp: int
    max_timestamp_offset: int
    first_timestamp: int | None
    last_position: int  # of the last whole batch scanned (the start position if none)


class Segment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int,
                 suffix: str = "") -> None:
        """``suffix`` follows each file name: the cleaner writes its output as ``.cleaned``
        files through the same append path, so their indexes come out as appends make them."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.path = segment_path(directory, base_offset, ".log" + suffix)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self._max_ts_offset = base_offset
        self.first_timestamp: int | None = None
        self._bytes_since_index = 0
        self.offset_index = OffsetIndex(segment_path(directory, base_offset, ".index" + suffix),
                                        base_offset)
        self.time_index = TimeIndex(segment_path(directory, base_offset, ".timeindex" + suffix),
                                    base_offset)
        self.txn_index = TxnIndex.load(txn_index_path(directory, base_offset, suffix))

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval_bytes: int,
               suffix: str = "") -> Segment:
        seg = cls(directory, base_offset, index_interval_bytes, suffix)
        os.ftruncate(seg.fd, 0)
        seg.txn_index.delete()
        seg.flush(fsync=False)
        return seg

    @classmethod
    def open_trusted(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> tuple[Segment, int]:
        """Open a segment written before the recovery point: trust data, check indexes.
        Returns the segment and the bytes cut from a torn tail (the disk lost what a
        clean shutdown had written): the caller must treat that as recovery."""
        seg = cls(directory, base_offset, index_interval_bytes)
        file_size = os.fstat(seg.fd).st_size
        offset_index = OffsetIndex.load(seg.offset_index.path, base_offset, max(file_size, 1))
        time_index = TimeIndex.load(seg.time_index.path, base_offset)
        if offset_index is None or time_index is None:
            log.info("rebuilding indexes of %s", seg.path)
            seg.recover(verify=False)
            return seg, 0
        seg.offset_index, seg.time_index = offset_index, time_index
        start = offset_index.positions[-1] if len(offset_index) else 0
        start_offset = offset_index.offsets[-1] if len(offset_index) else base_offset
        tail = seg._scan(start, start_offset, verify=False, rebuild=False)
        if tail.size != file_size:
            log.warning("segment %s has a torn tail after a clean shutdown; recovering", seg.path)
            return seg, seg.recover(verify=True)
        seg._adopt(tail)
        if tail.last_position - start > 2 * index_interval_bytes:
            # Well-formed but short (say only the first entry): every read would walk the
            # unindexed batches. Appends index the first batch past each interval, so past
            # the last entry lie at most about index.interval.bytes plus one batch.
            log.warning("offset index of %s stops short of the log; rebuilding", seg.path)
            seg.recover(verify=False)
            return seg, 0
        if file_size and not seg._indexes_match_log():
            # Well-formed but wrong (emptied, zeroed, stale): a lower max timestamp would
            # hide records from timestamp lookups and a higher one block retention.
            log.warning("indexes of %s do not match the log; rebuilding", seg.path)
            seg.recover(verify=False)
            return seg, 0
        seg.max_timestamp = max(seg.max_timestamp, time_index.max_timestamp)
        if seg.first_timestamp is None and seg.size:
            seg.first_timestamp = seg._first_batch_timestamp()
        return seg, 0

    def _indexes_match_log(self) -> bool:
        """Cheap checks of loaded indexes against a non-empty log: the first batch is always
        indexed at position 0, and the newest time entry names a batch holding exactly that
        max timestamp (each entry is (max timestamp so far, base offset that reached it))."""
        if not len(self.offset_index) or self.offset_index.positions[0] != 0:
            return False
        if not len(self.time_index):
            return False
        timestamp, offset = self.time_index.timestamps[-1], self.time_index.offsets[-1]
        pos = self.position_of(offset)
        if pos is None:
            return False
        header = parse_header(os.pread(self.fd, HEADER_SIZE, pos))
        return header.base_offset == offset and header.max_timestamp == timestamp

    @classmethod
    def open_recovering(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> tuple[Segment, int]:
        """Open a segment past the recovery point: verify every batch; returns bytes cut."""
        seg = cls(directory, base_offset, index_interval_bytes)
        truncated = seg.recover(verify=True)
        return seg, truncated

    def recover(self, verify: bool) -> int:
        """Rebuild indexes by scanning every batch; truncate at the first invalid byte."""
        file_size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(self.offset_index.path, self.base_offset)
        self.time_index = TimeIndex(self.time_index.path, self.base_offset)
        self.max_timestamp = -1
        self._max_ts_offset = self.base_offset
        self._bytes_since_index = 0
        tail = self._scan(0, self.base_offset, verify=verify, rebuild=True)
        self._adopt(tail)
        truncated = file_size - tail.size
        if truncated:
            os.ftruncate(self.fd, tail.size)
            os.fsync(self.fd)
        self.offset_index.rewrite(fsync=True)
        self.time_index.rewrite(fsync=True)
        return truncated

    def _adopt(self, tail: _Tail) -> None:
        self.size = tail.size
        self.next_offset = tail.next_offset
        if tail.max_timestamp > self.max_timestamp:
            self.max_timestamp = tail.max_timestamp
            self._max_ts_offset = tail.max_timestamp_offset
        if tail.first_timestamp is not None and self.first_timestamp is None:
            self.first_timestamp = tail.first_timestamp

    def _first_batch_timestamp(self) -> int:
        return parse_header(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp

    def _scan(self, pos: int, expected_offset: int, verify: bool, rebuild: bool) -> _Tail:
        """Walk batches from ``pos``; stop at the first one that is torn or (if ``verify``)
        fails magic, CRC or offset order. With ``rebuild`` add index entries on the way."""
        file_size = os.fstat(self.fd).st_size
        next_offset = expected_offset
        max_ts, max_ts_offset = -1, expected_offset
        first_ts: int | None = None
        last_pos = pos
        chunk_start, chunk = pos, b""
        while pos + HEADER_SIZE <= file_size:
            rel = pos - chunk_start
            if rel + HEADER_SIZE > len(chunk):
                chunk_start, chunk = pos, os.pread(self.fd, _SCAN_CHUNK, pos)
                rel = 0
            header = parse_header(chunk, rel)
            size = header.size
            if size < HEADER_SIZE or pos + size > file_size or header.magic != MAGIC:
                break
            if header.base_offset < next_offset:
                break
            if verify:
                if rel + size > len(chunk):
                    chunk_start, chunk = pos, os.pread(self.fd, max(size, _SCAN_CHUNK), pos)
                    rel = 0
                if crc_of(memoryview(chunk)[rel : rel + size]) != header.crc:
                    break
            if first_ts is None and pos == 0:
                first_ts = header.max_timestamp
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.base_offset
            if rebuild:
                self._index(header.base_offset, pos, size, header.max_timestamp)
            next_offset = header.next_offset
            last_pos = pos
            pos += size
        return _Tail(pos, next_offset, max_ts, max_ts_offset, first_ts, last_pos)

    # -- writing -------------------------------------------------------------------------

    def _index(self, base_offset: int, position: int, size: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self._max_ts_offset = base_offset
        if self._bytes_since_index >= self.index_interval_bytes or position == 0:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self._max_ts_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def append(self, data: bytes | memoryview, base_offset: int, next_offset: int, max_timestamp: int) -> None:
        """Store one validated batch with ``base_offset`` written into its first 8 bytes."""
        view = data if isinstance(data, memoryview) else memoryview(data)
        size = len(view)
        position = self.size
        written = os.pwritev(self.fd, [base_offset.to_bytes(_B8, "big", signed=True), view[_B8:]], position)
        if written != size:
            raise OSError(f"short write to {self.path}: {written} of {size} bytes")
        if position == 0:
            self.first_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp or self._bytes_since_index >= self.index_interval_bytes or position == 0:
            self._index(base_offset, position, size, max_timestamp)
        else:
            self._bytes_since_index += size
        self.size = position + size
        self.next_offset = next_offset

    def flush(self, fsync: bool) -> None:
        self.offset_index.flush(fsync)
        self.time_index.flush(fsync)
        if fsync:
            os.fsync(self.fd)

    # -- reading -------------------------------------------------------------------------

    def position_of(self, offset: int) -> int | None:
        """Byte position of the first batch whose last offset is >= ``offset``."""
        if offset >= self.next_offset:
            return None
        index = self.offset_index
        i = bisect_right(index.offsets, offset)
        if i and index.offsets[i - 1] == offset:
            return index.positions[i - 1]  # sequential consumers land here: no I/O
        pos = index.positions[i - 1] if i else 0
        return self._walk(pos, lambda _pos, last: last >= offset)

    def _walk(self, pos: int, stop: Callable[[int, int], bool]) -> int | None:
        """Position of the first batch from ``pos`` on for which ``stop(pos, last_offset)``."""
        chunk_len = max(self.index_interval_bytes * 2, 8192)
        while pos + HEADER_SIZE <= self.size:
            chunk = os.pread(self.fd, min(chunk_len, self.size - pos), pos)
            consumed = 0
            for rel, size, _base, last in iter_batch_spans(chunk):
                if stop(pos + rel, last):
                    return pos + rel
                consumed = rel + size
            if consumed == 0:  # a single batch larger than the chunk
                _base, consumed, last = peek_offsets(chunk, 0)
                if stop(pos, last):
                    return pos
            pos += consumed
        return None

    def _end_within(self, position: int, limit: int) -> tuple[int, int]:
        """(end, next offset): the last batch boundary in (position, limit], found through
        the index and a short walk, and the base offset of the first batch not included
        (where a reader continues). When even the first batch ends past ``limit``, the end
        of that batch."""
        index = self.offset_index
        i = bisect_right(index.positions, limit) - 1
        if i >= 0 and index.positions[i] > position:
            end, next_offset = index.positions[i], index.offsets[i]
        else:
            end, next_offset = position, -1
        while end < self.size:
            if limit - end < HEADER_SIZE:
                break
            base, size, last = peek_offsets(os.pread(self.fd, _PEEK, end), 0)
            next_offset = base
            if end + size > limit:
                break
            if limit - end > _WALK_READ or size >= limit - end:
                end, next_offset = end + size, last + 1
                continue
            for _rel, size, _base, last in iter_batch_spans(os.pread(self.fd, limit - end, end)):
                end, next_offset = end + size, last + 1
            break
        if end == position:
            _b, size, last = peek_offsets(os.pread(self.fd, _PEEK, position), 0)
            end, next_offset = position + size, last + 1
        if end >= self.size:
            next_offset = self.next_offset
        return end, next_offset

    def _bound_before(self, position: int, limit: int, max_offset: int) -> int:
        """Position of the first batch from ``position`` on whose base offset is >=
        ``max_offset`` (a batch straddling it was written before it, so it stays in), or a
        position >= ``limit`` when there is none before ``limit``. The walk starts at the
        last index entry at or below ``max_offset``, so it covers about one index interval,
        whatever the distance from ``position`` (a read_committed fetch at the start of a
        big segment must not walk the whole segment)."""
        index = self.offset_index
        i = bisect_right(index.offsets, max_offset) - 1
        start = max(position, index.positions[i]) if i >= 0 else position
        if start >= limit:
            return limit
        bound = self._walk(start, lambda pos, last: pos >= limit or last >= max_offset)
        if bound is None:
            return limit
        base, size, _last = peek_offsets(os.pread(self.fd, _PEEK, bound), 0)
        return bound + size if base < max_offset else bound

    def read(self, position: int, max_bytes: int, max_offset: int | None = None) -> tuple[bytes, int]:
        """Whole batches from ``position`` and the offset to read next: the first batch always
        (even when bigger than ``max_bytes``, so a consumer can make progress), then more
        while they fit; none whose base offset is >= ``max_offset``. One pread of exactly
        the bytes returned."""
        if position >= self.size:
            return b"", self.next_offset
        limit = min(self.size, position + max_bytes)
        if max_offset is not None and max_offset < self.next_offset:
            bound = self._bound_before(position, limit, max_offset)
            if bound <= position:
                return b"", max_offset
            limit = min(limit, bound)
        end, next_offset = self._end_within(position, limit)
        return os.pread(self.fd, end - position, position), next_offset

    def last_modified_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def read_all(self) -> bytes:
        return os.pread(self.fd, self.size, 0) if self.size else b""

    def batch_at(self, position: int) -> bytes:
        _base, size, _last = peek_offsets(os.pread(self.fd, _PEEK, position), 0)
        return os.pread(self.fd, size, position)

    # -- truncation, closing -----------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset``, a batch that straddles it too
        (as Kafka does), so that no record at or past ``offset`` survives."""
        pos = self.position_of(offset)
        if pos is None:
            return
        batch = parse_header(os.pread(self.fd, HEADER_SIZE, pos))
        self.offset_index.truncate_to_position(pos)
        self.time_index.truncate_to_offset(batch.base_offset)
        os.ftruncate(self.fd, pos)
        self.txn_index.truncate_from(batch.base_offset)
        self.size = pos
        self.max_timestamp = -1
        self.first_timestamp = None
        self._bytes_since_index = self.index_interval_bytes
        tail = self._scan(0, self.base_offset, verify=False, rebuild=False)
        self._adopt(tail)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for path in (self.path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)
        self.txn_index.delete()
