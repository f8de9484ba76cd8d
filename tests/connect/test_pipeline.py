"""Records through real connectors and a real broker: file round trips across a restart,
the dead-letter queue, tolerance and retries."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from streamkit.testing import BrokerThread
from tests.connect import plugins_for_tests
from tests.connect.conftest import consume, eventually, produce, standalone, worker_settings

pytestmark = pytest.mark.integration

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING = "org.apache.kafka.connect.storage.StringConverter"


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_file_round_trip_resumes_after_a_restart_without_loss_or_duplicates(
        broker: BrokerThread, tmp_path: Path) -> None:
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    expected = [f"line {i}" for i in range(500)]
    src.write_text("\n".join(expected[:300]) + "\n" + "line 3")  # a partial last line
    connectors = [
        ("src", {"connector.class": SOURCE, "file": str(src), "topic": "roundtrip", "batch.size": "64"}),
        ("sink", {"connector.class": SINK, "file": str(out), "topics": "roundtrip"}),
    ]
    settings = worker_settings(broker.bootstrap, tmp_path)
    async with standalone(settings, connectors):
        await eventually(lambda: len(lines_of(out)) == 300, 60, "300 lines in the sink file")
        assert lines_of(out) == expected[:300]  # the partial line waits for its newline
        with src.open("a") as f:  # complete it, and more while running
            f.write("00\n" + "\n".join(expected[301:400]) + "\n")
        await eventually(lambda: len(lines_of(out)) == 400, 60, "400 lines in the sink file")
    assert lines_of(out) == expected[:400]
    offsets = json.loads((tmp_path / "offsets.json").read_text())
    assert list(offsets.values()) == [{"position": src.stat().st_size}]

    with src.open("a") as f:  # written while no worker runs
        f.write("\n".join(expected[400:]) + "\n")
    async with standalone(settings, connectors) as (_worker, client):
        await eventually(lambda: len(lines_of(out)) >= 500, 60, "500 lines in the sink file")
        records = await consume(broker.bootstrap, "roundtrip", 500)
        for name in ("src", "sink"):  # Kafka's active topics (KIP-558)
            assert (await client.get(f"/connectors/{name}/topics")).json() == {name: {"topics": ["roundtrip"]}}
        assert (await client.put("/connectors/sink/topics/reset")).status_code == 202
        assert (await client.get("/connectors/sink/topics")).json() == {"sink": {"topics": []}}
    assert lines_of(out) == expected
    # the topic holds each line once, as Kafka Connect's JSON envelope of a string
    assert [json.loads(r.value)["payload"] for r in records] == expected


async def test_jsonl_and_csv_formats(broker: BrokerThread, tmp_path: Path) -> None:
    jsonl_in, jsonl_out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    csv_in, csv_out = tmp_path / "in.csv", tmp_path / "out.csv"
    rows = [{"id": i, "name": f"n{i}", "tags": ["a"]} for i in range(5)]
    jsonl_in.write_text("".join(json.dumps(r) + "\n" for r in rows))
    csv_in.write_text("id,name\n1,ann\n2,\"bob, jr\"\n")
    schemaless = {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
                  "value.converter.schemas.enable": "false"}
    connectors = [
        ("jsrc", {"connector.class": SOURCE, "file": str(jsonl_in), "topic": "jsonl", "format": "jsonl", **schemaless}),
        ("jsink", {"connector.class": SINK, "file": str(jsonl_out), "topics": "jsonl", "format": "jsonl", **schemaless}),
        ("csrc", {"connector.class": SOURCE, "file": str(csv_in), "topic": "csv", "format": "csv"}),
        ("csink", {"connector.class": SINK, "file": str(csv_out), "topics": "csv", "format": "csv"}),
    ]
    async with standalone(worker_settings(broker.bootstrap, tmp_path), connectors):
        await eventually(lambda: len(lines_of(jsonl_out)) == 5, 60, "the jsonl sink")
        await eventually(lambda: len(lines_of(csv_out)) == 3, 60, "the csv sink")
        [first] = await consume(broker.bootstrap, "csv", 1)
    assert [json.loads(line) for line in lines_of(jsonl_out)] == rows
    assert csv_out.read_text() == csv_in.read_text()
    envelope = json.loads(first.value)
    assert envelope["schema"]["type"] == "struct"
    assert [f["field"] for f in envelope["schema"]["fields"]] == ["id", "name"]
    assert envelope["payload"] == {"id": "1", "name": "ann"}


async def test_poison_record_goes_to_the_dead_letter_queue(broker: BrokerThread, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    await produce(broker.bootstrap, "dlq-in", [b'{"n": 1}', b"not json", b'{"n": 3}'],
                  keys=[b"k1", b"k2", b"k3"])
    config = {"connector.class": SINK, "file": str(out), "topics": "dlq-in", "format": "jsonl",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false", "key.converter": STRING,
              "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq-out",
              "errors.deadletterqueue.topic.replication.factor": "1",
              "errors.deadletterqueue.context.headers.enable": "true", "errors.log.enable": "true"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("dlq", config)]) as (_w, client):
        await eventually(lambda: len(lines_of(out)) == 2, 60, "the two good records")
        [dead] = await consume(broker.bootstrap, "dlq-out", 1)
        status = (await client.get("/connectors/dlq/status")).json()
        metrics = (await client.get("/metrics")).text
    assert [json.loads(line) for line in lines_of(out)] == [{"n": 1}, {"n": 3}]
    assert (dead.key, dead.value) == (b"k2", b"not json")
    headers = {k: v.decode() for k, v in dead.headers}
    assert headers["__connect.errors.topic"] == "dlq-in"
    assert headers["__connect.errors.partition"] == "0"
    assert headers["__connect.errors.offset"] == "1"
    assert headers["__connect.errors.connector.name"] == "dlq"
    assert headers["__connect.errors.task.id"] == "0"
    assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert headers["__connect.errors.exception.class.name"] == "streamkit.connect.errors.DataError"
    assert "serialization error" in headers["__connect.errors.exception.message"]
    assert "Traceback" in headers["__connect.errors.exception.stacktrace"]
    assert status["tasks"][0]["state"] == "RUNNING"
    assert 'connect_deadletterqueue_produce_requests_total{connector="dlq",task="0"} 1.0' in metrics


async def test_without_tolerance_a_poison_record_fails_the_task(broker: BrokerThread, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    await produce(broker.bootstrap, "strict-in", [b'{"n": 1}', b"not json"])
    config = {"connector.class": SINK, "file": str(out), "topics": "strict-in", "format": "jsonl",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("strict", config)]) as (_w, client):
        async def task_state() -> dict[str, str]:
            return (await client.get("/connectors/strict/tasks/0/status")).json()

        failed = await eventually(lambda: _failed(task_state()), 60, "the task to fail")
        assert "DataError" in failed["trace"] and "schemas.enable" not in failed["trace"]
        assert (await client.get("/connectors/strict/status")).json()["connector"]["state"] == "RUNNING"
        # nothing was committed past the poison record: a fixed config gets it again
        fixed = {**config, "errors.tolerance": "all"}
        assert (await client.put("/connectors/strict/config", json=fixed)).status_code == 200
        await eventually(lambda: len(lines_of(out)) >= 1, 60, "the good record")
        assert (await task_state())["state"] == "RUNNING"


async def _failed(pending: object) -> object:
    body = await pending  # type: ignore[misc]
    return body if body.get("state") == "FAILED" else None


async def test_retriable_errors_are_retried_and_data_errors_isolated(broker: BrokerThread, tmp_path: Path) -> None:
    plugins_for_tests.RECEIVED.clear()
    plugins_for_tests.ATTEMPTS.clear()
    values = [f"v{i}".encode() for i in range(6)]
    await produce(broker.bootstrap, "flaky-in", values)
    config = {"connector.class": "tests.connect.plugins_for_tests.FlakySinkConnector", "topics": "flaky-in",
              "fail_first": "2", "poison": "v3", "value.converter": STRING, "errors.tolerance": "all",
              "errors.retry.delay.max.ms": "50"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("flaky", config)]) as (_w, client):
        await eventually(lambda: len(plugins_for_tests.RECEIVED.get("flaky", [])) == 5, 60, "five values")
        status = (await client.get("/connectors/flaky/status")).json()
    assert plugins_for_tests.RECEIVED["flaky"] == ["v0", "v1", "v2", "v4", "v5"]
    assert plugins_for_tests.ATTEMPTS["flaky"] >= 3  # two retriable failures, then success
    assert status["tasks"][0]["state"] == "RUNNING"


async def test_deleting_a_connector_in_retry_backoff_stops_its_task_at_once(
        broker: BrokerThread, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every put fails with a RetriableError, retried forever; the worker would wait ten
    minutes for a task that does not stop by itself, so the delete returns only because the
    backoff ends at the stop."""
    plugins_for_tests.ATTEMPTS.clear()
    await produce(broker.bootstrap, "backoff-in", [b"x"])
    config = {"connector.class": "tests.connect.plugins_for_tests.FlakySinkConnector", "topics": "backoff-in",
              "fail_first": str(10**9), "value.converter": STRING, "errors.retry.delay.max.ms": "600000"}
    settings = worker_settings(broker.bootstrap, tmp_path, **{"task.shutdown.graceful.timeout.ms": "600000"})
    async with standalone(settings, [("backoff", config)]) as (_w, client):
        await eventually(lambda: plugins_for_tests.ATTEMPTS.get("flaky", 0) >= 2, 60, "a retry")
        with caplog.at_level("WARNING", logger="streamkit.connect"):
            assert (await client.delete("/connectors/backoff")).status_code == 204
        assert (await client.get("/connectors")).json() == []
    assert "did not stop within" not in caplog.text


async def test_sink_offsets_are_committed_and_editable_when_stopped(broker: BrokerThread, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    await produce(broker.bootstrap, "sink-offsets", [b"a", b"b", b"c"])
    config = {"connector.class": SINK, "file": str(out), "topics": "sink-offsets", "value.converter": STRING}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("so", config)]) as (_w, client):
        await eventually(lambda: lines_of(out) == ["a", "b", "c"], 60, "three lines")
        expected = [{"partition": {"kafka_topic": "sink-offsets", "kafka_partition": 0}, "offset": {"kafka_offset": 3}}]

        async def committed() -> bool:
            return (await client.get("/connectors/so/offsets")).json()["offsets"] == expected

        await eventually(committed, 30, "the committed sink offset")
        assert (await client.put("/connectors/so/stop")).status_code == 202
        rewind = {"offsets": [{"partition": {"kafka_topic": "sink-offsets", "kafka_partition": 0},
                               "offset": {"kafka_offset": 1}}]}
        response = await client.patch("/connectors/so/offsets", json=rewind)
        assert response.status_code == 200, response.text
        assert (await client.put("/connectors/so/resume")).status_code == 202
        await eventually(lambda: lines_of(out) == ["a", "b", "c", "b", "c"], 60, "b and c again")
        assert (await client.put("/connectors/so/stop")).status_code == 202
        reset = await client.delete("/connectors/so/offsets")
        assert reset.status_code == 200, reset.text
        assert (await client.get("/connectors/so/offsets")).json() == {"offsets": []}


async def test_sink_by_topic_regex_and_a_paused_source(broker: BrokerThread, tmp_path: Path) -> None:
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("first\n")
    connectors = [
        ("src", {"connector.class": SOURCE, "file": str(src), "topic": "regex-topic-1", "value.converter": STRING}),
        ("sink", {"connector.class": SINK, "file": str(out), "topics.regex": "regex-topic-[0-9]+",
                  "value.converter": STRING}),
    ]
    async with standalone(worker_settings(broker.bootstrap, tmp_path), connectors) as (_w, client):
        await eventually(lambda: lines_of(out) == ["first"], 60, "the first line through the regex")
        assert (await client.put("/connectors/src/pause")).status_code == 202
        status = (await client.get("/connectors/src/status")).json()
        assert status["connector"]["state"] == "PAUSED" and status["tasks"][0]["state"] == "PAUSED"
        with src.open("a") as f:
            f.write("while paused\n")
        await asyncio.sleep(2)  # a paused source polls nothing
        assert lines_of(out) == ["first"]
        assert (await client.put("/connectors/src/resume")).status_code == 202
        await eventually(lambda: lines_of(out) == ["first", "while paused"], 60, "the line after resume")


async def test_connector_created_stopped_then_resumed(broker: BrokerThread, tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    async with standalone(worker_settings(broker.bootstrap, tmp_path)) as (_w, client):
        created = await client.post("/connectors", json={
            "name": "later", "initial_state": "STOPPED",
            "config": {"connector.class": SOURCE, "file": str(src), "topic": "created-stopped"}})
        assert created.status_code == 201 and created.json()["tasks"] == []
        assert (await client.get("/connectors/later/status")).json()["connector"]["state"] == "STOPPED"
        # offsets of a stopped connector can be set before it ever runs
        seeded = {"offsets": [{"partition": {"filename": str(src)}, "offset": {"position": 2}}]}
        assert (await client.patch("/connectors/later/offsets", json=seeded)).status_code == 200
        with src.open("a") as f:
            f.write("y\n")
        assert (await client.put("/connectors/later/resume")).status_code == 202
        [record] = await consume(broker.bootstrap, "created-stopped", 1)
        assert json.loads(record.value)["payload"] == "y"  # resumed from the seeded offset


async def test_sink_task_context_seeks_and_requests_commits(broker: BrokerThread, tmp_path: Path) -> None:
    plugins_for_tests.RECEIVED.pop("seeking", None)
    await produce(broker.bootstrap, "seeking-in", [b"a", b"b", b"c"])
    config = {"connector.class": "tests.connect.plugins_for_tests.SeekingSinkConnector", "topics": "seeking-in",
              "value.converter": STRING, "offset.flush.interval.ms": "3600000"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("seeking", config)]) as (_w, client):
        await eventually(lambda: len(plugins_for_tests.RECEIVED.get("seeking", [])) == 2, 60, "two records")
        expected = [{"partition": {"kafka_topic": "seeking-in", "kafka_partition": 0}, "offset": {"kafka_offset": 3}}]

        async def committed() -> bool:
            return (await client.get("/connectors/seeking/offsets")).json()["offsets"] == expected

        # committed long before the hour-long interval: the task asked for it
        await eventually(committed, 30, "the requested commit")
    assert plugins_for_tests.RECEIVED["seeking"] == [(1, "b"), (2, "c")]


async def test_records_polled_while_a_partition_opens_wait_for_open_and_its_seek(broker: BrokerThread,
                                                                                tmp_path: Path) -> None:
    """aiokafka runs the rebalance listener beside the poll: records it fetched while the
    task's open() was still running are fetched again after open() and its seek, never
    given to put() first."""
    for key in ("slow-opening", "slow-opening-before-open"):
        plugins_for_tests.RECEIVED.pop(key, None)
    await produce(broker.bootstrap, "slow-opening-in", [b"a", b"b", b"c"])
    config = {"connector.class": "tests.connect.plugins_for_tests.SlowOpeningSinkConnector",
              "topics": "slow-opening-in", "value.converter": STRING}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("slow", config)]):
        await eventually(lambda: len(plugins_for_tests.RECEIVED.get("slow-opening", [])) >= 2, 60, "two records")
        await asyncio.sleep(0.5)  # nothing else may come
    assert plugins_for_tests.RECEIVED.get("slow-opening-before-open") is None
    assert plugins_for_tests.RECEIVED["slow-opening"] == [(1, "b"), (2, "c")]


async def test_sink_offsets_are_committed_only_after_a_successful_flush(broker: BrokerThread,
                                                                       tmp_path: Path) -> None:
    await produce(broker.bootstrap, "gated-in", [b"a", b"b", b"c"])
    gate = tmp_path / "gate"
    config = {"connector.class": "tests.connect.plugins_for_tests.GatedFlushSinkConnector", "topics": "gated-in",
              "value.converter": STRING, "gate": str(gate), "offset.flush.interval.ms": "100",
              "errors.retry.delay.max.ms": "100"}
    done = [{"partition": {"kafka_topic": "gated-in", "kafka_partition": 0}, "offset": {"kafka_offset": 3}}]
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("gated", config)]) as (_w, client):
        await eventually(lambda: plugins_for_tests.RECEIVED.get("gated-gate") == ["a", "b", "c"], 60, "three puts")
        # flush has failed again and again (RetriableError, retried): nothing is committed
        await eventually(lambda: plugins_for_tests.ATTEMPTS.get("gated-gate", 0) >= 3, 60, "failed flushes")
        assert (await client.get("/connectors/gated/offsets")).json() == {"offsets": []}
        gate.touch()

        async def committed() -> bool:
            return (await client.get("/connectors/gated/offsets")).json()["offsets"] == done

        await eventually(committed, 30, "the commit after the first successful flush")

        # a flush that fails for good fails the task, and still commits nothing
        hard = {**config, "topics": "gated-hard", "gate": str(tmp_path / "never"), "hard": "true"}
        await produce(broker.bootstrap, "gated-hard", [b"x"])
        assert (await client.put("/connectors/hard/config", json=hard)).status_code == 201

        async def failed() -> bool:
            tasks = (await client.get("/connectors/hard/status")).json()["tasks"]
            return bool(tasks) and tasks[0]["state"] == "FAILED"

        await eventually(failed, 60, "the task failed by its flush")
        assert "the disk is gone" in (await client.get("/connectors/hard/status")).json()["tasks"][0]["trace"]
        assert plugins_for_tests.RECEIVED.get("gated-never") == ["x"]
        assert (await client.get("/connectors/hard/offsets")).json() == {"offsets": []}
