"""Read-only views of a partition directory for ``streamkit dump-log`` and the demo.

Opens segment files directly (never through PartitionLog), so it can look at a partition
a running broker holds without taking its lock or marking it unclean.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from streamkit.log.batch import iter_batch_spans, parse_header
from streamkit.log.records import decode_batch

__all__ = ["SegmentSummary", "dump_records", "summarize_partition"]


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    name: str
    base_offset: int
    next_offset: int
    batches: int
    size: int
    max_timestamp: int


def _segment_files(directory: Path) -> list[Path]:
    files = sorted(p for p in directory.glob("*.log") if p.name[:20].isdigit())
    if not files and not any(directory.iterdir()):
        raise ValueError("the directory is empty")
    if not files:
        raise ValueError("no segment files (*.log) found: is this a partition directory?")
    return files


def _batches(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    for pos, size, _base, _last in iter_batch_spans(data):
        yield data[pos : pos + size]


def summarize_partition(directory: Path) -> list[SegmentSummary]:
    out = []
    for path in _segment_files(directory):
        base = int(path.name[:20])
        count, nxt, max_ts = 0, base, -1
        for batch in _batches(path):
            header = parse_header(batch)
            count += 1
            nxt = header.next_offset
            max_ts = max(max_ts, header.max_timestamp)
        out.append(SegmentSummary(path.name, base, nxt, count, os.path.getsize(path), max_ts))
    return out


def dump_records(directory: Path, limit: int) -> Iterator[str]:
    shown = 0
    for path in _segment_files(directory):
        for batch in _batches(path):
            header, records = decode_batch(batch, verify=False)
            for r in records:
                if shown >= limit:
                    return
                shown += 1
                key = r.key.decode("utf-8", "replace") if r.key is not None else None
                value = r.value.decode("utf-8", "replace") if r.value is not None else None
                yield (
                    f"offset={r.offset} timestamp={r.timestamp} key={key!r} value={value!r}"
                    f" headers={len(r.headers)} codec={header.compression}"
                )
