"""The source task loop: poll (on the task's thread), transform, convert, produce, commit.

Each round polls a batch, runs each record through the transform chain and the converters
(errors handled by ``errors.tolerance``), sends it with aiokafka (acks=all), waits for every
acknowledgement, then records the batch's source offsets. The offsets go to the offset store
every ``offset.flush.interval.ms`` and at stop, after which ``SourceTask.commit`` runs: an
offset is never stored before Kafka has the records up to it (at-least-once; a crash may
repeat the records polled since the last flush, never lose them).

With ``ExactlyOnce`` (a distributed worker with ``exactly.once.source.support=enabled``,
KIP-618) the task's producer is transactional, its ``transactional.id`` Kafka's
``{group.id}-{connector}-{task}``: the records of a transaction and the source offsets they
reach are written to the topics and to ``offset.storage.topic`` in one Kafka transaction,
committed after every poll (``transaction.boundary=poll``) or every
``transaction.boundary.interval.ms`` (``interval``). Readers of the offset topic read
read_committed, so after a crash the task resumes exactly where the records it committed
end. Starting the producer fences an older instance of the same id (a zombie left by a
rebalance or a dead worker): its open transaction is aborted and its next write fails.
``SourceTask.commit``/``commit_record`` run only after the transaction committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from aiokafka import AIOKafkaProducer

from streamkit.connect.connector import SourceTask
from streamkit.connect.data import SourceRecord
from streamkit.connect.offsets import OffsetStore, offset_key, offset_value
from streamkit.connect.runner import RunnerSettings, TaskRunner, start_client, stop_client
from streamkit.connect.tolerance import Stage

__all__ = ["ExactlyOnce", "SourceTaskRunner", "transactional_id"]


def transactional_id(group_id: str, connector: str, task: int) -> str:
    """Kafka Connect's transactional.id of a source task (KIP-618)."""
    return f"{group_id}-{connector}-{task}"


@dataclass(frozen=True)
class ExactlyOnce:
    """How an exactly-once source task writes: its transaction id, where its offsets go, and
    when it commits (``transaction.boundary``)."""

    transactional_id: str
    offset_topic: str
    boundary: Literal["poll", "interval"] = "poll"
    interval_ms: int = 60000


class _Context:
    def __init__(self, store: OffsetStore, connector: str) -> None:
        self._store = store
        self._connector = connector

    def offset(self, source_partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self._store.get(self._connector, source_partition)


class SourceTaskRunner(TaskRunner):
    kind = "source"

    def __init__(self, settings: RunnerSettings, task_class: type[SourceTask], offsets: OffsetStore,
                 exactly_once: ExactlyOnce | None = None) -> None:
        super().__init__(settings)
        self.exactly_once = exactly_once
        self._task_class = task_class
        self._offsets = offsets
        self._task: SourceTask | None = None
        self._pending: dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        self._acked: list[tuple[SourceRecord, Any]] = []  # in the open transaction
        self._in_transaction = False
        self.topics: set[str] = set()  # written to so far (Kafka's active topics, KIP-558)
        labels = (settings.connector, str(settings.task_id))
        self._polled = settings.metrics.source_records_polled.labels(*labels)
        self._written = settings.metrics.source_records_written.labels(*labels)
        self._commits = settings.metrics.offset_commits.labels(*labels)

    async def stop(self) -> None:
        # SourceTask.stop first: it wakes a poll() that waits for data (Kafka Connect's contract)
        self._life.request_stop()
        task = self._task
        if task is not None:
            await asyncio.to_thread(self._life.call_stop_once, task.stop)
        await super().stop()

    def _producer(self) -> AIOKafkaProducer:
        s = self.settings
        defaults: dict[str, Any] = {"acks": "all", "linger_ms": 5,
                                    "client_id": f"connector-producer-{s.connector}-{self.id}"}
        kwargs = s.client_kwargs("producer", defaults)
        if self.exactly_once is not None:
            # a transactional producer is idempotent with acks=all, whatever producer.* says
            kwargs.update(acks="all", enable_idempotence=True,
                          transactional_id=self.exactly_once.transactional_id)
        return AIOKafkaProducer(bootstrap_servers=s.bootstrap, **kwargs)

    async def _run(self) -> None:
        s = self.settings
        producer = self._producer()
        started = False
        try:
            # a transactional producer's start fences the previous instance of its id and
            # aborts its open transaction, so the offsets read next are the committed ones
            await start_client(producer)
            started = True
            await self._offsets.sync()
            task = self._task_class()
            task.initialize(_Context(self._offsets, s.connector))
            self._task = task
            await self._thread.call(task.start, dict(self.config))
            if self.exactly_once is not None:
                await self._run_transactional(producer, task, self.exactly_once)
            else:
                await self._run_at_least_once(producer, task)
        except Exception as exc:
            self._loop_failed(exc)
        finally:
            if self._in_transaction:
                # also when cancelled (a task that did not stop in time): an open transaction
                # would hold read_committed readers back until it times out
                self._in_transaction = False
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(producer.abort_transaction(), 10)
            if self._task is not None:
                await asyncio.to_thread(self._life.call_stop_once, self._task.stop)
            if started:
                await stop_client(producer)

    async def _poll(self, task: SourceTask) -> Sequence[SourceRecord]:
        return await self._errors.retry(lambda: self._thread.call(task.poll), Stage.TASK_POLL, always=True)

    async def _run_at_least_once(self, producer: AIOKafkaProducer, task: SourceTask) -> None:
        last_flush = time.monotonic()
        while not self._life.stopping:
            if self._life.paused:
                await self._commit_offsets()
                await self._life.resumed.wait()
                continue
            records = await self._poll(task)
            if records:
                self._polled.inc(len(records))
                acked = await self._send(producer, records)
                if acked:
                    await self._thread.call(_commit_records, task, acked)
            if time.monotonic() - last_flush >= self.settings.offset_flush_interval_ms / 1000:
                await self._commit_offsets()
                last_flush = time.monotonic()
        await self._commit_offsets()

    async def _run_transactional(self, producer: AIOKafkaProducer, task: SourceTask, eos: ExactlyOnce) -> None:
        opened = time.monotonic()
        while not self._life.stopping:
            if self._life.paused:
                await self._commit_transaction(producer, task, eos)
                await self._life.resumed.wait()
                continue
            records = await self._poll(task)
            if records:
                self._polled.inc(len(records))
                if not self._in_transaction:
                    await producer.begin_transaction()
                    self._in_transaction = True
                    opened = time.monotonic()
                self._acked.extend(await self._send(producer, records))
            if self._in_transaction and (eos.boundary == "poll"
                                         or time.monotonic() - opened >= eos.interval_ms / 1000):
                await self._commit_transaction(producer, task, eos)
        await self._commit_transaction(producer, task, eos)

    async def _commit_transaction(self, producer: AIOKafkaProducer, task: SourceTask, eos: ExactlyOnce) -> None:
        """Write the pending offsets into the open transaction and commit it."""
        if not self._in_transaction:
            return
        pending, self._pending = self._pending, {}
        acked, self._acked = self._acked, []
        futures = [await producer.send(eos.offset_topic, offset_value(offset), key=key.encode())
                   for key, (_partition, offset) in pending.items()]
        for future in futures:
            await future
        await producer.commit_transaction()
        self._in_transaction = False
        self._offsets.committed(self.settings.connector, pending)
        self._commits.inc()
        if acked:
            await self._thread.call(_commit_records, task, acked)
        await self._thread.call(task.commit)

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

    async def _send(self, producer: AIOKafkaProducer, records: Sequence[SourceRecord]
                    ) -> list[tuple[SourceRecord, Any]]:
        """Send the records, wait for every acknowledgement, and make their offsets pending."""
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
        return acked

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
