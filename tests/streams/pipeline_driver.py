"""A broker-less driver of compiled DSL pipelines, for event-time tests.

``Topology`` stands in for the worker's loop only: it hands batches of records to
``CompiledSource.process`` and keeps what the processors produce, per topic partition, in
production order, as a broker would. Everything it drives is the production code; the
order in which it reads the partitions is the test's (``run`` with a seeded random)."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson

from streamkit.state import MemoryBackend, StorePartition
from streamkit.streams.app import App
from streamkit.streams.metrics import Metrics
from streamkit.streams.pipeline import CompiledSource, compile_pipelines
from streamkit.streams.processing import LateLog
from streamkit.streams.topic import partition_for_key
from streamkit.streams.watermarks import carries_data

__all__ = ["LATE_TOPIC", "Record", "Topology", "Worker"]

LATE_TOPIC = "late"
DEFAULT_PARTITIONS = 2  # for a topic the app does not size


@dataclass
class Record:
    """What a consumer hands the runtime (the attributes of aiokafka's ConsumerRecord)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass
class Worker:
    """The part of the runtime compiled pipelines use (settings, clock, produce), and the
    runtime's decoding of the batches it hands them."""

    app: App
    produced: dict[tuple[str, int], list[Record]] = field(default_factory=lambda: defaultdict(list))
    metrics: Metrics = field(default_factory=Metrics)
    wall: int = 0

    @property
    def settings(self) -> Any:
        return self.app.settings

    def clock(self) -> int:
        return self.wall

    @property
    def late_log(self) -> LateLog:
        return self._late_log

    def __post_init__(self) -> None:
        self._late_log = LateLog(self.clock)

    def topic_partitions(self, name: str) -> int | None:
        topic = self.app.topics.get(name)
        return topic.partitions if topic is not None else None

    def decode(self, topic: Any, record: Record, partition: int) -> Any:
        return topic.event(record.key, record.value, record.timestamp, list(record.headers), partition,
                           record.offset)

    async def enqueue(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                      timestamp: int | None = None, partition: int | None = None, track: bool = True,
                      task: int | None = None) -> None:
        self.append(topic, key, value, headers=headers, timestamp=timestamp, partition=partition)

    async def enqueue_many(self, records: Any) -> None:
        for o in records:
            self.append(o.topic.name, o.key, o.value, headers=o.headers, timestamp=o.timestamp, partition=o.partition)

    def append(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
               timestamp: int | None = None, partition: int | None = None) -> None:
        if partition is None:
            count = self.topic_partitions(topic) or DEFAULT_PARTITIONS
            partition = 0 if key is None else partition_for_key(key, count)
        log = self.produced[(topic, partition)]
        log.append(Record(topic, partition, len(log), timestamp or 0, key, value, tuple(headers or ())))

    def send_soon_raw(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                      timestamp: int | None = None) -> None:
        self.append(topic, key, value, headers=headers, timestamp=timestamp)


class Topology:
    """One app's compiled pipelines over in-memory stores, fed batch by batch."""

    def __init__(self, app: App, worker: Worker | None = None) -> None:
        self.app = app
        self.worker = worker or Worker(app)
        for table in app.tables.values():
            for p in range(table.partitions):
                table._txns.setdefault(p, StorePartition(MemoryBackend()).begin())
        self.sources: dict[str, CompiledSource] = {c.topic.name: c for c in compile_pipelines(app, self.worker)}
        self.read: dict[tuple[str, int], int] = defaultdict(int)

    def pending(self) -> list[tuple[str, int]]:
        return [tp for tp, log in self.worker.produced.items()
                if tp[0] in self.sources and self.read[tp] < len(log)]

    async def step(self, tp: tuple[str, int], n: int) -> None:
        log = self.worker.produced[tp]
        start = self.read[tp]
        batch = log[start:start + n]
        self.read[tp] = start + len(batch)
        self.worker.wall += 1
        source = self.sources[tp[0]]
        events = [self.worker.decode(source.topic, r, tp[1]) if carries_data(r.headers) else None for r in batch]
        await source.process(tp[1], batch, events)

    async def run(self, rng: random.Random, max_batch: int) -> None:
        while pending := self.pending():
            await self.step(rng.choice(pending), rng.randint(1, max_batch))

    def commit(self) -> None:
        """Commit the stores as the worker does (without a changelog): what a restart
        restores."""
        for table in self.app.tables.values():
            for p in table.prepare_commit():
                table.finish_commit(p, 0)

    def windows(self, topic: str = "counts") -> dict[tuple[Any, int, int], Any]:
        """The window results written to ``topic``: (key, start, end) -> value; each once."""
        out: dict[tuple[Any, int, int], Any] = {}
        for (name, _p), log in self.worker.produced.items():
            if name == topic:
                for r in log:
                    value = orjson.loads(r.value or b"null")
                    key = (value["key"], value["start"], value["end"])
                    assert key not in out, f"window {key} emitted twice"
                    out[key] = value["value"]
        return out

    def results(self, topic: str = "counts") -> dict[tuple[Any, int], Any]:
        """The window results written to ``topic``: (key, start) -> value."""
        return {(key, start): value for (key, start, _end), value in self.windows(topic).items()}

    def late(self, field: str = "page") -> list[tuple[Any, int]]:
        """The records sent to the late topic: (their ``field``, timestamp), sorted."""
        return sorted((orjson.loads(r.value or b"null")[field], r.timestamp)
                      for (topic, _p), log in self.worker.produced.items() if topic == LATE_TOPIC for r in log)
