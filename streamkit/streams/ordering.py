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
from typing import Protocol, TypeVar

__all__ = ["by_timestamp"]

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
