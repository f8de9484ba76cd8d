"""Which leading segments retention deletes: a pure function of sizes, timestamps and config."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamkit.log.config import LogConfig

__all__ = ["SegmentInfo", "deletable_prefix"]


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    last_modified_ms: int = -1  # the file's mtime; needed only when max_timestamp is -1

    @property
    def largest_timestamp(self) -> int:
        """Kafka's rule: the newest record's timestamp, or the file's mtime when no record
        has one (timestamps of -1, or an empty segment)."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms


def deletable_prefix(
    segments: Sequence[SegmentInfo], config: LogConfig, now_ms: int, log_start_offset: int
) -> int:
    """How many segments, from the oldest, may be deleted. The last (active) one is included
    only when the time rule alone expires it; the caller rolls it first.

    Kafka's rules: a segment goes when all its offsets are below the log start offset
    (DeleteRecords), or with cleanup.policy=delete when its newest record (or, with no
    timestamps, its file's mtime) is older than retention.ms, or while the partition without it still holds at least retention.bytes.
    Deletion stops at the first segment that no rule removes, so the log stays a suffix.
    """
    count = 0
    remaining = sum(s.size for s in segments)
    last = len(segments) - 1
    for i, seg in enumerate(segments):
        # Kafka's rule, by the next segment's base: an emptied (compacted) segment's own
        # next offset is its base, which would drop it and move the log start.
        below_start = i < last and segments[i + 1].base_offset <= log_start_offset
        by_time = (
            config.delete
            and config.retention_ms >= 0
            and (seg.size > 0 or i < last)  # an empty active segment never expires
            and seg.largest_timestamp < now_ms - config.retention_ms
        )
        by_size = (
            config.delete
            and config.retention_bytes >= 0
            and i < last
            and remaining - seg.size >= config.retention_bytes
        )
        if not (below_start or by_time or by_size):
            break
        count += 1
        remaining -= seg.size
    return count
