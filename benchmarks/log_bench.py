"""Partition log throughput against raw file I/O, measured in the same run.

For each batch size (1 MiB and 16 KiB) append ``--gib`` GiB through PartitionLog (which
validates framing and CRC-32C, assigns offsets and keeps sparse indexes) and through plain
``os.write`` of the same bytes to a plain file; both fsync once at the end (the log's
default flush policy). Then read everything back: PartitionLog.read in 1 MiB fetches versus
``os.read`` of 1 MiB chunks. Prints MiB/s and the ratio log/raw (target >= 0.8).

Then the time to open a partition of the same size made of several segments
(``--open-segment-mib``, default 128 MiB): written by a child process that is then killed
with SIGKILL, so the directory is what a crash leaves (no clean-shutdown marker, the
checkpoint as of the last segment roll, index entries of the active segment lost). Printed:
the unclean open (target < 3 s), the clean open after a close (target < 1 s), and the worst
case on its own line: an unclean open with the checkpoint deleted too, which re-verifies
every batch.

Usage: python benchmarks/log_bench.py [--gib 1.0] [--open-segment-mib 128] [--dir DIR]
(a smoke run: --gib 0.0625 --open-segment-mib 16 --rounds 1)
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from streamkit.log import LogConfig, PartitionLog, Record, build_batch

MIB = 1024 * 1024


def make_batch(batch_bytes: int) -> bytes:
    """One batch of ~``batch_bytes`` holding 1 KiB records (random, so compression-free)."""
    per = 1024
    n = max(1, batch_bytes // (per + 20))
    payload = os.urandom(per)
    records = [Record(key=str(i).encode(), value=payload, timestamp=1_700_000_000_000 + i) for i in range(n)]
    return build_batch(records)


def bench_append(directory: Path, batch: bytes, count: int) -> tuple[float, PartitionLog]:
    log = PartitionLog.open(directory, LogConfig())
    start = time.perf_counter()
    for _ in range(count):
        log.append(batch)
    log.flush()
    return time.perf_counter() - start, log


def bench_raw_write(path: Path, batch: bytes, count: int) -> float:
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(count):
        os.write(fd, batch)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - start


def bench_read(log: PartitionLog) -> tuple[float, int]:
    start = time.perf_counter()
    offset, total = 0, 0
    end = log.log_end_offset
    while offset < end:
        data, offset = log.read_chunk(offset, MIB)
        total += len(data)
    return time.perf_counter() - start, total


def bench_raw_read(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    total = 0
    while chunk := os.read(fd, MIB):
        total += len(chunk)
    os.close(fd)
    return time.perf_counter() - start, total


def _write_then_die(directory: Path, config: LogConfig, batch: bytes, count: int) -> None:
    """Child process: append, then die by SIGKILL with nothing closed or flushed."""
    log = PartitionLog.open(directory, config)
    for _ in range(count):
        log.append(batch)
    os.kill(os.getpid(), signal.SIGKILL)


def _timed_open(directory: Path, config: LogConfig) -> tuple[float, PartitionLog]:
    start = time.perf_counter()
    log = PartitionLog.open(directory, config)
    return time.perf_counter() - start, log


def bench_open(directory: Path, batch: bytes, count: int, segment_bytes: int) -> tuple[float, float, float, int]:
    """(unclean, clean, unclean without checkpoint) open times and the segment count."""
    config = LogConfig.from_kafka({"segment.bytes": segment_bytes})
    child = multiprocessing.get_context("fork").Process(
        target=_write_then_die, args=(directory, config, batch, count)
    )
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL, child.exitcode
    assert (directory / "checkpoint").exists()
    unclean_s, log = _timed_open(directory, config)
    segments = len(log.segments)
    log.close()
    clean_s, log = _timed_open(directory, config)
    log.abandon()  # leaves no clean-shutdown marker
    (directory / "checkpoint").unlink()  # no recovery point either: verify every batch
    worst_s, log = _timed_open(directory, config)
    log.close()
    return unclean_s, clean_s, worst_s, segments


def _best(rounds: int, first: Callable[[], float], second: Callable[[], float]) -> tuple[float, float]:
    """Best (smallest) time of each of two measurements over ``rounds`` rounds, alternating
    which goes first so that page-cache and writeback effects do not favour either."""
    a, b = [], []
    for i in range(rounds):
        if i % 2:
            b.append(second())
            a.append(first())
        else:
            a.append(first())
            b.append(second())
    return min(a), min(b)


def bench_size(root: Path, label: str, size: int, total_bytes: int, rounds: int, open_segment_bytes: int) -> None:
    batch = make_batch(size)
    count = total_bytes // len(batch)
    mib = count * len(batch) / MIB
    raw_path = root / "raw.bin"
    log_dir = root / f"p-{size}"

    def raw_write() -> float:
        raw_path.unlink(missing_ok=True)
        return bench_raw_write(raw_path, batch, count)

    def log_append() -> float:
        shutil.rmtree(log_dir, ignore_errors=True)
        elapsed, log = bench_append(log_dir, batch, count)
        log.close()
        return elapsed

    log_w, raw_w = _best(rounds, log_append, raw_write)
    print(f"{label:>8} {'append':>7} {mib / log_w:>10.0f} {mib / raw_w:>10.0f} {raw_w / log_w:>8.2f}")

    def raw_read() -> float:
        elapsed, n = bench_raw_read(raw_path)
        assert n == count * len(batch)
        return elapsed

    def log_read() -> float:
        log = PartitionLog.open(log_dir, LogConfig())
        elapsed, n = bench_read(log)
        log.close()
        assert n == count * len(batch), (n, count * len(batch))
        return elapsed

    log_r, raw_r = _best(rounds, log_read, raw_read)
    print(f"{label:>8} {'read':>7} {mib / log_r:>10.0f} {mib / raw_r:>10.0f} {raw_r / log_r:>8.2f}")
    raw_path.unlink(missing_ok=True)
    shutil.rmtree(log_dir)
    if size == MIB:
        open_dir = root / "p-open"
        unclean_s, clean_s, worst_s, segments = bench_open(open_dir, batch, count, open_segment_bytes)
        shape = f"{mib / 1024:.2f} GiB partition, {segments} segments of {open_segment_bytes // MIB} MiB"
        print(f"open {shape}: after SIGKILL (checkpoint kept) {unclean_s:.3f} s (target < 3 s), "
              f"clean {clean_s:.3f} s (target < 1 s)")
        print(f"open {shape}, worst case (SIGKILL and checkpoint deleted: every batch verified): "
              f"{worst_s:.3f} s")
        shutil.rmtree(open_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="data per run in GiB")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds; the best of each is kept")
    parser.add_argument("--open-segment-mib", type=int, default=128,
                        help="segment.bytes (MiB) of the partition whose open time is measured")
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory (default: a temp dir)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="streamkit-log-bench-", dir=args.dir))
    total_bytes = int(args.gib * 1024 * MIB)
    print(f"log_bench: {args.gib} GiB per run, best of {args.rounds} alternating rounds, scratch {root}")
    print(f"{'batch':>8} {'op':>7} {'log MiB/s':>10} {'raw MiB/s':>10} {'log/raw':>8}  (target >= 0.80)")
    try:
        for label, size in (("1 MiB", MIB), ("16 KiB", 16 * 1024)):
            bench_size(root, label, size, total_bytes, args.rounds, args.open_segment_mib * MIB)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
