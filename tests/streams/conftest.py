"""Fixtures for the stream-processing tests.

Every test talks to a real broker over the Kafka protocol. Most share one ``streamkit
broker`` *process* for the whole session (``broker``), so starting an app costs a group join,
not a broker start, and the broker does not compete with the test's event loop for the GIL;
each test uses its own app id and topic names (``make_app``, ``topic_name``), so tests never
see each other's records or groups. A few tests start an app without a broker, which runs an
embedded one in the test's loop.

Waiting is always bounded: ``eventually`` polls a predicate until a deadline, and
``Probe.settle`` waits until a running worker has committed every record of its inputs, which
is the point where its outputs are complete (a commit flushes the producer first).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import ConsumerRecord, TopicPartition

from streamkit.streams.app import App
from streamkit.streams.runtime import Runtime
from streamkit.testing import BrokerProcess, log_tail

if TYPE_CHECKING:
    from .worker_processes import Scenario

T = TypeVar("T")

# Short group timings: a worker that dies is noticed in ~2 s instead of 10 s.
FAST_GROUP: dict[str, Any] = {
    "commit.interval.ms": 100,
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 500,
    "linger.ms": 1,
}

_ids = itertools.count()


def unique(prefix: str) -> str:
    """A name no other test (or earlier run against the same broker) uses."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", prefix).strip("-")[:40] or "t"
    return f"{clean}-{os.getpid()}-{next(_ids)}"


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker process for every stream test (tests isolate by app id and topic names)."""
    process = BrokerProcess(tmp_path_factory.mktemp("streams-broker") / "data").start()
    try:
        yield process
    finally:
        alive = process.process is not None and process.process.poll() is None
        if alive:
            code = process.stop(timeout_s=30)
            assert code == 0, f"the broker exited with {code}:\n{log_tail(process.log_file)}"
        else:
            pytest.fail(f"the shared broker died during the tests:\n{log_tail(process.log_file)}")


@pytest.fixture
def make_app(broker: BrokerProcess, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., App]:
    """``make_app(config={...})``: an App on the shared broker with a fresh id and data dir.
    ``app_id=`` reuses an id (a restart of the same app); ``data_dir=`` reuses state."""

    def make(*, app_id: str | None = None, config: dict[str, Any] | None = None,
             data_dir: Path | None = None, **kwargs: Any) -> App:
        app_id = app_id or unique(request.node.name)
        merged = {**FAST_GROUP, **(config or {})}
        return App(app_id, broker=broker.bootstrap, data_dir=data_dir or tmp_path / app_id,
                   config=merged, **kwargs)

    return make


async def eventually(predicate: Callable[[], T | Awaitable[T]], what: str, timeout: float = 20,
                     interval: float = 0.02) -> T:
    """Poll ``predicate`` (sync or async) until it returns something truthy; fail after
    ``timeout`` seconds with ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def running(app: App, *, expect_failure: bool = False, **kwargs: Any) -> AsyncIterator[Runtime]:
    """Run ``app`` for the block; stop it after. Unless ``expect_failure``, the worker must
    not have failed (a failure inside a test's block is reported, not swallowed)."""
    runtime = await app.start(**kwargs)
    try:
        yield runtime
    finally:
        await asyncio.wait_for(runtime.stop(), 60)
    if not expect_failure:
        assert runtime.failure is None, f"the worker failed: {runtime.failure!r}"


class Probe:
    """A plain Kafka client on the test broker: produce raw records, read topics to their
    end, look at offsets. Nothing streamkit-specific on the wire."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks="all")
        self.consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                         enable_auto_commit=False)
        self.admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)

    async def start(self) -> None:
        await self.producer.start()
        await self.consumer.start()
        await self.admin.start()

    async def close(self) -> None:
        await self.producer.stop()
        await self.consumer.stop()
        await self.admin.close()

    async def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        await self.admin.create_topics([NewTopic(name, partitions, 1, topic_configs=config or {})])

    async def produce(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                      timestamp: int | None = None, partition: int | None = None,
                      headers: list[tuple[str, bytes]] | None = None) -> tuple[int, int]:
        meta = await self.producer.send_and_wait(topic, value, key=key, timestamp_ms=timestamp,
                                                 partition=partition, headers=headers)
        return meta.partition, meta.offset

    async def produce_many(self, topic: str, records: Iterable[tuple[bytes | None, bytes | None, int | None]]) -> None:
        """(key, value, timestamp) records, sent in order; waits for every acknowledgement.
        Records of one partition keep their order (one batch in flight per partition)."""
        futures = [await self.producer.send(topic, v, key=k, timestamp_ms=ts) for k, v, ts in records]
        await self.producer.flush()
        for f in futures:
            await f

    async def partitions(self, topic: str) -> list[TopicPartition]:
        described = await self.admin.describe_topics([topic])
        return [TopicPartition(topic, p["partition"]) for p in described[0]["partitions"]]

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(tps)
        return dict(await self.consumer.end_offsets(tps)) if tps else {}

    async def read(self, topic: str, timeout: float = 20, *, read_committed: bool = False) -> list[ConsumerRecord]:
        """Every record of ``topic`` up to its end offsets as of this call, ordered by
        partition then offset; with ``read_committed``, up to the last stable offsets and
        without what aborted transactions wrote."""
        isolation = "read_committed" if read_committed else "read_uncommitted"
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                    enable_auto_commit=False, isolation_level=isolation)
        await consumer.start()
        try:
            return await self._read(consumer, topic, timeout)
        finally:
            await consumer.stop()

    async def _read(self, consumer: AIOKafkaConsumer, topic: str, timeout: float) -> list[ConsumerRecord]:
        tps = await self.partitions(topic)
        ends = dict(await consumer.end_offsets(tps)) if tps else {}
        wanted = {tp: end for tp, end in ends.items() if end > 0}
        out: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in wanted}
        if not wanted:
            return []
        consumer.assign(list(wanted))
        await consumer.seek_to_beginning(*wanted)
        deadline = time.monotonic() + timeout

        async def behind() -> bool:
            return any([await consumer.position(tp) < end for tp, end in wanted.items()])

        while await behind():
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to its end within {timeout}s")
            batch = await consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                out[tp].extend(r for r in records if r.offset < wanted[tp])
        return [r for tp in sorted(out, key=lambda t: t.partition) for r in out[tp]]

    async def latest(self, topic: str, *, read_committed: bool = False) -> dict[bytes, bytes]:
        """Latest value per key of a (changelog) topic; a tombstone removes the key."""
        state: dict[bytes, bytes] = {}
        for r in await self.read(topic, read_committed=read_committed):
            if r.value is None:
                state.pop(r.key, None)
            else:
                state[r.key] = r.value
        return state

    async def committed(self, group: str) -> dict[TopicPartition, int]:
        offsets = await self.admin.list_consumer_group_offsets(group)
        return {tp: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}

    async def caught_up(self, group: str, topics: Iterable[str]) -> bool:
        """Whether ``group`` has committed every record of ``topics`` (as of now)."""
        tps = [tp for t in topics for tp in await self.partitions(t)]
        ends = await self.end_offsets(tps)
        committed = await self.committed(group)
        return all(committed.get(tp, 0) >= end for tp, end in ends.items())

    async def settle(self, runtime: Runtime, timeout: float = 30) -> None:
        """Wait until ``runtime`` owns all partitions of its inputs, restored, and has
        committed up to the end of every one of them (repartition topics included), twice in
        a row with the same ends: then every output of those records has been produced."""
        consumer = runtime._consumer
        assert consumer is not None, "the runtime has no consumer (not started?)"
        topics = consumer.subscription()
        expected = {(t, p) for t in topics for p in range(runtime.app.topics[t].partitions or 0)}

        def owned() -> bool:
            if runtime.failure is not None:
                raise AssertionError(f"the worker failed: {runtime.failure!r}")
            return runtime.assigned == expected and not runtime.tasks.restores

        await eventually(owned, f"{runtime.app.id} to own {sorted(expected)}", timeout)
        tps = [TopicPartition(t, p) for t, p in expected]
        previous: dict[TopicPartition, int] | None = None

        async def done() -> bool:
            nonlocal previous
            if runtime.failure is not None:
                raise AssertionError(f"the worker failed: {runtime.failure!r}")
            ends = await self.end_offsets(tps)
            # The group's committed offsets (a worker that had nothing new to process since
            # its start has committed nothing itself), or this worker's newer ones.
            group = await self.committed(runtime.app.id)
            complete = all(max(runtime._committed.get((tp.topic, tp.partition), 0), group.get(tp, 0)) >= end
                           for tp, end in ends.items())
            stable, previous = complete and ends == previous, ends if complete else None
            return stable

        await eventually(done, f"{runtime.app.id} to commit all of {sorted(topics)}", timeout, interval=0.05)


@pytest.fixture
async def probe(broker: BrokerProcess) -> AsyncIterator[Probe]:
    p = Probe(broker.bootstrap)
    await p.start()
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
async def scenario(broker: BrokerProcess, probe: Probe, tmp_path: Path,
                   request: pytest.FixtureRequest) -> AsyncIterator[Scenario]:
    """Worker processes of one test (``worker_processes.Scenario``): its input topic
    created, every worker killed at the end; the test's duration in its report section."""
    from .worker_processes import PARTITIONS, Scenario

    s = Scenario(broker, probe, tmp_path, request.node.name)
    await probe.create_topic(s.input, PARTITIONS)
    try:
        yield s
    finally:
        for w in s.workers:
            w.kill()
        request.node.user_properties.append(("duration", s.elapsed()))
        print(f"{request.node.name}: {s.elapsed()}")
