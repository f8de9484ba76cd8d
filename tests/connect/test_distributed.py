"""Distributed mode with real worker processes: configs, offsets and statuses in compacted
topics, units spread over the group, and a SIGKILLed worker's units moving to the survivor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamkit.testing import BrokerThread

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    def __init__(self, tmp: Path, name: str, settings: dict[str, Any]) -> None:
        self.dir = tmp / name
        self.dir.mkdir()
        (self.dir / "worker.json").write_text(json.dumps(settings))
        self.ready = self.dir / "port"
        self.log_path = self.dir / "worker.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamkit", "connect", "distributed", str(self.dir / "worker.json"),
             "--ready-file", str(self.ready)],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while not (self.ready.exists() and self.ready.read_text()):
            assert self.process.poll() is None, self.log_path.read_text()
            assert time.monotonic() < deadline, f"worker not ready: {self.log_path.read_text()}"
            time.sleep(0.1)
        return f"http://127.0.0.1:{self.ready.read_text()}"

    @property
    def worker_id(self) -> str:
        return f"127.0.0.1:{self.ready.read_text()}"

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log.close()


@pytest.fixture
def workers(broker: BrokerThread, tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    settings = {"bootstrap.servers": broker.bootstrap, "listeners": "http://127.0.0.1:0", "group.id": "cluster-1",
                "config.storage.topic": "cluster-1-configs", "offset.storage.topic": "cluster-1-offsets",
                "status.storage.topic": "cluster-1-status", "offset.storage.partitions": "3",
                "status.storage.partitions": "2", "session.timeout.ms": "3000", "heartbeat.interval.ms": "500",
                "offset.flush.interval.ms": "500"}
    started = [WorkerProcess(tmp_path, f"w{i}", settings) for i in range(2)]
    try:
        yield started
    finally:
        for worker in started:
            worker.close()


def wait_for(predicate: Any, timeout: float, what: Any) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what} (last: {value!r})")
        time.sleep(0.2)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_killed_workers_units_move_to_the_survivor(workers: list[WorkerProcess], tmp_path: Path) -> None:
    urls = [w.wait_ready() for w in workers]
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"line {i}\n" for i in range(50)))
    with httpx.Client(base_url=urls[0], timeout=30) as first, httpx.Client(base_url=urls[1], timeout=30) as second:
        created = first.post("/connectors", json={"name": "src", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(src), "topic": "distributed"}})
        assert created.status_code == 201, created.text
        created = second.post("/connectors", json={"name": "sink", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(out), "topics": "distributed"}})
        assert created.status_code == 201, created.text
        assert first.post("/connectors", json={"name": "sink", "config": {}}).status_code in (400, 409)
        assert sorted(second.get("/connectors").json()) == ["sink", "src"]  # both see both

        def running(client: httpx.Client) -> dict[str, Any] | None:
            body = client.get("/connectors", params={"expand": "status"}).json()
            statuses = [body[n]["status"] for n in ("sink", "src") if n in body]
            states = [s["connector"]["state"] for s in statuses] + [t["state"] for s in statuses for t in s["tasks"]]
            return body if len(states) == 4 and set(states) == {"RUNNING"} else None

        body = wait_for(lambda: running(first), 60, "both connectors and their tasks running")
        owners = {body[n]["status"]["connector"]["worker_id"] for n in ("sink", "src")}
        owners |= {t["worker_id"] for n in ("sink", "src") for t in body[n]["status"]["tasks"]}
        assert owners == {w.worker_id for w in workers}  # spread over both workers
        wait_for(lambda: len(lines_of(out)) == 50, 60, "50 lines in the sink file")

        sink_owner = body["sink"]["status"]["tasks"][0]["worker_id"]
        victim = next(w for w in workers if w.worker_id == sink_owner)
        survivor = next(w for w in workers if w is not victim)
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        with src.open("a") as f:
            f.write("".join(f"line {i}\n" for i in range(50, 80)))
        client = first if survivor is workers[0] else second

        def all_on_survivor() -> bool:
            status = running(client)
            if status is None:
                return False
            ids = {status[n]["status"]["connector"]["worker_id"] for n in ("sink", "src")}
            ids |= {t["worker_id"] for n in ("sink", "src") for t in status[n]["status"]["tasks"]}
            return ids == {survivor.worker_id}

        wait_for(all_on_survivor, 90, lambda: f"every unit running on {survivor.worker_id}: "
                 f"{client.get('/connectors', params={'expand': 'status'}).json()}")
        expected = [f"line {i}" for i in range(80)]
        wait_for(lambda: set(lines_of(out)) >= set(expected), 90, "all 80 lines after the failover")
        assert set(lines_of(out)) == set(expected)  # nothing lost (a redelivery may repeat a line)

        wait_for(lambda: client.get("/connectors/sink/topics").json() == {"sink": {"topics": ["distributed"]}},
                 30, "the sink's active topics")
        assert client.put("/connectors/sink/topics/reset").status_code == 202
        assert client.get("/connectors/sink/topics").json() == {"sink": {"topics": []}}
        offsets = client.get("/connectors/src/offsets").json()["offsets"]
        assert offsets == [{"partition": {"filename": str(src)}, "offset": {"position": src.stat().st_size}}]

        def states(name: str) -> tuple[str, list[str]]:
            body = client.get(f"/connectors/{name}/status").json()
            return body["connector"]["state"], [t["state"] for t in body["tasks"]]

        assert client.put("/connectors/sink/pause").status_code == 202
        wait_for(lambda: states("sink") == ("PAUSED", ["PAUSED"]), 30, "the sink paused")
        assert client.put("/connectors/sink/resume").status_code == 202
        wait_for(lambda: states("sink") == ("RUNNING", ["RUNNING"]), 30, "the sink resumed")
        rewind = {"offsets": [{"partition": {"filename": str(src)}, "offset": {"position": src.stat().st_size}}]}
        assert client.patch("/connectors/src/offsets", json=rewind).status_code == 400  # not stopped
        assert client.put("/connectors/src/stop").status_code == 202
        wait_for(lambda: states("src") == ("STOPPED", []), 30, "the source stopped")
        assert client.patch("/connectors/src/offsets", json=rewind).status_code == 200
        assert client.put("/connectors/src/resume").status_code == 202
        wait_for(lambda: states("src") == ("RUNNING", ["RUNNING"]), 30, "the source resumed")

        # a config change restarts the tasks, wherever they run
        moved = tmp_path / "moved.txt"
        updated = client.put("/connectors/sink/config", json={
            "connector.class": "FileStreamSinkConnector", "file": str(moved), "topics": "distributed"})
        assert updated.status_code == 200, updated.text
        wait_for(lambda: client.get("/connectors/sink/tasks").json()[0]["config"]["file"] == str(moved), 60,
                 "the new task config")
        # the new task creates its file when it starts (the old one has stopped by then):
        # records read before that went to the old file, as in Kafka Connect
        wait_for(moved.exists, 60, "the restarted sink task")
        with src.open("a") as f:
            f.write("after the change\n")
        wait_for(lambda: "after the change" in lines_of(moved), 60,
                 lambda: f"the restarted task writing the new file: {client.get('/connectors?expand=status').json()} "
                         f"{client.get('/connectors/src/offsets').json()} {lines_of(moved)} {lines_of(out)[-3:]}\n"
                         f"{survivor.log_path.read_text()[-3000:]}")

        assert client.delete("/connectors/src").status_code == 204
        assert client.get("/connectors/src").status_code == 404
    survivor.process.send_signal(signal.SIGTERM)
    assert survivor.process.wait(60) == 0, survivor.log_path.read_text()
