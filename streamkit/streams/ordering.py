"""The order a worker processes a fetched batch in: lowest timestamp first.

A fetch returns records of several partitions at once; processed partition after partition,
a backlog runs one partition far ahead of the others (and so holds many windows open
downstream until the others catch up). Here the batch is cut into slices that are merged
by timestamp, as Kafka Streams picks the partition with the lowest head timestamp: a
slice is a run of one partition's records up to the next lowest head of another partition,
and at least ``min_slice`` records, so that finely interleaved live partitions do not cost
a processing call per record.

Pure: records are anything with a ``timestamp``."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = ["Alignment", "by_timestamp"]

MIN_SLICE = 32


class Timestamped(Protocol):
    @property
    def timestamp(self) -> int: ...


K = TypeVar("K")
R = TypeVar("R", bound=Timestamped)


def by_timestamp(batch: Mapping[K, Sequence[R]], min_slice: int = MIN_SLICE) -> Iterator[tuple[K, Sequence[R]]]:
    """Yield ``(partition, records)`` slices of ``batch``, each partition's records in
    their order, slices ordered by their first record's timestamp."""
    if len(batch) <= 1:
        yield from ((key, records) for key, records in batch.items() if records)
        return
    keys = list(batch)
    heap = [(records[0].timestamp, i, 0) for i, records in enumerate(batch.values()) if records]
    heapq.heapify(heap)
    while heap:
        _ts, i, start = heapq.heappop(heap)
        records = batch[keys[i]]
        end = len(records)
        if heap:
            bound = heap[0][0]
            end = min(start + min_slice, end)
            while end < len(records) and records[end].timestamp <= bound:
                end += 1
        yield keys[i], records[start:end]
        if end < len(records):
            heapq.heappush(heap, (records[end].timestamp, i, end))


@dataclass
class Alignment(Generic[K]):
    """Which input partitions to pause because they run ahead of the slowest one that still
    has records to read (Kafka Streams' ``max.task.idle.ms``: how long a task waits for a
    lagging input before going on with the others; Flink's watermark alignment).

    ``update`` takes each partition's watermark (its largest timestamp so far), the
    partitions with records left to read, and the wall clock; it returns ``(pause,
    resume)``. A partition ahead of the slowest lagging one is paused; it is resumed once it
    is no longer ahead, or after ``max_idle_ms`` paused (then it runs until it is caught up
    with, so that a partition that cannot move, a slow or stuck one, starves nobody)."""

    max_idle_ms: int
    paused: dict[K, int] = field(default_factory=dict)  # partition -> wall ms it was paused at
    released: set[K] = field(default_factory=set)

    def update(self, watermarks: Mapping[K, int], lagging: set[K], now: int) -> tuple[set[K], set[K]]:
        behind = [watermarks[k] for k in lagging if k in watermarks]
        slowest = min(behind) if behind else None
        ahead = {k for k, wm in watermarks.items() if slowest is not None and wm > slowest}
        self.released &= ahead
        pause = {k for k in ahead - self.released if k not in self.paused}
        resume = {k for k in self.paused if k not in ahead}
        for k, since in self.paused.items():
            if k in ahead and now - since >= self.max_idle_ms:
                resume.add(k)
                self.released.add(k)
        for k in resume:
            self.paused.pop(k, None)
        for k in pause:
            self.paused[k] = now
        return pause, resume
