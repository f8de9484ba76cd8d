"""PartitionLog: one partition as a directory of segments.

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset``. On a single
broker the high watermark follows the log end offset on every append and opens at it. A
``replicated`` partition (set by the cluster broker) moves it only through
``set_high_watermark`` (the leader: the minimum log end offset over the ISR; a follower: what
its leader reports), saves it in the checkpoint file and opens with the saved value.

Replication (KIP-101/279): every batch carries its leader's epoch (``partitionLeaderEpoch``);
the partition keeps where each epoch starts in its leader epoch cache
(``streamkit.log.leader_epochs``, file ``leader-epoch-checkpoint``), updated by appends and
cut by truncation and by a moving log start. A follower stores its leader's batches verbatim
at the leader's offsets with ``append_replica``, updating the producer state and the
transaction index exactly as the leader's appends did.

Durability (Kafka's ``flush.messages`` / ``flush.ms``): appends go to the page cache and are
fsynced when that many offsets, or that much time, have accumulated since the last fsync;
``flush.messages=1`` therefore fsyncs before every append returns (acknowledge-after-fsync).
``flush()`` fsyncs and advances the recovery point; the checkpoint file records it at most
every ``checkpoint_interval_ms`` and at close. Rolling a segment fsyncs it and moves the
recovery point to the new segment's base, and that is checkpointed at once. After an unclean
stop every segment from the recovery point on (so at most the active one, plus whatever was
appended since the last checkpoint) is verified batch by batch (framing, CRC-32C, offset
order), the first invalid byte and everything after it is cut, and the indexes are rebuilt.

Thread safety: all public methods take one lock, so the background cleaner may swap segments
while the broker's event loop appends and reads.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from streamkit.log.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    check_batch,
    iter_batch_spans,
    verify_integrity,
    with_log_append_time,
)
from streamkit.log.checkpoint import CLEAN_SHUTDOWN, Checkpoint, fsync_dir
from streamkit.log.config import LogConfig
from streamkit.log.errors import (
    CorruptBatchError,
    InvalidBatchError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)
from streamkit.log.leader_epochs import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from streamkit.log.producer_state import AppendOrigin, ProducerStateManager, headers_from
from streamkit.log.recompress import check_timestamps, recompress
from streamkit.log.records import ControlType, control_type_of, decode_batch
from streamkit.log.retention import SegmentInfo, deletable_prefix
from streamkit.log.segment import Segment
from streamkit.log.swap import complete_swap, discard_swap, finish_interrupted_swaps
from streamkit.log.txn_index import AbortedTxn, collect_aborted

__all__ = ["AppendResult", "PartitionLog", "ReplicaAppendResult", "wall_clock_ms"]

log = logging.getLogger(__name__)

Clock = Callable[[], int]
_NEVER = 2**62  # flush.ms at or above this means "no time-based flush" (Kafka's default)
# Index entries hold offsets relative to the segment's base as int32: like Kafka, roll
# before a batch whose last offset would be further than this from the base.
_MAX_RELATIVE_OFFSET = 2**31 - 1
_CONTROL_BIT = 0x20
_TRANSACTIONAL_BIT = 0x10
_CODEC_BITS = 0x07


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime


class ReplicaAppendResult(NamedTuple):
    first_offset: int  # base offset of the first batch (-1 when no batch was given)
    last_offset: int  # last offset of the last batch: the next fetch starts after it
    batch_count: int


class _TxnIndexRebuild:
    """Recovery's half of the transaction indexes: the entries of the replayed range are
    dropped and rewritten from the markers the producer-state replay meets."""

    def __init__(self, partition: PartitionLog) -> None:
        self.partition = partition

    def replay_from(self, offset: int) -> None:
        for seg in self.partition.segments:
            if seg.txn_index.entries and seg.next_offset > offset:
                seg.txn_index.truncate_from(offset)

    def marker(self, producer_id: int, control_type: int, first_offset: int | None,
               marker_offset: int) -> None:
        if control_type == ControlType.ABORT and first_offset is not None:
            self.partition._index_abort(producer_id, first_offset, marker_offset)


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[Segment],
        checkpoint: Checkpoint,
        clock: Clock,
        checkpoint_interval_ms: int,
        epochs: LeaderEpochCache,
        replicated: bool = False,
    ) -> None:
        self.directory = directory
        self.config = config
        self.clock = clock
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.lock = threading.RLock()
        self._segments = segments
        self._bases: list[int] = []
        self._closed_max_ts: list[int] = []  # running max of the closed segments' max timestamps
        self._segments_changed()
        self._checkpoint = checkpoint
        self._epochs = epochs
        # Set by the cluster broker: appends leave the high watermark where it is. Changing
        # it on an open partition keeps the current high watermark.
        self.replicated = replicated
        self._high_watermark = self.log_end_offset
        self._last_flush_ms = clock()
        self._last_checkpoint_ms = self._last_flush_ms
        self._closed = False
        self._cache_config(config)
        self.producers = ProducerStateManager(directory)
        self._any_aborted = any(s.txn_index.entries for s in segments)

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path | str,
        config: LogConfig | None = None,
        clock: Clock = wall_clock_ms,
        checkpoint_interval_ms: int = 60_000,
        replicated: bool = False,
    ) -> PartitionLog:
        """Open (or create) a partition directory, recovering after an unclean stop.
        ``replicated``: see the class; the high watermark opens at its saved value."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = config or LogConfig()
        finish_interrupted_swaps(directory)
        marker = directory / CLEAN_SHUTDOWN
        clean = marker.exists()
        saved = Checkpoint.read(directory)
        checkpoint = saved or Checkpoint()
        if saved is None:
            clean = False
        bases = sorted(int(p.name[:20]) for p in directory.glob("*.log") if p.name[:20].isdigit())
        segments: list[Segment] = []
        truncated_at: int | None = None
        for i, base in enumerate(bases):
            if truncated_at is not None:
                doomed = Segment(directory, base, config.index_interval_bytes)
                log.warning("deleting segment %s after the torn one", doomed.path)
                doomed.delete()
                continue
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            trusted = clean or (next_base is not None and next_base <= checkpoint.recovery_point)
            if trusted:
                seg, cut = Segment.open_trusted(directory, base, config.index_interval_bytes)
            else:
                seg, cut = Segment.open_recovering(directory, base, config.index_interval_bytes)
            if cut:
                # A torn tail is recovery whatever the marker says: later segments would
                # leave an offset hole, and the saved recovery point may lie past the end.
                log.warning(
                    "recovery truncated %d bytes from %s (torn or corrupt tail at offset %d)",
                    cut, seg.path, seg.next_offset,
                )
                truncated_at = seg.next_offset
                clean = False
            segments.append(seg)
        if not segments:
            start = checkpoint.log_start_offset
            segments.append(Segment.create(directory, start, config.index_interval_bytes))
        end = segments[-1].next_offset
        checkpoint.log_start_offset = min(max(checkpoint.log_start_offset, 0), end)
        if checkpoint.log_start_offset < segments[0].base_offset:
            checkpoint.log_start_offset = segments[0].base_offset
        checkpoint.cleaner_offset = min(checkpoint.cleaner_offset, end)
        checkpoint.recovery_point = min(checkpoint.recovery_point, end)
        # The epoch file is saved before the batch that starts an epoch is written, so it
        # lacks no stored batch's epoch: after recovery cut a tail, dropping the entries
        # past the new end leaves exactly what a rebuild from the batches would, without
        # reading the recovered segment a third time. Only a missing file is rebuilt.
        epochs = LeaderEpochCache.load(directory)
        rebuild = epochs is None
        if epochs is None:
            epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        partition = cls(directory, config, segments, checkpoint, clock, checkpoint_interval_ms,
                        epochs, replicated)
        # Load before anything can checkpoint: each checkpoint saves a producer snapshot,
        # and one taken before loading would save (and later load) an empty state.
        partition.producers.load(segments, end, clock(), _TxnIndexRebuild(partition))
        if rebuild:
            partition._rebuild_epochs(checkpoint.log_start_offset)
        # The file may name epochs of batches that recovery cut or retention deleted.
        epochs.truncate_from_end(end)
        epochs.truncate_from_start(checkpoint.log_start_offset)
        if replicated:
            saved_hw = checkpoint.high_watermark  # -1 (unknown) opens at the log start
            partition._high_watermark = max(checkpoint.log_start_offset, min(saved_hw, end))
        if not clean:
            partition.flush()
        partition._write_checkpoint()
        marker.unlink(missing_ok=True)
        fsync_dir(directory)
        return partition

    def _rebuild_epochs(self, start: int) -> None:
        """Assign the leader epochs of the stored batches from ``start`` on, and save the
        file even when there are none, so that a missing file is rebuilt only once."""
        cache = self._epochs
        if self.log_end_offset > start:
            log.info("rebuilding %s from the batches' leader epochs", cache.path)
        for header, _control in headers_from(self._segments, start):
            epoch = header.partition_leader_epoch
            if epoch > cache.latest_epoch:
                cache.assign(epoch, header.base_offset, save=False)
        cache.save()

    def _segments_changed(self) -> None:
        """Recompute what is derived from the segment list, after anything but an append or
        a roll (which keep it up to date themselves)."""
        self._bases = [s.base_offset for s in self._segments]
        self._any_aborted = any(s.txn_index.entries for s in self._segments)
        self._closed_max_ts = []
        running = -1
        for seg in self._segments[:-1]:
            running = max(running, seg.max_timestamp)
            self._closed_max_ts.append(running)

    # -- offsets -------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._checkpoint.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._checkpoint.recovery_point

    @property
    def cleaner_offset(self) -> int:
        return self._checkpoint.cleaner_offset

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp in the log (-1 when empty), without a segment scan."""
        with self.lock:
            closed = self._closed_max_ts[-1] if self._closed_max_ts else -1
            return max(closed, self._segments[-1].max_timestamp) if self._segments else closed

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[Segment]:
        """The segments, oldest first (the last is the active one). Do not mutate."""
        return self._segments

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, held back to the first offset of the oldest open
        transaction: what read_committed consumers may read up to."""
        first_unstable = self.producers.first_unstable_offset() if self.producers.ongoing else None
        if first_unstable is None:
            return self._high_watermark
        return max(min(first_unstable, self._high_watermark), self.log_start_offset)

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start, upper), from the transaction
        indexes (nothing to look at, so no cost, while no transaction was ever aborted)."""
        if not self._any_aborted:
            return []
        with self.lock:
            first = max(bisect_right(self._bases, start) - 1, 0)
            return collect_aborted([s.txn_index for s in self._segments[first:]], start, upper)

    def _index_abort(self, producer_id: int, first_offset: int, marker_offset: int) -> None:
        """Add an aborted transaction to the index of the segment holding its marker."""
        first_unstable = self.producers.first_unstable_offset()
        lso = marker_offset + 1 if first_unstable is None else first_unstable
        i = max(bisect_right(self._bases, marker_offset) - 1, 0)
        self._segments[i].txn_index.append(AbortedTxn(producer_id, first_offset, marker_offset, lso),
                                           fsync=True)
        self._any_aborted = True

    def set_high_watermark(self, offset: int) -> None:
        """For replication: hold the high watermark below the log end offset."""
        with self.lock:
            self._high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))

    def checkpoint_high_watermark(self) -> bool:
        """Save the high watermark if it changed since the checkpoint was last written (the
        cluster broker calls this every replica.high.watermark.checkpoint.interval.ms, as
        Kafka writes replication-offset-checkpoint); True if it wrote."""
        with self.lock:
            if self._closed or self._checkpoint.high_watermark == self._high_watermark:
                return False
            self._checkpoint.high_watermark = self._high_watermark
            self._checkpoint.write(self.directory)
            return True

    # -- leader epochs -------------------------------------------------------------------

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """The (epoch, start offset) entries of this partition; change it only through the
        partition's methods, which hold its lock."""
        return self._epochs

    @property
    def latest_epoch(self) -> int:
        """The epoch of the newest entry of the leader epoch cache (-1: none)."""
        return self._epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-279): the largest epoch <= ``epoch`` and the offset
        where it ends here (the log end offset for the latest); (-1, -1) if none."""
        with self.lock:
            return self._epochs.end_offset_for(epoch, self.log_end_offset)

    def start_leader_epoch(self, epoch: int) -> None:
        """This replica became leader in ``epoch``: the epoch starts at the log end offset,
        before its first batch, so that followers asking for their older epochs learn
        where those end (Kafka's Partition.makeLeader does the same)."""
        with self.lock:
            self._check_open()
            self._epochs.assign(epoch, self.log_end_offset)

    # -- appending -----------------------------------------------------------------------

    def append(self, batch: bytes | memoryview, leader_epoch: int | None = None,
               origin: AppendOrigin = AppendOrigin.COORDINATOR) -> AppendResult:
        """Validate one batch (framing, magic, CRC-32C, counts, max.message.bytes), give it
        the next offsets, and store it byte for byte. This is the hot path of Produce.

        A batch with a producer id goes through the producer state first (see
        ``streamkit.log.producer_state``; ``origin`` picks the checks): a retried duplicate
        returns its original offsets and appends nothing.

        ``leader_epoch`` (a cluster's leader) is stamped into the batch; without it the
        batch keeps its own. Either way that epoch goes into the leader epoch cache."""
        batch = memoryview(batch)
        fields = check_batch(batch, self.config.max_message_bytes)
        attributes, last_delta, max_ts, producer_id = fields[5], fields[6], fields[8], fields[9]
        epoch = fields[2] if leader_epoch is None else leader_epoch
        if attributes & _CONTROL_BIT and not attributes & _TRANSACTIONAL_BIT:
            raise InvalidBatchError("a control batch must be transactional")
        if self._check_timestamps and not self._log_append_time and not attributes & _CONTROL_BIT:
            check_timestamps(batch, max_ts, self.clock(), self.config.timestamp_before_max_ms,
                             self.config.timestamp_after_max_ms)
        codec = self._target_codec
        if codec is not None and attributes & _CODEC_BITS != codec and not attributes & _CONTROL_BIT:
            batch = memoryview(recompress(batch, codec, self.config.compression_level))
            fields = check_batch(batch, self.config.max_message_bytes)
            last_delta = fields[6]
        with self.lock:
            if self._closed:
                self._check_open()
            if producer_id >= 0:
                duplicate = self.producers.check(producer_id, fields[10], fields[11], last_delta,
                                                 attributes, origin)
                if duplicate is not None:
                    return AppendResult(duplicate.first_offset, duplicate.last_offset,
                                        duplicate.timestamp if self._log_append_time else -1)
            log_append_time = -1
            if self._log_append_time:
                log_append_time = self.clock()
                batch = memoryview(with_log_append_time(batch, log_append_time))
                max_ts = log_append_time
            if leader_epoch is not None:
                stamped = bytearray(batch)
                stamped[12:16] = leader_epoch.to_bytes(4, "big", signed=True)
                batch = memoryview(stamped)
            active = self._segments[-1]
            base = active.next_offset
            nxt = base + last_delta + 1
            if epoch > self._epochs.latest_epoch:
                self._epochs.assign(epoch, base)  # saved before the batch is written
            # _roll_due and _maybe_flush_after_append, inlined: two calls are 5% of a small
            # batch's append.
            if active.size and (
                active.size + len(batch) > self._segment_bytes
                or nxt - 1 - active.base_offset > _MAX_RELATIVE_OFFSET
                or (
                    active.first_timestamp is not None  # 0 is a timestamp: no `or` shortcut
                    and max_ts - active.first_timestamp > self._segment_ms - self._roll_jitter_ms
                )
            ):
                self._roll()
                active = self._segments[-1]
            active.append(batch, base, nxt, max_ts)
            if producer_id >= 0:
                self._track_producer(batch, producer_id, fields[10], fields[11], base, nxt - 1, max_ts,
                                     attributes)
            if not self.replicated:
                self._high_watermark = nxt
            if nxt - self._checkpoint.recovery_point >= self._flush_messages or (
                self._timed_flush and self.clock() - self._last_flush_ms >= self.config.flush_ms
            ):
                self._flush()
            return AppendResult(base, nxt - 1, log_append_time)

    def append_replica(self, data: bytes | memoryview) -> ReplicaAppendResult:
        """A follower's append: the whole batches of a fetched chunk, stored byte for byte
        at the offsets their leader gave them (Kafka's appendAsFollower).

        Each batch is checked for framing, magic and CRC-32C, nothing else: no producer
        sequence checks (the producer state is updated from each batch as the leader's
        append updated it, so duplicates, the last stable offset and the transaction index
        come out the same), no recompression, no timestamp checks, no re-stamping, no
        max.message.bytes. The first batch may start past the log end offset (a compacted
        leader has offset gaps) but not below it, and each batch starts past the previous
        one (UnexpectedAppendOffsetError); bytes after the last whole batch are a
        CorruptBatchError. The high watermark does not move."""
        view = memoryview(data)
        batches = _whole_batches(view)
        if not batches:
            return ReplicaAppendResult(-1, -1, 0)
        with self.lock:
            self._check_open()
            first = batches[0][1].base_offset
            if first < self.log_end_offset:
                raise UnexpectedAppendOffsetError(first, self.log_end_offset)
            epochs = self._epochs
            for pos, header in batches:
                base, last, max_ts = header.base_offset, header.last_offset, header.max_timestamp
                batch = view[pos : pos + header.size]
                if header.partition_leader_epoch > epochs.latest_epoch:
                    epochs.assign(header.partition_leader_epoch, base)
                active = self._segments[-1]
                if self._roll_due(active, header.size, last, max_ts):
                    self._roll(base)
                    active = self._segments[-1]
                active.append(batch, base, last + 1, max_ts)
                if header.producer_id >= 0:
                    self._track_producer(batch, header.producer_id, header.producer_epoch,
                                         header.base_sequence, base, last, max_ts, header.attributes)
            self._maybe_flush_after_append(self.log_end_offset)
            return ReplicaAppendResult(first, batches[-1][1].last_offset, len(batches))

    def _roll_due(self, active: Segment, size: int, last_offset: int, max_ts: int) -> bool:
        """Whether a batch of ``size`` bytes ending at ``last_offset`` starts a new segment."""
        # Past the int32 of the relative index offsets a new segment is needed even when the
        # active one is empty (a follower's first batch after a gap of 2^31 offsets).
        if last_offset - active.base_offset > _MAX_RELATIVE_OFFSET:
            return True
        return bool(active.size) and (
            active.size + size > self._segment_bytes
            or (
                active.first_timestamp is not None  # 0 is a timestamp: no `or` shortcut
                and max_ts - active.first_timestamp > self._segment_ms - self._roll_jitter_ms
            )
        )

    def _track_producer(self, batch: memoryview, producer_id: int, epoch: int, first_seq: int,
                        base: int, last: int, max_ts: int, attributes: int) -> None:
        """The producer state's half of an append (after the batch is stored): the
        transaction a marker ends, and an aborted one into the transaction index."""
        ended = self.producers.update(producer_id, epoch, first_seq, base, last, max_ts, attributes,
                                      self.clock())
        if ended is not None and attributes & _CONTROL_BIT and control_type_of(batch) == ControlType.ABORT:
            self._index_abort(producer_id, ended, base)

    def _maybe_flush_after_append(self, end: int) -> None:
        if end - self._checkpoint.recovery_point >= self._flush_messages or (
            self._timed_flush and self.clock() - self._last_flush_ms >= self.config.flush_ms
        ):
            self._flush()

    def roll(self) -> None:
        """Close the active segment and start a new one at the log end offset."""
        with self.lock:
            if self._segments[-1].size:
                self._roll()

    def _roll(self, base_offset: int | None = None) -> None:
        """Start a new segment at ``base_offset`` (a follower's batch after an offset gap)
        or at the log end offset."""
        active = self._segments[-1]
        # fsync the segment being closed (Kafka flushes it at roll too): otherwise a power
        # loss could cut its tail at a batch boundary while the next segment survives, an
        # offset hole that recovery cannot tell from a compaction gap.
        active.flush(fsync=True)
        self.producers.take_snapshot(active.next_offset)
        base = active.next_offset if base_offset is None else base_offset
        seg = Segment.create(self.directory, base, self.config.index_interval_bytes)
        self._roll_jitter_ms = _roll_jitter(self.config)
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        running = self._closed_max_ts[-1] if self._closed_max_ts else -1
        self._closed_max_ts.append(max(running, active.max_timestamp))
        # Every segment below the new one is now fsynced (each roll fsyncs the one it closes,
        # open and close flush the rest), so the recovery point moves to the new base, as in
        # Kafka; saving it now (one small file next to the fsync of a whole segment) bounds
        # what an unclean open verifies to the active segment, whatever the partition's size.
        if seg.base_offset > self._checkpoint.recovery_point:
            self._checkpoint.recovery_point = seg.base_offset
            self._write_checkpoint()

    def maybe_flush(self) -> bool:
        """Flush if ``flush.ms`` has passed; the broker calls this on a timer."""
        with self.lock:
            if self._closed or self.log_end_offset == self._checkpoint.recovery_point:
                return False
            if self.clock() - self._last_flush_ms >= self.config.flush_ms:
                self._flush()
                return True
            return False

    def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point."""
        with self.lock:
            self._check_open()
            self._flush()

    def _flush(self) -> None:
        point = self._checkpoint.recovery_point
        for seg in reversed(self._segments):
            seg.flush(fsync=True)
            if seg.base_offset <= point:
                break
        self._checkpoint.recovery_point = self.log_end_offset
        now = self.clock()
        self._last_flush_ms = now
        if now - self._last_checkpoint_ms >= self.checkpoint_interval_ms:
            self._write_checkpoint()

    def _write_checkpoint(self) -> None:
        # The producer state snapshot goes with every checkpoint, so that opening after a
        # crash replays at most the headers appended since (see producer_state).
        self.producers.take_snapshot(self.log_end_offset)
        self._checkpoint.high_watermark = self._high_watermark
        self._checkpoint.write(self.directory)
        self._last_checkpoint_ms = self.clock()

    def expire_producers(self, expiration_ms: int) -> int:
        """Forget idempotent producers unseen for ``expiration_ms`` (producer.id.expiration.ms)."""
        with self.lock:
            return self.producers.remove_expired(self.clock(), expiration_ms)

    # -- reading -------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches starting with the one that holds ``offset`` (at least one batch,
        then more while within ``max_bytes``), none with a base offset >= ``max_offset``."""
        return self.read_chunk(offset, max_bytes, max_offset)[0]

    def read_chunk(self, offset: int, max_bytes: int, max_offset: int | None = None) -> tuple[bytes, int]:
        """Like ``read``, plus the offset to read next (past gaps left by compaction)."""
        with self.lock:
            self._check_open()
            if offset < self.log_start_offset or offset > self.log_end_offset:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)
            segments = self._segments
            for i in range(max(bisect_right(self._bases, offset) - 1, 0), len(segments)):
                seg = segments[i]
                pos = seg.position_of(offset)
                if pos is not None:
                    return seg.read(pos, max_bytes, max_offset)
            return b"", self.log_end_offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp``."""
        with self.lock:
            self._check_open()
            start = self.log_start_offset
            segments = self._segments
            # No segment before the first whose running max reaches the target can hold it.
            first = max(bisect_left(self._closed_max_ts, timestamp),
                        bisect_right(self._bases, start) - 1, 0)
            for i in range(first, len(segments)):
                seg = segments[i]
                if seg.max_timestamp < timestamp or seg.next_offset <= start:
                    continue
                hint = seg.time_index.lookup(timestamp)
                pos = seg.position_of(max(hint if hint is not None else seg.base_offset, start))
                if pos is None:
                    continue
                while pos < seg.size:
                    data, _next = seg.read(pos, 1 << 20)
                    for rel, size, _base, _last in iter_batch_spans(data):
                        found = _first_at_or_after(data[rel : rel + size], timestamp, start)
                        if found is not None:
                            return found
                        pos += size
                    if not data:
                        break
            return None

    # -- retention, DeleteRecords, truncation --------------------------------------------

    def apply_retention(self) -> int:
        """Delete segments past retention.ms / retention.bytes / the log start offset."""
        with self.lock:
            self._check_open()
            infos = [
                SegmentInfo(s.base_offset, s.next_offset, s.size, s.max_timestamp,
                            s.last_modified_ms() if s.max_timestamp < 0 else -1)
                for s in self._segments
            ]
            count = deletable_prefix(infos, self.config, self.clock(), self.log_start_offset)
            if count == 0:
                return 0
            if count == len(self._segments):
                self._roll()
            for seg in self._segments[:count]:
                log.info("retention deletes segment %s", seg.path)
                seg.delete()
            del self._segments[:count]
            self._segments_changed()
            self._checkpoint.log_start_offset = max(
                self._checkpoint.log_start_offset, self._segments[0].base_offset
            )
            self._high_watermark = max(self._high_watermark, self.log_start_offset)
            self._epochs.truncate_from_start(self.log_start_offset)
            self._write_checkpoint()
            fsync_dir(self.directory)
            return count

    def delete_records_before(self, offset: int) -> int:
        """Kafka's DeleteRecords: raise the log start offset to ``offset`` (at most the high
        watermark) and drop the segments wholly below it. Returns the new log start offset."""
        with self.lock:
            self._check_open()
            if offset < 0 or offset > self._high_watermark:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, self._high_watermark)
            if offset > self._checkpoint.log_start_offset:
                self._checkpoint.log_start_offset = offset
                self._checkpoint.cleaner_offset = max(self._checkpoint.cleaner_offset, offset)
                self._epochs.truncate_from_start(offset)
                self._write_checkpoint()
            # Only segments wholly below the new start go; time and size retention keep
            # their own schedule (Kafka's DeleteRecords does not run them).
            count = 0
            # Kafka's rule: a segment lies wholly below when the next one starts at or below
            # the offset (its own next offset says nothing when compaction emptied it).
            while count < len(self._segments) - 1 and self._segments[count + 1].base_offset <= offset:
                count += 1
            for seg in self._segments[:count]:
                seg.delete()
            del self._segments[:count]
            self._segments_changed()
            if count:
                fsync_dir(self.directory)
            return self.log_start_offset

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or past ``offset`` (a follower diverging from its leader)."""
        with self.lock:
            self._check_open()
            if offset >= self.log_end_offset:
                # An epoch this replica began as leader at the log end offset but never
                # wrote goes all the same (Kafka's truncateTo): its leader may be another.
                self._epochs.truncate_from_end(self.log_end_offset)
                return
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._segments.pop().delete()
            self._segments[-1].truncate_to(offset)
            self._segments_changed()
            end = self.log_end_offset
            # A straddling batch goes whole, so the end may fall below the log start offset.
            self._checkpoint.log_start_offset = min(self._checkpoint.log_start_offset, end)
            self._high_watermark = min(self._high_watermark, end)
            self._checkpoint.recovery_point = min(self._checkpoint.recovery_point, end)
            self._checkpoint.cleaner_offset = min(self._checkpoint.cleaner_offset, end)
            self._epochs.truncate_from_end(end)
            self.producers.truncate(self._segments, end, self.clock(), _TxnIndexRebuild(self))
            self._write_checkpoint()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start an empty log at ``offset`` (Kafka's
        truncateFullyAndStartAt): a follower whose leader's log now starts past this
        log's end, or whose whole log diverged."""
        if offset < 0:
            raise ValueError(f"a log cannot start at the negative offset {offset}")
        with self.lock:
            self._check_open()
            for seg in self._segments:
                seg.delete()
            self._segments = [Segment.create(self.directory, offset, self.config.index_interval_bytes)]
            self._segments_changed()
            cp = self._checkpoint
            cp.log_start_offset = cp.recovery_point = cp.cleaner_offset = offset
            self._high_watermark = offset
            self._epochs.clear()
            self.producers.truncate_fully()
            self._write_checkpoint()
            fsync_dir(self.directory)

    def update_config(self, config: LogConfig) -> None:
        with self.lock:
            self._cache_config(config)
            for seg in self._segments:
                seg.index_interval_bytes = config.index_interval_bytes

    def _cache_config(self, config: LogConfig) -> None:
        """Plain attributes for the settings the append path reads on every call."""
        self.config = config
        self._timed_flush = config.flush_ms < _NEVER
        self._log_append_time = config.log_append_time
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms
        self._roll_jitter_ms = _roll_jitter(config)
        self._flush_messages = config.flush_messages
        self._target_codec = config.target_codec
        self._check_timestamps = (config.timestamp_before_max_ms < _NEVER
                                  or config.timestamp_after_max_ms < _NEVER)

    # -- compaction support (used by streamkit.log.cleaner) ---------------------------

    def replace_segment(self, base_offset: int) -> bool:
        """Complete a compaction swap staged by the cleaner (``streamkit.log.swap``) for one
        inactive segment; False if the segment is gone or became the active one. The
        staged indexes are used as they are: nothing is scanned under the lock."""
        with self.lock:
            self._check_open()
            i = bisect_right(self._bases, base_offset) - 1
            if i < 0 or self._bases[i] != base_offset or i == len(self._segments) - 1:
                discard_swap(self.directory, base_offset)
                return False
            self._segments[i].close()
            # Keep the first segment even if emptied: compaction never moves the log start.
            if complete_swap(self.directory, base_offset, keep_empty=i == 0):
                self._segments[i], _cut = Segment.open_trusted(
                    self.directory, base_offset, self.config.index_interval_bytes
                )
            else:
                del self._segments[i]
            self._segments_changed()
            return True

    @property
    def delete_horizon(self) -> int:
        """When compaction may next drop a tombstone it kept (-1: none pending)."""
        return self._checkpoint.delete_horizon

    def set_cleaner_offset(self, offset: int, delete_horizon: int = -1) -> None:
        with self.lock:
            self._checkpoint.cleaner_offset = offset
            self._checkpoint.delete_horizon = delete_horizon
            self._write_checkpoint()

    # -- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """Flush, checkpoint, and leave the clean-shutdown marker."""
        with self.lock:
            if self._closed:
                return
            self._flush()
            self._write_checkpoint()
            for seg in self._segments:
                seg.close()
            (self.directory / CLEAN_SHUTDOWN).touch()
            fsync_dir(self.directory)
            self._closed = True

    def abandon(self) -> None:
        """Close file descriptors without flushing or marking clean (tests of crashes)."""
        with self.lock:
            for seg in self._segments:
                seg.close()
            self._closed = True

    def delete(self) -> None:
        """Remove the partition and all its files."""
        with self.lock:
            for seg in self._segments:
                seg.delete()
            for path in self.directory.iterdir():
                path.unlink()
            self.directory.rmdir()
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"partition log {self.directory} is closed")


def _whole_batches(view: memoryview) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch of a fetched chunk, each checked for framing, magic
    and CRC-32C, their offsets strictly increasing."""
    out: list[tuple[int, BatchHeader]] = []
    pos, end, next_offset = 0, len(view), -1
    while pos < end:
        size = int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD
        if end - pos < LOG_OVERHEAD or size > end - pos:
            raise CorruptBatchError(f"{end - pos} bytes after the last whole batch at position {pos}")
        if size < HEADER_SIZE:
            raise CorruptBatchError(f"record batch at position {pos} claims {size} bytes, less than a header")
        header = verify_integrity(view[pos : pos + size])
        if header.last_offset_delta < 0:
            raise InvalidBatchError(f"record batch has the negative last offset delta {header.last_offset_delta}")
        if header.base_offset < next_offset:
            raise UnexpectedAppendOffsetError(header.base_offset, next_offset)
        out.append((pos, header))
        next_offset = header.next_offset
        pos += size
    return out


def _roll_jitter(config: LogConfig) -> int:
    """Kafka's randomSegmentJitter: each segment rolls up to ``segment.jitter.ms`` before
    ``segment.ms``, so that partitions created together do not all roll at once."""
    if config.segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.segment_ms))


def _first_at_or_after(batch: bytes, timestamp: int, min_offset: int) -> tuple[int, int] | None:
    _header, records = decode_batch(batch, verify=False)
    for record in records:
        if record.timestamp >= timestamp and record.offset >= min_offset:
            return record.offset, record.timestamp
    return None
