"""Per-partition producer state: what makes idempotent producers exactly-once per partition.

For every producer id that wrote to the partition the log keeps its epoch and the metadata of
its last ``MAX_CACHED_BATCHES`` batches (first and last sequence number, first and last
offset, max timestamp), as Kafka's ``ProducerStateManager`` does. A client's batch is then:

- a duplicate of a cached batch (same epoch, same first and last sequence): answered with the
  original offsets, nothing appended (the producer retried after a lost acknowledgement);
- from an older epoch: ``InvalidProducerEpochError`` (a zombie instance);
- of a newer epoch: accepted only from sequence 0 (``OutOfOrderSequenceError`` otherwise);
- of the current epoch: accepted only at last sequence + 1, wrapping from 2^31-1 to 0;
- of an unknown producer id: accepted only from sequence 0 (``UnknownProducerIdError``
  otherwise, which librdkafka and the Java client answer by bumping the epoch when that is
  safe). Kafka 2.5+ accepts any sequence here instead; refusing is the conservative choice:
  a retry whose state this broker lost is never written twice.

Batches without a producer id (-1) are not tracked. Appends by the broker itself
(``AppendOrigin.COORDINATOR``) only have their epoch checked; control batches never carry
sequence numbers. Each entry can carry ``current_txn_first_offset`` (set by the first
transactional batch, cleared by a control batch), the hook transactions build on (last
stable offset, aborted transaction index).

Durability. The state is rebuilt from batch headers only (producer id, epoch, base sequence,
lastOffsetDelta, offsets), never from records. To keep opening a partition independent of
its size, the state is saved in snapshot files, ``{offset:020d}.snapshot``: the whole state
for the batches below ``offset``, written atomically when a segment rolls, when the
partition checkpoint is written, and at close. Opening reads the newest valid snapshot at or
below the log end offset and replays the headers past it (at most what was appended since
the last checkpoint). A missing or corrupt snapshot falls back to the previous one, and then
to the headers of every segment. Retention and compaction delete segments but not the state
of producers that are still alive: the snapshot keeps them (as Kafka 2.5+ does) until they
expire, ``producer.id.expiration.ms`` after they were last seen.

Snapshot layout (big-endian)::

    magic "SKPS"  version uint16 (1)  crc uint32 (CRC-32C of everything after it)
    end_offset int64  producer_count int32
    per producer: producer_id int64  epoch int16  coordinator_epoch int32
                  txn_first_offset int64 (-1: none)  last_timestamp int64  batch_count uint8
        per batch: first_seq int32  last_seq int32  first_offset int64  last_offset int64
                   timestamp int64
"""

from __future__ import annotations

import enum
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from crc32c import crc32c

from streamkit.log.batch import HEADER_SIZE, BatchHeader, iter_batch_spans, parse_header
from streamkit.log.checkpoint import write_atomically
from streamkit.log.errors import InvalidBatchError, LogError
from streamkit.log.records import control_type_of
from streamkit.log.segment import Segment

__all__ = [
    "MAX_CACHED_BATCHES",
    "AppendOrigin",
    "BatchMetadata",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "MarkerSink",
    "OutOfOrderSequenceError",
    "ProducerEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "UnknownProducerIdError",
    "headers_from",
    "in_sequence",
    "last_sequence",
]

log = logging.getLogger(__name__)

MAX_CACHED_BATCHES: Final = 5
_INT32_MAX: Final = 2**31 - 1
_CONTROL_BIT: Final = 0x20
_TRANSACTIONAL_BIT: Final = 0x10
_SUFFIX: Final = ".snapshot"
_KEEP_SNAPSHOTS: Final = 2
_SCAN_CHUNK: Final = 1 << 20

_MAGIC: Final = b"SKPS"
_VERSION: Final = 1
_FILE_HEADER: Final = struct.Struct(">4sHI")
_STATE_HEADER: Final = struct.Struct(">qi")
_ENTRY: Final = struct.Struct(">qhiqqB")
_BATCH: Final = struct.Struct(">iiqqq")


class AppendOrigin(enum.Enum):
    """Who appends, which decides the checks (Kafka's AppendOrigin)."""

    CLIENT = "client"  # Produce: duplicates answered, epochs and sequences checked
    COORDINATOR = "coordinator"  # the broker's own writers: epochs checked
    REPLICATION = "replication"  # copying a leader's log: nothing checked


class MarkerSink(Protocol):
    """Who hears of the transaction markers a replay meets (the partition's transaction
    indexes, rebuilt for the replayed range)."""

    def replay_from(self, offset: int) -> None: ...

    def marker(self, producer_id: int, control_type: int, first_offset: int | None,
               marker_offset: int) -> None: ...


class ProducerStateError(LogError):
    """A batch the producer state refuses."""


class OutOfOrderSequenceError(ProducerStateError):
    """Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER."""


class InvalidProducerEpochError(ProducerStateError):
    """Kafka: INVALID_PRODUCER_EPOCH (a newer instance of this producer exists)."""


class UnknownProducerIdError(ProducerStateError):
    """Kafka: UNKNOWN_PRODUCER_ID (no state for this producer and the batch does not start it)."""


class InvalidTxnStateError(ProducerStateError):
    """Kafka: INVALID_TXN_STATE (a plain batch in the middle of this producer's transaction)."""


class SnapshotError(Exception):
    """A snapshot file that cannot be trusted."""


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """The sequence number of a batch's last record (sequence numbers wrap at 2^31-1)."""
    last = first_seq + last_offset_delta
    return last - _INT32_MAX - 1 if last > _INT32_MAX else last


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    last_timestamp: int  # broker clock (ms) when last seen: expiration counts from here
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


class ProducerStateManager:
    """The producer entries of one partition and their snapshot files in ``directory``.

    Not thread-safe: the partition calls it under its own lock.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction: what holds back the last
        # stable offset. Empty (and so free to check) when no transaction is open.
        self.ongoing: dict[int, int] = {}
        self._snapshot_offset: int | None = None

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: no open transaction)."""
        return min(self.ongoing.values()) if self.ongoing else None

    # -- the state machine ---------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_offset_delta: int,
              attributes: int, origin: AppendOrigin) -> BatchMetadata | None:
        """Validate a batch of ``producer_id`` before it is appended; the cached original
        when it is a duplicate (then nothing must be appended). Raises ProducerStateError."""
        if origin is AppendOrigin.REPLICATION:
            return None
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}")
        if origin is not AppendOrigin.CLIENT:
            return None
        if attributes & _CONTROL_BIT:
            raise InvalidBatchError("clients may not write control batches")
        if first_seq < 0:
            raise InvalidBatchError(f"producer {producer_id} sent a batch without a sequence number")
        last_seq = last_sequence(first_seq, last_offset_delta)
        if entry is None:
            if first_seq != 0:
                raise UnknownProducerIdError(
                    f"no state for producer {producer_id} and its batch starts at sequence {first_seq}, not 0")
            return None
        if epoch != entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} epoch {epoch} is new and must start at sequence 0, not {first_seq}")
            return None
        duplicate = entry.find_duplicate(first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        if not in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {producer_id} sent sequence {first_seq}; {entry.last_seq + 1} was expected")
        if entry.current_txn_first_offset is not None and not attributes & _TRANSACTIONAL_BIT:
            raise InvalidTxnStateError(f"producer {producer_id} sent a plain batch inside a transaction")
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, first_offset: int, last_offset: int,
               timestamp: int, attributes: int, now_ms: int) -> int | None:
        """Record an appended batch of ``producer_id`` (after ``check`` let it through).
        For a control batch: the first offset of the transaction it ends (None if the
        producer wrote nothing here in that transaction)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id, epoch, now_ms)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_timestamp = now_ms
        if attributes & _CONTROL_BIT:
            ended = entry.current_txn_first_offset
            entry.current_txn_first_offset = None
            self.ongoing.pop(producer_id, None)
            return ended
        if first_seq >= 0:
            last_seq = last_sequence(first_seq, last_offset - first_offset)
            entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        if attributes & _TRANSACTIONAL_BIT and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self.ongoing[producer_id] = first_offset
        return None

    def replay(self, header: BatchHeader, now_ms: int, control_type: int = -1,
               markers: MarkerSink | None = None) -> None:
        """Rebuild from a stored batch's header (no checks: it is in the log already)."""
        if header.producer_id >= 0:
            ended = self.update(header.producer_id, header.producer_epoch, header.base_sequence,
                                header.base_offset, header.last_offset, header.max_timestamp,
                                header.attributes, now_ms)
            if markers is not None and header.attributes & _CONTROL_BIT:
                markers.marker(header.producer_id, control_type, ended, header.base_offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers unseen for ``expiration_ms`` (never one inside a transaction)."""
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- snapshots -----------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        return sorted(int(p.name[:20]) for p in self.directory.glob(f"*{_SUFFIX}") if p.name[:20].isdigit())

    def _path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{_SUFFIX}"

    def take_snapshot(self, end_offset: int) -> None:
        """Save the state of every batch below ``end_offset`` (the log end offset)."""
        if self._snapshot_offset == end_offset:
            return
        write_atomically(self._path(end_offset), encode_snapshot(end_offset, self.producers.values()))
        self._snapshot_offset = end_offset
        for old in self.snapshot_offsets()[:-_KEEP_SNAPSHOTS]:
            self._path(old).unlink(missing_ok=True)

    def load(self, segments: Sequence[Segment], log_end_offset: int, now_ms: int,
             markers: MarkerSink | None = None) -> int:
        """Rebuild the state: newest valid snapshot, then the headers past it. Returns the
        number of batches replayed from the log. ``markers`` hears where the replay starts
        and every transaction marker it meets."""
        for tmp in self.directory.glob(f"*{_SUFFIX}.tmp"):
            tmp.unlink()
        self.producers = {}
        start = 0
        for offset in reversed(self.snapshot_offsets()):
            path = self._path(offset)
            if offset > log_end_offset:  # the log was cut below it: it describes lost batches
                path.unlink()
                continue
            try:
                self.producers = decode_snapshot(path.read_bytes(), offset)
            except (OSError, SnapshotError) as exc:
                log.warning("ignoring producer state snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            start = offset
            self._snapshot_offset = offset
            break
        self.ongoing = {pid: e.current_txn_first_offset for pid, e in self.producers.items()
                        if e.current_txn_first_offset is not None}
        if markers is not None:
            markers.replay_from(start)
        replayed = 0
        for header, control_type in headers_from(segments, start):
            self.replay(header, now_ms, control_type, markers)
            replayed += 1
        return replayed

    def truncate_fully(self) -> None:
        """The log lost every batch: no producer state and no snapshot is left."""
        for offset in self.snapshot_offsets():
            self._path(offset).unlink(missing_ok=True)
        self.producers = {}
        self.ongoing = {}
        self._snapshot_offset = None

    def truncate(self, segments: Sequence[Segment], log_end_offset: int, now_ms: int,
                 markers: MarkerSink | None = None) -> None:
        """The log lost everything from ``log_end_offset`` on: rebuild without it."""
        self._snapshot_offset = None
        self.load(segments, log_end_offset, now_ms, markers)


def encode_snapshot(end_offset: int, entries: Iterable[ProducerEntry]) -> bytes:
    items = list(entries)
    body = bytearray(_STATE_HEADER.pack(end_offset, len(items)))
    for e in items:
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _ENTRY.pack(e.producer_id, e.epoch, e.coordinator_epoch, txn, e.last_timestamp, len(e.batches))
        for b in e.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
    return _FILE_HEADER.pack(_MAGIC, _VERSION, crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes, expected_offset: int) -> dict[int, ProducerEntry]:
    if len(data) < _FILE_HEADER.size + _STATE_HEADER.size:
        raise SnapshotError(f"{len(data)} bytes is too short")
    magic, version, crc = _FILE_HEADER.unpack_from(data, 0)
    if magic != _MAGIC or version != _VERSION:
        raise SnapshotError(f"unknown format {magic!r} v{version}")
    body = memoryview(data)[_FILE_HEADER.size:]
    if crc32c(body) != crc:
        raise SnapshotError("CRC-32C mismatch")
    end_offset, count = _STATE_HEADER.unpack_from(body, 0)
    if end_offset != expected_offset:
        raise SnapshotError(f"holds offset {end_offset}, its name says {expected_offset}")
    pos = _STATE_HEADER.size
    producers: dict[int, ProducerEntry] = {}
    try:
        for _ in range(count):
            pid, epoch, coordinator_epoch, txn, last_ts, batches = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
            entry = ProducerEntry(pid, epoch, last_ts, coordinator_epoch=coordinator_epoch,
                                  current_txn_first_offset=None if txn < 0 else txn)
            for _ in range(batches):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            producers[pid] = entry
    except struct.error as exc:
        raise SnapshotError(f"truncated: {exc}") from exc
    if pos != len(body):
        raise SnapshotError(f"{len(body) - pos} bytes after the last producer")
    return producers


def headers_from(segments: Sequence[Segment], offset: int) -> Iterator[tuple[BatchHeader, int]]:
    """Headers of the stored batches from the one holding ``offset`` on, read in chunks,
    each with its ControlType when it is a control batch (-1 otherwise)."""
    for seg in segments:
        if seg.next_offset <= offset or not seg.size:
            continue
        pos = seg.position_of(max(offset, seg.base_offset))
        while pos is not None and pos + HEADER_SIZE <= seg.size:
            chunk = os.pread(seg.fd, min(_SCAN_CHUNK, seg.size - pos), pos)
            consumed = 0
            for rel, size, _base, _last in iter_batch_spans(chunk):
                header = parse_header(chunk, rel)
                control = control_type_of(chunk[rel : rel + size]) if header.attributes & _CONTROL_BIT else -1
                yield header, control
                consumed = rel + size
            if consumed == 0:  # one batch larger than the chunk: its header is enough
                header = parse_header(chunk, 0)
                yield header, -1
                consumed = header.size
            pos += consumed
