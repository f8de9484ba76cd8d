"""The JDBC source in a standalone worker (real broker, real databases): a task that cannot
work fails with its one-line reason in the status trace and the log, never retrying forever
while it shows RUNNING."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from streamkit.testing import BrokerThread
from tests.connect.conftest import eventually, standalone, worker_settings
from tests.connect.jdbc.databases import Database

pytestmark = pytest.mark.integration


async def failed_task(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        tasks = (await client.get(f"/connectors/{name}/status")).json()["tasks"]
        return tasks[0] if tasks and tasks[0]["state"] == "FAILED" else None

    return await eventually(probe, 60, f"{name}'s task to fail")  # type: ignore[no-any-return]


def failure_logs(caplog: pytest.LogCaptureFixture, name: str) -> list[Any]:
    return [r for r in caplog.records if r.getMessage().startswith(f"source task {name}-0 failed")]


async def test_a_wrong_incrementing_column_fails_the_task_with_one_line(
        broker: BrokerThread, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = Database.open("sqlite", f"sqlite:///{tmp_path / 'shop.db'}")
    try:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
    finally:
        db.engine.dispose()
    config = {"connector.class": "JdbcSourceConnector", "connection.url": f"jdbc:sqlite:{tmp_path / 'shop.db'}",
              "mode": "incrementing", "incrementing.column.name": "idd", "table.whitelist": "orders",
              "topic.prefix": "shop-"}
    reason = "ConnectError: table 'orders' has no column 'idd' (did you mean 'id'?)"
    with caplog.at_level("ERROR", logger="streamkit.connect"):
        async with standalone(worker_settings(broker.bootstrap, tmp_path), [("shop", config)]) as (_w, client):
            task = await failed_task(client, "shop")
    assert task["trace"] == reason
    (logged,) = failure_logs(caplog, "shop")
    assert logged.getMessage() == f"source task shop-0 failed: {reason}"
    assert logged.exc_info is None and "Traceback" not in caplog.text


async def test_an_unreachable_database_fails_the_task_after_connection_attempts(
        broker: BrokerThread, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = {"connector.class": "JdbcSourceConnector", "connection.url": "jdbc:postgresql://127.0.0.1:1/shop",
              "mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "orders",
              "topic.prefix": "gone-", "connection.attempts": "2", "connection.backoff.ms": "10"}
    with caplog.at_level("WARNING", logger="streamkit.connect"):
        async with standalone(worker_settings(broker.bootstrap, tmp_path), [("gone", config)]) as (_w, client):
            task = await failed_task(client, "gone")
    trace = task["trace"]
    assert trace.startswith("ConnectError: cannot connect to postgresql+psycopg://127.0.0.1:1/shop "
                            "after 2 attempt(s) (connection.attempts=2): connection failed")
    assert "\n" not in trace and "sqlalche.me" not in trace
    retries = [r.getMessage() for r in caplog.records if "retrying in 10 ms" in r.getMessage()]
    assert len(retries) == 1 and "(attempt 1 of 2)" in retries[0]
    (logged,) = failure_logs(caplog, "gone")
    assert logged.exc_info is None
