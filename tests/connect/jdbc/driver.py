"""A tiny stand-in for the Connect runtime: drives source and sink tasks through the SPI.

``OffsetStore`` is the source task's context: it hands back committed offsets and commits a
record's offset once the test "acknowledges" it, as the runtime does after Kafka's ack."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from streamkit.connect.data import SinkRecord, SourceRecord
from streamkit.connect.jdbc.config import JdbcSourceConfig, parse_config
from streamkit.connect.jdbc.source import JdbcSourceConnector, JdbcSourceTask


class OffsetStore:
    def __init__(self) -> None:
        self.committed: dict[str, dict[str, Any]] = {}

    def offset(self, source_partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self.committed.get(json.dumps(dict(source_partition), sort_keys=True))

    def commit(self, records: list[SourceRecord]) -> None:
        for r in records:
            self.committed[json.dumps(dict(r.source_partition), sort_keys=True)] = dict(r.source_offset)


def start_source(config: dict[str, str], store: OffsetStore, task_index: int = 0) -> JdbcSourceTask:
    connector = JdbcSourceConnector()
    connector.start(parse_config(JdbcSourceConfig, config))
    task = JdbcSourceTask()
    task.initialize(store)
    task.start(connector.task_configs(1)[task_index])
    connector.stop()
    return task


def poll_until(task: JdbcSourceTask, store: OffsetStore,
               done: Callable[[list[SourceRecord]], bool], timeout: float = 30.0,
               settle: float = 0.0) -> list[SourceRecord]:
    """Poll (committing each batch) until ``done(records so far)``, then ``settle`` seconds
    more to catch anything extra; fails after ``timeout``."""
    got: list[SourceRecord] = []
    deadline = time.monotonic() + timeout
    while not done(got):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out with {len(got)} records: {[r.value for r in got]}")
        batch = list(task.poll())
        store.commit(batch)
        got.extend(batch)
    end = time.monotonic() + settle
    while time.monotonic() < end:
        batch = list(task.poll())
        store.commit(batch)
        got.extend(batch)
    return got


def as_sink_records(records: list[SourceRecord], start_offset: int = 0) -> list[SinkRecord]:
    return [SinkRecord(topic=r.topic, partition=0, offset=start_offset + i, value=r.value,
                       key=r.key, value_schema=r.value_schema, key_schema=r.key_schema)
            for i, r in enumerate(records)]
