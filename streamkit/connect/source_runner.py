"""The source task loop: poll (on the task's thread), transform, convert, produce, commit.

Each round polls a batch, runs each record through the transform chain and the converters
(errors handled by ``errors.tolerance``), sends it with aiokafka (acks=all), waits for every
acknowledgement, then records the batch's source offsets. The offsets go to the offset store
every ``offset.flush.interval.ms`` and at stop, after which ``SourceTask.commit`` runs: an
offset is never stored before Kafka has the records up to it (at-least-once; a crash may
repeat the records polled since the last flush, never lose them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from streamkit.connect.connector import SourceTask
from streamkit.connect.data import SourceRecord
from streamkit.connect.offsets import OffsetStore, offset_key
from streamkit.connect.runner import RunnerSettings, TaskLife, TaskThread, start_client, stop_client
from streamkit.connect.status import State, Status
from streamkit.connect.tolerance import ErrorHandler, Stage

__all__ = ["SourceTaskRunner"]

log = logging.getLogger(__name__)


class _Context:
    def __init__(self, store: OffsetStore, connector: str) -> None:
        self._store = store
        self._connector = connector

    def offset(self, source_partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self._store.get(self._connector, source_partition)


class SourceTaskRunner:
    def __init__(self, settings: RunnerSettings, task_class: type[SourceTask], offsets: OffsetStore) -> None:
        self.settings = settings
        self.id = settings.task_id
        self.config = settings.task_config
        self._task_class = task_class
        self._offsets = offsets
        self._life = TaskLife(settings.worker_id)
        self._thread = TaskThread(f"{settings.connector}-{settings.task_id}")
        self._errors = ErrorHandler(settings.valid.common, settings.connector, settings.task_id)
        self._task: SourceTask | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._pending: dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        self.topics: set[str] = set()  # written to so far (Kafka's active topics, KIP-558)
        labels = (settings.connector, str(settings.task_id))
        self._polled = settings.metrics.source_records_polled.labels(*labels)
        self._written = settings.metrics.source_records_written.labels(*labels)
        self._commits = settings.metrics.offset_commits.labels(*labels)

    def status(self) -> Status:
        return self._life.status()

    async def start(self, paused: bool = False) -> None:
        self._life.state = State.RUNNING
        if paused:
            self._life.pause()
        self._loop_task = asyncio.create_task(self._run(), name=f"source-{self.settings.connector}-{self.id}")

    def pause(self) -> None:
        self._life.pause()

    def resume(self) -> None:
        self._life.resume()

    async def stop(self) -> None:
        self._life.stopping = True
        self._life.resumed.set()
        task = self._task
        if task is not None:
            await asyncio.to_thread(self._life.call_stop_once, task.stop)
        if self._loop_task is not None:
            timeout = max(self.settings.shutdown_timeout_ms, 1000) / 1000
            done, _ = await asyncio.wait({self._loop_task}, timeout=timeout)
            if not done:
                log.warning("source task %s-%d did not stop within %.1f s; cancelling it",
                            self.settings.connector, self.id, timeout)
                self._loop_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._loop_task
        if self._life.state != State.FAILED:
            self._life.state = State.UNASSIGNED
        self._thread.close()

    async def _run(self) -> None:
        s = self.settings
        producer = AIOKafkaProducer(bootstrap_servers=s.bootstrap, **s.client_kwargs("producer", {
            "acks": "all", "linger_ms": 5, "client_id": f"connector-producer-{s.connector}-{self.id}"}))
        started = False
        try:
            await start_client(producer)
            started = True
            await self._offsets.sync()
            task = self._task_class()
            task.initialize(_Context(self._offsets, s.connector))
            self._task = task
            await self._thread.call(task.start, dict(self.config))
            last_flush = time.monotonic()
            while not self._life.stopping:
                if self._life.paused:
                    await self._commit_offsets()
                    await self._life.resumed.wait()
                    continue
                records = await self._errors.retry(lambda: self._thread.call(task.poll), Stage.TASK_POLL,
                                                   always=True)
                if records:
                    self._polled.inc(len(records))
                    await self._send(producer, task, records)
                if time.monotonic() - last_flush >= s.offset_flush_interval_ms / 1000:
                    await self._commit_offsets()
                    last_flush = time.monotonic()
            await self._commit_offsets()
        except Exception as exc:
            log.error("source task %s-%d failed", s.connector, self.id, exc_info=True)
            self._life.fail(exc)
        finally:
            if self._task is not None:
                await asyncio.to_thread(self._life.call_stop_once, self._task.stop)
            if started:
                await stop_client(producer)

    def _prepare(self, record: SourceRecord) -> tuple[SourceRecord, bytes | None, bytes | None] | None:
        valid = self.settings.valid
        stage = Stage.TRANSFORMATION
        try:
            out = valid.transforms(record)
            if out is None:
                return None
            stage = Stage.KEY_CONVERTER
            key = valid.key_converter.from_connect_data(out.topic, out.key_schema, out.key)
            stage = Stage.VALUE_CONVERTER
            value = valid.value_converter.from_connect_data(out.topic, out.value_schema, out.value)
        except Exception as exc:
            self.settings.metrics.errors.labels(self.settings.connector, str(self.id), stage.value).inc()
            if self._errors.tolerate(stage, exc, record):
                return None
            raise
        return out, key, value

    async def _send(self, producer: AIOKafkaProducer, task: SourceTask, records: Sequence[SourceRecord]) -> None:
        sent: list[tuple[SourceRecord, asyncio.Future[Any]]] = []
        for record in records:
            prepared = self._prepare(record)
            if prepared is None:
                continue
            out, key, value = prepared
            future = await producer.send(out.topic, value, key=key, partition=out.partition,
                                         timestamp_ms=out.timestamp_ms, headers=list(out.headers) or None)
            sent.append((record, future))
            self.topics.add(out.topic)
        acked = [(record, await future) for record, future in sent]
        self._written.inc(len(acked))
        for record in records:  # skipped and filtered records are done too
            stored_key = offset_key(self.settings.connector, record.source_partition)
            self._pending[stored_key] = (record.source_partition, record.source_offset)
        if acked:
            await self._thread.call(_commit_records, task, acked)

    async def _commit_offsets(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        self._offsets.put(self.settings.connector, pending)
        await self._offsets.flush()
        self._commits.inc()
        if self._task is not None:
            await self._thread.call(self._task.commit)


def _commit_records(task: SourceTask, acked: list[tuple[SourceRecord, Any]]) -> None:
    for record, metadata in acked:
        task.commit_record(record, metadata.partition, metadata.offset)
