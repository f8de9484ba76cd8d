"""ConnectorTestDriver: one connector's tasks against in-memory topics and offset storage,
with its converters and transforms (SMTs) applied, so a custom connector can be tested
without a worker, a broker or threads.

The connector's config is validated as a worker validates it (``validate_config``: unknown
classes, bad settings and transform chains are refused with the same errors); the connector
is started and asked for ``tasks.max`` task configs; each task is started with its own.
Then the test drives the tasks' SPI calls itself, synchronously:

- a source connector: ``poll()`` calls every task's ``poll`` once and writes what it
  returned (transformed, then converted by ``key.converter``/``value.converter``) to the
  in-memory topics; ``commit()`` stores the source offsets of what was written, as an
  offset flush does, and calls ``SourceTask.commit``; ``output(topic).read_all()`` gives
  the records as a consumer would read them, decoded by the converters;
- a sink connector: ``input(topic).send(value, key=...)`` encodes with the converters,
  then converts back, transforms, and ``put``s the record to the task that owns the
  partition; ``commit()`` calls ``pre_commit`` (by default ``flush``) with the offsets
  consumed;
- ``restart()`` stops the tasks and the connector and starts them again: a source task
  resumes from the offsets committed (``SourceTaskContext.offset``).

Errors are raised to the test (``errors.tolerance`` and dead-letter queues are the worker's).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from streamkit.connect.config import ValidConfig, validate_config
from streamkit.connect.connector import Connector, SinkTask, SourceTask
from streamkit.connect.data import SinkRecord, SourceRecord
from streamkit.connect.offsets import MemoryOffsetStore, offset_key
from streamkit.connect.plugins import PluginRegistry

# The workers' own task contexts: what a task sees of them is the same here.
from streamkit.connect.sink_runner import _Context as SinkContext
from streamkit.connect.source_runner import _Context as SourceContext
from streamkit.testing.driver import OutputRecord
from streamkit.testing.memory import MemoryLog

__all__ = ["ConnectorTestDriver"]

TP = tuple[str, int]


class _ConnectorContext:
    def __init__(self) -> None:
        self.reconfiguration_requested = False
        self.errors: list[BaseException] = []

    def request_task_reconfiguration(self) -> None:
        self.reconfiguration_requested = True

    def raise_error(self, error: BaseException) -> None:
        self.errors.append(error)


class ConnectorTestDriver:
    """Run one connector's tasks in memory (see the module doc). ``config`` is the
    connector's JSON config (Kafka Connect's names); ``worker`` the worker's settings it may
    inherit converters from; ``partitions`` the partition count of the topics it writes or
    reads."""

    def __init__(self, config: Mapping[str, Any], *, worker: Mapping[str, Any] | None = None,
                 registry: PluginRegistry | None = None, partitions: int = 1,
                 offsets: MemoryOffsetStore | None = None) -> None:
        self.valid: ValidConfig = validate_config(config, registry or PluginRegistry(), worker)
        self.log = MemoryLog(lambda: time.time_ns() // 1_000_000, partitions)
        self.partitions = partitions
        self.offsets = offsets if offsets is not None else MemoryOffsetStore()
        self.context = _ConnectorContext()
        self.connector: Connector | None = None
        self.tasks: list[Any] = []
        self.task_configs: list[dict[str, str]] = []
        self._pending: dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        self._consumed: dict[TP, int] = {}
        self._sink_offsets: dict[TP, int] = {}
        self._read: dict[TP, int] = {}
        self._start()

    @property
    def name(self) -> str:
        """The connector's name (its config's ``name``)."""
        return self.valid.name

    @property
    def is_source(self) -> bool:
        """Whether the connector is a source (``poll()``) rather than a sink (``send()``)."""
        return self.valid.type == "source"

    # -- lifecycle -----------------------------------------------------------------------

    def _start(self) -> None:
        valid = self.valid
        connector = valid.connector_class()
        connector.initialize(self.context)
        connector.start(valid.connector)
        self.connector = connector
        limit = valid.common.tasks_max
        self.task_configs = [{str(k): str(v) for k, v in c.items()} for c in connector.task_configs(limit)[:limit]]
        task_class = connector.task_class()
        self.tasks = []
        for i, task_config in enumerate(self.task_configs):
            task = task_class()
            if isinstance(task, SourceTask):
                task.initialize(SourceContext(self.offsets, self.name))
                task.start(task_config)
            else:
                assert isinstance(task, SinkTask)
                task.start(task_config)
                self._open_sink(i, task)
            self.tasks.append(task)

    def _open_sink(self, index: int, task: SinkTask) -> None:
        """Assign each topic partition the sink reads to task ``partition % tasks``."""
        topics = self._sink_topics()
        owned = frozenset((t, p) for t in topics for p in range(self.partitions) if p % len(self.task_configs) == index)
        context = SinkContext()
        context.assigned = owned
        task.initialize(context)
        if owned:
            task.open(owned)

    def _sink_topics(self) -> list[str]:
        raw = self.valid.raw.get("topics", "")
        return [t.strip() for t in raw.split(",") if t.strip()]

    def stop(self) -> None:
        """Stop the tasks (sinks close their partitions first), then the connector."""
        for task in self.tasks:
            if isinstance(task, SinkTask):
                assignment = task.context.assignment() if task.context is not None else frozenset()
                if assignment:
                    task.close(assignment)
            task.stop()
        self.tasks = []
        if self.connector is not None:
            self.connector.stop()
            self.connector = None

    def restart(self) -> None:
        """Stop everything and start again; uncommitted source offsets are lost."""
        self.stop()
        self._pending.clear()
        self._start()

    def __enter__(self) -> ConnectorTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- source --------------------------------------------------------------------------

    def poll(self) -> int:
        """Call every source task's ``poll`` once; returns how many records were written. A
        task's ``poll`` may wait when it has nothing (FileStreamSource waits up to about a
        second): that wait is the task's own."""
        if not self.is_source:
            raise TypeError(f"connector {self.name!r} is a sink: send records with input(topic).send()")
        written = 0
        for task in self.tasks:
            for record in task.poll() or ():
                written += self._write(task, record)
        return written

    def _write(self, task: SourceTask, record: SourceRecord) -> int:
        valid = self.valid
        out = valid.transforms(record)
        # Filtered or not, its offset is done (as the worker's source loop has it).
        self._pending[offset_key(self.name, record.source_partition)] = (record.source_partition,
                                                                          record.source_offset)
        if out is None:
            return 0
        key = valid.key_converter.from_connect_data(out.topic, out.key_schema, out.key)
        value = valid.value_converter.from_connect_data(out.topic, out.value_schema, out.value)
        partition = self.log.partition_for(out.topic, key, out.partition)
        stored = self.log.append(out.topic, partition, key, value, out.timestamp_ms, out.headers)
        task.commit_record(record, partition, stored.offset)
        return 1

    def output(self, topic: str) -> list[OutputRecord]:
        """The records written to ``topic`` since the last call, decoded by the converters."""
        valid = self.valid
        out = []
        for p in range(self.log.partitions(topic) or 0):
            for r in self.log.read((topic, p), self._read.get((topic, p), 0)):
                key = valid.key_converter.to_connect_data(topic, r.key)[1]
                value = valid.value_converter.to_connect_data(topic, r.value)[1]
                out.append(OutputRecord(key, value, r.timestamp, dict(r.headers), p, r.offset))
            self._read[(topic, p)] = self.log.end_offset((topic, p))
        return out

    # -- sink ----------------------------------------------------------------------------

    def send(self, topic: str, value: Any = None, *, key: Any = None, timestamp: int | None = None,
             headers: Mapping[str, bytes] | None = None, partition: int | None = None) -> None:
        """A record on ``topic`` (encoded by the converters, schemaless) delivered to the sink
        task that owns its partition with ``put``."""
        valid = self.valid
        k = valid.key_converter.from_connect_data(topic, None, key)
        v = valid.value_converter.from_connect_data(topic, None, value)
        self.send_raw(topic, v, key=k, timestamp=timestamp, headers=headers, partition=partition)

    def send_raw(self, topic: str, value: bytes | None, *, key: bytes | None = None, timestamp: int | None = None,
                 headers: Mapping[str, bytes] | None = None, partition: int | None = None) -> None:
        """``send()`` of bytes as they are, past the converters (what another client wrote)."""
        if self.is_source:
            raise TypeError(f"connector {self.name!r} is a source: call poll()")
        if topic not in self._sink_topics():
            raise KeyError(f"sink {self.name!r} does not read {topic!r} (topics: {', '.join(self._sink_topics())})")
        if topic not in self.log.topics:
            self.log.create(topic, self.partitions)
        p = self.log.partition_for(topic, key, partition)
        stored = self.log.append(topic, p, key, value, timestamp, list((headers or {}).items()))
        self.put([stored])

    def put(self, stored: Sequence[Any]) -> None:
        """Convert and transform stored records as a worker does and ``put()`` them to
        the tasks that own their partitions."""
        valid = self.valid
        by_task: dict[int, list[SinkRecord]] = {}
        for m in stored:
            key_schema, key = valid.key_converter.to_connect_data(m.topic, m.key)
            value_schema, value = valid.value_converter.to_connect_data(m.topic, m.value)
            record = valid.transforms(SinkRecord(m.topic, m.partition, m.offset, value, key, value_schema,
                                                 key_schema, m.timestamp, tuple(m.headers)))
            self._consumed[(m.topic, m.partition)] = m.offset + 1
            if record is not None:
                by_task.setdefault(m.partition % len(self.tasks), []).append(record)
        for index, records in sorted(by_task.items()):
            self.tasks[index].put(records)

    def committed_sink_offsets(self) -> dict[TP, int]:
        """What the sink tasks' ``pre_commit`` returned at the last ``commit()``."""
        return dict(self._sink_offsets)

    # -- committing ----------------------------------------------------------------------

    def commit(self) -> None:
        """Sources: store the pending source offsets, then ``SourceTask.commit``. Sinks:
        ``pre_commit`` with the consumed offsets of each task's partitions."""
        if self.is_source:
            pending, self._pending = self._pending, {}
            if pending:
                self.offsets.put(self.name, pending)
            for task in self.tasks:
                task.commit()
            return
        for task in self.tasks:
            assert isinstance(task, SinkTask) and task.context is not None
            owned = task.context.assignment()
            offsets = {tp: o for tp, o in self._consumed.items() if tp in owned}
            self._sink_offsets.update(task.pre_commit(offsets))

    def source_offsets(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The committed (source partition, source offset) pairs of this connector."""
        return self.offsets.connector_offsets(self.name)
