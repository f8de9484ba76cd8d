"""The sink task loop: consume (group ``connect-{name}``), convert, transform, put, commit.

A batch from ``getmany`` is converted and transformed record by record; a record that fails
there is skipped with ``errors.tolerance=all`` (and written, raw, to the dead-letter topic
with Kafka Connect's ``__connect.errors.*`` headers when enabled) or fails the task. The rest
goes to ``SinkTask.put`` on the task's thread. A ``DataError`` from ``put`` of several
records is narrowed down by putting them one at a time, so only the poison record is
skipped. Every ``offset.flush.interval.ms``, on ``request_commit``, before partitions are
revoked and at stop, ``pre_commit`` (by default: ``flush``) says which offsets are safe and
only those are committed: nothing is committed that the task has not made durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

from streamkit.connect.connector import SinkTask
from streamkit.connect.data import SinkRecord
from streamkit.connect.errors import DataError
from streamkit.connect.runner import (
    GROUP_STOP_WAIT_S,
    RunnerSettings,
    TaskRunner,
    start_client,
    stop_client,
)
from streamkit.connect.tolerance import Stage, error_headers

__all__ = ["SinkTaskRunner", "sink_group"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


def sink_group(connector: str) -> str:
    return f"connect-{connector}"


class _Context:
    """SinkTaskContext: requests the loop carries out before its next poll."""

    def __init__(self) -> None:
        self.assigned: frozenset[TP] = frozenset()
        self.seeks: dict[TP, int] = {}
        self.paused: set[TP] = set()
        self.commit_requested = False

    def assignment(self) -> frozenset[TP]:
        return self.assigned

    def offset(self, offsets: Mapping[TP, int]) -> None:
        self.seeks.update(offsets)

    def pause(self, *partitions: TP) -> None:
        self.paused.update(partitions)

    def resume(self, *partitions: TP) -> None:
        self.paused.difference_update(partitions)

    def request_commit(self) -> None:
        self.commit_requested = True


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runner: SinkTaskRunner) -> None:
        self.runner = runner

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.runner._revoked({(tp.topic, tp.partition) for tp in revoked})

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.runner._assigned({(tp.topic, tp.partition) for tp in assigned})


class SinkTaskRunner(TaskRunner):
    kind = "sink"

    def __init__(self, settings: RunnerSettings, task_class: type[SinkTask]) -> None:
        super().__init__(settings)
        self._task_class = task_class
        self._context = _Context()
        self._task: SinkTask | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._dlq: AIOKafkaProducer | None = None
        self._lock = asyncio.Lock()
        self._consumed: dict[TP, int] = {}
        # Partitions the task has opened, and how many seeks were made (per partition: the
        # count at its last one): see _deliverable.
        self._opened: set[TP] = set()
        self._moves = 0
        self._moved: dict[TP, int] = {}
        self.topics: set[str] = set()  # read from so far (Kafka's active topics, KIP-558)
        self._committed: dict[TP, int] = {}
        self._task_started = False
        labels = (settings.connector, str(settings.task_id))
        self._read = settings.metrics.sink_records_read.labels(*labels)
        self._sent = settings.metrics.sink_records_sent.labels(*labels)
        self._commits = settings.metrics.offset_commits.labels(*labels)
        self._dlq_count = settings.metrics.deadletterqueue_produce.labels(*labels)

    # -- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        s = self.settings
        common = s.valid.common
        settings = s.client_kwargs("consumer", {"auto_offset_reset": "earliest", "max_poll_records": 500,
                                                "client_id": f"connector-consumer-{s.connector}-{self.id}"})
        self._max_records = int(settings["max_poll_records"])
        consumer = AIOKafkaConsumer(bootstrap_servers=s.bootstrap, group_id=sink_group(s.connector),
                                    enable_auto_commit=False, **settings)
        started = False
        try:
            task = self._task_class()
            task.initialize(self._context)
            self._task = task
            await self._thread.call(task.start, dict(self.config))
            self._task_started = True
            if common.errors_deadletterqueue_topic_name and common.errors_tolerance == "all":
                self._dlq = await self._dlq_producer(common.errors_deadletterqueue_topic_name,
                                                     common.errors_deadletterqueue_topic_replication_factor)
            await start_client(consumer)
            started = True
            self._consumer = consumer
            if common.topics:
                consumer.subscribe(topics=list(common.topics), listener=_Listener(self))
            else:
                consumer.subscribe(pattern=common.topics_regex, listener=_Listener(self))
            await self._loop(consumer, task)
            async with self._lock:
                await self._commit(set(self._context.assigned))
                await self._close(set(self._context.assigned))
        except Exception as exc:
            self._loop_failed(exc)
        finally:
            if self._task is not None and self._task_started:
                await asyncio.to_thread(self._life.call_stop_once, self._task.stop)
            if started:
                await stop_client(consumer, GROUP_STOP_WAIT_S)
            if self._dlq is not None:
                await stop_client(self._dlq)

    async def _loop(self, consumer: AIOKafkaConsumer, task: SinkTask) -> None:
        interval = (self.settings.valid.common.offset_flush_interval_ms
                    or self.settings.offset_flush_interval_ms) / 1000
        last_commit = time.monotonic()
        while not self._life.stopping:
            self._apply_context(consumer)
            moves = self._moves
            batch = await self._life.unless_stopped(
                consumer.getmany(timeout_ms=500, max_records=self._max_records))
            if batch is None:
                break
            async with self._lock:
                messages = self._deliverable(consumer, batch, moves)
                if messages:
                    self._read.inc(len(messages))
                    self.topics.update(m.topic for m in messages)
                    await self._deliver(task, messages)
                due = time.monotonic() - last_commit >= interval
                if due or self._context.commit_requested:
                    self._context.commit_requested = False
                    await self._commit(set(self._context.assigned))
                    last_commit = time.monotonic()

    def _deliverable(self, consumer: AIOKafkaConsumer, batch: Mapping[TopicPartition, list[ConsumerRecord[Any, Any]]],
                     moves: int) -> list[ConsumerRecord[Any, Any]]:
        """The records of ``batch`` the task may be given: of partitions it has opened, and
        fetched after the last seek of their partition. aiokafka calls the rebalance
        listener beside the poll, not inside it as Kafka's consumer does, so a poll can
        return records of a partition whose open() (and the seek it asks for) has not
        happened yet: those are fetched again, from where the batch had them, or from where
        a seek made meanwhile put the partition."""
        out: list[ConsumerRecord[Any, Any]] = []
        assigned = consumer.assignment()
        for tp, records in batch.items():
            key = (tp.topic, tp.partition)
            moved = self._moved.get(key, 0) > moves
            if key in self._opened and not moved:
                out.extend(records)
            elif tp in assigned:
                # Whether a moved partition's records came before or after its seek is not
                # known: fetched again from where the seek put it (nothing delivered since).
                consumer.seek(tp, self._consumed[key] if moved else records[0].offset)
        return out

    def _apply_context(self, consumer: AIOKafkaConsumer) -> None:
        assigned = self._context.assigned
        for tp, offset in list(self._context.seeks.items()):
            if tp in assigned:
                consumer.seek(TopicPartition(*tp), offset)
                self._consumed[tp] = offset
                self._moves += 1
                self._moved[tp] = self._moves
                del self._context.seeks[tp]
        paused = assigned if self._life.paused else assigned & self._context.paused
        wanted = {TopicPartition(*tp) for tp in paused}
        current = consumer.paused()
        if wanted - current:
            consumer.pause(*(wanted - current))
        if current - wanted:
            consumer.resume(*(current - wanted))

    def _convert(self, message: ConsumerRecord[Any, Any]) -> SinkRecord | None:
        valid = self.settings.valid
        stage = Stage.KEY_CONVERTER
        try:
            key_schema, key = valid.key_converter.to_connect_data(message.topic, message.key)
            stage = Stage.VALUE_CONVERTER
            value_schema, value = valid.value_converter.to_connect_data(message.topic, message.value)
            headers = tuple((k, bytes(v) if v is not None else None) for k, v in message.headers or ())
            record = SinkRecord(message.topic, message.partition, message.offset, value, key, value_schema,
                                key_schema, message.timestamp, headers)
            stage = Stage.TRANSFORMATION
            return valid.transforms(record)
        except Exception as exc:
            self._failed(stage, exc, message)
            return None

    def _failed(self, stage: Stage, error: Exception, message: ConsumerRecord[Any, Any]) -> None:
        """Tolerate ``error`` (queue the raw record for the DLQ) or re-raise it."""
        self.settings.metrics.errors.labels(self.settings.connector, str(self.id), stage.value).inc()
        if not self._errors.tolerate(stage, error, message):
            raise error
        self._dead.append((stage, error, message))

    async def _deliver(self, task: SinkTask, messages: list[ConsumerRecord[Any, Any]]) -> None:
        self._dead: list[tuple[Stage, Exception, ConsumerRecord[Any, Any]]] = []
        records = [r for r in (self._convert(m) for m in messages) if r is not None]
        raw = {(m.topic, m.partition, m.offset): m for m in messages}
        if records:
            await self._put(task, records, raw)
            self._sent.inc(len(records))
        for m in messages:
            self._consumed[(m.topic, m.partition)] = m.offset + 1
        if self._dead:
            await self._send_dead(self._dead)

    async def _put(self, task: SinkTask, records: Sequence[SinkRecord],
                   raw: Mapping[tuple[str, int, int], ConsumerRecord[Any, Any]]) -> None:
        try:
            await self._errors.retry(lambda: self._thread.call(task.put, list(records)), Stage.TASK_PUT, always=True)
            return
        except DataError as exc:
            if not self._errors.tolerates:
                raise
            if len(records) == 1:
                self._failed(Stage.TASK_PUT, exc, raw[(records[0].topic, records[0].partition, records[0].offset)])
                return
        for record in records:  # find the poison records: put them one at a time
            await self._put(task, [record], raw)

    async def _dlq_producer(self, topic: str, replication: int) -> AIOKafkaProducer:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.settings.bootstrap, **self.settings.client_kwargs("admin", {}))
        await start_client(admin)
        try:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(topic, 1, replication if replication > 0 else 1)])
        except KafkaError as exc:
            log.warning("cannot create the dead-letter topic %s (it may exist already): %s", topic, exc)
        finally:
            await stop_client(admin)
        producer = AIOKafkaProducer(bootstrap_servers=self.settings.bootstrap, **self.settings.client_kwargs(
            "producer", {"acks": "all", "client_id": f"connector-dlq-producer-{self.settings.connector}-{self.id}"}))
        await start_client(producer)
        return producer

    async def _send_dead(self, dead: list[tuple[Stage, Exception, ConsumerRecord[Any, Any]]]) -> None:
        common = self.settings.valid.common
        if self._dlq is None:
            return
        futures = []
        for stage, error, m in dead:
            headers = [(k, bytes(v) if v is not None else b"") for k, v in m.headers or ()]
            if common.errors_deadletterqueue_context_headers_enable:
                executing = type(self._task) if stage == Stage.TASK_PUT else None
                headers += error_headers(topic=m.topic, partition=m.partition, offset=m.offset,
                                         connector=self.settings.connector, task_id=self.id, stage=stage,
                                         executing=executing, error=error)
            futures.append(await self._dlq.send(common.errors_deadletterqueue_topic_name, m.value, key=m.key,
                                                headers=headers or None))
        for future in futures:
            await future
        self._dlq_count.inc(len(futures))

    # -- commits and rebalances ------------------------------------------------------------

    async def _commit(self, partitions: set[TP]) -> None:
        consumer, task = self._consumer, self._task
        if consumer is None or task is None:
            return
        offsets = {tp: self._consumed[tp] for tp in partitions if tp in self._consumed}
        if not offsets:
            return
        safe = await self._errors.retry(lambda: self._thread.call(task.pre_commit, dict(offsets)),
                                        Stage.TASK_PUT, always=True)
        commit = {tp: off for tp, off in safe.items()
                  if tp in offsets and off <= offsets[tp] and self._committed.get(tp) != off}
        if not commit:
            return
        await consumer.commit({TopicPartition(*tp): OffsetAndMetadata(off, "") for tp, off in commit.items()})
        self._committed.update(commit)
        self._commits.inc()

    async def _close(self, partitions: set[TP]) -> None:
        if partitions and self._task is not None:
            await self._thread.call(self._task.close, frozenset(partitions))

    async def _revoked(self, revoked: set[TP]) -> None:
        async with self._lock:
            try:
                await self._commit(revoked)
            except Exception:
                log.warning("commit before a rebalance failed for %s; records may be redelivered",
                            sorted(revoked), exc_info=True)
            await self._close(revoked)
            self._opened -= revoked
            for tp in revoked:
                self._consumed.pop(tp, None)
                self._committed.pop(tp, None)
                self._moved.pop(tp, None)
            self._context.assigned = self._context.assigned - frozenset(revoked)

    async def _assigned(self, assigned: set[TP]) -> None:
        self._context.assigned = self._context.assigned | frozenset(assigned)
        if self._task is not None and assigned:
            await self._thread.call(self._task.open, frozenset(assigned))
        if self._consumer is not None:
            # offsets the task asked for in open() apply before the first fetch, as in Kafka
            self._apply_context(self._consumer)
        self._opened |= assigned
