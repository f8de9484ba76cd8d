"""Progress a user can see: restores and long catch-ups logged periodically (a rich bar on a
terminal), a message while the consumer waits for its group, one log line per retry of an
unreachable broker."""

from __future__ import annotations

import asyncio
import io
import logging
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from streamkit.streams import progress as progress_module
from streamkit.streams import runtime as runtime_module
from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.streams.progress import ProgressReporter
from streamkit.streams.runtime import StartupError

from .conftest import Probe, eventually, running

pytestmark = pytest.mark.integration


def messages(caplog: pytest.LogCaptureFixture, fragment: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if fragment in r.getMessage()]


async def test_a_restore_logs_its_progress(make_app: Any, probe: Probe, caplog: pytest.LogCaptureFixture,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "LOG_INTERVAL_MS", 0)
    app = make_app()
    changelog = f"{app.id}-t-changelog"
    await probe.create_topic(changelog, 1, {"cleanup.policy": "compact"})
    await probe.produce_many(changelog, ((f"k{i}".encode(), b"1", None) for i in range(45_000)))
    topic = app.topic(f"{app.id}-in", partitions=1)
    table = app.Table("t", default=int)

    @app.agent(topic)
    async def use(stream: AgentStream) -> None:
        async for _ in stream:
            table["x"] += 1

    with caplog.at_level(logging.INFO):
        async with running(app) as runtime:
            await eventually(lambda: table.owned_partitions() == [0] and not runtime.tasks.restores, "the restore")
    lines = messages(caplog, "restoring t-0: ")
    assert lines, "no progress line"
    assert all("/45000 records" in line for line in lines)
    assert len(lines) >= 2 and "45000/45000 records (100%)" in lines[-1]
    assert messages(caplog, "restored t-0: 45000 records")


async def test_a_long_catch_up_logs_its_progress(make_app: Any, probe: Probe, caplog: pytest.LogCaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "LOG_INTERVAL_MS", 0)
    monkeypatch.setattr(runtime_module, "CATCH_UP_MIN_LAG", 500)
    monkeypatch.setattr(runtime_module, "LAG_CHECK_MS", 50)
    app = make_app(config={"max.poll.records": 100})
    topic = app.topic(f"{app.id}-backlog", partitions=1)
    await probe.create_topic(topic.name, 1)
    await probe.produce_many(topic.name, ((b"k", str(i).encode(), None) for i in range(3000)))
    seen = 0

    @app.agent(topic)
    async def slow(stream: AgentStream) -> None:
        nonlocal seen
        async for _ in stream:
            seen += 1
            await asyncio.sleep(0.001)  # a backlog that takes seconds

    with caplog.at_level(logging.INFO):
        async with running(app) as runtime:
            await probe.settle(runtime, timeout=90)
    lines = messages(caplog, f"catching up ({app.id}): ")
    assert lines, "no catch-up progress line"
    assert all("/3000 records" in line or "records (" in line for line in lines)
    assert messages(caplog, "caught up: ")


def test_a_terminal_gets_a_bar_and_a_pipe_log_lines(caplog: pytest.LogCaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "LOG_INTERVAL_MS", 0)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    reporter = ProgressReporter(terminal)
    with caplog.at_level(logging.INFO, logger="streamkit.streams.progress"):
        task = reporter.start("restoring t-0", 100)
        task.advance(40)
        reporter._bars.refresh()
        assert "restoring t-0" in terminal.getvalue() and "40/100" in terminal.getvalue()
        task.finish()
    assert reporter._bars is None
    assert not caplog.records, "a terminal shows a bar, not log lines"

    piped = io.StringIO()
    reporter = ProgressReporter(piped)
    with caplog.at_level(logging.INFO, logger="streamkit.streams.progress"):
        task = reporter.start("restoring t-1", 100)
        task.advance(40)
        task.finish()
    assert piped.getvalue() == ""
    assert messages(caplog, "restoring t-1: 40/100 records (40%)")


async def test_waiting_for_the_group_is_announced(make_app: Any, caplog: pytest.LogCaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime_module, "GROUP_WAIT_LOG_MS", 1)
    app = make_app()
    topic = app.topic(f"{app.id}-in", partitions=1)

    @app.agent(topic)
    async def noop(stream: AgentStream) -> None:
        async for _ in stream:
            pass

    with caplog.at_level(logging.INFO, logger="streamkit.streams.runtime"):
        async with running(app) as runtime:
            await eventually(lambda: runtime.assigned, "the assignment")
    lines = messages(caplog, f"waiting for consumer group {app.id} to assign partitions")
    assert lines and "group.initial.rebalance.delay.ms" in lines[0]


async def test_one_log_line_per_retry(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Bound, not listening: connections are refused, and nobody else can take the port.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        app = App("retrying", broker=address, data_dir=tmp_path, config={"bootstrap.timeout.ms": 2000})
        with caplog.at_level(logging.INFO), pytest.raises(StartupError) as failed:
            await app.start()
    assert str(failed.value) == (f"cannot reach a broker at {address} (connection refused); "
                                 "gave up after bootstrap.timeout.ms=2000")
    retries = messages(caplog, f"cannot reach a broker at {address}")
    assert len(retries) >= 2
    assert all(re.fullmatch(r".* \(connection refused\); retrying in \d\.\ds", line) for line in retries), retries
    doubled = [r for r in caplog.records if r.name.startswith("aiokafka") and "Unable connect" in r.getMessage()]
    assert not doubled, "aiokafka's own line doubles each retry"
