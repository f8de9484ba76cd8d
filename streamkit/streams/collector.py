"""RecordCollector: everything a worker produces, and the check that it was delivered.

Outputs, repartitioned records, changelogs, dead letters and late records all go through
here. The runtime's commit asks the collector to deliver what it queued
(``check_deliveries``) before it commits anything, and under exactly-once to commit it.

At-least-once (``processing.guarantee=at_least_once``): one producer. A record is
acknowledged by the broker before the input offsets that led to it are committed, so a
crash repeats effects and never loses them.

Exactly-once (``exactly_once``/``exactly_once_v2``): one transactional producer per task,
with ``transactional.id`` ``{application.id}-{task}``, as in Kafka Streams' first
exactly-once mode. Every record a task produces (outputs, repartitioned records, its tables'
changelog records) and its input offsets (``commit``) go into that task's transaction.
A worker that is assigned a task initializes its producer before it restores or processes
anything: the broker then fences the previous owner's producer (a zombie's later writes and
commits are refused) and aborts its open transaction. Kafka Streams' ``exactly_once_v2``
fences by the consumer group generation instead, through TxnOffsetCommit v3, which the
Python client (aiokafka) does not send; per-task transactional ids fence zombies as
precisely, at the cost of one producer per task.

What a worker produces outside any task (a timer's sends) goes into the transaction of a
worker producer whose ``transactional.id`` is ``{application.id}-{process id}``; the process
id is kept in the state directory, so a restarted worker fences its previous life.

Which task a record belongs to: the one given by the caller (changelogs, DSL outputs), else
the one the runtime set for the batch it runs (``task_scope``), else the partition of the
event the calling agent is processing (``current_event``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.structs import TopicPartition

from streamkit import logfmt
from streamkit.streams.agent import read_current_event
from streamkit.streams.clients import start_client, stop_client
from streamkit.streams.partitioners import murmur2_partition
from streamkit.streams.settings import AppSettings

__all__ = ["DeliveryError", "Produced", "RecordCollector", "TaskMigratedError", "current_task", "task_scope"]

log = logging.getLogger(__name__)

TP = tuple[str, int]
# (topic, key, value, timestamp, headers, partition, task): a record for ``enqueue_many``.
Produced = tuple[str, bytes | None, bytes | None, int | None, Any, int | None, int | None]

_task: contextvars.ContextVar[int | None] = contextvars.ContextVar("streamkit_task", default=None)


class DeliveryError(RuntimeError):
    """A record produced since the last commit was not delivered: nothing is committed."""


class TaskMigratedError(RuntimeError):
    """A record for a task this worker no longer owns (exactly-once): its new owner
    reprocesses the input that led to it, so it must not be written from here."""


def current_task() -> int | None:
    """The task whose record the calling code is processing, if any."""
    task = _task.get()
    if task is not None:
        return task
    event = read_current_event()
    return None if event is None else event.partition


@contextlib.contextmanager
def task_scope(task: int) -> Iterator[None]:
    """Records produced inside belong to ``task`` unless the caller names another."""
    token = _task.set(task)
    try:
        yield
    finally:
        _task.reset(token)


def process_id(state_dir: Path) -> str:
    """This worker's id, kept in its state directory (Kafka Streams keeps one there too)."""
    path = state_dir / "process.id"
    with contextlib.suppress(OSError):
        text = path.read_text().strip()
        if text:
            return text
    state_dir.mkdir(parents=True, exist_ok=True)
    pid = uuid.uuid4().hex
    path.write_text(pid + "\n")
    return pid


class RecordCollector:
    """The worker's producers (see the module docstring). ``start()`` before the first
    record, ``stop()`` after the last commit; under exactly-once ``open_tasks`` /
    ``close_tasks`` follow the assignment and ``commit`` ends every open transaction."""

    def __init__(self, bootstrap: str, settings: AppSettings, *, state_dir: Path,
                 security: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self._security = dict(security or {})
        self.settings = settings
        self.exactly_once = settings.exactly_once
        self._state_dir = state_dir
        self._producer: AIOKafkaProducer | None = None  # at-least-once, or exactly-once's task-less one
        self._tasks: dict[int, AIOKafkaProducer] = {}
        # Kept until a commit looks at them: sends started from synchronous code, and the
        # delivery futures of everything else produced since the last commit (but records
        # whose caller awaits the delivery itself).
        self._pending_sends: list[tuple[str, asyncio.Future[Any]]] = []
        self._deliveries: list[tuple[str, asyncio.Future[Any]]] = []
        self._last_send: asyncio.Future[Any] | None = None

    def _new_producer(self, transactional_id: str | None, client_id: str) -> AIOKafkaProducer:
        settings = self.settings
        extra: dict[str, Any] = {}
        if transactional_id is not None:
            extra = {"transactional_id": transactional_id, "transaction_timeout_ms": settings.transaction_timeout_ms,
                     "enable_idempotence": True}
        return AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=settings.producer_linger_ms,
            acks="all" if transactional_id is not None or settings.producer_acks in ("all", "-1")
            else int(settings.producer_acks),
            max_batch_size=1 << 20, client_id=client_id, **self._security, **extra)

    async def _start_transactional(self, transactional_id: str) -> AIOKafkaProducer:
        producer = self._new_producer(transactional_id, transactional_id)
        await start_client(producer)  # InitProducerId: fences the previous instance
        await producer.begin_transaction()
        return producer

    @property
    def producer(self) -> AIOKafkaProducer:
        """The worker's own producer (at-least-once: the only one)."""
        assert self._producer is not None, "the collector is not started"
        return self._producer

    async def start(self, connect: Any = None) -> None:
        """Start the worker's producer; ``connect(start_fn)`` retries an unreachable broker."""
        app_id = self.settings.application_id
        txn_id = f"{app_id}-{process_id(self._state_dir)}" if self.exactly_once else None
        producer = self._new_producer(txn_id, txn_id or f"{app_id}-producer")
        self._producer = producer  # stop() closes it, also when its start fails
        if connect is not None:
            await connect(producer.start)
        else:
            await start_client(producer)
        if txn_id is not None:
            await producer.begin_transaction()  # waits for InitProducerId: fences the previous life

    async def stop(self) -> None:
        """Close every producer. An open transaction is aborted: what the last commit did
        not cover is the next owner's to produce again."""
        producers = [*self._tasks.values(), *([self._producer] if self._producer is not None else [])]
        self._tasks.clear()
        self._producer = None
        await asyncio.gather(*(self._close(p) for p in producers))

    async def _close(self, producer: AIOKafkaProducer) -> None:
        if self.exactly_once:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.abort_transaction(), self.settings.transaction_timeout_ms / 1000)
        await stop_client(producer)

    # -- tasks (exactly-once) ----------------------------------------------------------------

    @property
    def tasks(self) -> set[int]:
        return set(self._tasks)

    async def open_tasks(self, tasks: Iterable[int]) -> None:
        """Start the producers of newly owned tasks (fencing their previous owners)."""
        if not self.exactly_once:
            return
        new = sorted(set(tasks) - set(self._tasks))
        if not new:
            return
        app_id = self.settings.application_id
        started = await asyncio.gather(*(self._start_transactional(f"{app_id}-{t}") for t in new),
                                       return_exceptions=True)
        failure: BaseException | None = None
        for task, result in zip(new, started, strict=True):
            if isinstance(result, BaseException):
                failure = failure or result
            else:
                self._tasks[task] = result
        if failure is not None:
            raise failure
        log.info("exactly-once: transactional producers of tasks %s ready", logfmt.ranges(new))

    async def close_tasks(self, tasks: Iterable[int]) -> None:
        """Close the producers of tasks this worker no longer owns (after their commit)."""
        gone = [self._tasks.pop(t) for t in sorted(set(tasks)) if t in self._tasks]
        await asyncio.gather(*(self._close(p) for p in gone))

    def _producer_for(self, task: int | None) -> AIOKafkaProducer:
        if not self.exactly_once:
            return self.producer
        if task is None:
            task = current_task()
        if task is None:
            return self.producer
        producer = self._tasks.get(task)
        if producer is None:
            raise TaskMigratedError(f"task {task} is not owned by this worker any more")
        return producer

    # -- producing -------------------------------------------------------------------------

    async def enqueue(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                      timestamp: int | None = None, partition: int | None = None, track: bool = True,
                      task: int | None = None) -> asyncio.Future[Any]:
        """Queue a record (waiting for buffer space: back-pressure); the future resolves
        with its metadata once the broker has it. Unless ``track`` is false (the caller
        awaits the future itself), the next commit checks its delivery first."""
        producer = self._producer_for(task)
        future: asyncio.Future[Any] = await producer.send(
            topic, value, key=key, partition=partition, timestamp_ms=timestamp,
            headers=list(headers) if headers else None)
        if track:
            self._deliveries.append((topic, future))
        return future

    async def enqueue_many(self, records: Iterable[Produced]) -> None:
        """Queue ``records`` (a DSL batch's outputs) in order, as ``enqueue`` would one by
        one, in one loop: a keyed record without a partition gets the producer's own choice
        (murmur2 of the key over the topic's partitions) from the memoized
        ``murmur2_partition`` rather than aiokafka's pure-Python hash per record."""
        counts: dict[tuple[int, str], int] = {}
        deliveries = self._deliveries
        for topic, key, value, timestamp, headers, partition, task in records:
            producer = self._producer_for(task)
            if partition is None and key is not None:
                at = (id(producer), topic)
                n = counts.get(at)
                if n is None:
                    n = counts[at] = len(await producer.partitions_for(topic))
                partition = murmur2_partition(key, n)
            future: asyncio.Future[Any] = await producer.send(
                topic, value, key=key, partition=partition, timestamp_ms=timestamp,
                headers=list(headers) if headers else None)
            deliveries.append((topic, future))

    def produce(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                timestamp: int | None = None, partition: int | None = None, task: int | None = None) -> None:
        """Produce from synchronous code; delivery is checked by the next commit."""
        if task is None:
            task = current_task()  # now: the spawned send runs after the caller moved on
        send = asyncio.ensure_future(self._enqueue_after(
            self._last_send, topic, key, value, headers=headers, timestamp=timestamp, partition=partition, task=task))
        self._last_send = send
        # Kept until a commit looks at it (not discarded when done): a send that failed
        # before reaching the producer (a record larger than max.request.size) must fail
        # that commit as well.
        self._pending_sends.append((topic, send))

    async def _enqueue_after(self, previous: asyncio.Future[Any] | None, topic: str, key: bytes | None,
                             value: bytes | None, **kwargs: Any) -> asyncio.Future[Any]:
        """``enqueue`` once the previous synchronous send has been queued: a send waits
        for its topic's metadata or for buffer space, and without the chain a later one
        that did not have to wait overtook it (records of one key out of order)."""
        if previous is not None and not previous.done():
            await asyncio.wait([previous])
        return await self.enqueue(topic, key, value, **kwargs)

    async def send_batches(self, topic: str, partition: int,
                           records: Iterable[tuple[bytes | None, bytes | None]],
                           headers: list[tuple[str, bytes]] | None = None,
                           task: int | None = None) -> tuple[asyncio.Future[Any], int] | None:
        """Queue ``records`` for one partition as whole record batches: one future per batch,
        not per record (per-record sends cost more than the rest of a commit). ``headers``
        go on the first record of each batch only: they say who wrote the batch, and headers
        on every record made changelogs twice as large and their restore several times
        slower. Returns the last batch's future and record count, or None when there was
        nothing to send."""
        producer = self._producer_for(task)
        batch = producer.create_batch()
        # aiokafka's C batch builder takes lists only.
        every: list[tuple[str, bytes]] = list(headers or ())
        none: list[tuple[str, bytes]] = []
        first = every
        last: tuple[asyncio.Future[Any], int] | None = None
        for key, value in records:
            if batch.append(key=key, value=value, timestamp=None, headers=first) is None:
                last = await self._send_batch(producer, batch, topic, partition)
                batch = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None, headers=every) is None:
                    raise MessageSizeTooLargeError(f"a record for {topic}-{partition} is larger than a batch")
            first = none
        if batch.record_count():
            last = await self._send_batch(producer, batch, topic, partition)
        return last

    @staticmethod
    async def _send_batch(producer: AIOKafkaProducer, batch: Any, topic: str,
                          partition: int) -> tuple[asyncio.Future[Any], int]:
        batch.close()
        return await producer.send_batch(batch, topic, partition=partition), batch.record_count()

    # -- committing ------------------------------------------------------------------------

    async def check_deliveries(self) -> None:
        """Flush the producers and raise DeliveryError if any record produced since the
        last commit was not delivered (a producer's flush does not say)."""
        sends, self._pending_sends = self._pending_sends, []
        if sends:
            await asyncio.wait([task for _topic, task in sends])  # they queue their deliveries
        await asyncio.gather(*(p.flush() for p in self._producers()))
        deliveries, self._deliveries = self._deliveries, []
        for topic, future in itertools.chain(sends, deliveries):
            if not future.done():
                await asyncio.wait([future])
            exc = asyncio.CancelledError() if future.cancelled() else future.exception()
            if isinstance(exc, TaskMigratedError):
                log.info("dropped a record for %r: %s", topic, exc)
                continue
            if exc is not None:
                detail = " ".join(str(exc).split()) or "no detail"
                raise DeliveryError(f"producing a record to {topic!r} failed ({type(exc).__name__}: {detail}); "
                                    "stopping without committing the input offsets of the records since the "
                                    "last commit")

    def _producers(self) -> list[AIOKafkaProducer]:
        return [*([self._producer] if self._producer is not None else []), *self._tasks.values()]

    async def commit_transactions(self, offsets: dict[TP, int], group_id: str) -> None:
        """Exactly-once: commit every task's transaction with its input ``offsets`` (and the
        worker producer's), then begin the next ones. A failure (a fenced producer: this
        worker lost the task) raises; the caller must then not write its stores."""
        by_task: dict[int, dict[TopicPartition, Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_task.setdefault(partition, {})[TopicPartition(topic, partition)] = offset
        missing = sorted(set(by_task) - set(self._tasks))
        if missing:
            raise TaskMigratedError(f"offsets of tasks {missing} without their producers")
        commits = [self._commit_one(self.producer, {}, group_id)]
        commits += [self._commit_one(p, by_task.get(t, {}), group_id) for t, p in self._tasks.items()]
        results = await asyncio.gather(*commits, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    @staticmethod
    async def _commit_one(producer: AIOKafkaProducer, offsets: dict[TopicPartition, Any], group_id: str) -> None:
        if offsets:
            await producer.send_offsets_to_transaction(offsets, group_id)
        await producer.commit_transaction()
        await producer.begin_transaction()
