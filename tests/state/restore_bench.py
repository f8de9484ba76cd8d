"""Restore throughput: changelog records applied per second, per backend.

Run: ``.venv/bin/python -m tests.state.restore_bench [records] [value_bytes] [repeats]``
(defaults 1,000,000 records of 100 bytes, best of 3). ``test_throughput`` runs a small
version with a loose lower bound.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from streamkit.state import StorePartition
from tests.state.conftest import CHANGELOG, open_backend

__all__ = ["changelog", "measure", "measure_restore"]


def changelog(n: int, value_bytes: int = 100) -> list[tuple[bytes, bytes | None, int]]:
    """``n`` records over ``n // 2`` distinct keys (updates as well as inserts), one in
    twenty a tombstone, as a compacted-but-busy changelog would hold."""
    value = b"v" * value_bytes
    keys = max(n // 2, 1)
    return [
        (b"user-%010d" % (i * 7919 % keys), None if i % 20 == 19 else value, i) for i in range(n)
    ]


def measure_restore(
    kind: str, records: list[tuple[bytes, bytes | None, int]], repeats: int = 1
) -> float:
    """Best wall-clock records/s over ``repeats`` restores, each into a fresh partition."""
    return measure(kind, records, repeats)[0]


def measure(
    kind: str, records: list[tuple[bytes, bytes | None, int]], repeats: int = 1
) -> tuple[float, float]:
    """Best (wall-clock, calling-thread CPU) records/s over ``repeats`` restores.

    The CPU figure leaves out RocksDB's background flush and compaction threads; on a
    busy shared machine it is the steadier of the two."""
    best = best_cpu = 0.0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            partition = StorePartition(open_backend(kind, Path(tmp) / "db"), CHANGELOG)
            started, cpu_started = time.perf_counter(), time.thread_time()
            applied = partition.apply_changelog(records)
            elapsed = time.perf_counter() - started
            cpu = time.thread_time() - cpu_started
            assert applied == len(records)
            assert partition.changelog_offset == records[-1][2]
            partition.destroy()
        best = max(best, len(records) / elapsed)
        best_cpu = max(best_cpu, len(records) / cpu)
    return best, best_cpu


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 1_000_000
    value_bytes = int(argv[1]) if len(argv) > 1 else 100
    repeats = int(argv[2]) if len(argv) > 2 else 3
    records = changelog(n, value_bytes)
    for kind in ("rocksdb", "memory"):
        wall, cpu = measure(kind, records, repeats)
        print(
            f"{kind:8} {n:>10,} records x {value_bytes} B: {wall:>11,.0f} records/s wall, "
            f"{cpu:>11,.0f} records/s of calling-thread CPU (best of {repeats})"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
