"""A record the broker refuses must fail the worker before the offsets of its input are
committed: sinks of agents (``send_soon``/``cast``) and of the DSL (``to``), repartition
topics (``group_by``) and the dead-letter topic. The sink topics here take at most 1000 bytes
per batch (``max.message.bytes``), and the failing record is 5000 bytes: the broker answers
MESSAGE_TOO_LARGE, which the producer's flush alone does not report."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.streams.runtime import DeliveryError
from streamkit.testing import BrokerProcess

from .conftest import Probe, eventually, running, unique

pytestmark = pytest.mark.timeout(120)

SMALL = {"max.message.bytes": "1000"}
BIG = b"x" * 5000
REPO = Path(__file__).resolve().parents[2]


def build(app: App, kind: str) -> tuple[str, str]:
    """The app for ``kind``; returns (input topic, the topic whose sends fail)."""
    if kind == "dead_letter":
        numbers = app.topic(f"{app.id}-in", value_type=int, partitions=1)  # BIG is not an int

        @app.agent(numbers)
        async def count(stream: AgentStream) -> None:
            async for _value in stream:
                pass

        return numbers.name, f"{app.id}-dead-letter"
    source = app.topic(f"{app.id}-in", value_type=str, partitions=1)
    if kind == "cast":
        sink = app.topic(f"{app.id}-out", value_type=str)

        @app.agent(source)
        async def forward(stream: AgentStream) -> None:
            async for event in stream.events():
                sink.send_soon(event.value, key=event.key)

        return source.name, sink.name
    if kind == "to":
        app.stream(source).filter(lambda v: True).to(f"{app.id}-out")
        return source.name, f"{app.id}-out"
    assert kind == "group_by"

    @app.agent(source)
    async def regroup(stream: AgentStream) -> None:
        async for _value in stream.group_by(lambda v: v[:1], name="by_first"):
            pass

    return source.name, f"{app.id}-by_first-repartition"


@pytest.mark.parametrize("kind", ["cast", "to", "group_by", "dead_letter"])
async def test_a_refused_record_fails_the_worker_without_committing_its_input(
        make_app: Any, probe: Probe, kind: str) -> None:
    config = {"deserialization.exception.handler": "dead_letter"} if kind == "dead_letter" else {}
    app = make_app(config=config)
    source_name, failing = build(app, kind)
    await probe.create_topic(failing, 1, SMALL)
    async with running(app, expect_failure=True) as runtime:
        good = b"1" if kind == "dead_letter" else b"small"
        await probe.produce(source_name, good, key=b"k")
        await eventually(lambda: probe.caught_up(app.id, [source_name]), "the small record to be committed")
        await probe.produce(source_name, BIG, key=b"k")
        await asyncio.wait_for(runtime.stopped.wait(), 30)
    failure = runtime.failure
    assert isinstance(failure, DeliveryError), repr(failure)
    message = str(failure)
    assert f"producing a record to {failing!r} failed" in message and "\n" not in message
    assert "MessageSizeTooLarge" in message
    committed = {tp.topic: offset for tp, offset in (await probe.committed(app.id)).items()}
    assert committed[source_name] == 1, f"only the small record is committed: {committed}"


async def test_the_worker_command_ends_with_a_one_line_error(broker: BrokerProcess, probe: Probe) -> None:
    """The same through ``streamkit worker``: exit 1, the reason on the last line."""
    app_id = unique("sink-cli")
    source, sink = f"{app_id}-in", f"{app_id}-out"
    await probe.create_topic(source, 1)
    await probe.create_topic(sink, 1, SMALL)
    await probe.produce(source, BIG, key=b"k")
    env = {**os.environ, "SK_TEST_APP_ID": app_id, "SK_TEST_INPUT": source, "SK_TEST_SINK": sink,
           "COLUMNS": "400"}
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streamkit", "worker", "-A", "tests.streams.apps_for_tests.sink:app",
        "--broker", broker.bootstrap, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _out, err = await asyncio.wait_for(worker.communicate(), 60)
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
    stderr = err.decode()
    assert worker.returncode == 1, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(f"error: the worker stopped: producing a record to {sink!r} failed"), stderr
    assert "Traceback" not in stderr
    assert await probe.committed(app_id) == {}
