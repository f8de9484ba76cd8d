"""In-memory Kafka for the app test driver: topics, transactions and group offsets, with the
producer, consumer and changelog reader that a worker's runtime plugs in where it otherwise
talks to a broker.

Only the transport is replaced: the runtime's collector, task manager, tables, agents and
DSL operators run unchanged on top. The log keeps what a broker keeps that those parts
observe: per partition, records at increasing offsets (an aborted record keeps its offset,
as in Kafka, and no reader sees it); per transactional id, the open transaction, which a
new producer with the same id fences (aborts), as InitProducerId does; per group, committed
offsets (under exactly-once, committed with the transaction that carried them).

Everything is synchronous underneath; the async methods exist because the runtime awaits
them, and complete without suspending.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka.structs import TopicPartition

from streamkit.streams.partitioners import murmur2_partition

__all__ = ["MemoryChangelogReader", "MemoryConsumer", "MemoryLog", "MemoryProducer", "StoredRecord"]

TP = tuple[str, int]

COMMITTED = "committed"
OPEN = "open"
ABORTED = "aborted"


@dataclass(slots=True)
class StoredRecord:
    """A record in the log. It has the fields of aiokafka's ``ConsumerRecord`` that the
    runtime reads, so the consumer hands it over as it is."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]  # a tuple: no list per record for the collector to scan
    state: str = COMMITTED
    seq: int = 0  # the order of appends across the whole log


@dataclass(slots=True)
class Metadata:
    """What a producer's delivery future resolves to (aiokafka's RecordMetadata's fields
    that the runtime reads)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass
class _Transaction:
    records: list[StoredRecord] = field(default_factory=list)
    offsets: dict[tuple[str, TP], int] = field(default_factory=dict)


class MemoryLog:
    """The topics, transactions and group offsets of one in-memory "cluster". ``clock()``
    stamps records produced without a timestamp (the driver's virtual wall clock)."""

    def __init__(self, clock: Callable[[], int], default_partitions: int = 1) -> None:
        self.clock = clock
        self.default_partitions = default_partitions
        self.topics: dict[str, list[list[StoredRecord]]] = {}
        self.group_offsets: dict[tuple[str, TP], int] = {}
        # transactional.id -> its open transaction; a producer's epoch fences older ones.
        self._open: dict[str, _Transaction] = {}
        self._epochs: dict[str, int] = {}
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._seq = itertools.count()

    # -- topics ----------------------------------------------------------------------------

    def create(self, topic: str, partitions: int) -> None:
        if topic not in self.topics:
            self.topics[topic] = [[] for _ in range(partitions)]

    def partitions(self, topic: str) -> int | None:
        parts = self.topics.get(topic)
        return None if parts is None else len(parts)

    def partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has, created first as a send would
        (``auto.create.topics.enable``)."""
        if topic not in self.topics:
            self.create(topic, self.default_partitions)
        return len(self.topics[topic])

    def partition_for(self, topic: str, key: bytes | None, partition: int | None) -> int:
        """Where a record goes: the given partition, murmur2 of its key (Kafka's default
        partitioner, as the worker's producer), or round robin for keyless records."""
        count = self.partition_count(topic)
        if partition is not None:
            if not 0 <= partition < count:
                raise ValueError(f"topic {topic!r} has {count} partition(s); there is no partition {partition}")
            return partition
        if key is not None:
            return murmur2_partition(key, count)
        return next(self._round_robin.setdefault(topic, itertools.count())) % count

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None, timestamp: int | None,
               headers: Iterable[tuple[str, bytes | None]] | None, txn: _Transaction | None = None) -> StoredRecord:
        log = self.topics[topic][partition]
        record = StoredRecord(topic, partition, len(log), key, value, self.clock() if timestamp is None else timestamp,
                              tuple(headers or ()), OPEN if txn is not None else COMMITTED, next(self._seq))
        log.append(record)
        if txn is not None:
            txn.records.append(record)
        return record

    def end_offset(self, tp: TP, *, committed_only: bool = False) -> int:
        """The high watermark, or with ``committed_only`` the last stable offset (the first
        offset of an open transaction)."""
        log = self.topics.get(tp[0], [])[tp[1]] if tp[0] in self.topics else []
        if committed_only:
            for record in log:
                if record.state == OPEN:
                    return record.offset
        return len(log)

    def read(self, tp: TP, start: int, end: int | None = None, *, committed_only: bool = False) -> list[StoredRecord]:
        """The records of ``[start, end)`` a reader sees: never aborted ones; with
        ``committed_only`` nothing from the first open transaction on."""
        if tp[0] not in self.topics:
            return []
        stop = self.end_offset(tp, committed_only=committed_only)
        stop = stop if end is None else min(stop, end)
        return [r for r in self.topics[tp[0]][tp[1]][start:stop] if r.state != ABORTED]

    # -- transactions ----------------------------------------------------------------------

    def init_producer(self, transactional_id: str) -> int:
        """InitProducerId: a new epoch for the id; the previous one's open transaction is
        aborted and its producer fenced."""
        self.abort(transactional_id)
        epoch = self._epochs.get(transactional_id, -1) + 1
        self._epochs[transactional_id] = epoch
        return epoch

    def check_epoch(self, transactional_id: str, epoch: int) -> None:
        if self._epochs.get(transactional_id) != epoch:
            raise ProducerFenced(f"producer {transactional_id!r} was fenced by a newer instance")

    def begin(self, transactional_id: str) -> _Transaction:
        txn = self._open[transactional_id] = _Transaction()
        return txn

    def commit(self, transactional_id: str) -> None:
        txn = self._open.pop(transactional_id, None)
        if txn is None:
            return
        for record in txn.records:
            record.state = COMMITTED
        self.group_offsets.update(txn.offsets)

    def abort(self, transactional_id: str) -> None:
        txn = self._open.pop(transactional_id, None)
        if txn is None:
            return
        for record in txn.records:
            record.state = ABORTED

    def abort_all(self) -> None:
        """Abort every open transaction (a crashed worker's, once its tasks' next owner fences them)."""
        for transactional_id in list(self._open):
            self.abort(transactional_id)


class ProducerFenced(RuntimeError):
    """A transactional producer whose id a newer producer took over (Kafka's ProducerFencedException)."""


class MemoryBatch:
    """A record batch being built (``create_batch``), as aiokafka's ``BatchBuilder``."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None, int | None, list[tuple[str, bytes]]]] = []

    def append(self, *, key: bytes | None, value: bytes | None, timestamp: int | None,
               headers: list[tuple[str, bytes]]) -> object:
        self.records.append((key, value, timestamp, list(headers)))
        return True

    def close(self) -> None:
        """Nothing to seal in memory."""

    def record_count(self) -> int:
        return len(self.records)


def _done(result: Any) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.set_result(result)
    return future


class MemoryProducer:
    """What the runtime's ``RecordCollector`` uses of ``AIOKafkaProducer``: sends, batches,
    flush and (with a ``transactional_id``) transactions that commit input offsets."""

    def __init__(self, log: MemoryLog, transactional_id: str | None = None) -> None:
        self.log = log
        self.transactional_id = transactional_id
        self._epoch = -1
        self._txn: _Transaction | None = None

    async def start(self) -> None:
        if self.transactional_id is not None:
            self._epoch = self.log.init_producer(self.transactional_id)

    async def stop(self) -> None:
        """Nothing to close; an open transaction stays open until fenced or aborted."""

    def _transaction(self) -> _Transaction | None:
        if self.transactional_id is None:
            return None
        self.log.check_epoch(self.transactional_id, self._epoch)
        if self._txn is None:
            raise RuntimeError(f"producer {self.transactional_id!r}: no transaction begun")
        return self._txn

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: list[tuple[str, bytes]] | None = None) -> asyncio.Future[Any]:
        txn = self._transaction()
        p = self.log.partition_for(topic, key, partition)
        record = self.log.append(topic, p, key, value, timestamp_ms, headers, txn)
        return _done(Metadata(topic, p, record.offset, record.timestamp))

    async def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids, as aiokafka's producer answers them (a topic not
        there yet is created, as ``auto.create.topics.enable`` does on a send)."""
        return set(range(self.log.partition_count(topic)))

    def create_batch(self) -> MemoryBatch:
        return MemoryBatch()

    async def send_batch(self, batch: MemoryBatch, topic: str, *, partition: int) -> asyncio.Future[Any]:
        txn = self._transaction()
        self.log.partition_for(topic, None, partition)
        first: StoredRecord | None = None
        for key, value, timestamp, headers in batch.records:
            record = self.log.append(topic, partition, key, value, timestamp, headers, txn)
            first = first or record
        assert first is not None, "an empty batch is never sent"
        return _done(Metadata(topic, partition, first.offset, first.timestamp))

    async def flush(self) -> None:
        """Every send is delivered when it returns."""

    async def begin_transaction(self) -> None:
        assert self.transactional_id is not None
        self.log.check_epoch(self.transactional_id, self._epoch)
        self._txn = self.log.begin(self.transactional_id)

    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, Any], group_id: str) -> None:
        txn = self._transaction()
        assert txn is not None
        for tp, offset in offsets.items():
            txn.offsets[(group_id, (tp.topic, tp.partition))] = int(getattr(offset, "offset", offset))

    async def commit_transaction(self) -> None:
        assert self.transactional_id is not None
        self._transaction()
        self.log.commit(self.transactional_id)
        self._txn = None

    async def abort_transaction(self) -> None:
        if self.transactional_id is not None and self._txn is not None:
            self.log.check_epoch(self.transactional_id, self._epoch)
            self.log.abort(self.transactional_id)
            self._txn = None


class MemoryConsumer:
    """What the runtime uses of its group consumer, for one worker that owns every
    partition: positions, pausing, committed offsets, and ``poll`` in place of ``getmany``.

    It reads what its own worker produced at once, committed or not: one worker owns every
    task and commits them together, so a crash aborts an uncommitted record together with
    every effect of reading it (the readers' offsets and store changes are not committed
    either)."""

    def __init__(self, log: MemoryLog, group_id: str, *, auto_offset_reset: str) -> None:
        self.log = log
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.assignment: set[TP] = set()
        self.paused: set[TP] = set()
        self._positions: dict[TP, int] = {}

    def assign(self, tps: Iterable[TP]) -> None:
        for tp in tps:
            self.assignment.add(tp)
            committed = self.log.group_offsets.get((self.group_id, tp))
            if committed is None:
                committed = 0 if self.auto_offset_reset == "earliest" else self.log.end_offset(tp)
            self._positions[tp] = committed

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update((tp.topic, tp.partition) for tp in tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update((tp.topic, tp.partition) for tp in tps)

    async def position(self, tp: TopicPartition) -> int:
        return self._positions[(tp.topic, tp.partition)]

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.log.end_offset((tp.topic, tp.partition))

    async def committed(self, tp: TopicPartition) -> int | None:
        return self.log.group_offsets.get((self.group_id, (tp.topic, tp.partition)))

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            self.log.group_offsets[(self.group_id, (tp.topic, tp.partition))] = offset

    def has_more(self) -> bool:
        """Whether an assigned, unpaused partition has records past its position."""
        return any(self._positions[tp] < self.log.end_offset(tp) for tp in self.assignment - self.paused)

    def poll(self) -> dict[TopicPartition, list[StoredRecord]]:
        """Every record past the position of each assigned, unpaused partition."""
        out: dict[TopicPartition, list[StoredRecord]] = {}
        for tp in sorted(self.assignment - self.paused):
            position = self._positions[tp]
            end = self.log.end_offset(tp)
            if position >= end:
                continue
            records = self.log.read(tp, position)
            self._positions[tp] = end
            if records:
                out[TopicPartition(*tp)] = records
        return out


class MemoryChangelogReader:
    """``streams.changelog.ChangelogReader`` over the in-memory log (table restores)."""

    def __init__(self, log: MemoryLog, topic: str, partition: int, *, chunk_records: int,
                 read_committed: bool) -> None:
        self.log = log
        self.tp = (topic, partition)
        self.chunk_records = chunk_records
        self.read_committed = read_committed
        self.on_headers: Callable[[Any], None] | None = None

    async def start(self) -> None:
        """Nothing to connect."""

    async def stop(self) -> None:
        """Nothing to close."""

    async def offsets(self) -> tuple[int, int]:
        return 0, self.log.end_offset(self.tp, committed_only=self.read_committed)

    async def read(self, start: int, end: int) -> AsyncGenerator[list[tuple[bytes, bytes | None, int]], None]:
        records = self.log.read(self.tp, start, end, committed_only=self.read_committed)
        for i in range(0, len(records), self.chunk_records):
            chunk = records[i:i + self.chunk_records]
            if self.on_headers is not None:
                for record in chunk:
                    if record.headers:
                        self.on_headers(record.headers)
            yield [(r.key or b"", r.value, r.offset) for r in chunk]
