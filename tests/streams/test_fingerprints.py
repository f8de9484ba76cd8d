"""State fingerprints: restoring state into an operator whose definition changed (same name,
another window size or type) is refused with a message that says how to start over, whether
the old state comes from the local store or only from the changelog."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.streams.table import FINGERPRINT_HEADER, StateDefinitionError

from .conftest import Probe, eventually, running, unique

pytestmark = pytest.mark.integration


def clicks_app(make_app: Any, app_id: str, data_dir: Path, window: str, size: float) -> tuple[App, Any]:
    app = make_app(app_id=app_id, data_dir=data_dir)
    topic = app.topic(f"{app_id}-clicks", value_type=int, partitions=2)
    table = app.Table("clicks", default=int)
    clicks = table.tumbling(size, expires=3600) if window == "tumbling" else table.hopping(size, size / 2, expires=3600)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            clicks[event.key] += event.value

    return app, topic


@pytest.mark.parametrize("local_state", [True, False])
@pytest.mark.parametrize(("window", "size"), [("tumbling", 20), ("hopping", 10)])
async def test_a_changed_window_refuses_the_old_state(make_app: Any, probe: Probe, tmp_path: Path,
                                                      local_state: bool, window: str, size: float) -> None:
    app_id = unique("fp")
    app, topic = clicks_app(make_app, app_id, tmp_path / "w1", "tumbling", 10)
    async with running(app) as runtime:
        for i in range(10):
            await topic.send(1, key=f"k{i}", timestamp=1_700_000_000_000 + i)
        await probe.settle(runtime)
    changelog = await probe.read(f"{app_id}-clicks-changelog")
    firsts = {}
    for r in changelog:  # read in partition and offset order
        firsts.setdefault(r.partition, r)
    assert firsts and all(dict(r.headers).get(FINGERPRINT_HEADER) for r in firsts.values())

    # The same app id with another window: on the same machine (local store) or a new one.
    data_dir = tmp_path / ("w1" if local_state else "w2")
    changed, _topic = clicks_app(make_app, app_id, data_dir, window, size)
    async with running(changed, expect_failure=True) as runtime:
        await asyncio.wait_for(runtime.stopped.wait(), 30)
    failure = runtime.failure
    assert isinstance(failure, StateDefinitionError), failure
    message = str(failure)
    assert "table 'clicks'" in message and "another definition" in message
    assert f"delete the topic {app_id}-clicks-changelog" in message
    assert str(data_dir / "state" / app_id / "clicks") in message
    assert "another name" in message and "\n" not in message
    if local_state:
        assert "TumblingWindows(size_ms=10000)" in message  # what the local state holds


async def test_the_same_definition_restores_its_state(make_app: Any, probe: Probe, tmp_path: Path) -> None:
    app_id = unique("fp-same")
    app, topic = clicks_app(make_app, app_id, tmp_path / "w1", "tumbling", 10)
    async with running(app) as runtime:
        await topic.send(1, key="k", timestamp=1_700_000_000_000)
        await probe.settle(runtime)
    again, topic = clicks_app(make_app, app_id, tmp_path / "w2", "tumbling", 10)
    async with running(again) as runtime:
        await topic.send(1, key="k", timestamp=1_700_000_000_001)
        await probe.settle(runtime)
        table = again.tables["clicks"]
        await eventually(lambda: table.query("k")[0]["value"] == 2, "the restored count to go on")
