"""Compaction: the background ``LogCleaner``, the dirty-ratio gate, min.compaction.lag.ms,
control batches, and what a pass may and may not touch."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from streamkit.log import (
    Compression,
    ControlType,
    LogCleaner,
    PartitionLog,
    Record,
    build_batch,
    build_control_batch,
    clean,
    decode_batch,
)
from streamkit.log.batch import parse_header
from streamkit.log.checkpoint import Checkpoint
from streamkit.log.records import decode_control_key
from streamkit.log.segment import Segment

from .conftest import (
    T0,
    FakeClock,
    OpenLog,
    read_batches,
    read_records,
    segment_files,
    split_batches,
)

NOW = T0 + 100_000


def _compact(settings: dict[str, object] | None = None) -> dict[str, object]:
    return {"cleanup.policy": "compact", "segment.bytes": 400, **(settings or {})}


def _keyed(i: int, key: bytes, ts: int = T0, value: bytes | None = b"") -> bytes:
    return build_batch([Record(key, value if value is None else value or f"v{i}".encode(), ts)])


def _latest(records: list[Record]) -> dict[bytes | None, bytes | None]:
    return {r.key: r.value for r in records}


def _segment_bytes(log: PartitionLog) -> list[bytes]:
    return [s.read_all() for s in log.segments]


# -- the background thread -----------------------------------------------------------------


def test_log_cleaner_compacts_in_the_background_while_appends_go_on(
    open_log: OpenLog, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    clock.now = NOW
    log = open_log(_compact({"min.cleanable.dirty.ratio": 0.0}))  # clean whatever is dirty
    cleaner = LogCleaner(lambda: [log], backoff_ms=5)
    sent: list[Record] = []
    caplog.set_level(logging.INFO, logger="streamkit.log")
    cleaner.start()
    try:
        for i in range(300):
            batch = build_batch([Record(f"key-{i % 7}".encode(), f"value-{i}".encode(), T0 + i)],
                                compression=i % 5)
            sent.append(decode_batch(batch)[1][0])
            log.append(batch)
            if i % 50 == 49:
                time.sleep(0.02)  # let the cleaner get a pass in between
        deadline = time.monotonic() + 10
        while log.cleaner_offset < log.segments[-1].base_offset and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        cleaner.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("compacted" in r.getMessage() for r in caplog.records)
    assert log.cleaner_offset == log.segments[-1].base_offset  # every inactive segment cleaned
    remaining = read_records(log)
    assert len(remaining) < len(sent)
    expected = {r.key: r.value for r in sent}
    assert _latest(remaining) == expected
    originals = {i: r.value for i, r in enumerate(sent)}
    assert all(originals[r.offset] == r.value for r in remaining)  # offsets kept
    cleaned = [r.key for r in remaining if r.offset < log.segments[-1].base_offset]
    assert len(cleaned) == len(set(cleaned))  # each key at most once in the cleaned part
    assert log.log_end_offset == 300
    # and the result is durable as it is
    log.abandon()
    log = open_log(_compact())
    assert read_records(log) == remaining


def test_log_cleaner_stops_promptly_and_runs_once_on_demand(open_log: OpenLog, clock: FakeClock) -> None:
    clock.now = NOW
    log = open_log(_compact())
    for i in range(40):
        log.append(_keyed(i, b"k"))
    cleaner = LogCleaner(lambda: [log], backoff_ms=60_000)
    cleaner.start()
    started = time.monotonic()
    cleaner.stop()
    assert time.monotonic() - started < 5
    assert not any(t.name == "streamkit-log-cleaner" for t in threading.enumerate())
    assert log.cleaner_offset == 0  # its first pass would only come after the backoff
    assert cleaner.run_once() == 0  # a stopped cleaner does no more passes
    on_demand = LogCleaner(lambda: [log])
    assert on_demand.run_once() == 1
    assert on_demand.run_once() == 0  # nothing dirty any more
    # one "k" left in the cleaned segments, the active segment untouched
    assert len(read_records(log)) == 1 + 40 - log.segments[-1].base_offset


def test_log_cleaner_skips_closed_partitions(open_log: OpenLog, clock: FakeClock,
                                           caplog: pytest.LogCaptureFixture) -> None:
    clock.now = NOW
    log = open_log(_compact())
    for i in range(40):
        log.append(_keyed(i, f"k{i % 3}".encode()))
    expected = _latest(read_records(log))
    log.close()
    assert LogCleaner(lambda: [log], backoff_ms=10).run_once() == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    log = open_log(_compact())  # whatever the cleaner left behind is finished or dropped
    assert _latest(read_records(log)) == expected
    assert not list(log.directory.glob("*.swap")) and not list(log.directory.glob("*.cleaned"))


def test_clean_needs_cleanup_policy_compact(open_log: OpenLog) -> None:
    log = open_log({"segment.bytes": 200})
    for i in range(20):
        log.append(_keyed(i, b"same"))
    before = _segment_bytes(log)
    assert clean(log, now_ms=NOW, force=True) is None
    assert _segment_bytes(log) == before


# -- min.cleanable.dirty.ratio ---------------------------------------------------------------


def _ratio(log: PartitionLog) -> float:
    inactive = log.segments[:-1]
    total = sum(s.size for s in inactive)
    dirty = sum(s.size for s in inactive if s.next_offset > log.cleaner_offset)
    return dirty / total


def test_dirty_ratio_gates_cleaning(open_log: OpenLog, clock: FakeClock) -> None:
    clock.now = NOW
    log = open_log(_compact({"min.cleanable.dirty.ratio": 0.5}))
    for i in range(30):
        log.append(_keyed(i, f"k{i}".encode()))  # distinct keys: compaction keeps them all
    assert _ratio(log) == 1.0  # never cleaned: all dirty
    first = clean(log)
    assert first is not None and first.records_removed == 0
    assert log.cleaner_offset == log.segments[-1].base_offset
    assert clean(log) is None  # nothing dirty at all

    n = 30
    decisions = []
    while len(decisions) < 40:
        log.append(_keyed(n, f"k{n % 4}".encode()))  # overwrites: cleaning would remove some
        n += 1
        if len(log.segments) < 2 or log.segments[-2].next_offset <= log.cleaner_offset:
            continue  # no newly rolled segment yet
        ratio = _ratio(log)
        before = _segment_bytes(log)
        result = clean(log)
        decisions.append(ratio >= 0.5)
        if ratio < 0.5:
            assert result is None
            assert _segment_bytes(log) == before  # nothing touched
        else:
            assert result is not None and result.records_removed > 0
            assert log.cleaner_offset == log.segments[-1].base_offset
        if len(decisions) > 5 and True in decisions and False in decisions:
            break
    assert True in decisions and False in decisions
    # force ignores the ratio
    log.append(_keyed(n, b"k0"))
    log.roll()
    if _ratio(log) < 0.5:
        assert clean(log) is None
    assert clean(log, force=True) is not None
    assert _latest(read_records(log))[b"k0"] == f"v{n}".encode()


# -- max.compaction.lag.ms (KIP-354) ---------------------------------------------------------


def test_max_compaction_lag_forces_cleaning_below_the_dirty_ratio(open_log: OpenLog, clock: FakeClock) -> None:
    clock.now = NOW
    log = open_log(_compact({"min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000}))
    for i in range(30):
        log.append(_keyed(i, f"k{i}".encode(), ts=NOW))
    assert clean(log, force=True) is not None  # everything cleaned once
    for i in range(6):  # a little dirt, well below the 0.99 ratio
        log.append(_keyed(100 + i, b"k0", ts=NOW))
    log.roll()
    assert _ratio(log) < 0.99
    before = _segment_bytes(log)
    clock.now = NOW + 60_000  # not older than the lag yet
    assert clean(log) is None and _segment_bytes(log) == before
    clock.now = NOW + 60_001  # the oldest uncleaned record is now past max.compaction.lag.ms
    result = clean(log)
    assert result is not None and result.records_removed == 6
    assert [r.value for r in read_records(log) if r.key == b"k0"] == [b"v105"]


def test_max_compaction_lag_default_never_forces(open_log: OpenLog, clock: FakeClock) -> None:
    clock.now = NOW
    log = open_log(_compact({"min.cleanable.dirty.ratio": 0.99}))
    for i in range(30):
        log.append(_keyed(i, f"k{i}".encode(), ts=NOW))
    assert clean(log, force=True) is not None
    for i in range(6):
        log.append(_keyed(100 + i, b"k0", ts=NOW))
    log.roll()
    clock.now = NOW + 10 * 365 * 86_400_000
    assert clean(log) is None


# -- min.compaction.lag.ms -------------------------------------------------------------------


def test_min_compaction_lag(open_log: OpenLog, clock: FakeClock) -> None:
    lag = 5_000
    clock.now = T0 + 10_000
    log = open_log(_compact({"min.compaction.lag.ms": lag, "segment.bytes": 10_000}))
    # three segments: old, young (newest record younger than the lag), old again
    for stamps in ([T0] * 6, [T0, T0, T0 + 6_000, T0], [T0] * 6):
        for i, ts in enumerate(stamps):
            log.append(_keyed(i, f"k{i % 2}".encode(), ts=ts, value=f"{ts}-{i}".encode()))
        log.roll()
    _old, young, old_again, _active = log.segments
    untouched = [young.read_all(), old_again.read_all()]

    result = clean(log, force=True)
    assert result is not None and result.segments == 1
    assert [s.read_all() for s in log.segments[1:3]] == untouched
    cleaned = [r for r in read_records(log) if r.offset < young.base_offset]
    assert [(r.key, r.offset) for r in cleaned] == [(b"k0", 4), (b"k1", 5)]  # latest there

    # a young first segment blocks the whole pass
    log2 = open_log(_compact({"min.compaction.lag.ms": lag}), directory=log.directory.parent / "t-1")
    for i in range(6):
        log2.append(_keyed(i, b"k", ts=T0 + 9_000))
    log2.roll()
    before = _segment_bytes(log2)
    assert clean(log2, force=True) is None
    assert _segment_bytes(log2) == before

    # once the young segment ages, the rest is cleaned, against keys across all three
    clock.now = T0 + 6_000 + lag
    assert clean(log, force=True) is not None
    cleaned = [(r.key, r.offset) for r in read_records(log) if r.offset < log.segments[-1].base_offset]
    assert cleaned == [(b"k0", 14), (b"k1", 15)]


def test_explicit_now_overrides_the_clock(open_log: OpenLog, clock: FakeClock) -> None:
    clock.now = T0
    log = open_log(_compact({"min.compaction.lag.ms": 1000}))
    for i in range(10):
        log.append(_keyed(i, b"k", ts=T0))
    log.roll()
    assert clean(log, force=True) is None  # by the clock everything is too young
    assert clean(log, now_ms=T0 + 1000, force=True) is not None
    assert [r.offset for r in read_records(log)] == [9]


# -- tombstones and control batches ----------------------------------------------------------


def _stored(log: PartitionLog) -> list[tuple[bytes | None, bytes | None, int, int]]:
    return [(r.key, r.value, r.offset, r.timestamp) for r in read_records(log)]


def test_tombstones_get_a_delete_horizon_and_go_once_it_passes(open_log: OpenLog, clock: FakeClock,
                                                                part_dir: Path) -> None:
    """KIP-534: the first pass that keeps a tombstone stamps its batch with a delete horizon
    of now + delete.retention.ms; the tombstone goes on the first pass at or after it,
    however old its CreateTime. A consumer reading from the start in between sees it."""
    clock.now = T0 + 10_000
    log = open_log(_compact({"delete.retention.ms": 5_000, "segment.bytes": 10_000}))
    log.append(_keyed(0, b"old", ts=T0))
    log.append(_keyed(1, b"old", ts=T0 + 1_000, value=None))  # far older than the retention
    log.append(_keyed(2, b"new", ts=T0))
    log.append(_keyed(3, b"new", ts=T0 + 9_000, value=None))
    log.append(_keyed(4, b"live", ts=T0))
    log.append(build_batch([Record(b"x", b"1", T0 + 7), Record(b"x", None, T0 + 8)],
                           compression=Compression.GZIP))  # [5-6]: x=1 goes, its tombstone stays
    log.roll()
    horizon = clock.now + 5_000
    assert clean(log) is not None
    kept = [(b"old", None, 1, T0 + 1_000), (b"new", None, 3, T0 + 9_000), (b"live", b"v4", 4, T0),
            (b"x", None, 6, T0 + 8)]
    assert _stored(log) == kept  # timestamps unchanged
    headers = {parse_header(b).base_offset: parse_header(b) for b in read_batches(log)}
    for base in (1, 3, 5):
        assert headers[base].delete_horizon == horizon
    assert headers[5].compression == Compression.GZIP and headers[5].last_offset_delta == 1
    assert headers[4].delete_horizon is None  # no tombstone: copied as it was
    assert log.delete_horizon == horizon
    assert Checkpoint.read(part_dir).delete_horizon == horizon  # survives a restart

    clock.now = horizon - 1
    assert clean(log) is None  # nothing dirty, horizon not reached
    assert clean(log, force=True) is not None
    assert _stored(log) == kept  # a second pass keeps the horizon, does not renew it
    assert {parse_header(b).delete_horizon for b in read_batches(log)} == {horizon, None}

    clock.now = horizon
    assert clean(log) is not None  # the passed horizon alone starts a pass
    assert _stored(log) == [(b"live", b"v4", 4, T0)]
    assert log.delete_horizon == -1
    assert clean(log) is None


def test_delete_horizon_survives_restart_and_starts_the_cleaner(open_log: OpenLog, clock: FakeClock) -> None:
    clock.now = NOW
    settings = _compact({"delete.retention.ms": 1_000, "segment.bytes": 10_000})
    log = open_log(settings)
    log.append(_keyed(0, b"k"))
    log.append(_keyed(1, b"k", value=None))
    log.roll()
    assert clean(log) is not None
    assert [r.value for r in read_records(log)] == [None]
    log.close()
    log = open_log(settings)
    assert log.delete_horizon == NOW + 1_000
    clock.now = NOW + 1_000
    assert LogCleaner(lambda: [log]).run_once() == 1
    assert read_records(log) == []


def test_control_batches_are_kept(open_log: OpenLog, clock: FakeClock) -> None:
    clock.now = NOW
    log = open_log(_compact({"segment.bytes": 10_000}))
    pid = 77

    def txn(values: list[tuple[bytes, bytes]], seq: int) -> bytes:
        recs = [Record(k, v, T0) for k, v in values]
        return build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=seq,
                           transactional=True, compression=Compression.LZ4)

    log.append(txn([(b"a", b"1"), (b"b", b"1")], 0))
    commit = build_control_batch(ControlType.COMMIT, producer_id=pid, producer_epoch=0,
                                 coordinator_epoch=3, timestamp=T0)
    log.append(commit)  # offset 2
    log.append(txn([(b"a", b"2")], 2))
    abort = build_control_batch(ControlType.ABORT, producer_id=pid, producer_epoch=0,
                                coordinator_epoch=3, timestamp=T0)
    log.append(abort)  # offset 4
    log.append(txn([(b"a", b"3"), (b"b", b"3")], 3))
    log.append(commit)  # offset 7
    log.roll()
    result = clean(log, force=True)
    assert result is not None and result.records_removed == 3  # a=1, b=1, a=2

    batches = read_batches(log)
    controls = [b for b in batches if parse_header(b).is_control]
    # the markers stay (the first two, whose transactions have no record left, now carry a
    # delete horizon: a later pass drops them; see tests/log/test_transactions.py)
    assert [parse_header(b).base_offset for b in controls] == [2, 4, 7]
    assert [parse_header(b).delete_horizon for b in controls] == [NOW + 86_400_000, NOW + 86_400_000, None]
    assert controls[2][8:] == commit[8:]
    assert [decode_control_key(decode_batch(b)[1][0].key) for b in controls] == [
        ControlType.COMMIT, ControlType.ABORT, ControlType.COMMIT
    ]
    data = [b for b in batches if not parse_header(b).is_control]
    assert [(r.key, r.value, r.offset) for b in data for r in decode_batch(b)[1]] == [
        (b"a", b"3", 5), (b"b", b"3", 6)
    ]
    header = parse_header(data[0])
    assert header.is_transactional and header.producer_id == pid
    assert header.compression == Compression.LZ4


def test_partially_kept_batch_keeps_its_offsets_and_header(open_log: OpenLog, clock: FakeClock) -> None:
    """A batch that loses some records is rebuilt with the same base offset, lastOffsetDelta,
    producer fields, codec and max timestamp; it is no longer a producer-shaped batch (fewer
    records than offsets) but stays readable, as in Kafka."""
    clock.now = NOW
    log = open_log(_compact({"segment.bytes": 10_000}))
    first = build_batch([Record(b"x", b"1", T0), Record(b"y", b"1", T0 + 5), Record(b"z", b"1", T0 + 9)],
                        producer_id=9, producer_epoch=2, base_sequence=40, compression=Compression.ZSTD)
    log.append(first)
    log.append(_keyed(3, b"y"))
    log.roll()
    clean(log, force=True)
    rebuilt = read_batches(log)[0]
    before, after = parse_header(first), parse_header(rebuilt)
    assert (after.base_offset, after.last_offset_delta, after.record_count) == (0, 2, 2)
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (9, 2, 40)
    assert (after.compression, after.max_timestamp) == (Compression.ZSTD, before.max_timestamp)
    assert [(r.key, r.offset, r.timestamp) for r in decode_batch(rebuilt)[1]] == [
        (b"x", 0, T0), (b"z", 2, T0 + 9)
    ]


def test_cleaning_to_nothing_keeps_the_log_start_offset(
    open_log: OpenLog, clock: FakeClock, part_dir: Path
) -> None:
    """As in Kafka, compaction never moves the log start offset: the first segment stays
    (empty) when cleaned to nothing, later emptied ones go, and a consumer positioned in
    the compacted prefix reads on from the next retained batch, also after a restart."""
    clock.now = NOW
    settings = _compact({"segment.bytes": 100})
    log = open_log(settings)
    for i in range(6):
        log.append(_keyed(i, b"k"))  # one batch per segment
    assert len(log.segments) == 6
    assert clean(log, force=True) is not None
    assert [(s.base_offset, s.size) for s in log.segments][:1] == [(0, 0)]
    assert [s.base_offset for s in log.segments] == [0, 4, 5]
    assert len(segment_files(part_dir)) == 3
    assert log.log_start_offset == 0
    for offset in range(5):
        data, next_offset = log.read_chunk(offset, 1 << 20)
        assert [parse_header(b).base_offset for b in split_batches(data)] == [4]
        assert next_offset == 5
    assert log.offset_for_timestamp(0) == (4, T0)
    state = (log.log_start_offset, log.log_end_offset, read_records(log))
    assert [r.offset for r in state[2]] == [4, 5]
    # a second pass keeps it so, and DeleteRecords / retention checks do not drop segment 0
    log.append(_keyed(6, b"k"))
    assert clean(log, force=True) is not None
    assert [s.base_offset for s in log.segments] == [0, 5, 6]
    assert log.apply_retention() == 0
    assert log.delete_records_before(0) == 0
    assert [s.base_offset for s in log.segments] == [0, 5, 6]
    state = (log.log_start_offset, log.log_end_offset, read_records(log))
    log.abandon()
    log = open_log(settings)
    assert (log.log_start_offset, log.log_end_offset, read_records(log)) == state
    assert parse_header(log.read(0, 1)).base_offset == 5
    # DeleteRecords past the empty segment's range removes it
    assert log.delete_records_before(5) == 5
    assert [s.base_offset for s in log.segments] == [5, 6]


def test_compact_delete_retention_removes_an_emptied_first_segment_by_its_mtime(
    open_log: OpenLog, clock: FakeClock
) -> None:
    """With cleanup.policy=compact,delete the kept empty segment has no timestamps: retention
    goes by its file's mtime, which the cleaner carries over from the original segment."""
    clock.now = NOW
    log = open_log({"cleanup.policy": "compact,delete", "segment.bytes": 100, "retention.ms": 50_000})
    for i in range(3):
        log.append(_keyed(i, b"k", ts=NOW))
    first = log.segments[0].path
    os.utime(first, ns=(0, (NOW - 60_000) * 1_000_000))  # written a minute ago
    assert clean(log, force=True) is not None
    assert log.segments[0].size == 0
    assert first.stat().st_mtime_ns == (NOW - 60_000) * 1_000_000
    assert log.apply_retention() == 1
    assert [s.base_offset for s in log.segments] == [1, 2]
    assert log.log_start_offset == 1


def test_swap_uses_the_cleaners_indexes_without_scanning(
    open_log: OpenLog, clock: FakeClock, part_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cleaner writes the cleaned segment's indexes itself: swapping it in under the
    partition lock rebuilds nothing, and the indexes equal what a rebuild would make."""
    clock.now = NOW
    settings = _compact({"segment.bytes": 3_000, "index.interval.bytes": 120})
    log = open_log(settings)
    for i in range(80):
        log.append(_keyed(i, f"k{i % 9}".encode(), ts=T0 + (i * 37) % 500, value=f"value-{i}".encode() * 3))
    log.roll()
    rebuilds: list[Path] = []
    real_recover = Segment.recover

    def recording(seg: Segment, verify: bool) -> int:
        rebuilds.append(seg.path)
        return real_recover(seg, verify)

    with monkeypatch.context() as patch:
        patch.setattr(Segment, "recover", recording)
        assert clean(log, force=True) is not None
    assert rebuilds == []
    state = (read_batches(log), [log.offset_for_timestamp(t) for t in range(T0, T0 + 500, 7)])
    log.close()
    indexes = {p.name: p.read_bytes() for p in part_dir.iterdir() if p.suffix in (".index", ".timeindex")}
    rebuilt = tmp_path / "rebuilt-0"
    shutil.copytree(part_dir, rebuilt)
    for name in indexes:
        (rebuilt / name).unlink()
    log = open_log(settings, directory=rebuilt)
    assert (read_batches(log), [log.offset_for_timestamp(t) for t in range(T0, T0 + 500, 7)]) == state
    log.close()
    assert {n: (rebuilt / n).read_bytes() for n in indexes} == indexes
