"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

One pass over a partition:

1. The cleanable range is every inactive segment whose newest record is older than
   ``min.compaction.lag.ms`` (stopping at the first that is not). The active segment is
   never touched.
2. Skip the pass unless the dirty share (bytes past the cleaner offset) reaches
   ``min.cleanable.dirty.ratio``, a kept tombstone's delete horizon has passed, or (KIP-354)
   the first dirty segment's first record is older than ``max.compaction.lag.ms``: then
   the pass runs whatever the dirty ratio, so a key's old value is gone within that lag
   (plus the roll of the active segment, which is never cleaned, as in Kafka).
3. Build a map key -> latest offset over the cleanable range.
4. Rewrite each cleanable segment on its own, keeping a record when it is the latest for its
   key, or has no key. Tombstones (null values) follow KIP-534: the first pass that keeps
   one stamps its batch with a delete horizon (now + ``delete.retention.ms``, in
   baseTimestamp with attribute bit 6), and a later pass drops it once that time has come,
   so a consumer that starts from the beginning within ``delete.retention.ms`` of the first
   cleaning sees the delete, whatever the tombstone's CreateTime. Offsets never change: a
   batch keeps its base offset and lastOffsetDelta, so gaps appear where records went, as in
   Kafka. Batches that keep every record and need no stamp are copied byte for byte.

Transactions: the cleanable range ends below the first offset of the oldest open
transaction (the last stable offset), so every transactional batch in it is decided. Batches
of aborted transactions (known from the transaction indexes, not from records) neither
supersede a key nor survive: read_committed consumers never see them, and keeping an aborted
value as a key's latest would drop the committed one before it. A transaction marker is kept
while any record of its transaction is left; once none is, it is treated like a tombstone
(as Kafka does): the pass that finds it so stamps it with a delete horizon and a pass after
that time drops it, so a consumer reading within ``delete.retention.ms`` still sees it.
5. Crash-safe swap per segment (``streamkit.log.swap``): the output and its indexes are
   written as ``.cleaned`` files through the segment append path, fsynced with the
   original's mtime (retention.ms falls back to it), staged as ``.swap`` and swapped in.
   A segment cleaned to nothing is deleted, except the first: compaction never moves the
   log start offset, so a consumer in the compacted prefix reads on from the next batch.

``LogCleaner`` runs passes on a background thread every ``log.cleaner.backoff.ms``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from streamkit.log.batch import BatchHeader, iter_batch_spans, parse_header
from streamkit.log.partition import PartitionLog
from streamkit.log.records import build_batch, decode_batch
from streamkit.log.segment import Segment
from streamkit.log.swap import CLEANED, discard_cleaned, stage_swap

__all__ = ["CleanResult", "LogCleaner", "clean"]

log = logging.getLogger(__name__)

_READ_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanResult:
    segments: int
    bytes_before: int
    bytes_after: int
    records_removed: int


@contextmanager
def _opened(path: Path) -> Iterator[int]:
    """A segment file through the cleaner's own descriptor, so that a concurrent retention
    delete cannot pull the file out from under it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        yield fd
    finally:
        os.close(fd)


def _batches_of(fd: int) -> Iterable[bytes]:
    """Whole batches of an open segment file."""
    pos = 0
    carry = b""
    while True:
        chunk = os.pread(fd, _READ_CHUNK, pos)
        if not chunk:
            return
        pos += len(chunk)
        data = carry + chunk if carry else chunk
        end = 0
        for rel, size, _base, _last in iter_batch_spans(data):
            yield data[rel : rel + size]
            end = rel + size
        carry = data[end:]


def _cleanable(partition: PartitionLog, now_ms: int) -> list[Segment]:
    lag = partition.config.min_compaction_lag_ms
    stable = partition.last_stable_offset
    out = []
    for seg in partition.segments[:-1]:
        if seg.size and seg.max_timestamp > now_ms - lag:
            break
        if seg.next_offset > stable:  # an open transaction's batches are undecided
            break
        out.append(seg)
    return out


def _overdue(segments: list[Segment], first_dirty: int, now_ms: int, max_lag_ms: int) -> bool:
    """Whether max.compaction.lag.ms forces this pass: the oldest uncleaned record of the
    cleanable range (the first batch of its first dirty segment) is older than the lag."""
    for seg in segments:
        if seg.next_offset > first_dirty and seg.size:
            first = seg.first_timestamp if seg.first_timestamp is not None else seg.max_timestamp
            return first >= 0 and now_ms - first > max_lag_ms
    return False


class _Aborted:
    """Which transactional batches belong to aborted transactions."""

    def __init__(self, partition: PartitionLog, start: int, end: int) -> None:
        self.ranges: dict[int, list[tuple[int, int]]] = {}
        for txn in partition.aborted_transactions(start, end):
            self.ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def __contains__(self, header: BatchHeader) -> bool:
        if not self.ranges or not header.is_transactional or header.is_control:
            return False
        return any(first <= header.base_offset <= last
                   for first, last in self.ranges.get(header.producer_id, ()))


def clean(partition: PartitionLog, now_ms: int | None = None, force: bool = False) -> CleanResult | None:
    """One compaction pass; None when there is nothing (dirty enough) to clean."""
    if not partition.config.compact:
        return None
    now = partition.clock() if now_ms is None else now_ms
    with partition.lock:
        segments = _cleanable(partition, now)
        first_dirty = partition.cleaner_offset
        # where the dirty section will start: the segment after the last cleanable one
        end = partition.segments[len(segments)].base_offset if segments else first_dirty
        horizon_due = 0 <= partition.delete_horizon <= now
    if not segments:
        return None
    total = sum(s.size for s in segments)
    dirty = sum(s.size for s in segments if s.next_offset > first_dirty)
    if total == 0:
        return None
    if (not force and not horizon_due and not _overdue(segments, first_dirty, now, partition.config.max_compaction_lag_ms)
            and (dirty == 0 or dirty / total < partition.config.min_cleanable_dirty_ratio)):
        return None

    aborted = _Aborted(partition, segments[0].base_offset, end)
    latest: dict[bytes, int] = {}
    for seg in segments:
        with _opened(seg.path) as fd:
            for batch in _batches_of(fd):
                header = parse_header(batch)
                if header.is_control or header in aborted:
                    continue
                for record in decode_batch(batch, verify=False)[1]:
                    if record.key is not None:
                        latest[record.key] = record.offset

    rules = _Rules(latest, now, now + partition.config.delete_retention_ms, aborted)
    interval = partition.config.index_interval_bytes
    removed = 0
    after = 0
    next_horizon = -1
    for seg in segments:
        if not seg.size:
            continue  # emptied before: nothing to clean
        written = _clean_segment(seg, rules, partition.directory, interval)
        removed += written.removed
        after += written.size
        next_horizon = _earliest(next_horizon, written.earliest_horizon)
        partition.replace_segment(seg.base_offset)
    partition.set_cleaner_offset(end, next_horizon)
    log.info(
        "compacted %s: %d segments, %d -> %d bytes, %d records removed",
        partition.directory, len(segments), total, after, removed,
    )
    return CleanResult(len(segments), total, after, removed)


@dataclass(frozen=True, slots=True)
class _Rules:
    latest: dict[bytes, int]  # key -> offset of its latest record in the cleanable range
    now: int
    new_horizon: int  # the delete horizon a batch gets when a pass first keeps its tombstone
    aborted: _Aborted
    # producer id -> whether its current transaction kept any record so far in this pass
    txn_data: dict[int, bool] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Written:
    size: int
    removed: int
    earliest_horizon: int  # of the tombstones kept, -1 if none


def _earliest(a: int, b: int) -> int:
    """The earlier of two times where -1 means none."""
    return b if a < 0 else a if b < 0 else min(a, b)


def _clean_segment(seg: Segment, rules: _Rules, directory: Path, interval: int) -> _Written:
    """Write the cleaned copy with its indexes as ``.cleaned`` files and stage the swap."""
    discard_cleaned(directory, seg.base_offset)  # a failed pass's leftovers
    out = Segment.create(directory, seg.base_offset, interval, suffix=CLEANED)
    removed = 0
    earliest = -1
    try:
        with _opened(seg.path) as fd:
            for batch in _batches_of(fd):
                header = parse_header(batch)
                kept, dropped, horizon = _clean_batch(batch, header, rules)
                removed += dropped
                if kept is not None:
                    earliest = _earliest(earliest, horizon)
                    out.append(kept, header.base_offset, header.next_offset, header.max_timestamp)
            mtime = os.fstat(fd).st_mtime_ns
        os.utime(out.fd, ns=(mtime, mtime))  # retention.ms falls back to it (as in Kafka)
        out.flush(fsync=True)
    except BaseException:
        out.close()
        discard_cleaned(directory, seg.base_offset)
        raise
    out.close()
    stage_swap(directory, seg.base_offset)
    return _Written(out.size, removed, earliest)


def _clean_marker(batch: bytes, header: BatchHeader, rules: _Rules) -> tuple[bytes | None, int, int]:
    """A transaction marker: kept while its transaction has records left, then stamped with
    a delete horizon, then dropped once that has passed."""
    if rules.txn_data.pop(header.producer_id, False):
        return batch, 0, -1
    horizon = header.delete_horizon
    if horizon is not None:
        return (None, 1, -1) if rules.now >= horizon else (batch, 0, horizon)
    _h, records = decode_batch(batch, verify=False)
    stamped = build_batch(
        records, base_offset=header.base_offset, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence, transactional=True,
        control=True, partition_leader_epoch=header.partition_leader_epoch,
        last_offset_delta=header.last_offset_delta, max_timestamp=header.max_timestamp,
        delete_horizon=rules.new_horizon)
    return stamped, 0, rules.new_horizon


def _clean_batch(batch: bytes, header: BatchHeader, rules: _Rules) -> tuple[bytes | None, int, int]:
    """(what to write or None, records dropped, delete horizon if it keeps tombstones else -1)."""
    if header.is_control:
        return _clean_marker(batch, header, rules)
    if header in rules.aborted:
        rules.txn_data.setdefault(header.producer_id, False)
        return None, header.record_count, -1
    if header.is_transactional:
        kept, dropped, horizon = _clean_records(batch, header, rules)
        rules.txn_data[header.producer_id] = rules.txn_data.get(header.producer_id, False) or kept is not None
        return kept, dropped, horizon
    return _clean_records(batch, header, rules)


def _clean_records(batch: bytes, header: BatchHeader, rules: _Rules) -> tuple[bytes | None, int, int]:
    _h, records = decode_batch(batch, verify=False)
    horizon = header.delete_horizon
    keep = [
        r for r in records
        if r.key is None
        or (rules.latest.get(r.key) == r.offset
            and (r.value is not None or horizon is None or rules.now < horizon))
    ]
    dropped = len(records) - len(keep)
    if not keep:
        return None, dropped, -1
    tombstones = any(r.key is not None and r.value is None for r in keep)
    if tombstones and horizon is None:
        horizon = rules.new_horizon
    elif not dropped:
        return batch, 0, horizon if tombstones and horizon is not None else -1
    rebuilt = build_batch(
        keep,
        base_offset=header.base_offset,
        compression=header.compression,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp,
        delete_horizon=horizon,
    )
    return rebuilt, dropped, horizon if tombstones and horizon is not None else -1


class LogCleaner:
    """Runs ``clean`` over the partitions ``partitions()`` returns, on one thread."""

    def __init__(self, partitions: Callable[[], Iterable[PartitionLog]], backoff_ms: int = 15_000) -> None:
        self._partitions = partitions
        self._backoff_s = backoff_ms / 1000
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="streamkit-log-cleaner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def run_once(self) -> int:
        cleaned = 0
        for partition in list(self._partitions()):
            if self._stop.is_set():
                break
            try:
                if clean(partition) is not None:
                    cleaned += 1
            except ValueError:
                continue  # closed while we looked at it
            except Exception:
                log.exception("compaction of %s failed; will retry", partition.directory)
        return cleaned

    def _run(self) -> None:
        while not self._stop.wait(self._backoff_s):
            self.run_once()
