"""Restarts: clean close and reopen, crashes (``abandon``: no flush, no clean marker), lost
or damaged index files, torn writes and corrupt bytes in segment files."""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from streamkit.log import Compression, PartitionLog, build_batch
from streamkit.log.batch import parse_header
from streamkit.log.checkpoint import CHECKPOINT, CLEAN_SHUTDOWN, Checkpoint

from .conftest import (
    T0,
    FakeClock,
    OpenLog,
    batch_spans,
    config,
    cut_file,
    flip_byte,
    make_batch,
    make_records,
    read_batches,
    read_records,
    segment_files,
)

SETTINGS = {"segment.bytes": 600, "index.interval.bytes": 100}
# record timestamps per batch, out of order so the time index has work to do
STAMPS = [[T0 + (i * 37) % 500, T0 + (i * 53) % 700] for i in range(24)]


def _fill(log: PartitionLog, batches: int = 24) -> None:
    for i in range(batches):
        log.append(build_batch(make_records(2, ts=STAMPS[i], tag=f"b{i}", value_size=20 + i),
                               compression=i % 5))


def _snapshot(log: PartitionLog) -> dict[str, Any]:
    """Everything a client can observe."""
    lo, hi = T0 - 1, T0 + 702
    return {
        "start": log.log_start_offset,
        "end": log.log_end_offset,
        "hw": log.high_watermark,
        "segments": [(s.base_offset, s.next_offset, s.size, s.max_timestamp) for s in log.segments],
        "batches": read_batches(log),
        "single": [log.read(o, 1) for o in range(log.log_start_offset, log.log_end_offset + 1)],
        "times": [log.offset_for_timestamp(t) for t in range(lo, hi, 3)],
    }


def _index_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())
            if p.suffix in (".index", ".timeindex")}


def test_clean_restart_preserves_everything(open_log: OpenLog, part_dir: Path, clock: FakeClock) -> None:
    log = open_log({**SETTINGS, "retention.bytes": 2000})
    _fill(log)
    assert log.apply_retention() > 0
    log.delete_records_before(log.log_start_offset + 1)  # inside a batch
    before = _snapshot(log)
    assert before["start"] > 0 and len(before["segments"]) > 3
    log.close()
    assert (part_dir / CLEAN_SHUTDOWN).exists()
    indexes = _index_files(part_dir)

    log = open_log({**SETTINGS, "retention.bytes": 2000})
    assert not (part_dir / CLEAN_SHUTDOWN).exists()  # only between a close and an open
    assert _snapshot(log) == before
    assert _index_files(part_dir) == indexes
    assert log.recovery_point == log.log_end_offset
    # appends continue where they left off
    end = log.log_end_offset
    assert log.append(make_batch(3)).base_offset == end
    log.close()
    log = open_log({**SETTINGS, "retention.bytes": 2000})
    assert log.log_end_offset == end + 3
    assert read_batches(log)[: len(before["batches"])] == before["batches"]


@pytest.mark.parametrize("flushed", [False, True], ids=["nothing-flushed", "flushed"])
def test_unclean_restart_keeps_data_and_rebuilds_indexes(open_log: OpenLog, part_dir: Path, tmp_path: Path,
                                                          flushed: bool) -> None:
    """A crash (``abandon``: index entries only in memory, no marker, no checkpoint since
    open) loses nothing that reached the page cache, and the rebuilt indexes are the ones
    a clean close would have written."""
    twin = tmp_path / "twin"  # the same appends, shut down cleanly
    logs = []
    for directory in (part_dir, twin):
        log = open_log(SETTINGS, directory=directory, checkpoint_interval_ms=0)
        _fill(log, 12)
        if flushed:
            log.flush()  # the recovery point now trusts the earlier segments
        _fill(log, 12)
        logs.append(log)
    crashed, clean = logs
    before = _snapshot(crashed)
    assert _snapshot(clean) == before
    crashed.abandon()
    clean.close()
    assert not (part_dir / CLEAN_SHUTDOWN).exists()
    assert _index_files(part_dir) != _index_files(twin)  # the active segment's are stale

    log = open_log(SETTINGS)
    assert _snapshot(log) == before
    assert _index_files(part_dir) == _index_files(twin)
    assert log.recovery_point == log.log_end_offset  # everything verified is now trusted


# -- damaged index files -------------------------------------------------------------------


def _offset_entries(*rows: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">ii", *r) for r in rows)


def _time_entries(*rows: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">qi", *r) for r in rows)


INDEX_DAMAGE = {
    "deleted": None,
    "empty": b"",
    "zeros": bytes(16),
    "torn": b"\x00" * 8 + b"\x00\x00\x00",
    "random": random.Random(7).randbytes(24),
    "mid-batch": _offset_entries((0, 0), (1, 30)),
    "past-the-end": _offset_entries((0, 0), (5, 1 << 20)),
    "prefix-only": _offset_entries((0, 0)),  # well-formed, but the rest is unindexed
}
TIMEINDEX_DAMAGE = {
    "deleted": None,
    "empty": b"",
    "zeros": bytes(12),
    "torn": bytes(13),
    "random": random.Random(7).randbytes(36),
    "future": _time_entries((T0 + 10**9, 0)),
    "past": _time_entries((T0 - 10**9, 0)),
    "beyond-segment": _time_entries((T0, 0), (T0 + 5000, 10_000)),
}


@pytest.mark.parametrize("shutdown", ["clean", "unclean"])
@pytest.mark.parametrize(
    ("suffix", "damage"),
    [(".index", k) for k in INDEX_DAMAGE] + [(".timeindex", k) for k in TIMEINDEX_DAMAGE],
)
def test_damaged_index_files_are_rebuilt(open_log: OpenLog, part_dir: Path, shutdown: str,
                                         suffix: str, damage: str) -> None:
    """The damaged segment is an old one, which recovery trusts either way (after a clean
    shutdown, or below the recovery point), so only the index sanity checks stand between a
    bad index and wrong answers."""
    log = open_log(SETTINGS, checkpoint_interval_ms=0)
    _fill(log)
    log.flush()
    before = _snapshot(log)
    assert len(log.segments) > 3
    if shutdown == "clean":
        log.close()
    else:
        log.abandon()
    indexes = _index_files(part_dir)
    victim = segment_files(part_dir, suffix)[1]
    content = (INDEX_DAMAGE if suffix == ".index" else TIMEINDEX_DAMAGE)[damage]
    if content is None:
        victim.unlink()
    else:
        victim.write_bytes(content)

    log = open_log(SETTINGS)
    assert _snapshot(log) == before
    assert _index_files(part_dir) == indexes


# -- torn writes ---------------------------------------------------------------------------


def _crashed_log(open_log: OpenLog, part_dir: Path, clean_marker: bool) -> list[bytes]:
    """Two segments, the last with three batches (its last one compressed); returns the
    stored batches."""
    batches = [build_batch(make_records(3, ts=T0 + i, tag=str(i), value_size=60)) for i in range(5)]
    batches.append(build_batch(make_records(2, ts=T0 + 5, tag="5", value_size=30),
                               compression=Compression.GZIP))
    log = open_log({"segment.bytes": 3 * len(batches[0])})
    for batch in batches:
        log.append(batch)
    assert [len(batch_spans(s.path)) for s in log.segments] == [3, 3]
    stored = read_batches(log)
    if clean_marker:  # the disk lost the tail although the broker shut down cleanly
        log.close()
    else:
        log.abandon()
    return stored


@pytest.mark.parametrize("clean_marker", [False, True], ids=["crash", "clean-marker"])
def test_torn_last_batch_at_every_byte(open_log: OpenLog, part_dir: Path, tmp_path: Path,
                                       clean_marker: bool) -> None:
    stored = _crashed_log(open_log, part_dir, clean_marker)
    last_segment = segment_files(part_dir)[-1]
    pos, size, base, _last = batch_spans(last_segment)[-1]
    pristine = tmp_path / "pristine"
    shutil.copytree(part_dir, pristine)
    for cut in range(pos, pos + size):
        shutil.rmtree(part_dir)
        shutil.copytree(pristine, part_dir)
        cut_file(part_dir / last_segment.name, cut)
        log = PartitionLog.open(part_dir, config())
        try:
            assert log.log_end_offset == base, cut
            assert read_batches(log) == stored[:-1], cut
            assert os.path.getsize(part_dir / last_segment.name) == pos
            assert log.append(make_batch(1)).base_offset == base
        finally:
            log.abandon()  # no need for a clean close (and its fsyncs) of a throwaway copy


def test_torn_tail_of_an_older_segment_after_a_clean_shutdown(open_log: OpenLog, part_dir: Path) -> None:
    """The disk lost the end of a closed segment although the broker shut down cleanly: that
    is recovery as after a crash, so the later segments go (no offset hole) and the
    recovery point comes down to the new log end offset (flush.messages counts from it)."""
    settings = {"segment.bytes": 700, "flush.messages": 1}
    log = open_log(settings)
    for i in range(8):
        log.append(make_batch(2, tag=str(i), value_size=90))
    stored = read_batches(log)
    assert len(log.segments) >= 3
    log.close()
    first = segment_files(part_dir)[0]
    pos, _size, base, _last = batch_spans(first)[-1]
    cut_file(first, pos + 10)
    log = open_log(settings)
    assert log.log_end_offset == base
    assert [s.base_offset for s in log.segments] == [0]
    assert segment_files(part_dir) == [first]
    assert read_batches(log) == [b for b in stored if parse_header(b).base_offset < base]
    assert log.recovery_point == base
    log.append(make_batch(1))
    assert log.recovery_point == base + 1  # flush.messages=1 still fsyncs every append


def test_torn_write_after_flushed_data(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log({"segment.bytes": 1000}, checkpoint_interval_ms=0)
    for i in range(4):
        log.append(make_batch(3, tag=str(i), value_size=60))
    log.flush()
    flushed = read_batches(log)
    log.append(make_batch(3, tag="unflushed", value_size=60))
    log.abandon()
    last = segment_files(part_dir)[-1]
    cut_file(last, os.path.getsize(last) - 1)
    log = open_log({"segment.bytes": 1000})
    assert read_batches(log) == flushed


@pytest.mark.parametrize("junk", ["zeros", "random", "half-header"])
def test_junk_after_the_last_batch_is_cut(open_log: OpenLog, part_dir: Path, junk: str) -> None:
    log = open_log({"segment.bytes": 1000})
    for i in range(5):
        log.append(make_batch(2, tag=str(i)))
    stored = read_batches(log)
    log.abandon()
    last = segment_files(part_dir)[-1]
    size = os.path.getsize(last)
    tail = {"zeros": bytes(4096), "random": random.Random(1).randbytes(300),
            "half-header": stored[-1][:40]}[junk]
    with open(last, "ab") as f:
        f.write(tail)
    log = open_log({"segment.bytes": 1000})
    assert read_batches(log) == stored
    assert os.path.getsize(last) == size
    assert log.append(make_batch(1)).base_offset == 10


# -- corrupt bytes -------------------------------------------------------------------------

# where in a batch to flip a byte: a record byte, and header fields inside and outside the
# CRC (length, magic and the CRC itself are checked by framing, magic and CRC)
CORRUPTIONS = {
    "record-body": lambda size: size - 5,
    "attributes": lambda size: 22,
    "last-offset-delta": lambda size: 26,
    "max-timestamp": lambda size: 40,
    "record-count": lambda size: 60,
    "crc": lambda size: 18,
    "magic": lambda size: 16,
    "length-low": lambda size: 11,
    "length-high": lambda size: 8,
    "base-offset-down": lambda size: 0,  # the sign bit: a huge negative base offset
}


@pytest.mark.parametrize("where", list(CORRUPTIONS))
def test_corrupt_byte_truncates_there_and_drops_later_segments(open_log: OpenLog, part_dir: Path,
                                                              where: str) -> None:
    settings = {"segment.bytes": 700}
    log = open_log(settings, checkpoint_interval_ms=0)
    for i in range(3):
        log.append(make_batch(2, tag=str(i), value_size=90))
    log.flush()  # segment 0 is below the recovery point: trusted, not re-verified
    saved = (part_dir / CHECKPOINT).read_bytes()
    for i in range(3, 12):
        log.append(make_batch(2, tag=str(i), value_size=90))
    stored = read_batches(log)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    log.abandon()
    # Each roll checkpoints its recovery point; put back the one from before the rolls (a
    # stale checkpoint, e.g. restored from a backup) so that several segments are verified.
    (part_dir / CHECKPOINT).write_bytes(saved)

    victim = segment_files(part_dir)[1]
    spans = batch_spans(victim)
    pos, size, base, _last = spans[1]  # the second batch of the second segment
    flip_byte(victim, pos + CORRUPTIONS[where](size), 0x80 if where == "base-offset-down" else 0x01)
    log = open_log(settings)
    kept = [b for b in stored if parse_header(b).base_offset < base]
    assert log.log_end_offset == base
    assert read_batches(log) == kept
    assert os.path.getsize(victim) == pos
    assert [p.name[:20] for p in segment_files(part_dir)] == [f"{b:020d}" for b in bases[:2]]
    for later in bases[2:]:
        for suffix in (".log", ".index", ".timeindex"):
            assert not (part_dir / f"{later:020d}{suffix}").exists()
    assert log.append(make_batch(1)).base_offset == base


def _bytes_read_by_open(open_log: OpenLog, settings: dict[str, Any],
                        monkeypatch: pytest.MonkeyPatch) -> tuple[PartitionLog, int]:
    total = 0
    real_pread = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        nonlocal total
        data = real_pread(fd, length, offset)
        total += len(data)
        return data

    with monkeypatch.context() as patch:
        patch.setattr(os, "pread", counting)
        log = open_log(settings)
    return log, total


def test_unclean_open_verifies_only_past_the_last_roll(open_log: OpenLog, part_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A roll fsyncs the closed segment and checkpoints the new base as the recovery point,
    so after a crash (no flush, no clean close) only the active segment is read through;
    the closed ones are opened from their indexes. Recovery time does not grow with data."""
    settings = {"segment.bytes": 20_000, "index.interval.bytes": 256}
    log = open_log(settings)  # the default checkpoint interval: nothing but rolls save it
    for i in range(500):
        log.append(make_batch(1, tag=str(i), value_size=150))
    active = log.segments[-1]
    assert len(log.segments) >= 5 and log.recovery_point == active.base_offset
    assert Checkpoint.read(part_dir).recovery_point == active.base_offset
    stored = read_batches(log)
    total_size = log.size_bytes
    # the crash also tears the active segment's last batch: that one is verified and cut
    log.abandon()
    cut_file(active.path, active.size - 1)
    log, read = _bytes_read_by_open(open_log, settings, monkeypatch)
    assert read_batches(log) == stored[:-1]
    closed = len(log.segments) - 1
    # the active segment twice (verified, then its headers replayed into the producer state
    # from the roll's snapshot), a little of each closed one
    assert read < 2 * active.size + closed * 2_000, (read, total_size)
    assert log.recovery_point == log.log_end_offset


@pytest.mark.parametrize("checkpoint_interval_ms", [0, 60_000])
def test_unclean_open_keeps_the_producer_state(open_log: OpenLog, checkpoint_interval_ms: int) -> None:
    """The flush of an unclean open checkpoints (at once with a zero checkpoint interval),
    and a checkpoint saves a producer snapshot: it must hold the loaded state, not an empty
    one that the next open would trust."""
    log = open_log(checkpoint_interval_ms=checkpoint_interval_ms)
    log.append(build_batch(make_records(2), producer_id=5, producer_epoch=0, base_sequence=0))
    log.abandon()
    for _ in range(2):
        log = open_log(checkpoint_interval_ms=checkpoint_interval_ms)
        assert list(log.producers.producers) == [5]
        log.abandon()


def test_missing_checkpoint_verifies_everything(open_log: OpenLog, part_dir: Path) -> None:
    """Without a checkpoint (and so without a trusted recovery point) even the first
    segment is verified, although the clean-shutdown marker is there."""
    log = open_log({"segment.bytes": 700}, checkpoint_interval_ms=0)
    for i in range(8):
        log.append(make_batch(2, tag=str(i), value_size=90))
    stored = read_batches(log)
    log.close()
    (part_dir / CHECKPOINT).unlink()
    first = segment_files(part_dir)[0]
    pos, size, base, _last = batch_spans(first)[1]
    flip_byte(first, pos + size - 1)
    log = open_log({"segment.bytes": 700})
    assert log.log_end_offset == base
    assert read_batches(log) == stored[:1]
    assert len(log.segments) == 1


def test_log_start_offset_survives_crash(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log({"segment.bytes": 700})
    for i in range(8):
        log.append(make_batch(2, tag=str(i), value_size=90))
    log.delete_records_before(5)
    stored = read_batches(log)
    log.abandon()
    log = open_log({"segment.bytes": 700})
    assert log.log_start_offset == 5
    assert read_batches(log) == stored
    assert [r.offset for r in read_records(log)] == list(range(5, 16))
