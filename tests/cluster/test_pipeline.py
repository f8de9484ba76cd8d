"""The whole pipeline on a 3-broker cluster, one broker SIGKILLed midway: a Connect file
source feeds a topic, a stream app counts under exactly-once (``streamkit worker``, the
counter app of the stream tests), and a Connect file sink writes what the app outputs
(read committed). Everything is a real process; every topic has 3 replicas.

Checked afterwards: every line of the input file reached the input topic (the source is
at-least-once), the app's committed output holds, per group, exactly the counts 1..n of the
group's input records (no record counted twice or missed, across the broker's death and the
failover of partitions, group and transaction coordinators), and the sink wrote exactly
that output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from streamkit.testing_cluster import BrokerCluster
from streamkit.testing_history import full_read

from .workload import create_topic, eventually, leader_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

CLUSTER_CONFIG = {"replica.lag.time.max.ms": "2000", "min.insync.replicas": "2", "default.replication.factor": "3",
                  "offsets.topic.num.partitions": "4", "transaction.state.log.num.partitions": "4"}
REPO = Path(__file__).resolve().parents[2]
GROUPS = 7
LINES = 3000
STRING = "org.apache.kafka.connect.storage.StringConverter"


def _spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "streamkit", *args], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(none)"


def test_connect_to_an_exactly_once_app_to_a_sink_survives_a_broker_kill(cluster: BrokerCluster,
                                                                         tmp_path: Path) -> None:
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("")
    for topic in ("pipeline-in", "pipeline-out"):
        create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    worker = {"bootstrap.servers": cluster.bootstrap, "listeners": "http://127.0.0.1:0",
              "offset.storage.file.filename": str(tmp_path / "offsets.json"), "offset.flush.interval.ms": "500",
              "key.converter": STRING, "value.converter": STRING,
              "consumer.isolation.level": "read_committed", "producer.acks": "all"}
    (tmp_path / "worker.json").write_text(json.dumps(worker))
    (tmp_path / "source.json").write_text(json.dumps({"name": "source", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
        "file": str(source), "topic": "pipeline-in"}}))
    (tmp_path / "sink.json").write_text(json.dumps({"name": "sink", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
        "file": str(sink), "topics": "pipeline-out"}}))
    connect_log, app_log = tmp_path / "connect.log", tmp_path / "app.log"
    connect = _spawn(["connect", "standalone", str(tmp_path / "worker.json"), str(tmp_path / "source.json"),
                      str(tmp_path / "sink.json")], connect_log)
    app = _spawn(["worker", "-A", "tests.streams.apps_for_tests.counter:app", "--broker", cluster.bootstrap,
                  "--data-dir", str(tmp_path / "app"), "--web-port", "0"], app_log,
                 {"SK_TEST_APP_ID": "pipeline", "SK_TEST_INPUT": "pipeline-in", "SK_TEST_OUTPUT": "pipeline-out",
                  "SK_TEST_GROUPS": str(GROUPS),
                  "SK_TEST_CONFIG": json.dumps({"processing.guarantee": "exactly_once", "replication.factor": 3})})
    try:
        written = 0

        def write(upto: int) -> None:
            nonlocal written
            with source.open("a") as f:
                f.writelines(f"{i}\n" for i in range(written, upto))
            written = upto

        def outputs() -> int:
            return len(sink.read_text().splitlines()) if sink.exists() else 0

        for chunk in range(10):
            write((chunk + 1) * LINES // 30)
            time.sleep(0.1)
        eventually(lambda: outputs() >= LINES // 6, "the first outputs through the whole pipeline", timeout=120)
        victim = leader_of(cluster.bootstrap, "pipeline-in", 0)
        cluster.kill(victim)
        for chunk in range(10, 30):
            write((chunk + 1) * LINES // 30)
            time.sleep(0.1)
        assert connect.poll() is None and app.poll() is None, "a pipeline process died"
        cluster.start(victim)
        eventually(lambda: outputs() >= LINES, "every record through the pipeline", timeout=240, interval=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- connect ---\n{_tail(connect_log)}\n--- app ---\n{_tail(app_log)}") from None
    finally:
        for process in (app, connect):
            process.terminate()
        for process in (app, connect):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    inputs = [int(r.value) for r in full_read(cluster.bootstrap, "pipeline-in").records]
    assert set(inputs) == set(range(LINES)), "a line of the file never reached the input topic"
    per_group = Counter(f"g{v % GROUPS}" for v in inputs)
    committed = full_read(cluster.bootstrap, "pipeline-out").records  # read committed
    counts = Counter(int(r.value) for r in committed)
    expected = Counter(n for group, total in per_group.items() for n in range(1, total + 1))
    assert counts == expected, "the exactly-once app's committed output is not each group's 1..n"
    assert Counter(int(line) for line in sink.read_text().splitlines()) == counts
