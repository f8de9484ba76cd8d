"""Helpers and fixtures shared by the partition-log tests.

Everything works on real files under ``tmp_path``: build batches, read a whole log back
through ``PartitionLog.read`` (checking every batch's CRC on the way), and the directory
surgery crash tests need (copy a partition, cut or flip bytes of a segment file).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from streamkit.log import LogConfig, PartitionLog, Record, build_batch, decode_batch
from streamkit.log.batch import iter_batch_spans, parse_header, verify_integrity

T0 = 1_700_000_000_000  # a realistic epoch-millis base for record timestamps


class FakeClock:
    """An injectable ``clock`` for PartitionLog: milliseconds that move only when told."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def make_records(
    n: int,
    *,
    ts: int | Sequence[int] = T0,
    key: bytes | None = b"k",
    value_size: int = 16,
    tag: str = "",
) -> list[Record]:
    """``n`` records; ``ts`` is one timestamp for all or one per record; values are
    distinct (they carry ``tag`` and the index) and compressible."""
    stamps = [ts] * n if isinstance(ts, int) else list(ts)
    assert len(stamps) == n
    out = []
    for i in range(n):
        value = f"{tag}#{i}:".encode().ljust(value_size, b"v")
        out.append(Record(key=key, value=value, timestamp=stamps[i]))
    return out


def make_batch(n: int = 1, **kwargs: Any) -> bytes:
    """One batch of ``make_records(n, ...)``; ``compression`` and producer fields pass on."""
    batch_kwargs = {
        k: kwargs.pop(k)
        for k in list(kwargs)
        if k in ("compression", "producer_id", "producer_epoch", "base_sequence", "base_offset",
                 "transactional", "timestamp_type")
    }
    return build_batch(make_records(n, **kwargs), **batch_kwargs)


def split_batches(data: bytes) -> list[bytes]:
    """The whole batches of a read result; fails if anything is left over."""
    out = [data[pos : pos + size] for pos, size, _b, _l in iter_batch_spans(data)]
    assert sum(map(len, out)) == len(data), "read returned a partial batch"
    return out


def read_batches(log: PartitionLog, start: int | None = None, max_bytes: int = 1 << 20) -> list[bytes]:
    """Every stored batch from ``start`` (default: the log start offset) to the log end
    offset, fetched as a consumer would, each one checked for framing and CRC-32C."""
    offset = log.log_start_offset if start is None else start
    out: list[bytes] = []
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        if not data:
            # Only compaction leaves offsets below the end with no batch at or after them
            # (it dropped the last batches before an empty active segment).
            assert not any(s.size and s.next_offset > offset for s in log.segments), (
                f"read({offset}) returned nothing though batches follow"
            )
            break
        batches = split_batches(data)
        for batch in batches:
            verify_integrity(batch)
        assert parse_header(batches[-1]).next_offset > offset
        out.extend(batches)
        offset = parse_header(batches[-1]).next_offset
    return out


def consume(log: PartitionLog, max_bytes: int = 1 << 20) -> list[bytes]:
    """Every batch from the log start offset, fetched as a consumer does with
    ``read_chunk``: always continue at the offset it returns, until the log end offset."""
    offset = log.log_start_offset
    out: list[bytes] = []
    while offset < log.log_end_offset:
        data, next_offset = log.read_chunk(offset, max_bytes)
        assert next_offset > offset, f"read_chunk({offset}) makes no progress"
        batches = split_batches(data)
        for batch in batches:
            verify_integrity(batch)
        if batches:
            assert parse_header(batches[-1]).next_offset <= next_offset
        out.extend(batches)
        offset = next_offset
    assert offset == log.log_end_offset
    return out


def read_records(log: PartitionLog) -> list[Record]:
    """Every record from the log start offset on, in offset order."""
    start = log.log_start_offset
    return [r for b in read_batches(log) for r in decode_batch(b)[1] if r.offset >= start]


def payload(batch: bytes) -> bytes:
    """A stored batch without its base offset: what must equal the appended bytes."""
    return batch[8:]


def segment_files(directory: Path, suffix: str = ".log") -> list[Path]:
    return sorted(p for p in directory.glob(f"*{suffix}") if p.name[:20].isdigit())


def batch_spans(path: Path) -> list[tuple[int, int, int, int]]:
    """(position, size, base_offset, last_offset) of every batch in a segment file."""
    return list(iter_batch_spans(path.read_bytes()))


def flip_byte(path: Path, position: int, mask: int = 0xFF) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        (b,) = f.read(1)
        f.seek(position)
        f.write(bytes([b ^ mask]))


def cut_file(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def copy_partition(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def config(settings: Mapping[str, Any] | None = None) -> LogConfig:
    """A LogConfig from Kafka-named settings; retention off unless asked for, so that tests
    with old-looking timestamps never lose data to the default retention.ms."""
    base = {"retention.ms": -1}
    base.update(settings or {})
    return LogConfig.from_kafka(base)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def part_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


OpenLog = Callable[..., PartitionLog]


@pytest.fixture
def open_log(part_dir: Path, clock: FakeClock) -> Iterator[OpenLog]:
    """``open_log(settings=None, directory=part_dir, **open_kwargs)``: open a partition with
    the test's clock; whatever is still open at the end is closed."""
    opened: list[PartitionLog] = []

    def _open(settings: Mapping[str, Any] | None = None, directory: Path | None = None,
              **kwargs: Any) -> PartitionLog:
        kwargs.setdefault("clock", clock)
        log = PartitionLog.open(directory or part_dir, config(settings), **kwargs)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()
