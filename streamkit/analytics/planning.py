"""Which offset ranges a read covers, and how they are split into tasks.

``plan_ranges`` asks the cluster (metadata, ListOffsets, offsets for times) once, on the
driver, and returns plain ``OffsetRange`` values that Spark or Dask ship to their workers;
a worker then reads exactly its range (``fetch.read_range``), so the result does not depend
on what is produced while the job runs. ``split_ranges`` is pure.

An offset lookup that a partition's leader cannot answer yet is asked again, with a doubling
backoff, for up to the lookup timeout: a leader elected a moment ago answers
OFFSET_NOT_AVAILABLE until its high watermark has caught up (KIP-207), and taking the stale
end it would otherwise give would read a partition short.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streamkit.analytics.options import EARLIEST, LATEST, OffsetSpec, OptionError, ReadOptions

__all__ = ["Cluster", "OffsetRange", "PlanError", "ask_until_answered", "consumer_config", "plan_ranges", "rate_limit",
           "resolve_offsets", "split_ranges"]

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0
_RETRY_BACKOFF_S = 0.1
_MAX_RETRY_BACKOFF_S = 1.0
# What a partition's leader answers while it cannot give an offset yet: librdkafka refreshes
# the leader but does not ask again itself.
_RETRIABLE = frozenset({KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.UNKNOWN_LEADER_EPOCH,
                        KafkaError.FENCED_LEADER_EPOCH})

TP = tuple[str, int]
_T = TypeVar("_T")


class PlanError(RuntimeError):
    """The cluster cannot serve the read as asked (a missing topic, an offset past the end)."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """The records of ``topic``-``partition`` with ``start <= offset < end``."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """One range per topic-partition, or, when that is fewer than ``min_partitions``, large
    ranges cut into parts in proportion to their size (Spark's KafkaOffsetRangeCalculator):
    every part of one range holds the same number of records, give or take one."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size / total * min_partitions)))
        for i in range(parts):
            start = r.start + r.size * i // parts
            end = r.start + r.size * (i + 1) // parts
            out.append(OffsetRange(r.topic, r.partition, start, end))
    return out


def consumer_config(client_config: Mapping[str, str], **extra: Any) -> dict[str, Any]:
    """A librdkafka consumer that reads assigned ranges and never joins a group or commits."""
    return {
        "client.id": "streamkit-reader",
        **client_config,
        # Only required by librdkafka's API: nothing joins this group or commits to it.
        "group.id": f"streamkit-reader-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        # Records deleted by retention under a planned range are skipped, not an error.
        "auto.offset.reset": "earliest",
        **extra,
    }


class Cluster:
    """Metadata and offset lookups over one consumer connection (close it: ``with``)."""

    def __init__(self, client_config: Mapping[str, str]) -> None:
        self._consumer = Consumer(consumer_config(client_config))

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    def topics(self) -> dict[str, int]:
        """Every topic and its partition count."""
        try:
            meta = self._consumer.list_topics(timeout=_TIMEOUT_S)
        except KafkaException as exc:
            raise PlanError(f"cannot read the cluster's metadata: {exc.args[0]}") from None
        return {name: len(t.partitions) for name, t in meta.topics.items() if t.error is None}

    def partitions(self, options: ReadOptions) -> list[TP]:
        """The topic-partitions that ``subscribe``, ``subscribePattern`` or ``assign`` name."""
        if options.assign:
            topics = self.topics()
            for topic, partition in options.assign:
                if partition >= topics.get(topic, 0):
                    raise PlanError(f"assign: {topic}-{partition} does not exist")
            return list(options.assign)
        topics = self.topics()
        if options.subscribe_pattern is not None:
            try:
                pattern = re.compile(options.subscribe_pattern)
            except re.error as exc:
                raise OptionError(f"subscribePattern {options.subscribe_pattern!r} is not a regex: {exc}") from None
            names = sorted(t for t in topics if pattern.fullmatch(t) and not t.startswith("__"))
        else:
            missing = [t for t in options.subscribe if t not in topics]
            if missing:
                raise PlanError(f"topic(s) {', '.join(missing)} do not exist")
            names = list(options.subscribe)
        return [(t, p) for t in names for p in range(topics[t])]

    def watermarks(self, tps: Iterable[TP]) -> dict[TP, tuple[int, int]]:
        """(log start offset, end offset) per partition; the end is the last stable offset
        under ``isolation.level=read_committed``."""
        out = {}
        for topic, partition in tps:
            ask = functools.partial(self._consumer.get_watermark_offsets, TopicPartition(topic, partition),
                                    timeout=_TIMEOUT_S, cached=False)
            low, high = _retrying(f"list the offsets of {topic}-{partition}", ask)
            out[(topic, partition)] = (int(low), int(high))
        return out

    def offsets_for_times(self, times: Mapping[TP, int]) -> dict[TP, int]:
        """The first offset at or after each time, -1 where no record is that recent."""
        if not times:
            return {}
        query = [TopicPartition(t, p, ts) for (t, p), ts in times.items()]

        def look_up() -> list[TopicPartition]:
            found: list[TopicPartition] = self._consumer.offsets_for_times(query, timeout=_TIMEOUT_S)
            failed = next((tp.error for tp in found if tp.error is not None), None)
            if failed is not None:
                raise KafkaException(failed)
            return found

        return {(tp.topic, tp.partition): tp.offset for tp in _retrying("look offsets up by time", look_up)}


def ask_until_answered(call: Callable[[], _T], timeout_s: float = _TIMEOUT_S, what: str = "ask") -> _T:
    """``call()`` (a librdkafka offset query), asked again after a doubling backoff (100 ms
    to 1 s) while it fails with an error a partition's leader gives while it cannot answer
    yet (``_RETRIABLE``: librdkafka refreshes the leader but does not ask again itself),
    until ``timeout_s`` has passed; any other KafkaException, or the last one, is raised."""
    deadline = time.monotonic() + timeout_s
    backoff = _RETRY_BACKOFF_S
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0]
            code = error.code() if isinstance(error, KafkaError) else None
            if code not in _RETRIABLE or time.monotonic() + backoff > deadline:
                raise
            log.info("cannot %s yet (%s); asking again in %d ms", what, error.name(), backoff * 1000)
        time.sleep(backoff)
        backoff = min(backoff * 2, _MAX_RETRY_BACKOFF_S)


def _retrying(what: str, call: Callable[[], _T]) -> _T:
    """``ask_until_answered`` within the planner's lookup timeout; PlanError when it fails."""
    try:
        return ask_until_answered(call, _TIMEOUT_S, what)
    except KafkaException as exc:
        raise PlanError(f"cannot {what}: {exc.args[0]}") from None


def resolve_offsets(cluster: Cluster, spec: OffsetSpec, tps: list[TP], *, side: str,
                    marks: Mapping[TP, tuple[int, int]], strategy: str = "error") -> dict[TP, int]:
    """The concrete offset of ``spec`` for each partition of ``tps`` (``side``: starting or
    ending). Partitions a per-partition spec leaves out start at earliest and end at latest."""
    unknown = sorted(set(spec.per_partition) - set(tps))
    if unknown:
        names = ", ".join(f"{t}-{p}" for t, p in unknown)
        raise OptionError(f"{side} offsets name partitions the read does not cover: {names}")
    default = EARLIEST if side == "starting" else LATEST
    if spec.kind in ("timestamp", "timestamps"):
        times = {tp: spec.timestamp if spec.kind == "timestamp" else spec.per_partition.get(tp) for tp in tps}
        found = cluster.offsets_for_times({tp: ts for tp, ts in times.items() if ts is not None})
        out = {}
        for tp in tps:
            if tp not in found:
                out[tp] = marks[tp][0] if default == EARLIEST else marks[tp][1]
            elif found[tp] >= 0:
                out[tp] = found[tp]
            elif side == "starting" and strategy == "error":
                raise PlanError(f"{tp[0]}-{tp[1]} has no record at or after {times[tp]} ms "
                                "(set startingOffsetsByTimestampStrategy=latest to start it at its end)")
            else:
                out[tp] = marks[tp][1]
        return out
    out = {}
    for tp in tps:
        if spec.kind == "earliest":
            wanted = EARLIEST
        elif spec.kind == "latest":
            wanted = LATEST
        else:
            wanted = spec.per_partition.get(tp, default)
        low, high = marks[tp]
        if wanted == EARLIEST:
            out[tp] = low
        elif wanted == LATEST:
            out[tp] = high
        elif wanted > high:
            raise PlanError(f"{side} offset {wanted} of {tp[0]}-{tp[1]} is past its end offset {high}")
        else:
            out[tp] = max(wanted, low)
    return out


def plan_ranges(options: ReadOptions) -> list[OffsetRange]:
    """The offset ranges of a batch read, split to ``minPartitions``."""
    with Cluster(options.client_config) as cluster:
        tps = cluster.partitions(options)
        marks = cluster.watermarks(tps)
        starts = resolve_offsets(cluster, options.starting, tps, side="starting", marks=marks,
                                 strategy=options.by_timestamp_strategy)
        ends = resolve_offsets(cluster, options.ending, tps, side="ending", marks=marks)
    ranges = []
    for tp in tps:
        if ends[tp] < starts[tp]:
            raise PlanError(f"{tp[0]}-{tp[1]}: the ending offset {ends[tp]} is before the starting offset {starts[tp]}")
        ranges.append(OffsetRange(tp[0], tp[1], starts[tp], ends[tp]))
    return split_ranges(ranges, options.min_partitions)


def rate_limit(begin: Mapping[TP, int], end: Mapping[TP, int], max_records: int) -> dict[TP, int]:
    """``end`` moved back so that about ``max_records`` records are read in all, shared
    between partitions in proportion to how far behind each is (Spark's
    ``maxOffsetsPerTrigger``): a partition with any lag always moves by at least one."""
    lags = {tp: max(0, end[tp] - begin.get(tp, end[tp])) for tp in end}
    total = sum(lags.values())
    if total <= max_records:
        return dict(end)
    out = {}
    for tp, stop in end.items():
        share = max_records * lags[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(begin.get(tp, stop) + step, stop)
    return out
