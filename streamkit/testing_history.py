"""A Jepsen-style checker over a recorded history of produces and reads against a log.

Record what the test's clients did, then check it::

    from streamkit.testing_history import History, full_read

    history = History()
    op = history.produce("p1", "p1-17", key="k3")      # before sending; value unique
    ...                                                 # then, from the delivery report:
    history.ack(op, partition, offset)                  # acknowledged at (partition, offset)
    history.fail(op)                                    # an error (it may still be in the log)
    # no call at all: unknown (a timeout, a crash): it may or may not be in the log
    history.read(records)                               # what a consumer read: (partition, offset, value)
    ...                                                 # heal the cluster, then one last full read:
    history.add_read(full_read(cluster.bootstrap, "orders", final=True))
    report = history.check()
    assert report.ok, report

The checker works on values (each produce carries a value no other produce has) and
positions ``(topic, partition, offset)``. It reports:

- ``lost``: acknowledged, but not in the final full read;
- ``duplicates``: one value at two positions of the log as last seen;
- ``reordered``: within a partition, two of one producer's acknowledged records in the log
  in the opposite order from their acknowledgements;
- ``unstable``: reads of data that later disappeared: a value read at an offset, then a
  later read that covered that offset found another value there, or nothing;
- ``misplaced``: an acknowledged record found at another position than its acknowledgement
  named;
- ``unexpected``: a value read that no produce sent.

Failed and unknown produces may or may not appear; where they appear, they appear once
(``duplicates`` covers every value). ``report.failed_present`` lists failed ones that did
appear (not an anomaly: a client's error often leaves it unknown whether the write
happened; a test that knows the error was definite asserts on it).

A read covers, per partition, the offsets ``[start, end)`` it saw every record of (control
records and aborted transactions leave gaps): by default from its lowest to its highest
offset read; ``ranges`` says so explicitly, as a full read does from the watermarks.
Reads are checked in the order they were recorded.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "History", "Produce", "Read", "Record", "Reordering", "Report", "UnstableRead", "full_read",
]

Outcome = Literal["ok", "failed", "unknown"]
Position = tuple[str, int, int]  # topic, partition, offset
TP = tuple[str, int]  # topic, partition


@dataclass
class Produce:
    """One produce: sent by ``producer`` (one ordered stream of sends), ``value`` unique."""

    producer: str
    value: str
    key: str | None = None
    topic: str = ""
    outcome: Outcome = "unknown"
    partition: int | None = None  # where an acknowledgement says it went
    offset: int | None = None
    acked: int | None = None  # the acknowledgement's rank in the history


@dataclass(frozen=True)
class Record:
    """One record a read returned."""

    partition: int
    offset: int
    value: str
    topic: str = ""

    @property
    def position(self) -> Position:
        return (self.topic, self.partition, self.offset)


@dataclass(frozen=True)
class Read:
    """What one read saw; ``ranges`` {(topic, partition): (start, end)} it covered."""

    records: tuple[Record, ...]
    ranges: Mapping[TP, tuple[int, int]]
    final: bool = False

    @staticmethod
    def of(records: Iterable[Record | tuple[int, int, str]],
           ranges: Mapping[TP, tuple[int, int]] | None = None, final: bool = False) -> Read:
        """A read from records (or ``(partition, offset, value)`` tuples); without ``ranges``
        each partition's range runs from its lowest to its highest offset read."""
        found = tuple(r if isinstance(r, Record) else Record(*r) for r in records)
        if ranges is None:
            spans: dict[TP, tuple[int, int]] = {}
            for record in found:
                tp = (record.topic, record.partition)
                low, high = spans.get(tp, (record.offset, record.offset + 1))
                spans[tp] = (min(low, record.offset), max(high, record.offset + 1))
            ranges = spans
        return Read(found, dict(ranges), final)


@dataclass(frozen=True)
class Reordering:
    """``first`` was acknowledged before ``second`` (same producer, same partition), yet
    the log has it at a higher offset."""

    producer: str
    first: str
    second: str
    first_position: Position
    second_position: Position


@dataclass(frozen=True)
class UnstableRead:
    """``before`` was read at ``position``; a later read found ``after`` there (None:
    nothing, inside that read's range)."""

    position: Position
    before: str
    after: str | None


@dataclass
class Report:
    lost: list[Produce] = field(default_factory=list)
    duplicates: dict[str, list[Position]] = field(default_factory=dict)
    reordered: list[Reordering] = field(default_factory=list)
    unstable: list[UnstableRead] = field(default_factory=list)
    misplaced: list[tuple[Produce, Position]] = field(default_factory=list)
    unexpected: list[tuple[Position, str]] = field(default_factory=list)
    failed_present: list[Produce] = field(default_factory=list)
    acknowledged: int = 0
    final_read: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.reordered or self.unstable or self.misplaced
                    or self.unexpected)

    def __str__(self) -> str:
        head = f"{self.acknowledged} acknowledged, {self.final_read} in the final read"
        lines = [head + (": no anomaly" if self.ok else ":")]
        lines += [f"  lost: {p.value!r} (acknowledged at {p.topic}/{p.partition}@{p.offset})" for p in self.lost]
        lines += [f"  duplicate: {value!r} at {positions}" for value, positions in self.duplicates.items()]
        lines += [f"  reordered ({r.producer}): {r.first!r} acknowledged before {r.second!r}, but at "
                  f"{r.first_position} after {r.second_position}" for r in self.reordered]
        lines += [f"  unstable read at {u.position}: {u.before!r}, later {u.after!r}" for u in self.unstable]
        lines += [f"  misplaced: {p.value!r} acknowledged at {p.topic}/{p.partition}@{p.offset}, found at {at}"
                  for p, at in self.misplaced]
        lines += [f"  unexpected: {value!r} at {at} (never produced)" for at, value in self.unexpected]
        return "\n".join(lines[:200])


class History:
    """The operations of a test, in the order they happened (thread-safe)."""

    def __init__(self) -> None:
        self.produces: list[Produce] = []
        self.reads: list[Read] = []
        self._lock = threading.Lock()
        self._acks = itertools.count()

    def produce(self, producer: str, value: str, key: str | None = None, topic: str = "") -> Produce:
        """Record a produce before it is sent; complete it with ``ack`` or ``fail`` (one not
        completed stays unknown)."""
        op = Produce(producer, value, key, topic)
        with self._lock:
            self.produces.append(op)
        return op

    def ack(self, op: Produce, partition: int, offset: int | None) -> None:
        """The produce was acknowledged at ``(partition, offset)`` (offset None: not told)."""
        with self._lock:
            op.outcome, op.partition, op.offset, op.acked = "ok", partition, offset, next(self._acks)

    def fail(self, op: Produce) -> None:
        """The produce failed with an error."""
        with self._lock:
            op.outcome = "failed"

    def read(self, records: Iterable[Record | tuple[int, int, str]],
             ranges: Mapping[TP, tuple[int, int]] | None = None, final: bool = False) -> Read:
        """Record a read (see ``Read.of``); ``final`` marks a full read after healing."""
        return self.add_read(Read.of(records, ranges, final))

    def add_read(self, read: Read) -> Read:
        with self._lock:
            self.reads.append(read)
        return read

    def check(self) -> Report:
        with self._lock:
            return check(list(self.produces), list(self.reads))


def check(produces: list[Produce], reads: list[Read]) -> Report:
    """The anomalies of a history; see the module docstring."""
    finals = [read for read in reads if read.final]
    if not finals:
        raise ValueError("the history has no final read: record a full read with final=True after healing")
    final = finals[-1]
    report = Report(acknowledged=sum(p.outcome == "ok" for p in produces), final_read=len(final.records))
    log = _stable_log(reads, report)

    by_value = {p.value: p for p in produces}
    positions: dict[str, list[Position]] = {}
    for position, value in sorted(log.items()):
        positions.setdefault(value, []).append(position)
    report.duplicates = {value: found for value, found in positions.items() if len(found) > 1}
    report.unexpected = [(found[0], value) for value, found in positions.items() if value not in by_value]

    in_final = {record.value: record.position for record in final.records}
    for op in produces:
        if op.outcome == "ok" and op.value not in in_final:
            report.lost.append(op)
        elif op.outcome == "ok" and op.offset is not None and op.offset >= 0:
            acked_at = (op.topic, op.partition, op.offset)
            if in_final[op.value] != acked_at:
                report.misplaced.append((op, in_final[op.value]))
        elif op.outcome == "failed" and op.value in positions:
            report.failed_present.append(op)
    report.reordered = _reorderings(produces, positions)
    return report


def _stable_log(reads: list[Read], report: Report) -> dict[Position, str]:
    """The log as last seen: each position's latest value. Where a later read covered a
    position and found another value or none, the earlier read was unstable."""
    log: dict[TP, dict[int, str]] = {}
    for read in reads:
        seen: dict[TP, dict[int, str]] = {}
        for record in read.records:
            seen.setdefault((record.topic, record.partition), {})[record.offset] = record.value
        for tp, (start, end) in read.ranges.items():
            known, now = log.get(tp, {}), seen.get(tp, {})
            for offset in [o for o in known if start <= o < end and known[o] != now.get(o)]:
                report.unstable.append(UnstableRead((*tp, offset), known[offset], now.get(offset)))
                del known[offset]
        for tp, values in seen.items():
            log.setdefault(tp, {}).update(values)
    return {(*tp, offset): value for tp, values in log.items() for offset, value in values.items()}


def _reorderings(produces: list[Produce], positions: Mapping[str, list[Position]]) -> list[Reordering]:
    """Per producer and partition, acknowledged records whose offsets fall as their
    acknowledgements rise (compared with the previous one present in the log)."""
    found: list[Reordering] = []
    acked = sorted((p for p in produces if p.outcome == "ok" and p.value in positions),
                   key=lambda p: p.acked if p.acked is not None else -1)
    previous: dict[tuple[str, str, int], tuple[str, Position]] = {}
    for op in acked:
        position = positions[op.value][0]
        stream = (op.producer, position[0], position[1])
        if stream in previous:
            before, before_position = previous[stream]
            if before_position[2] > position[2]:
                found.append(Reordering(op.producer, before, op.value, before_position, position))
                continue  # compare the next one with the record that stands highest so far
        previous[stream] = (op.value, position)
    return found


def _watermarks(consumer: Any, partition: Any, timeout_s: float) -> tuple[int, int]:
    """(log start, end offset) from the partition's leader, asked again while the leader
    moved or a new leader's high watermark has not caught up (``ask_until_answered``)."""
    from streamkit.analytics.planning import ask_until_answered

    low, high = ask_until_answered(lambda: consumer.get_watermark_offsets(partition, timeout=timeout_s), timeout_s,
                                   f"list the offsets of {partition.topic}-{partition.partition}")
    return int(low), int(high)


def full_read(bootstrap: str, topic: str, final: bool = True, isolation_level: str = "read_committed",
              timeout_s: float = 60) -> Read:
    """Read every partition of ``topic`` from its log start to its end offset (as when the
    read begins) with confluent-kafka: a ``Read`` covering exactly those ranges, values
    decoded as UTF-8. Run it after healing the cluster, for ``final=True``."""
    import time

    from confluent_kafka import Consumer, KafkaError, KafkaException
    from confluent_kafka import TopicPartition as Assignment

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streamkit-history",
                         "enable.auto.commit": False, "isolation.level": isolation_level,
                         "enable.partition.eof": True, "log_level": 0})
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        ranges = {(topic, p): _watermarks(consumer, Assignment(topic, p), timeout_s)
                  for p in sorted(metadata.partitions)}
        ends = {p: end for (_, p), (start, end) in ranges.items() if end > start}
        consumer.assign([Assignment(topic, p, ranges[(topic, p)][0]) for p in ends])
        records: list[Record] = []
        deadline = time.monotonic() + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise TimeoutError(f"full read of {topic}: partitions {sorted(ends)} not read to their end in "
                                   f"{timeout_s}s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(error)
            partition, offset = message.partition(), message.offset()
            if partition is None or partition not in ends or offset is None:
                continue
            if error is None and offset < ends[partition]:
                value = (message.value() or b"").decode(errors="backslashreplace")
                records.append(Record(partition, offset, value, topic))
            # Done at the last offset of the range, or at the end of the partition past it
            # (the range may end with transaction markers, which are not delivered).
            if offset + (error is None) >= ends[partition]:
                del ends[partition]
        return Read(tuple(records), ranges, final)
    finally:
        consumer.close()
