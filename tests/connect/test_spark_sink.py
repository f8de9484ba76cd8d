"""The Spark sink connector: a topic into a Parquet table, exactly once, read by a real
local SparkSession (shared by the whole test session, ``tests/sparkutil.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from streamkit.connect.spark import committed_files, read_committed
from streamkit.connect.spark_log import Batch, CommitLog
from streamkit.testing import BrokerThread
from tests.connect.conftest import consume, eventually, produce, standalone, worker_settings
from tests.sparkutil import spark_session

ROOT = Path(__file__).resolve().parents[2]


def _sink(name: str, topic: str, path: Path, **extra: str) -> tuple[str, dict[str, str]]:
    shipped = json.loads((ROOT / "connectors" / "spark-sink.json").read_text())["config"]
    return name, {**shipped, "topics": topic, "path": str(path), "offset.flush.interval.ms": "300",
                  "include.kafka.metadata": "true", **extra}


def _committed_rows(path: Path) -> int:
    return sum(b.rows for b in CommitLog(path).batches())


# -- the commit log, without Spark ----------------------------------------------------------------


def test_recover_publishes_committed_batches_and_deletes_uncommitted_ones(tmp_path: Path) -> None:
    log = CommitLog(tmp_path)
    for batch_id in (1, 2, 3):
        stage = log.stage_dir(batch_id)
        stage.mkdir(parents=True)
        (stage / f"part-{batch_id}.parquet").write_bytes(b"data")
    log.commit(Batch(1, ("part-1.parquet",), 10, {("t", 0): 10}, None))
    log.publish_files(log.batches()[0])
    # batch 2: committed, then a crash before its files were published
    log.commit(Batch(2, ("part-2.parquet",), 5, {("t", 0): 15, ("t", 1): 3}, None))
    # batch 3: written to staging, never committed; a torn manifest and a stray data file
    (log.commits / "3.json.tmp").write_bytes(b'{"batch": 3')
    (tmp_path / "part-9.parquet").write_bytes(b"stray")
    assert committed_files(tmp_path) == [tmp_path / "part-1.parquet", log.stage_dir(2) / "part-2.parquet"]

    last = log.recover()

    assert last is not None and last.id == 2 and last.offsets == {("t", 0): 15, ("t", 1): 3}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["part-1.parquet", "part-2.parquet"]
    assert not any(log.staging.iterdir()) and not list(log.commits.glob("*.tmp"))
    assert committed_files(tmp_path) == [tmp_path / "part-1.parquet", tmp_path / "part-2.parquet"]


def test_a_manifest_is_never_overwritten(tmp_path: Path) -> None:
    log = CommitLog(tmp_path)
    log.commit(Batch(1, (), 0, {("t", 0): 1}, None))
    with pytest.raises(FileExistsError, match="another writer"):
        log.commit(Batch(1, (), 0, {("t", 0): 2}, None))
    assert log.latest() == Batch(1, (), 0, {("t", 0): 1}, None)


def test_delta_without_delta_spark_is_a_config_error() -> None:
    from streamkit.connect.config import validate_config
    from streamkit.connect.errors import ConfigError
    from streamkit.connect.plugins import PluginRegistry

    name, config = _sink("delta", "t", Path("/tmp/x"), format="delta")
    with pytest.raises(ConfigError, match="format=delta needs the delta-spark package"):
        validate_config({**config, "name": name}, PluginRegistry())


# -- with a broker and Spark ----------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(240)
async def test_exports_a_topic_into_a_parquet_table(broker: BrokerThread, tmp_path: Path) -> None:
    spark = spark_session()
    table = tmp_path / "views"
    n = 1200
    values = [orjson.dumps({"id": i, "page": f"/p{i % 7}", "score": i / 2, "tags": ["a", i]}) for i in range(n)]
    keys = [str(i).encode() for i in range(n + 1)]
    await produce(broker.bootstrap, "spark-views", [*values, None], keys)  # and a tombstone, skipped
    async with standalone(worker_settings(broker.bootstrap, tmp_path),
                          [_sink("views-sink", "spark-views", table, **{"flush.size": "500"})]):
        await eventually(lambda: _committed_rows(table) == n, 120, f"{n} rows committed")
    df = read_committed(spark, table)
    assert df.count() == n
    assert dict(df.dtypes) == {"id": "bigint", "page": "string", "score": "double", "tags": "string",
                               "kafka_topic": "string", "kafka_partition": "int", "kafka_offset": "bigint",
                               "kafka_timestamp": "bigint"}
    assert df.select("id").distinct().count() == n
    row = df.where("id = 7").collect()[0]
    assert (row.page, row.score, row.tags, row.kafka_offset) == ("/p0", 3.5, '["a",7]', 7)
    # the table is an ordinary Parquet directory too: Spark skips the _streamkit_* entries
    assert spark.read.parquet(str(table)).count() == n
    batches = CommitLog(table).batches()
    assert batches[-1].offsets == {("spark-views", 0): n + 1}
    assert len(batches) >= 2, "flush.size=500 splits 1200 rows into micro-batches"


@pytest.mark.integration
@pytest.mark.timeout(240)
async def test_a_connect_schema_gives_the_column_types(broker: BrokerThread, tmp_path: Path) -> None:
    spark = spark_session()
    table = tmp_path / "typed"
    schema = {"type": "struct", "fields": [
        {"field": "id", "type": "int32"},
        {"field": "name", "type": "string", "optional": True},
        {"field": "at", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"},
        {"field": "day", "type": "int32", "name": "org.apache.kafka.connect.data.Date"},
        {"field": "ok", "type": "boolean"}]}
    values = [orjson.dumps({"schema": schema, "payload": {"id": i, "name": None if i == 2 else f"n{i}",
                                                          "at": 1_700_000_000_000 + i, "day": 19_000 + i,
                                                          "ok": i % 2 == 0}}) for i in range(5)]
    await produce(broker.bootstrap, "spark-typed", values)
    async with standalone(worker_settings(broker.bootstrap, tmp_path),
                          [_sink("typed-sink", "spark-typed", table, **{"value.converter.schemas.enable": "true",
                                                                        "include.kafka.metadata": "false"})]):
        await eventually(lambda: _committed_rows(table) == 5, 120, "5 rows committed")
    df = read_committed(spark, table)
    assert df.dtypes == [("id", "int"), ("name", "string"), ("at", "timestamp"), ("day", "date"), ("ok", "boolean")]
    rows = {r.id: r for r in df.collect()}
    assert rows[2].name is None and rows[3].name == "n3" and rows[4].ok is True
    assert int(rows[1].at.timestamp() * 1000) == 1_700_000_000_001
    assert rows[1].day.isoformat() == "2022-01-09"  # day 19001


@pytest.mark.integration
@pytest.mark.timeout(240)
async def test_new_fields_add_columns_and_a_type_conflict_goes_to_the_dead_letter_topic(
        broker: BrokerThread, tmp_path: Path) -> None:
    spark = spark_session()
    table = tmp_path / "evolving"
    values = [b'{"id": 1, "page": "/a"}', b'{"id": 2, "page": "/b", "ms": 2.5}', b'{"id": "three"}',
              b'{"id": 4, "ms": 4}']
    await produce(broker.bootstrap, "spark-evolving", values)
    sink = _sink("evolving-sink", "spark-evolving", table, **{
        "include.kafka.metadata": "false", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "spark-evolving-dlq"})
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [sink]):
        await eventually(lambda: _committed_rows(table) == 3, 120, "3 rows committed")
        dead = await consume(broker.bootstrap, "spark-evolving-dlq", 1)
    assert dead[0].value == b'{"id": "three"}'
    df = read_committed(spark, table)
    assert df.dtypes == [("id", "bigint"), ("page", "string"), ("ms", "double")]
    assert sorted(tuple(r) for r in df.collect()) == [(1, "/a", None), (2, "/b", 2.5), (4, None, 4.0)]


# -- a real worker process, SIGKILLed mid-export ---------------------------------------------------


class _Worker:
    def __init__(self, tmp_path: Path, connector: Path, attempt: int) -> None:
        self.ready = tmp_path / f"port-{attempt}"
        self.log_path = tmp_path / f"worker-{attempt}.log"
        log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamkit", "connect", "standalone", str(tmp_path / "worker.json"),
             str(connector), "--ready-file", str(self.ready)],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def alive(self) -> bool:
        assert self.process.poll() is None, self.log_path.read_text()
        return True

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)


@pytest.mark.integration
@pytest.mark.timeout(420)
async def test_sigkilled_mid_export_then_restarted_exact_rows_no_duplicates(broker: BrokerThread,
                                                                            tmp_path: Path) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("spark-kill", 3, 1)])
    finally:
        await admin.close()
    table = tmp_path / "kill"
    worker = worker_settings(broker.bootstrap, tmp_path)
    (tmp_path / "worker.json").write_text(json.dumps(worker))
    name, config = _sink("kill-sink", "spark-kill", table, **{"flush.size": "300"})
    connector = tmp_path / "spark-sink.json"
    connector.write_text(json.dumps({"name": name, "config": config}))
    first_half = [orjson.dumps({"id": i}) for i in range(3000)]
    await produce(broker.bootstrap, "spark-kill", first_half, keys=[str(i).encode() for i in range(3000)])

    first = _Worker(tmp_path, connector, 1)
    try:
        await eventually(lambda: first.alive() and len(CommitLog(table).batches()) >= 2, 180,
                         "two committed micro-batches")
        # kill it while it writes the next batch, if we catch it (the assertions hold anyway)
        log = CommitLog(table)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (log.staging.is_dir() and any(log.staging.iterdir())):
            time.sleep(0.005)
    finally:
        first.kill()
    rows_at_kill = _committed_rows(table)
    assert 0 < rows_at_kill < 3000, "the worker was killed mid-export"

    second_half = [orjson.dumps({"id": i}) for i in range(3000, 5000)]
    await produce(broker.bootstrap, "spark-kill", second_half, keys=[str(i).encode() for i in range(3000, 5000)])
    second = _Worker(tmp_path, connector, 2)
    try:
        await eventually(lambda: second.alive() and _committed_rows(table) >= 5000, 240, "5000 rows committed")
        time.sleep(1)  # a duplicate batch would land within the next commit interval
    finally:
        second.process.send_signal(signal.SIGTERM)
        assert second.process.wait(60) == 0, second.log_path.read_text()

    df = read_committed(spark_session(), table)
    assert df.count() == 5000
    assert df.select("id").distinct().count() == 5000
    assert df.select("kafka_partition", "kafka_offset").distinct().count() == 5000
    assert spark_session().read.parquet(str(table)).count() == 5000
    assert _committed_rows(table) == 5000
