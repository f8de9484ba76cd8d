"""Kafka Connect's REST API from a real HTTP client (httpx) against a standalone worker
(in-process uvicorn on port 0) and a real broker."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamkit.testing import BrokerThread
from tests.connect.conftest import eventually, standalone, worker_settings

pytestmark = pytest.mark.integration

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


async def state(client: httpx.AsyncClient, name: str) -> tuple[str, list[str]]:
    body = (await client.get(f"/connectors/{name}/status")).json()
    return body["connector"]["state"], [t["state"] for t in body["tasks"]]


async def test_connector_lifecycle(broker: BrokerThread, tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("one\ntwo\n")
    config = {"connector.class": SOURCE, "file": str(src), "topic": "lifecycle", "tasks.max": "1"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path)) as (_worker, client):
        assert (await client.get("/connectors")).json() == []
        created = await client.post("/connectors", json={"name": "src", "config": config})
        assert created.status_code == 201
        assert created.json() == {"name": "src", "config": {**config, "name": "src"},
                                  "tasks": [{"connector": "src", "task": 0}], "type": "source"}
        again = await client.post("/connectors", json={"name": "src", "config": config})
        assert again.status_code == 409 and again.json()["error_code"] == 409

        assert (await client.get("/connectors")).json() == ["src"]
        expanded = (await client.get("/connectors", params={"expand": ["status", "info"]})).json()
        assert expanded["src"]["status"]["connector"]["state"] == "RUNNING"
        assert expanded["src"]["info"]["type"] == "source"
        assert (await client.get("/connectors/src/config")).json()["file"] == str(src)
        tasks = (await client.get("/connectors/src/tasks")).json()
        assert tasks == [{"id": {"connector": "src", "task": 0},
                          "config": {"file": str(src), "topic": "lifecycle", "batch.size": "2000", "format": "lines"}}]
        assert (await client.get("/connectors/src/tasks/0/status")).json()["state"] == "RUNNING"
        assert (await client.get("/connectors/src/tasks/7/status")).status_code == 404

        # offsets follow the file: {"filename"} -> {"position"}, as Kafka's FileStreamSource
        async def offsets() -> list[dict[str, object]]:
            return (await client.get("/connectors/src/offsets")).json()["offsets"]

        await eventually(offsets, 30, "source offsets")
        assert await offsets() == [{"partition": {"filename": str(src)}, "offset": {"position": 8}}]

        assert (await client.put("/connectors/src/pause")).status_code == 202
        assert await state(client, "src") == ("PAUSED", ["PAUSED"])
        assert (await client.put("/connectors/src/resume")).status_code == 202
        assert await state(client, "src") == ("RUNNING", ["RUNNING"])

        # offsets may only change while stopped
        moved = {"offsets": [{"partition": {"filename": str(src)}, "offset": {"position": 4}}]}
        refused = await client.patch("/connectors/src/offsets", json=moved)
        assert refused.status_code == 400 and "STOPPED" in refused.json()["message"]
        assert (await client.put("/connectors/src/stop")).status_code == 202
        assert await state(client, "src") == ("STOPPED", [])
        assert (await client.get("/connectors/src")).json()["tasks"] == []
        altered = await client.patch("/connectors/src/offsets", json=moved)
        assert altered.status_code == 200, altered.text
        assert await offsets() == [{"partition": {"filename": str(src)}, "offset": {"position": 4}}]
        assert (await client.delete("/connectors/src/offsets")).status_code == 200
        assert await offsets() == []

        assert (await client.put("/connectors/src/resume")).status_code == 202
        assert await state(client, "src") == ("RUNNING", ["RUNNING"])
        assert (await client.delete("/connectors/src")).status_code == 204
        missing = await client.get("/connectors/src")
        assert missing.status_code == 404
        assert missing.json() == {"error_code": 404, "message": "Connector src not found"}
        assert (await client.get("/connectors")).json() == []


async def test_bad_config_is_a_400_listing_every_problem(broker: BrokerThread, tmp_path: Path) -> None:
    async with standalone(worker_settings(broker.bootstrap, tmp_path)) as (_worker, client):
        bad = {"connector.class": SINK, "tasks.max": "none", "errors.tolerance": "sometimes",
               "transforms": "route", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter"}
        response = await client.post("/connectors", json={"name": "bad", "config": bad})
        assert response.status_code == 400
        body = response.json()
        assert body["error_code"] == 400
        assert set(body["problems"]) == {"tasks.max", "errors.tolerance", "file", "topics", "topics.regex",
                                         "transforms.route.regex", "transforms.route.replacement"}
        assert "contains the following 7 error(s)" in body["message"]
        for key in body["problems"]:
            assert key in body["message"]
        unknown = await client.put("/connectors/x/config", json={"connector.class": "com.example.Nope"})
        assert unknown.status_code == 400 and "com.example.Nope" in unknown.json()["message"]
        mismatch = await client.put("/connectors/x/config", json={"name": "y", "connector.class": SINK})
        assert mismatch.status_code == 400
        not_json = await client.post("/connectors", content=b"{oops", headers={"content-type": "application/json"})
        assert not_json.status_code == 400 and not_json.json()["error_code"] == 400
        assert (await client.get("/connectors")).json() == []

        report = await client.put("/connector-plugins/FileStreamSinkConnector/config/validate",
                                  json={"connector.class": SINK, "name": "v", "topics": "t", "tasks.max": "0"})
        assert report.status_code == 200
        body = report.json()
        assert body["name"] == "FileStreamSinkConnector" and body["error_count"] == 2
        errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
        assert set(errors) == {"tasks.max", "file"}
        assert (await client.put("/connector-plugins/Nope/config/validate", json={})).status_code == 400


async def test_unknown_keys_are_logged_and_returned_by_validate_as_warnings(
        broker: BrokerThread, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = {"connector.class": SINK, "topics": "t", "file": str(tmp_path / "out.txt"), "fromat": "jsonl"}
    expected = "The configuration 'fromat' was supplied but isn't a known config (did you mean 'format'?)"
    async with standalone(worker_settings(broker.bootstrap, tmp_path)) as (_worker, client):
        report = (await client.put("/connector-plugins/FileStreamSinkConnector/config/validate",
                                   json={"name": "typo", **config})).json()
        assert report["error_count"] == 0
        assert report["warnings"] == {"fromat": [expected]}
        with caplog.at_level("WARNING", logger="streamkit.connect"):
            created = await client.put("/connectors/typo/config", json=config)
        assert created.status_code == 201
        assert [r.getMessage() for r in caplog.records if "fromat" in r.getMessage()] == [
            f"connector typo: {expected}"]


async def test_root_health_plugins_and_metrics(broker: BrokerThread, tmp_path: Path) -> None:
    async with standalone(worker_settings(broker.bootstrap, tmp_path)) as (_worker, client):
        root = (await client.get("/")).json()
        assert root["version"] and root["commit"] and root["kafka_cluster_id"]
        assert (await client.get("/health")).json()["status"] == "healthy"
        plugins = (await client.get("/connector-plugins")).json()
        assert {"class": SOURCE, "type": "source", "version": root["version"]} in plugins
        assert {"class": SINK, "type": "sink", "version": root["version"]} in plugins
        everything = (await client.get("/connector-plugins", params={"connectorsOnly": "false"})).json()
        kinds = {p["type"] for p in everything}
        assert {"source", "sink", "transformation", "predicate", "converter"} <= kinds
        assert {"class": "org.apache.kafka.connect.transforms.Filter", "type": "transformation",
                "version": root["version"]} in everything
        metrics = await client.get("/metrics")
        assert metrics.status_code == 200 and "connect_source_record_poll" in metrics.text
        nowhere = await client.get("/no/such/path")
        assert nowhere.status_code == 404 and nowhere.json()["error_code"] == 404


async def test_a_config_change_restarts_the_tasks(broker: BrokerThread, tmp_path: Path) -> None:
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    src = tmp_path / "in.txt"
    src.write_text("a\n")
    source = {"connector.class": SOURCE, "file": str(src), "topic": "reconfigured"}
    sink = {"connector.class": SINK, "file": str(first), "topics": "reconfigured",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path)) as (_worker, client):
        assert (await client.put("/connectors/src/config", json=source)).status_code == 201
        assert (await client.put("/connectors/sink/config", json=sink)).status_code == 201
        await eventually(lambda: first.exists() and first.read_text() == '{"schema":{"type":"string","optional":false},"payload":"a"}\n',
                         30, "the first file")
        updated = await client.put("/connectors/sink/config", json={**sink, "file": str(second)})
        assert updated.status_code == 200
        assert (await client.get("/connectors/sink/tasks")).json()[0]["config"]["file"] == str(second)
        with src.open("a") as f:
            f.write("b\n")
        await eventually(lambda: second.exists() and second.read_text().endswith('"payload":"b"}\n'), 30,
                         "the new task writing the second file")
        assert first.read_text().count("\n") == 1  # the old task is gone
        patched = await client.patch("/connectors/src/config", json={"value.converter":
                                     "org.apache.kafka.connect.storage.StringConverter", "batch.size": None})
        assert patched.status_code == 200
        assert patched.json()["config"]["value.converter"].endswith("StringConverter")
        assert "batch.size" not in patched.json()["config"]
        with src.open("a") as f:
            f.write("c\n")
        await eventually(lambda: second.read_text().endswith("c\n") and not second.read_text().endswith('}\n'),
                         30, "a plain string written by the reconfigured source")


@pytest.mark.parametrize("include_tasks", [False, True])
async def test_restart_endpoints(broker: BrokerThread, tmp_path: Path, include_tasks: bool) -> None:
    src = tmp_path / "in.txt"
    src.write_text("")
    config = {"connector.class": SOURCE, "file": str(src), "topic": "restarts"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("src", config)]) as (_worker, client):
        params = {"includeTasks": str(include_tasks).lower(), "onlyFailed": "false"}
        response = await client.post("/connectors/src/restart", params=params)
        if include_tasks:
            assert response.status_code == 202
            assert response.json()["connector"]["state"] == "RUNNING"
        else:  # Kafka's plain restart: the connector only, no body
            assert response.status_code == 204
        only_failed = await client.post("/connectors/src/restart", params={"includeTasks": "true", "onlyFailed": "true"})
        assert only_failed.status_code == 202 and only_failed.json()["tasks"][0]["state"] == "RUNNING"
        assert (await client.post("/connectors/src/restart")).status_code == 204
        assert (await client.post("/connectors/src/tasks/0/restart")).status_code == 204
        assert await state(client, "src") == ("RUNNING", ["RUNNING"])
        assert (await client.post("/connectors/nope/restart")).status_code == 404
        assert (await client.post("/connectors/src/restart", params={"includeTasks": "maybe"})).status_code == 400


async def test_connector_context_reconfigures_tasks_and_raises_errors(broker: BrokerThread, tmp_path: Path) -> None:
    from tests.connect import plugins_for_tests as plugins

    plugins.TABLES[:] = ["t1"]
    plugins.MonitoringConnector.instances.clear()
    config = {"connector.class": "tests.connect.plugins_for_tests.MonitoringConnector", "topics": "monitored",
              "tasks.max": "3"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [("mon", config)]) as (_w, client):
        async def task_tables() -> list[str]:
            return [t["config"]["table"] for t in (await client.get("/connectors/mon/tasks")).json()]

        assert await task_tables() == ["t1"]
        plugins.TABLES[:] = ["t1", "t2", "t3", "t4"]
        plugins.MonitoringConnector.instances[-1].poke()
        await eventually(lambda: _equals(task_tables(), ["t1", "t2", "t3"]), 30, "three tasks after the new tables")
        assert await state(client, "mon") == ("RUNNING", ["RUNNING"] * 3)

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, plugins.MonitoringConnector.instances[-1].fail)
        failed = await eventually(lambda: _failed_connector(client), 30, "the connector to fail")
        assert "the table monitor died" in failed["trace"]


async def _equals(pending: Any, expected: Any) -> bool:
    return bool(await pending == expected)


async def _failed_connector(client: httpx.AsyncClient) -> dict[str, Any] | None:
    body = (await client.get("/connectors/mon/status")).json()["connector"]
    return body if body["state"] == "FAILED" else None


async def test_admin_loggers(broker: BrokerThread, tmp_path: Path) -> None:
    import logging

    logger = logging.getLogger("streamkit.connect.sink_runner")
    before = logger.level
    try:
        async with standalone(worker_settings(broker.bootstrap, tmp_path)) as (_worker, client):
            changed = await client.put("/admin/loggers/streamkit.connect", json={"level": "DEBUG"})
            assert changed.status_code == 200 and "streamkit.connect.sink_runner" in changed.json()
            assert (await client.get("/admin/loggers/streamkit.connect")).json() == {"level": "DEBUG"}
            assert (await client.get("/admin/loggers")).json()["streamkit.connect"] == {"level": "DEBUG"}
            assert (await client.get("/admin/loggers/no.such.logger")).status_code == 404
            bad = await client.put("/admin/loggers/streamkit.connect", json={"level": "LOUD"})
            assert bad.status_code == 400 and bad.json()["error_code"] == 400
    finally:
        logging.getLogger("streamkit.connect").setLevel(logging.NOTSET)
        logger.setLevel(before)
