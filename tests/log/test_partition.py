"""PartitionLog on real files: offsets, reads, rolling, timestamp lookups, retention,
DeleteRecords, truncation, flush policy and configuration."""

from __future__ import annotations

import os
import struct
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest

from streamkit.log import (
    Compression,
    ConfigError,
    CorruptBatchError,
    InvalidBatchError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    Record,
    TimestampType,
    build_batch,
    decode_batch,
)
from streamkit.log.batch import crc_of, parse_header, verify_integrity
from streamkit.log.checkpoint import Checkpoint
from streamkit.log.errors import BatchTooLargeError

from .conftest import (
    T0,
    FakeClock,
    OpenLog,
    make_batch,
    make_records,
    payload,
    read_batches,
    read_records,
    segment_files,
    split_batches,
)

# -- append and offsets --------------------------------------------------------------------


def test_offsets_are_assigned_consecutively(open_log: OpenLog) -> None:
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    sizes = [1, 3, 5, 2, 1]
    sent = [make_batch(n, tag=f"b{i}", compression=i % 5) for i, n in enumerate(sizes)]
    results = [log.append(b) for b in sent]
    assert [(r.base_offset, r.last_offset) for r in results] == [(0, 0), (1, 3), (4, 8), (9, 10), (11, 11)]
    assert all(r.log_append_time == -1 for r in results)
    assert (log.log_end_offset, log.high_watermark) == (12, 12)
    stored = read_batches(log)
    assert [payload(b) for b in stored] == [payload(b) for b in sent]  # byte for byte
    assert [parse_header(b).base_offset for b in stored] == [0, 1, 4, 9, 11]
    records = read_records(log)
    assert [r.offset for r in records] == list(range(12))
    assert [r.value for r in records] == [r.value for i, n in enumerate(sizes)
                                          for r in make_records(n, tag=f"b{i}")]


def test_producer_base_offset_is_ignored(open_log: OpenLog) -> None:
    log = open_log()
    log.append(make_batch(2))
    result = log.append(make_batch(2, base_offset=999))
    assert result.base_offset == 2
    assert parse_header(log.read(2, 1)).base_offset == 2


def test_leader_epoch_is_stamped_without_breaking_the_crc(open_log: OpenLog) -> None:
    log = open_log()
    log.append(make_batch(2), leader_epoch=7)
    stored = log.read(0, 1)
    assert verify_integrity(stored).partition_leader_epoch == 7


def test_invalid_batches_are_refused_and_leave_the_log_unchanged(open_log: OpenLog) -> None:
    log = open_log()
    log.append(make_batch(1))
    good = make_batch(3)
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    not_transactional_control = build_batch(
        [Record(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", T0)], control=True
    )
    empty_control = build_batch([], control=True, transactional=True, producer_id=1,
                                producer_epoch=0, last_offset_delta=-1, max_timestamp=T0)
    cases = [
        (bytes(corrupt), CorruptBatchError),
        (good[:-1], CorruptBatchError),
        (not_transactional_control, InvalidBatchError),
        (empty_control, InvalidBatchError),
    ]
    for bad, error in cases:
        with pytest.raises(error):
            log.append(bad)
        assert log.log_end_offset == 1
    assert log.append(good).base_offset == 1
    assert log.append(make_batch(1)).base_offset == 4


# -- reads ---------------------------------------------------------------------------------


def test_read_from_any_offset_returns_the_batch_holding_it(open_log: OpenLog) -> None:
    log = open_log({"index.interval.bytes": 200})
    sent = [make_batch(n, tag=str(n)) for n in (4, 1, 6, 3, 2, 5)]
    for b in sent:
        log.append(b)
    bounds = []
    for b in read_batches(log):
        h = parse_header(b)
        bounds.append((h.base_offset, h.last_offset, b))
    for offset in range(log.log_end_offset):
        data = log.read(offset, 1)
        (base, last, batch) = next(x for x in bounds if x[0] <= offset <= x[1])
        assert data == batch
        assert base <= offset <= last
    assert log.read(log.log_end_offset, 1 << 20) == b""


@pytest.mark.parametrize("interval", [0, 150, 4096])
def test_read_honours_max_bytes_with_whole_batches(open_log: OpenLog, interval: int) -> None:
    log = open_log({"index.interval.bytes": interval})
    for i in range(30):
        log.append(make_batch(1 + i % 4, value_size=10 + 7 * i, tag=str(i)))
    stored = read_batches(log)
    sizes = [len(b) for b in stored]
    starts = [parse_header(b).base_offset for b in stored]
    assert len(log.segments) == 1
    for first in (0, 7, 29):
        offset = starts[first]
        for max_bytes in (0, 1, sizes[first] - 1, sizes[first], sizes[first] + 1,
                          sum(sizes[first : first + 3]), sum(sizes[first : first + 3]) + 5,
                          sum(sizes[first:]) - 1, 1 << 20):
            data = log.read(offset, max_bytes)
            # the largest run of whole batches within max_bytes, but at least one batch
            n, total = 0, 0
            while first + n < len(sizes) and total + sizes[first + n] <= max_bytes:
                total += sizes[first + n]
                n += 1
            n = max(n, 1)
            assert split_batches(data) == stored[first : first + n], (offset, max_bytes)


def test_read_beyond_64k_walks_batch_headers(open_log: OpenLog) -> None:
    """Reads that end far from an index entry (index.interval.bytes is large)."""
    log = open_log({"index.interval.bytes": 1 << 20})
    for i in range(120):
        log.append(make_batch(2, value_size=1000, tag=str(i)))
    stored = read_batches(log)
    size = len(stored[0])
    assert {len(b) for b in stored} == {size}
    for count in (1, 40, 65, 66, 100, 119):
        data = log.read(0, count * size + size - 1)
        assert split_batches(data) == stored[:count]
        data = log.read(20, count * size)  # offset 20 is the first record of batch 10
        assert split_batches(data) == stored[10 : 10 + count]


def test_read_with_max_offset(open_log: OpenLog) -> None:
    log = open_log()
    for i in range(4):
        log.append(make_batch(3, tag=str(i)))  # offsets [0-2] [3-5] [6-8] [9-11]
    stored = read_batches(log)
    big = 1 << 20
    assert split_batches(log.read(0, big, max_offset=6)) == stored[:2]
    assert split_batches(log.read(0, big, max_offset=4)) == stored[:2]  # [3-5] starts below 4
    assert split_batches(log.read(0, big, max_offset=3)) == stored[:1]
    assert split_batches(log.read(4, big, max_offset=9)) == stored[1:3]
    assert split_batches(log.read(0, big, max_offset=100)) == stored
    assert split_batches(log.read(0, 1, max_offset=6)) == stored[:1]
    assert log.read(3, big, max_offset=3) == b""
    assert log.read(0, big, max_offset=0) == b""
    assert log.read(9, big, max_offset=9) == b""


def _preads_of_a_held_back_read(open_log: OpenLog, directory: Path, batches: int,
                                monkeypatch: pytest.MonkeyPatch) -> int:
    """preads made by a read at the start of one big segment, bounded by a max_offset near
    its end (a read_committed fetch while a transaction is open)."""
    log = open_log({"index.interval.bytes": 4096}, directory=directory)
    batch = make_batch(1, value_size=100)
    for _ in range(batches):
        log.append(batch)
    assert len(log.segments) == 1
    calls = 0
    real_pread = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        nonlocal calls
        calls += 1
        return real_pread(fd, length, offset)

    with monkeypatch.context() as patch:
        patch.setattr(os, "pread", counting)
        data, nxt = log.read_chunk(0, 3 * len(batch), max_offset=batches - 10)
    assert len(split_batches(data)) == 3 and nxt == 3
    return calls


def test_read_with_max_offset_costs_the_same_on_any_segment_size(
    open_log: OpenLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = _preads_of_a_held_back_read(open_log, tmp_path / "small-0", 1_000, monkeypatch)
    big = _preads_of_a_held_back_read(open_log, tmp_path / "big-0", 20_000, monkeypatch)
    assert small == big <= 4


def test_read_with_max_offset_across_index_entries(open_log: OpenLog) -> None:
    """The bound is found from the index entry below max_offset: every (offset, max_offset)
    pair agrees with a plain read cut at the first batch based at or past max_offset."""
    log = open_log({"index.interval.bytes": 150})
    for i in range(30):
        log.append(make_batch(1 + i % 3, tag=str(i), value_size=20 + i))
    stored = read_batches(log)
    bases = [parse_header(b).base_offset for b in stored]
    for offset in range(0, log.log_end_offset, 2):
        first = max(i for i, b in enumerate(bases) if b <= offset)
        for max_offset in range(offset, log.log_end_offset + 1, 3):
            for max_bytes in (1, 400, 1 << 20):
                got = split_batches(log.read(offset, max_bytes, max_offset=max_offset))
                allowed = [b for b in stored[first:] if parse_header(b).base_offset < max_offset]
                if not allowed:
                    assert got == []
                    continue
                assert got == allowed[: len(got)] and got
                assert len(got) == 1 or sum(map(len, got)) <= max_bytes
                if len(got) < len(allowed):  # stopped only because the next did not fit
                    assert sum(map(len, got)) + len(allowed[len(got)]) > max_bytes


def test_read_chunk_returns_the_offset_to_read_next(open_log: OpenLog) -> None:
    log = open_log()
    for i in range(3):
        log.append(make_batch(3, tag=str(i)))  # [0-2] [3-5] [6-8]
    log.roll()
    log.append(make_batch(3, tag="3"))  # [9-11] in a second segment
    stored = read_batches(log)
    two = len(stored[0]) + len(stored[1])
    big = 1 << 20

    def chunk(offset: int, max_bytes: int, max_offset: int | None = None) -> tuple[list[bytes], int]:
        data, nxt = log.read_chunk(offset, max_bytes, max_offset)
        assert data == log.read(offset, max_bytes, max_offset)
        return split_batches(data), nxt

    assert chunk(0, two) == (stored[:2], 6)
    assert chunk(0, two - 1) == (stored[:1], 3)
    assert chunk(4, 1) == (stored[1:2], 6)  # the batch holding 4 is [3-5]
    assert chunk(0, big) == (stored[:3], 9)  # a read stops at the segment's end
    assert chunk(9, big) == (stored[3:], 12)
    assert chunk(12, big) == ([], 12)
    assert chunk(0, big, max_offset=4) == (stored[:2], 6)
    assert chunk(3, big, max_offset=3) == ([], 3)


def test_read_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    for _ in range(3):
        log.append(make_batch(3))
    with pytest.raises(OffsetOutOfRangeError) as err:
        log.read(10, 100)
    assert (err.value.offset, err.value.log_start_offset, err.value.log_end_offset) == (10, 0, 9)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    assert log.read(9, 100) == b""
    log.delete_records_before(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    assert parse_header(log.read(4, 1)).base_offset == 3  # the batch holding offset 4


def test_reads_after_close_fail(open_log: OpenLog) -> None:
    log = open_log()
    log.append(make_batch(1))
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.read(0, 100)
    with pytest.raises(ValueError, match="closed"):
        log.append(make_batch(1))


# -- rolling -------------------------------------------------------------------------------


def test_roll_at_segment_bytes(open_log: OpenLog, part_dir: Path) -> None:
    size = len(make_batch(1))
    log = open_log({"segment.bytes": 3 * size})
    for _ in range(10):
        log.append(make_batch(1))  # the same size every time
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert [s.size for s in log.segments] == [3 * size, 3 * size, 3 * size, size]
    assert [p.name for p in segment_files(part_dir)] == [f"{b:020d}.log" for b in (0, 3, 6, 9)]
    assert all(p.stat().st_size <= 3 * size for p in segment_files(part_dir))
    assert [r.offset for r in read_records(log)] == list(range(10))
    # a batch larger than segment.bytes gets a segment of its own
    log.append(make_batch(10))
    log.append(make_batch(1))
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9, 10, 20]


def test_explicit_roll(open_log: OpenLog) -> None:
    log = open_log()
    log.roll()  # an empty active segment is not rolled
    assert len(log.segments) == 1
    log.append(make_batch(2))
    log.roll()
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.append(make_batch(1))
    assert [(s.base_offset, s.next_offset) for s in log.segments] == [(0, 2), (2, 3)]


def _wide_batch(last_offset_delta: int) -> bytes:
    """A valid batch (framing, CRC-32C, record count) spanning ``last_offset_delta + 1``
    offsets. Its body holds one record: the log never decodes records on append or read,
    and a compacted batch may hold fewer records than offsets anyway."""
    out = bytearray(make_batch(1))
    struct.pack_into(">i", out, 23, last_offset_delta)
    struct.pack_into(">i", out, 57, last_offset_delta + 1)
    struct.pack_into(">I", out, 17, crc_of(out))
    return bytes(out)


def test_roll_before_offsets_outgrow_the_32_bit_relative_index(open_log: OpenLog) -> None:
    """Index entries store offset - base offset as int32 (as in Kafka): a batch whose last
    offset would not fit goes to a new segment based at its own base offset."""
    settings = {"index.interval.bytes": 0}  # index every batch, the worst case
    log = open_log(settings)
    big = 2**31 - 1
    log.append(_wide_batch(big - 1))  # offsets 0 .. 2^31-2
    log.append(make_batch(1))  # offset 2^31-1: relative offset Int.MaxValue still fits
    assert [s.base_offset for s in log.segments] == [0]
    log.append(make_batch(1))  # offset 2^31 does not
    assert [s.base_offset for s in log.segments] == [0, big + 1]
    log.append(make_batch(2))
    log.append(_wide_batch(big - 1))  # its last offset would be > base + 2^31-1
    base = big + 4
    assert [s.base_offset for s in log.segments] == [0, big + 1, base]
    log.append(_wide_batch(1))  # offsets base + 2^31-1 and one more: the second does not fit
    assert [s.base_offset for s in log.segments] == [0, big + 1, base, base + big]
    log.flush()  # used to fail for good with struct.error
    stored = read_batches(log)
    assert [parse_header(b).base_offset for b in stored] == [0, big, big + 1, big + 2, base, base + big]
    log.close()
    log = open_log(settings)
    assert read_batches(log) == stored
    assert log.log_end_offset == base + big + 2
    assert parse_header(log.read(base + 5, 1)).base_offset == base


@pytest.mark.parametrize("t0", [0, T0], ids=["epoch", "now"])
def test_roll_at_segment_ms_by_record_timestamps(open_log: OpenLog, t0: int) -> None:
    log = open_log({"segment.ms": 1000})
    for ts in (t0, t0 + 500, t0 - 2000, t0 + 1000):  # at most segment.ms after the first
        log.append(make_batch(1, ts=ts))
    assert len(log.segments) == 1
    log.append(make_batch(1, ts=t0 + 1001))
    assert [s.base_offset for s in log.segments] == [0, 4]
    log.append(make_batch(1, ts=t0 + 2001))
    assert len(log.segments) == 2
    log.append(make_batch(1, ts=t0 + 2002))
    assert [s.base_offset for s in log.segments] == [0, 4, 6]


def test_roll_at_segment_ms_by_log_append_time(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log({"segment.ms": 1000, "message.timestamp.type": "LogAppendTime"})
    log.append(make_batch(1, ts=0))
    clock.advance(1000)
    log.append(make_batch(1, ts=0))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(make_batch(1, ts=0))
    assert [s.base_offset for s in log.segments] == [0, 2]


# -- timestamps ----------------------------------------------------------------------------


def _expected_lookup(records: list[Record], target: int, start: int = 0) -> tuple[int, int] | None:
    for r in records:
        if r.offset >= start and r.timestamp >= target:
            return r.offset, r.timestamp
    return None


# per batch: record timestamps (out of order within and across batches, duplicates)
TIMESTAMP_BATCHES = [
    [100, 300, 200], [150], [250, 120], [90, 95], [400, 350, 400], [310], [305, 500, 10],
    [10], [499], [600, 600], [550], [20, 30, 40, 50], [700], [650, 100], [701],
]


@pytest.mark.parametrize(("interval", "segment_bytes"), [(0, 400), (100, 400), (300, 1500), (4096, 400)])
def test_offset_for_timestamp_is_exact(open_log: OpenLog, interval: int, segment_bytes: int) -> None:
    """Brute force against every target; a sparse time index (interval 300) is the case
    where starting the scan one entry too late would skip a qualifying batch."""
    log = open_log({"index.interval.bytes": interval, "segment.bytes": segment_bytes})
    for i, stamps in enumerate(TIMESTAMP_BATCHES):
        log.append(build_batch(make_records(len(stamps), ts=[T0 + t for t in stamps], tag=str(i)),
                               compression=i % 5))
    assert len(log.segments) > (1 if segment_bytes > 1000 else 3)
    records = read_records(log)
    for target in range(T0 + 0, T0 + 703):
        assert log.offset_for_timestamp(target) == _expected_lookup(records, target), target
    assert log.offset_for_timestamp(T0 + 702) is None
    assert log.offset_for_timestamp(-1) == (0, T0 + 100)

    log.delete_records_before(9)  # inside the batch [8-10] holding 400, 350, 400
    records = read_records(log)
    assert records[0].offset == 9
    for target in range(T0 + 0, T0 + 703, 7):
        assert log.offset_for_timestamp(target) == _expected_lookup(records, target, 9), target


def _lines_run(call: Callable[[], object]) -> int:
    """Python lines executed by ``call``: an exact, machine-independent measure of work."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Callable[..., object]:
        nonlocal count
        count += event == "line"
        return tracer

    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


def _many_segments(open_log: OpenLog, directory: Path, segments: int) -> PartitionLog:
    batch = make_batch(1, ts=T0)
    log = open_log({"segment.bytes": len(batch)}, directory=directory)
    for i in range(segments - 1):
        log.append(make_batch(1, ts=T0 + i))
    log.append(make_batch(1, ts=T0 + 10_000))
    assert len(log.segments) == segments
    return log


def test_lookups_do_not_grow_with_the_segment_count(open_log: OpenLog, tmp_path: Path) -> None:
    """offset_for_timestamp bisects a running max of segment max timestamps instead of
    looking at every segment; read_chunk walks segments by index instead of copying the
    list's tail on every read."""
    few = _many_segments(open_log, tmp_path / "few-0", 10)
    many = _many_segments(open_log, tmp_path / "many-0", 400)
    for log in (few, many):
        assert log.offset_for_timestamp(T0 + 10_000) == (log.log_end_offset - 1, T0 + 10_000)
    assert _lines_run(lambda: few.offset_for_timestamp(T0 + 10_000)) == _lines_run(
        lambda: many.offset_for_timestamp(T0 + 10_000)
    )

    def peak_of_a_read(log: PartitionLog) -> int:
        tracemalloc.start()
        try:
            log.read_chunk(0, 1)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak_of_a_read(few)  # warm up whatever allocates once
    assert peak_of_a_read(many) - peak_of_a_read(few) < 8 * 100  # a 390-entry copy is 8 * 390


def test_offset_for_timestamp_follows_segment_changes(open_log: OpenLog, clock: FakeClock) -> None:
    """The running max is kept right through rolls, retention, DeleteRecords, truncation and
    reopening (timestamps that go down and up again across segments)."""
    stamps = [500, 100, 900, 300, 950, 200, 700, 990, 50, 800]
    log = open_log({"segment.bytes": 3 * len(make_batch(1)), "retention.bytes": 10**9})
    assert log.max_timestamp == -1
    for i, ts in enumerate(stamps):
        log.append(make_batch(1, ts=T0 + ts, tag=str(i)))

    def check() -> None:
        records = read_records(log)
        for target in range(T0, T0 + 1000, 10):
            assert log.offset_for_timestamp(target) == _expected_lookup(records, target), target
        # segments keep their max even when DeleteRecords cut below it (Kafka does the same)
        assert log.max_timestamp == max(s.max_timestamp for s in log.segments)

    check()
    log.delete_records_before(4)
    log.apply_retention()
    check()
    log.truncate_to(8)
    check()
    log.append(make_batch(1, ts=T0 + 999))
    log.close()
    log = open_log({"segment.bytes": 3 * len(make_batch(1))})
    check()


def test_log_append_time_stamps_the_clock(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log({"message.timestamp.type": "LogAppendTime"})
    sent = build_batch(make_records(3, ts=[5, 1, 3]), compression=Compression.ZSTD)
    clock.now = T0 + 123
    result = log.append(sent)
    assert result.log_append_time == T0 + 123
    clock.now = T0 + 456
    assert log.append(make_batch(2, ts=T0 + 10**9)).log_append_time == T0 + 456
    first, second = read_batches(log)
    header = verify_integrity(first)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == T0 + 123
    assert [r.timestamp for r in decode_batch(first)[1]] == [T0 + 123] * 3
    assert [r.value for r in decode_batch(first)[1]] == [r.value for r in make_records(3)]
    assert [r.timestamp for r in decode_batch(second)[1]] == [T0 + 456] * 2
    assert log.offset_for_timestamp(T0 + 200) == (3, T0 + 456)
    assert log.offset_for_timestamp(T0 + 10**9) is None


def test_create_time_keeps_producer_timestamps(open_log: OpenLog) -> None:
    log = open_log()
    sent = make_batch(2, ts=[7, 3])
    assert log.append(sent).log_append_time == -1
    assert log.read(0, 1) == sent


# -- max.message.bytes ---------------------------------------------------------------------


def test_max_message_bytes(open_log: OpenLog) -> None:
    batch = make_batch(5)
    log = open_log({"max.message.bytes": len(batch)})
    assert log.append(batch).base_offset == 0
    bigger = make_batch(6)
    with pytest.raises(BatchTooLargeError):
        log.append(bigger)
    with pytest.raises(InvalidBatchError):
        log.append(bigger)
    assert log.log_end_offset == 5
    assert log.size_bytes == len(batch)


# -- retention -----------------------------------------------------------------------------


def _one_record_batches(open_log: OpenLog, settings: dict[str, object], stamps: list[int]):  # type: ignore[no-untyped-def]
    size = len(make_batch(1))
    log = open_log({"segment.bytes": 2 * size, **settings})
    for ts in stamps:
        log.append(make_batch(1, ts=ts))
    return log, size


def test_retention_ms_deletes_old_segments(open_log: OpenLog, clock: FakeClock, part_dir: Path) -> None:
    clock.now = T0 + 10_000
    # segments [0,1] [2,3] [4,5] [6]: newest records T0+100, T0+2000, T0+500 (out of order), T0+9000
    log, _ = _one_record_batches(open_log, {"retention.ms": 8000},
                             [T0, T0 + 100, T0 + 2000, T0 + 1500, T0 + 500, T0 + 200, T0 + 9000])
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    # expired: newest record older than now - retention.ms = T0 + 2000 (strictly)
    assert log.apply_retention() == 1  # [0,1]; [2,3] holds T0+2000, so deletion stops there
    assert log.log_start_offset == 2
    assert [s.base_offset for s in log.segments] == [2, 4, 6]
    assert not (part_dir / f"{0:020d}.log").exists()
    assert not (part_dir / f"{0:020d}.index").exists()
    assert not (part_dir / f"{0:020d}.timeindex").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    clock.advance(1)
    assert log.apply_retention() == 2
    assert log.log_start_offset == 6
    assert [r.offset for r in read_records(log)] == [6]
    assert Checkpoint.read(part_dir).log_start_offset == 6  # persisted at once
    # everything expired: the active segment is rolled, then deleted
    clock.advance(10_000)
    assert log.apply_retention() == 1
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    assert [s.base_offset for s in log.segments] == [7]
    assert log.read(7, 100) == b""
    assert log.append(make_batch(1, ts=clock.now)).base_offset == 7


def test_retention_ms_without_timestamps_goes_by_the_file_mtime(open_log: OpenLog, clock: FakeClock,
                                                                 part_dir: Path) -> None:
    """Records without timestamps (-1) leave a segment with no max timestamp: like Kafka,
    retention.ms then looks at the segment file's mtime instead of deleting it at once."""
    clock.now = T0 + 10_000
    log = open_log({"retention.ms": 8000})
    log.append(build_batch([Record(b"k", b"no timestamp", -1)]))
    log.roll()
    log.append(make_batch(1, ts=clock.now))
    assert log.segments[0].max_timestamp == -1
    os.utime(log.segments[0].path, ns=(0, (clock.now - 8000) * 1_000_000))  # not yet older
    assert log.apply_retention() == 0
    assert read_records(log)[0].value == b"no timestamp"
    os.utime(log.segments[0].path, ns=(0, (clock.now - 8001) * 1_000_000))
    assert log.apply_retention() == 1
    assert log.log_start_offset == 1


def test_retention_ms_needs_cleanup_policy_delete(open_log: OpenLog, clock: FakeClock) -> None:
    clock.now = T0 + 10**9
    log, _ = _one_record_batches(open_log, {"retention.ms": 1000, "cleanup.policy": "compact"},
                             [T0] * 5)
    assert log.apply_retention() == 0
    assert log.log_start_offset == 0


def test_retention_bytes(open_log: OpenLog, part_dir: Path) -> None:
    size = len(make_batch(1))
    log = open_log({"segment.bytes": 3 * size, "retention.bytes": 7 * size})
    for _ in range(13):
        log.append(make_batch(1))
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9, 12]
    assert log.size_bytes == 13 * size
    # delete the oldest while what remains would still hold at least retention.bytes
    assert log.apply_retention() == 2
    assert (log.log_start_offset, log.size_bytes) == (6, 7 * size)
    assert [p.name[:20] for p in segment_files(part_dir)] == [f"{b:020d}" for b in (6, 9, 12)]
    assert log.apply_retention() == 0
    assert [r.offset for r in read_records(log)] == list(range(6, 13))


def test_retention_bytes_never_deletes_the_active_segment(open_log: OpenLog) -> None:
    size = len(make_batch(1))
    log = open_log({"segment.bytes": 3 * size, "retention.bytes": 0})
    for _ in range(5):
        log.append(make_batch(1))
    assert log.apply_retention() == 1
    assert [s.base_offset for s in log.segments] == [3]
    assert log.log_start_offset == 3


# -- DeleteRecords -------------------------------------------------------------------------


def test_delete_records_before(open_log: OpenLog, part_dir: Path) -> None:
    size = len(make_batch(2))
    log = open_log({"segment.bytes": 2 * size})
    for i in range(6):
        log.append(make_batch(2, tag=str(i)))  # segments [0-3] [4-7] [8-11]
    assert log.delete_records_before(5) == 5
    assert log.log_start_offset == 5
    assert [s.base_offset for s in log.segments] == [4, 8]
    assert not (part_dir / f"{0:020d}.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    assert parse_header(log.read(5, 1)).base_offset == 4  # the batch holding offset 5
    assert [r.offset for r in read_records(log)] == list(range(5, 12))
    assert log.delete_records_before(2) == 5  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(13)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(-1)
    assert log.delete_records_before(12) == 12  # up to the high watermark
    assert read_records(log) == []
    assert log.append(make_batch(1)).base_offset == 12
    assert [r.offset for r in read_records(log)] == [12]


def test_delete_records_respects_a_held_back_high_watermark(open_log: OpenLog) -> None:
    log = open_log()
    log.append(make_batch(5))
    log.set_high_watermark(3)
    assert log.high_watermark == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(4)
    assert log.delete_records_before(3) == 3


# -- truncation ----------------------------------------------------------------------------


def test_truncate_to(open_log: OpenLog, part_dir: Path) -> None:
    size = len(make_batch(5, ts=T0))
    log = open_log({"segment.bytes": 2 * size}, checkpoint_interval_ms=0)
    stamps = [T0 + 100, T0 + 900, T0 + 300, T0 + 200, T0 + 500, T0 + 50]
    for i, ts in enumerate(stamps):
        log.append(make_batch(5, ts=ts, tag=str(i)))  # [0-4] [5-9] | [10-14] [15-19] | [20-24] [25-29]
    log.flush()
    assert [s.base_offset for s in log.segments] == [0, 10, 20]
    before = read_batches(log)

    log.truncate_to(30)  # at or past the end: nothing to do
    assert log.log_end_offset == 30

    log.truncate_to(20)  # a segment boundary
    assert log.log_end_offset == 20
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert [p.name[:20] for p in segment_files(part_dir)] == [f"{b:020d}" for b in (0, 10)]
    assert not (part_dir / f"{20:020d}.index").exists()

    log.truncate_to(17)  # inside [15-19]: that batch goes whole
    assert (log.log_end_offset, log.high_watermark) == (15, 15)
    assert log.recovery_point <= 15
    assert read_batches(log) == before[:3]
    assert [s.next_offset for s in log.segments] == [10, 15]

    log.truncate_to(7)  # inside [5-9], which held segment 0's newest timestamp
    assert log.log_end_offset == 5
    assert [s.base_offset for s in log.segments] == [0]
    assert read_batches(log) == before[:1]
    assert log.segments[0].max_timestamp == T0 + 100  # not T0 + 900 any more
    assert log.offset_for_timestamp(T0 + 101) is None
    assert Checkpoint.read(part_dir).recovery_point <= 5

    result = log.append(make_batch(2, ts=T0 + 1000, tag="new"))
    assert (result.base_offset, result.last_offset) == (5, 6)
    assert read_batches(log)[:1] == before[:1]
    assert [r.value for r in read_records(log)[5:]] == [r.value for r in make_records(2, tag="new")]
    assert log.offset_for_timestamp(T0 + 600) == (5, T0 + 1000)

    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert read_batches(log) == []
    assert os.path.getsize(part_dir / f"{0:020d}.log") == 0


def test_truncate_below_the_log_start_offset(open_log: OpenLog) -> None:
    log = open_log()
    for _ in range(3):
        log.append(make_batch(4))
    log.delete_records_before(6)
    log.truncate_to(7)  # drops [4-7], which holds the log start offset
    assert log.log_end_offset == 4
    assert log.log_start_offset == 4  # never above the log end offset
    assert log.read(4, 100) == b""
    assert log.append(make_batch(1)).base_offset == 4
    assert [r.offset for r in read_records(log)] == [4]


# -- flush policy --------------------------------------------------------------------------


def test_flush_messages_one_advances_the_recovery_point_on_every_append(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log({"flush.messages": 1}, checkpoint_interval_ms=0)
    for n in (1, 3, 2):
        log.append(make_batch(n))
        assert log.recovery_point == log.log_end_offset
        assert Checkpoint.read(part_dir).recovery_point == log.log_end_offset


def test_flush_messages_counts_offsets(open_log: OpenLog) -> None:
    log = open_log({"flush.messages": 3})
    points = []
    for n in (1, 1, 1, 1, 1, 1, 5, 1):
        log.append(make_batch(n))
        points.append(log.recovery_point)
    assert points == [0, 0, 3, 3, 3, 6, 11, 11]


def test_default_policy_flushes_only_when_asked(open_log: OpenLog) -> None:
    log = open_log()
    for _ in range(5):
        log.append(make_batch(2))
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 10


def test_flush_ms(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log({"flush.ms": 1000})
    log.append(make_batch(1))
    assert log.recovery_point == 0
    assert not log.maybe_flush()
    clock.advance(1000)
    assert log.maybe_flush()
    assert log.recovery_point == 1
    assert not log.maybe_flush()  # nothing new
    log.append(make_batch(1))
    clock.advance(1000)
    log.append(make_batch(1))  # the append itself sees the time is up
    assert log.recovery_point == 3


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings",
    [
        {"no.such.config": 1},
        {"segment.bytes": "abc"},
        {"segment.bytes": 13},
        {"segment.bytes": 2**31},
        {"segment.ms": 0},
        {"retention.ms": -2},
        {"retention.bytes": -5},
        {"cleanup.policy": "bogus"},
        {"cleanup.policy": "compact,bogus"},
        {"message.timestamp.type": "WallClock"},
        {"compression.type": "brotli"},
        {"compression.gzip.level": 0},
        {"compression.gzip.level": 10},
        {"compression.lz4.level": 18},
        {"compression.zstd.level": 23},
        {"compression.zstd.level": -131073},
        {"max.compaction.lag.ms": 0},
        {"min.insync.replicas": 0},
        {"unclean.leader.election.enable": "yes"},
        {"preallocate": "1"},
        {"segment.index.bytes": 3},
        {"segment.jitter.ms": -1},
        {"file.delete.delay.ms": -1},
        {"local.retention.ms": -3},
        {"local.retention.bytes": -3},
        {"leader.replication.throttled.replicas": "0:x"},
        {"follower.replication.throttled.replicas": "*,0:1"},
        {"message.format.version": "banana"},
        {"message.timestamp.after.max.ms": -1},
        {"message.timestamp.before.max.ms": -1},
        {"message.timestamp.difference.max.ms": -1},
        {"log.retention.hours": "x"},
        {"min.cleanable.dirty.ratio": 1.5},
        {"min.cleanable.dirty.ratio": "nan"},
        {"flush.messages": 0},
        {"max.message.bytes": -1},
        {"index.interval.bytes": -1},
        {"delete.retention.ms": -1},
        {"min.compaction.lag.ms": "1.5"},
    ],
    ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()),
)
def test_config_errors(settings: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        LogConfig.from_kafka(settings)


def test_config_parsing() -> None:
    cfg = LogConfig.from_kafka({
        "segment.bytes": "1000", "retention.ms": -1, "cleanup.policy": "compact, delete",
        "log.index.interval.bytes": 10, "min.cleanable.dirty.ratio": "0.25",
        "message.timestamp.type": "LogAppendTime",
    })
    assert cfg.segment_bytes == 1000 and cfg.retention_ms == -1
    assert cfg.compact and cfg.delete
    assert cfg.index_interval_bytes == 10  # set through the broker-level synonym
    assert cfg.min_cleanable_dirty_ratio == 0.25
    assert cfg.log_append_time
    assert LogConfig.from_kafka(cfg.to_kafka()) == cfg
    assert cfg.overrides(LogConfig()) == {
        "segment.bytes": "1000", "retention.ms": "-1", "cleanup.policy": "compact,delete",
        "index.interval.bytes": "10", "min.cleanable.dirty.ratio": "0.25",
        "message.timestamp.type": "LogAppendTime",
    }
    assert LogConfig.from_kafka({}) == LogConfig()
    assert not LogConfig().compact and LogConfig().delete
