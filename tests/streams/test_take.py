"""Batch-at-a-time agents (``stream.take(max_, within)``) on a real broker: batch sizes, the
partial batch after ``within``, what a commit covers, exactly-once, and windowed tables that
merge a batch's updates."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from streamkit.streams.agent import AgentStream, Batch, current_event
from streamkit.streams.app import App

from .conftest import Probe, eventually, running

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000_000  # a multiple of every window size used here


def topic_name(app: App, what: str) -> str:
    return f"{app.id}-{what}"


async def test_batches_never_exceed_max_and_keep_every_value_in_order(make_app: Any, probe: Probe) -> None:
    app = make_app()
    numbers = app.topic(topic_name(app, "numbers"), partitions=1)
    batches: list[Batch] = []

    @app.agent(numbers)
    async def collect(stream: AgentStream) -> None:
        async for batch in stream.take(100, within=0.5):
            batches.append(batch)

    await probe.create_topic(numbers.name, 1)
    await probe.produce_many(numbers.name, [(None, orjson.dumps(i), T0 + i) for i in range(250)])
    async with running(app) as runtime:
        await probe.settle(runtime)
        await eventually(lambda: sum(map(len, batches)) == 250, "every value in a batch")
    assert all(0 < len(batch) <= 100 for batch in batches), [len(b) for b in batches]
    assert [v for batch in batches for v in batch] == list(range(250))
    assert [e.offset for batch in batches for e in batch.events] == list(range(250))
    assert [e.timestamp for batch in batches for e in batch.events] == [T0 + i for i in range(250)]


async def test_a_partial_batch_is_handed_over_after_within(make_app: Any, probe: Probe) -> None:
    """Three values and a batch size of 1,000: they come as one batch once ``within`` has
    passed (without it the agent would wait for 997 more)."""
    app = make_app()
    numbers = app.topic(topic_name(app, "numbers"), partitions=1)
    batches: list[list[int]] = []

    @app.agent(numbers)
    async def collect(stream: AgentStream) -> None:
        async for batch in stream.take(1000, within=0.2):
            batches.append(list(batch))

    async with running(app):
        for i in range(3):
            await numbers.send(i)
        await eventually(lambda: sum(map(len, batches)) == 3, "the partial batch")
    assert [v for batch in batches for v in batch] == [0, 1, 2]


def test_take_refuses_bad_arguments(make_app: Any) -> None:
    app = make_app()
    topic = app.topic(topic_name(app, "t"))

    @app.agent(topic)
    async def noop(stream: AgentStream) -> None:
        pass

    stream = noop.new_streams()[0]
    for max_, within in ((0, 1), (1.5, 1), (10, 0), (10, -1)):
        with pytest.raises(ValueError, match="take"):
            stream.take(max_, within)  # type: ignore[arg-type]


async def test_commits_cover_only_processed_batches(make_app: Any, probe: Probe) -> None:
    """The first worker processes two batches of 10, then fails in the middle of the third
    (after long enough for several commit intervals). Its committed offset never covers the
    third batch; a second worker processes it (and what follows) again."""
    app = make_app()
    numbers = app.topic(topic_name(app, "numbers"), partitions=1)
    first: list[int] = []

    @app.agent(numbers)
    async def fail_in_third(stream: AgentStream) -> None:
        async for batch in stream.take(10, within=5):
            first.extend(batch)
            if len(first) > 20:
                await asyncio.sleep(1)  # commit.interval.ms is 100
                raise RuntimeError("boom")

    await probe.create_topic(numbers.name, 1)
    await probe.produce_many(numbers.name, [(None, orjson.dumps(i), None) for i in range(40)])
    async with running(app, expect_failure=True) as runtime:
        await eventually(lambda: runtime.failure is not None, "the failure")
    committed = await probe.committed(app.id)
    assert sum(committed.values()) <= 20, committed
    assert first[:30] == list(range(30))

    again = make_app(app_id=app.id)
    numbers2 = again.topic(numbers.name, partitions=1)
    second: list[int] = []

    @again.agent(numbers2)
    async def collect(stream: AgentStream) -> None:
        async for batch in stream.take(10, within=0.1):
            second.extend(batch)

    async with running(again) as runtime:
        await probe.settle(runtime)
    assert second[0] <= 20 and second == list(range(second[0], 40))


async def test_exactly_once_covers_each_batch(make_app: Any, probe: Probe) -> None:
    """Under exactly-once, a batch's table writes and sends commit with its offsets: the
    read-committed output holds each value once and the windowed counts are exact."""
    app = make_app(config={"processing.guarantee": "exactly_once"})
    clicks = app.topic(topic_name(app, "clicks"), partitions=2)
    out = app.topic(topic_name(app, "out"), partitions=1)
    counts = app.Table("counts", default=int).tumbling(10, expires=3600)
    users = ["ann", "bob", "cy"]

    @app.agent(clicks)
    async def count(stream: AgentStream) -> None:
        async for batch in stream.take(7, within=0.1):
            for click in batch:
                counts[click["user"]] += 1
                out.send_soon(click["n"], key=click["user"])

    await probe.create_topic(out.name, 1)
    records = [(users[i % 3].encode(), orjson.dumps({"user": users[i % 3], "n": i}), T0 + (i % 4) * 5_000)
               for i in range(60)]
    async with running(app) as runtime:
        await probe.produce_many(clicks.name, records)
        await probe.settle(runtime)
        windows = {user: [(w.start - T0, n) for w, n in counts.windows(user)] for user in users}
    output = await probe.read(out.name, read_committed=True)
    assert sorted(orjson.loads(r.value) for r in output) == list(range(60))
    for u, user in enumerate(users):
        stamps = [(i % 4) * 5_000 for i in range(60) if i % 3 == u]
        expected = {start: sum(1 for s in stamps if start <= s < start + 10_000) for start in (0, 10_000)}
        assert windows[user] == sorted(expected.items())


async def test_windowed_tables_merge_a_batch_and_reads_see_it(make_app: Any, probe: Probe) -> None:
    """One key, one window, batches of up to 50: ``current()`` inside a batch sees the merged
    updates so far, the changelog ends with the full count, each value's event is the
    current one while the batch is iterated (none after), and filtered or undecodable
    records are acknowledged, not yielded."""
    app = make_app(config={"deserialization.exception.handler": "skip"})
    clicks = app.topic(topic_name(app, "clicks"), partitions=1)
    counts = app.Table("counts", default=int).tumbling(60, expires=3600)
    seen: list[int] = []
    events: list[Any] = []

    @app.agent(clicks)
    async def count(stream: AgentStream) -> None:
        async for batch in stream.filter(lambda v: v["n"] % 10 != 9).take(50, within=0.5):
            for _click in batch:
                events.append(current_event())
                counts["k"] += 1
                seen.append(counts["k"].current())
            events.append(current_event())

    values = [orjson.dumps({"n": i}) for i in range(55)]
    values[3] = b"not json"
    await probe.create_topic(clicks.name, 1)
    await probe.produce_many(clicks.name, [(b"k", v, T0 + 1_000) for v in values])
    async with running(app) as runtime:
        await probe.settle(runtime)
    kept = [i for i in range(55) if i != 3 and i % 10 != 9]
    assert seen == list(range(1, len(kept) + 1))
    assert [e.offset for e in events if e is not None] == kept
    assert events[-1] is None  # no current event after a batch's loop
    changelog = await probe.read(f"{app.id}-counts-changelog")
    window_records = [r for r in changelog if r.key is not None and r.key.startswith(b"\x00")]
    assert window_records and orjson.loads(window_records[-1].value) == len(kept)
