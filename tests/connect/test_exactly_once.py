"""Exactly-once sources (KIP-618): records and source offsets in one Kafka transaction.

A distributed worker with ``exactly.once.source.support=enabled`` runs the file source while
it is SIGKILLed and restarted several times; the topic read with read_committed holds every
line of the input once, in order. A second instance of a task fences the first (a zombie),
a connector config that requires exactly-once is refused by a worker without it, and
shrinking a connector's task count fences the transactional ids of the tasks that are gone.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.connect.config import validate_config
from streamkit.connect.distributed import DistributedHerder
from streamkit.connect.file import FileStreamSourceConnector
from streamkit.connect.kafka_log import KafkaLog, KafkaOffsetStore
from streamkit.connect.metrics import ConnectMetrics
from streamkit.connect.plugins import PluginRegistry
from streamkit.connect.runner import RunnerSettings
from streamkit.connect.source_runner import ExactlyOnce, SourceTaskRunner, transactional_id
from streamkit.connect.status import State
from streamkit.connect.worker_config import load_worker_config
from streamkit.testing import BrokerThread
from tests.connect.conftest import eventually, standalone, worker_settings
from tests.connect.test_distributed import WorkerProcess, wait_for

pytestmark = pytest.mark.integration

STRING = "org.apache.kafka.connect.storage.StringConverter"


def create_topics(bootstrap: str, *names: str) -> None:
    """One partition each, so the order of the records is the order of the lines."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)


class CommittedReader:
    """Follows partition 0 of a topic with read_committed (confluent-kafka, librdkafka)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.values: list[str] = []
        self._tp = TopicPartition(topic, 0)
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}",
                                   "isolation.level": "read_committed", "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest"})
        self._consumer.assign([TopicPartition(topic, 0, 0)])

    def read(self) -> None:
        for message in self._consumer.consume(500, 0.5):
            if message.error() is None:
                self.values.append(message.value().decode())

    def caught_up(self) -> bool:
        """Everything up to the high watermark read (so no transaction is open)."""
        self.read()
        _low, high = self._consumer.get_watermark_offsets(self._tp, timeout=10, cached=False)
        [position] = self._consumer.position([self._tp])
        return position.offset >= 0 and position.offset >= high

    def high(self) -> int:
        return int(self._consumer.get_watermark_offsets(self._tp, timeout=10, cached=False)[1])

    def close(self) -> None:
        self._consumer.close()


class LineWriter:
    """Appends ``line N`` to a file, a few lines at a time, until stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self.path.open("a") as f:
                f.write("".join(f"line {self.written + i}\n" for i in range(7)))
            self.written += 7
            self._stop.wait(0.02)

    def __enter__(self) -> LineWriter:
        self.path.touch()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def eos_settings(broker: BrokerThread, request: pytest.FixtureRequest) -> dict[str, Any]:
    group = f"eos-{request.node.name[-20:]}".replace("[", "-").replace("]", "")
    return {"bootstrap.servers": broker.bootstrap, "listeners": "http://127.0.0.1:0", "group.id": group,
            "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status", "offset.storage.partitions": "3",
            "status.storage.partitions": "2", "session.timeout.ms": "3000", "heartbeat.interval.ms": "500",
            "offset.flush.interval.ms": "500", "exactly.once.source.support": "enabled"}


@pytest.fixture
def processes() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    try:
        yield started
    finally:
        for worker in started:
            worker.close()


def test_sigkilled_worker_writes_every_line_exactly_once(broker: BrokerThread, tmp_path: Path,
                                                          eos_settings: dict[str, Any],
                                                          processes: list[WorkerProcess]) -> None:
    create_topics(broker.bootstrap, "eos-lines")
    src = tmp_path / "in.txt"
    reader = CommittedReader(broker.bootstrap, "eos-lines")
    try:
        with LineWriter(src) as writer:
            for round_ in range(4):
                worker = WorkerProcess(tmp_path, f"w{round_}", eos_settings)
                processes.append(worker)
                url = worker.wait_ready()
                if round_ == 0:
                    with httpx.Client(base_url=url, timeout=30) as client:
                        created = client.post("/connectors", json={"name": "src", "config": {
                            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                            "file": str(src), "topic": "eos-lines", "batch.size": "5", "value.converter": STRING,
                            "exactly.once.support": "required", "transaction.boundary": "interval",
                            "transaction.boundary.interval.ms": "200"}})
                        assert created.status_code == 201, created.text
                start = reader.high()
                # killed while it writes: records of an open transaction are in the log
                wait_for(lambda start=start: reader.high() >= start + 60, 120,
                         lambda worker=worker: f"progress on {worker.worker_id}: {worker.log_path.read_text()[-3000:]}")
                worker.process.send_signal(signal.SIGKILL)
                worker.process.wait()
            last = WorkerProcess(tmp_path, "last", eos_settings)
            processes.append(last)
            url = last.wait_ready()
        total = writer.written
        expected = [f"line {i}" for i in range(total)]
        wait_for(lambda: reader.caught_up() and len(reader.values) >= total, 180,
                 lambda: f"{total} lines, read {len(reader.values)}: {last.log_path.read_text()[-3000:]}")
        assert len(reader.values) == total, "a line was written twice"
        assert reader.values == expected
        with httpx.Client(base_url=url, timeout=30) as client:
            # the committed offset is the end of the last committed line: the file's end
            offsets = client.get("/connectors/src/offsets").json()["offsets"]
            assert offsets == [{"partition": {"filename": str(src)}, "offset": {"position": src.stat().st_size}}]
    finally:
        reader.close()
    last.process.send_signal(signal.SIGTERM)
    assert last.process.wait(60) == 0, last.log_path.read_text()


async def _offset_store(bootstrap: str, topic: str, name: str) -> KafkaOffsetStore:
    store = KafkaOffsetStore()
    store.log = KafkaLog(bootstrap, topic, 1, 1, store.on_record, name, {}, isolation_level="read_committed")
    await store.log.start()
    return store


async def test_a_zombie_task_is_fenced_by_its_successor(broker: BrokerThread, tmp_path: Path) -> None:
    await asyncio.to_thread(create_topics, broker.bootstrap, "zombie-out", "zombie-offsets")
    src = tmp_path / "in.txt"
    src.write_text("".join(f"line {i}\n" for i in range(20)))
    worker = {"exactly.once.source.support": "enabled", "offset.storage.topic": "zombie-offsets"}
    valid = validate_config({"name": "z", "connector.class": "FileStreamSource", "file": str(src),
                             "topic": "zombie-out", "batch.size": "3", "value.converter": STRING},
                            PluginRegistry(), worker)
    connector = FileStreamSourceConnector()
    connector.start(valid.connector)
    [task_config] = connector.task_configs(1)
    eos = ExactlyOnce(transactional_id("zgroup", "z", 0), "zombie-offsets")
    reader = CommittedReader(broker.bootstrap, "zombie-out")
    runners: list[SourceTaskRunner] = []
    stores: list[KafkaOffsetStore] = []

    async def run(worker_id: str) -> SourceTaskRunner:
        store = await _offset_store(broker.bootstrap, "zombie-offsets", f"store-{worker_id}")
        stores.append(store)
        settings = RunnerSettings(connector="z", task_id=0, task_config=task_config, valid=valid,
                                  bootstrap=broker.bootstrap, worker_id=worker_id, offset_flush_interval_ms=500,
                                  shutdown_timeout_ms=5000, metrics=ConnectMetrics())
        runner = SourceTaskRunner(settings, FileStreamSourceConnector.task_class(), store, eos)
        runners.append(runner)
        await runner.start()
        return runner

    try:
        zombie = await run("worker-a")
        await eventually(lambda: (reader.read(), len(reader.values) >= 20)[1], 60, "the first 20 lines")
        # a rebalance gives the task to another worker while the first still runs it
        successor = await run("worker-b")
        with src.open("a") as f:
            f.write("".join(f"line {i}\n" for i in range(20, 40)))
        await eventually(lambda: zombie.status().state == State.FAILED, 60, "the zombie fenced")
        assert "Fenced" in (zombie.status().trace or "")
        await eventually(lambda: (reader.read(), len(reader.values) >= 40)[1], 60, "all 40 lines")
        await eventually(reader.caught_up, 30, "the end of the topic")
        assert successor.status().state == State.RUNNING
        assert reader.values == [f"line {i}" for i in range(40)]
    finally:
        for runner in runners:
            await runner.stop()
        for store in stores:
            assert store.log is not None
            await store.log.stop()
        reader.close()


async def test_fewer_tasks_fence_the_ids_of_the_removed_ones(broker: BrokerThread) -> None:
    worker = load_worker_config({"bootstrap.servers": broker.bootstrap, "group.id": "shrink",
                                 "config.storage.topic": "shrink-configs", "offset.storage.topic": "shrink-offsets",
                                 "status.storage.topic": "shrink-status", "exactly.once.source.support": "enabled"})
    herder = DistributedHerder(worker, PluginRegistry(), ConnectMetrics(), "w", "http://w")
    gone = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id("shrink", "c", 1))
    await gone.start()
    try:
        await gone.begin_transaction()
        await herder._fence("c", range(1, 2))
        # the old task 1 can no longer write: its transaction was aborted and its epoch is stale
        with pytest.raises(KafkaError):
            await (await gone.send("shrink-out", b"late"))
            await gone.commit_transaction()
    finally:
        await gone.stop()


async def test_required_exactly_once_is_refused_by_a_worker_without_it(broker: BrokerThread,
                                                                       tmp_path: Path) -> None:
    async with standalone(worker_settings(broker.bootstrap, tmp_path)) as (_worker, client):
        response = await client.post("/connectors", json={"name": "eos", "config": {
            "connector.class": "FileStreamSource", "file": str(tmp_path / "x"), "topic": "t",
            "exactly.once.support": "required"}})
        assert response.status_code == 400
        body = response.json()
        assert body["error_code"] == 400
        assert "exactly.once.support=required needs exactly.once.source.support=enabled" in body["message"]
        assert (await client.get("/connectors")).json() == []
