"""The worker runtime in the test's loop: what a commit contains, the web endpoints, and
rebalances between two workers of one app running side by side in one event loop."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import streamkit
from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.streams.runtime import Runtime, StartupError
from streamkit.streams.topic import partition_for_key
from streamkit.testing import BrokerProcess, metric_value

from .conftest import Probe, eventually, running

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000_000


async def http_get(port: int, path: str, method: str = "GET") -> tuple[int, str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    content_type = next((line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("content-type")), "")
    return int(lines[0].split(" ")[1]), content_type, body


# -- commits -------------------------------------------------------------------------------


async def test_a_commit_is_a_consistent_cut(make_app: Any, probe: Probe) -> None:
    """After a commit, the changelog holds exactly the table's state and the committed
    offsets are exactly the processed records: what a restart would start from."""
    app = make_app(config={"commit.interval.ms": 60_000})  # only explicit commits
    topic = app.topic(f"{app.id}-in", value_type=int, partitions=2)
    totals = app.Table("totals", default=int)
    release = asyncio.Event()
    processed: list[int] = []

    @app.agent(topic)
    async def add(stream: AgentStream) -> None:
        async for event in stream.events():
            if event.value < 0:
                await release.wait()  # an event in progress: the commit must wait for it
            totals[event.key] += event.value
            processed.append(event.value)

    async with running(app) as runtime:
        for v in (1, 2, 3):
            await topic.send(v, key="a")
        await eventually(lambda: len(processed) == 3, "three records")
        assert await probe.latest(totals.changelog.name) == {}  # nothing committed yet
        await runtime.commit()
        assert await probe.latest(totals.changelog.name) == {b"a": b"6"}
        committed = await probe.committed(app.id)
        assert sum(committed.values()) == 3

        await topic.send(-10, key="a")
        await eventually(lambda: runtime.gate._busy == 1, "the agent to hold the negative record")
        commit = asyncio.ensure_future(runtime.commit())
        await asyncio.sleep(0.2)  # the commit must still be waiting for the event in progress
        assert not commit.done()
        release.set()
        await asyncio.wait_for(commit, 10)
        assert await probe.latest(totals.changelog.name) == {b"a": b"-4"}
        assert sum((await probe.committed(app.id)).values()) == 4
        assert runtime.metrics.commits >= 2


async def test_stop_commits_and_a_restart_goes_on_exactly(make_app: Any, probe: Probe) -> None:
    def build(app: App) -> tuple[Any, Any]:
        topic = app.topic(f"{app.id}-in", value_type=int, partitions=4)
        totals = app.Table("totals", default=int)

        @app.agent(topic)
        async def add(stream: AgentStream) -> None:
            async for event in stream.events():
                totals[event.key] += event.value

        return topic, totals

    app = make_app()
    topic, _ = build(app)
    async with running(app) as runtime:
        await probe.produce_many(topic.name, [(f"k{i % 9}".encode(), b"1", None) for i in range(3000)])
        await eventually(lambda: sum(runtime.metrics.consumed_total.values()) >= 1000, "some progress")
    # Stopped mid-stream (the stop committed what was processed); the next run finishes.
    again = make_app(app_id=app.id, data_dir=app.data_dir)
    _, totals = build(again)
    async with running(again) as runtime:
        await probe.settle(runtime)
        assert dict(totals.items()) == {f"k{i}": len(range(i, 3000, 9)) for i in range(9)}


async def test_an_agent_that_fails_at_start_is_a_startup_error(make_app: Any) -> None:
    app = make_app()

    @app.agent(f"{app.id}-in")
    async def broken(stream: AgentStream) -> None:
        raise RuntimeError("misconfigured")

    with pytest.raises(StartupError, match="an agent failed at start: RuntimeError\\('misconfigured'\\)"):
        await app.start()
    assert app.runtime is None


async def test_an_app_without_inputs_runs_its_timers(make_app: Any) -> None:
    app = make_app()
    fired = asyncio.Event()
    out = app.topic(f"{app.id}-ticks", partitions=1)

    @app.timer(0.05)
    async def tick() -> None:
        await out.send("tick", key="t")
        fired.set()

    async with running(app) as runtime:
        await asyncio.wait_for(fired.wait(), 10)
        assert runtime.assigned == set()


# -- web endpoints -------------------------------------------------------------------------


async def test_web_endpoints(make_app: Any, probe: Probe) -> None:
    app = make_app()
    topic = app.topic(f"{app.id}-in", value_type=int, partitions=4)
    counts = app.Table("counts", default=int)
    hourly = app.Table("hourly", default=int).tumbling(3600)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            counts[event.key] += event.value
            hourly[event.key] += event.value

    async with running(app, web_port=0) as runtime:
        port = runtime.web.port
        for key, value in (("a", 1), ("b", 2), ("a", 3)):
            await topic.send(value, key=key, timestamp=T0)
        await probe.settle(runtime)

        status, ctype, body = await http_get(port, "/health")
        health = orjson.loads(body)
        assert (status, ctype) == (200, "application/json")
        assert health["status"] == "ok" and health["app"] == app.id
        assert sorted(health["partitions"]) == sorted(f"{topic.name}-{p}" for p in range(4))

        assert orjson.loads((await http_get(port, "/tables/counts"))[2]) == {"a": 4, "b": 2}
        assert len(orjson.loads((await http_get(port, "/tables/counts?limit=1"))[2])) == 1
        assert orjson.loads((await http_get(port, "/tables/counts/a"))[2]) == {"key": "a", "value": 4}
        status, _, body = await http_get(port, "/tables/counts/zzz")
        assert status == 404 and b"zzz" in body
        status, _, body = await http_get(port, "/tables/nope")
        assert status == 404 and b"no table named 'nope'" in body
        hour = T0 - T0 % 3_600_000
        assert orjson.loads((await http_get(port, "/tables/hourly/a"))[2]) == {
            "key": "a", "value": [{"start": hour, "end": hour + 3_600_000, "value": 4}]}
        status, _, body = await http_get(port, "/tables/counts?limit=lots")
        assert status == 400 and b"limit must be a positive integer" in body
        status, ctype, body = await http_get(port, "/")
        index = orjson.loads(body)
        assert (status, ctype, index["app"]) == (200, "application/json", app.id)
        assert {"/health", "/metrics", "/tables/{name}", "/tables/{name}/{key}"} <= set(index["endpoints"])
        assert index["tables"]["counts"]["queryable"] is True
        assert "TumblingWindows(size_ms=3600000)" in index["tables"]["hourly"]["kind"]
        status, _, body = await http_get(port, "/nowhere")
        assert (status, orjson.loads(body)) == (404, {"error": "no route for /nowhere"})
        status, _, body = await http_get(port, "/health", method="POST")
        assert (status, orjson.loads(body)) == (405, {"error": "only GET is supported"})

        status, ctype, body = await http_get(port, "/metrics")
        text = body.decode()
        assert status == 200 and ctype.startswith("text/plain")
        p_a = partition_for_key(b"a", 4)
        in_p_a = 2 + (partition_for_key(b"b", 4) == p_a)
        where = {"app": app.id, "topic": topic.name, "partition": str(p_a)}
        assert metric_value(text, "streamkit_records_consumed_total", **where) == in_p_a
        assert metric_value(text, "streamkit_consumer_lag", **where) == 0
        assert metric_value(text, "streamkit_events_processed_total", app=app.id) == 3
        assert metric_value(text, "streamkit_late_records_total", app=app.id) == 0
        assert metric_value(text, "streamkit_restore_records", app=app.id, table="counts", partition="0",
                            kind="total") is not None
        # lag() covers the partitions whose end the consumer has seen in a fetch response.
        lag = runtime.lag()
        assert (topic.name, p_a) in lag and set(lag) <= {(topic.name, p) for p in range(4)}
        assert set(lag.values()) == {0}


# -- rebalances between two workers in one loop -----------------------------------------


async def _share(workers: list[Runtime], topic: str, partitions: int) -> None:
    everything = {(topic, p) for p in range(partitions)}

    def split() -> bool:
        owned = [{tp for tp in w.assigned if tp[0] == topic} for w in workers]
        return (all(owned) and set().union(*owned) == everything and sum(map(len, owned)) == partitions
                and not any(w.tasks.restores for w in workers))

    await eventually(split, f"{len(workers)} workers to share {topic}", timeout=30)


async def test_window_stream_time_survives_a_partition_moving_away_and_back(make_app: Any, probe: Probe,
                                                                            tmp_path: Path) -> None:
    """Worker 1 owns both partitions; worker 2 joins and takes one, advances its stream time
    (closing a window), then leaves: the partition comes back to worker 1, which must go on
    from the stream time worker 2 reached, not from what it had seen itself. Otherwise a
    record that is late is accepted, and the closed window is emitted a second time."""
    def build(app: App) -> Any:
        source = app.topic(f"{app.id}-in", value_type=int, partitions=2)
        (app.stream(source).window(streamkit.tumbling(ms=100)).count(name="c").final()
            .to(f"{app.id}-counts"))
        return source

    keys = [next(f"k{i}" for i in range(100) if partition_for_key(f"k{i}".encode(), 2) == p) for p in (0, 1)]
    w1 = make_app(data_dir=tmp_path / "w1")
    source = build(w1)
    w2 = make_app(app_id=w1.id, data_dir=tmp_path / "w2")
    build(w2)

    async def send_all(ts: int) -> None:
        await probe.produce_many(source.name, [(k.encode(), b"1", T0 + ts) for k in keys])

    async def caught_up() -> None:
        await eventually(lambda: probe.caught_up(w1.id, [source.name]), "both inputs committed", timeout=30)

    async with running(w1) as r1:
        await send_all(10)
        await send_all(150)  # closes [0, 100)
        await probe.settle(r1)
        async with running(w2) as r2:
            await _share([r1, r2], source.name, 2)
            await send_all(500)  # closes [100, 200) on both workers
            await caught_up()
            await eventually(lambda: r1.metrics.commits and r2.metrics.commits, "commits")
        # Worker 2 left (it committed on its way out): worker 1 has both partitions again.
        await _share([r1], source.name, 2)
        late_before = r1.metrics.late_records
        await send_all(160)  # late on both partitions: [100, 200) closed at stream time 500
        await send_all(900)  # closes [500, 600)
        await caught_up()
        assert r1.metrics.late_records - late_before == 2
    outs = [(r.key.decode(), orjson.loads(r.value)) for r in await probe.read(f"{w1.id}-counts")]
    for key in keys:
        assert [(v["start"] - T0, v["value"]) for k, v in outs if k == key] == [(0, 1), (100, 1), (500, 1)], key


async def test_stopping_during_restores_leaks_no_consumer(make_app: Any) -> None:
    """Restores are cancelled when the worker stops (or loses the partition): one cancelled
    while its changelog consumer is still connecting must still close that consumer."""
    leaked: list[str] = []
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        leaked.append(f"{unraisable.exc_value!r}")

    sys.unraisablehook = hook
    try:
        for _ in range(3):
            app = make_app()
            app.Table("t1", default=int)
            app.Table("t2", default=int)

            @app.agent(f"{app.id}-in")
            async def noop(stream: AgentStream) -> None:
                async for _ in stream:
                    pass

            runtime = await app.start()
            await eventually(lambda: runtime.tasks.restores, "restores to start", interval=0.001)  # noqa: B023
            await runtime.stop()
            assert runtime.failure is None
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0)
    finally:
        sys.unraisablehook = previous
    assert not [m for m in leaked if "Unclosed" in m], leaked


async def test_a_stop_racing_the_first_assignment_is_clean(make_app: Any) -> None:
    """A worker stopped right after its start, while its first assignment completes: the
    stop is clean (no failure reported), and nothing it began outlives it (no restore
    running on against the closed store, no committed-offsets lookup retrying through the
    closed consumer)."""
    for delay_s in (0, 0, 0.001, 0.003, 0.005, 0.01, 0.02, 0.05):
        app = make_app()
        app.Table("counts", default=int).tumbling(10)

        @app.agent(f"{app.id}-in")
        async def noop(stream: AgentStream) -> None:
            async for _ in stream:
                pass

        runtime = await app.start()
        await asyncio.sleep(delay_s)
        await runtime.stop()
        await asyncio.sleep(0.05)  # what outlived stop() runs into the closed store now
        assert runtime.failure is None, f"stopped after {delay_s}s: {runtime.failure!r}"
        left = [t.get_name() for t in asyncio.all_tasks()
                if t.get_name().startswith(("restore-", "streamkit-committed")) and not t.done()]
        assert not left, f"stopped after {delay_s}s, still running: {left}"


async def test_tables_stay_with_their_task_when_inputs_have_different_partition_counts(
        make_app: Any, probe: Probe, tmp_path: Path) -> None:
    """A table fed by a 4-partition topic, next to a 2-partition input. Task p is partition p
    of every input: each worker owns exactly the table partitions of the 4-partition input's
    partitions it reads. (With the range assignor each topic was split on its own: one worker
    got partition 1 of the 2-partition topic and restored table partition 1, which the other
    one updated, then served its stale copy from /tables.)"""
    def build(app: App) -> tuple[Any, Any, Any]:
        four = app.topic(f"{app.id}-four", value_type=int, partitions=4)
        two = app.topic(f"{app.id}-two", value_type=int, partitions=2)
        counts = app.Table("counts", default=int)

        @app.agent(four)
        async def count(stream: AgentStream) -> None:
            async for event in stream.events():
                counts[event.key] += event.value

        @app.agent(two)
        async def other(stream: AgentStream) -> None:
            async for _ in stream:
                pass

        return four, two, counts

    w1 = make_app(data_dir=tmp_path / "w1")
    four, two, c1 = build(w1)
    w2 = make_app(app_id=w1.id, data_dir=tmp_path / "w2")
    _, _, c2 = build(w2)
    keys = [next(f"k{i}" for i in range(100) if partition_for_key(f"k{i}".encode(), 4) == p) for p in range(4)]
    async with running(w1, web_port=0) as r1, running(w2, web_port=0) as r2:
        await _share([r1, r2], four.name, 4)
        await eventually(lambda: {tp for r in (r1, r2) for tp in r.assigned if tp[0] == two.name}
                         == {(two.name, 0), (two.name, 1)}, "the 2-partition topic to be assigned")
        for runtime, table in ((r1, c1), (r2, c2)):
            tasks = {p for t, p in runtime.assigned if t == four.name}
            assert {p for _t, p in runtime.assigned} == tasks, "partition p of each input on one worker"
            await eventually(lambda: table.owned_partitions() == sorted(tasks),  # noqa: B023
                             "the table partitions of its tasks, and only those")
        for round_ in (1, 2):
            await probe.produce_many(four.name, [(k.encode(), b"1", None) for k in keys])
            await eventually(lambda: probe.caught_up(w1.id, [four.name]), "the records to be committed")
            for runtime in (r1, r2):
                for key in keys:
                    status, _, body = await http_get(runtime.web.port, f"/tables/counts/{key}")
                    assert (status, orjson.loads(body)) == (200, {"key": key, "value": round_}), (key, body)


async def test_consumer_lag_starts_from_the_group_offsets_after_a_restart(make_app: Any, probe: Probe) -> None:
    """/metrics lag of a restarted worker: end offset minus the group's committed offset,
    not minus 0 (it only knew the offsets it had committed itself)."""
    first = make_app()
    topic = first.topic(f"{first.id}-in", value_type=int, partitions=1)

    @first.agent(topic)
    async def drain(stream: AgentStream) -> None:
        async for _ in stream:
            pass

    async with running(first) as runtime:
        await probe.produce_many(topic.name, [(b"k", b"1", None)] * 30)
        await probe.settle(runtime)
    await probe.produce_many(topic.name, [(b"k", b"1", None)] * 5)  # while no worker runs

    again = make_app(app_id=first.id, data_dir=first.data_dir)
    again.topic(topic.name, value_type=int, partitions=1)
    hold = asyncio.Event()

    @again.agent(topic.name)
    async def stuck(stream: AgentStream) -> None:
        async for _ in stream:
            await hold.wait()  # nothing more gets committed while the lag is read

    async with running(again, web_port=0) as runtime:
        await eventually(lambda: runtime.lag() == {(topic.name, 0): 5}, "the lag to be 5", timeout=20)
        _, _, body = await http_get(runtime.web.port, "/metrics")
        assert metric_value(body.decode(), "streamkit_consumer_lag", app=again.id, topic=topic.name,
                            partition="0") == 5
        hold.set()


async def test_the_write_cache_is_committed_when_it_exceeds_its_size(make_app: Any, probe: Probe) -> None:
    """statestore.cache.max.bytes: once the tables' write caches hold more, the worker commits
    (state to the stores and changelogs, offsets) without waiting for commit.interval.ms. A
    key written again counts once, with its latest value."""
    app = make_app(config={"commit.interval.ms": 600_000, "statestore.cache.max.bytes": 2500})
    topic = app.topic(f"{app.id}-in", value_type=str, partitions=1)
    table = app.Table("t", default=str)
    processed: list[str] = []

    @app.agent(topic)
    async def keep(stream: AgentStream) -> None:
        async for event in stream.events():
            table[event.key] = event.value
            processed.append(event.key)

    keys = [f"k{i}" for i in range(200) if partition_for_key(f"k{i}".encode(), 4) == 0][:3]
    async with running(app) as runtime:
        # One key, rewritten five times with 1000 bytes: about 1 kB cached, no commit.
        await probe.produce_many(topic.name, [(keys[0].encode(), b"w" * 1000, None)] * 5)
        await eventually(lambda: len(processed) == 5, "five records")
        assert 1000 < table.cache_bytes() < 1100
        await asyncio.sleep(0.5)
        assert runtime.metrics.commits == 0 and await probe.latest(table.changelog.name) == {}
        # Two more keys: 3 kB, over the limit.
        await probe.produce_many(topic.name, [(k.encode(), b"x" * 1000, None) for k in keys[1:]])
        await eventually(lambda: runtime.metrics.commits >= 1, "a commit of the full cache", timeout=10)
        assert table.cache_bytes() == 0
        assert set(await probe.latest(table.changelog.name)) == {k.encode() for k in keys}
        assert sum((await probe.committed(app.id)).values()) == 7


async def test_table_keys_in_urls_are_parsed_with_the_key_type(make_app: Any, probe: Probe) -> None:
    """/tables/{name}/{key} of a key_type=int table takes /tables/t/42 (every key was looked
    up as the string "42" and missed); a key that does not parse is a 400 with a JSON body."""
    app = make_app()
    topic = app.topic(f"{app.id}-in", key_type=int, value_type=int, partitions=4)
    by_id = app.Table("by_id", key_type=int, default=int)
    names = app.Table("names", default=str)

    @app.agent(topic)
    async def keep(stream: AgentStream) -> None:
        async for event in stream.events():
            by_id[event.key] += event.value

    async with running(app, web_port=0) as runtime:
        port = runtime.web.port
        for key in (42, 7, -3):
            await topic.send(key * 10, key=key)
        await probe.settle(runtime)
        for key in (42, 7, -3):
            status, ctype, body = await http_get(port, f"/tables/by_id/{key}")
            assert (status, orjson.loads(body)) == (200, {"key": key, "value": key * 10})
        status, ctype, body = await http_get(port, "/tables/by_id/8")
        assert status == 404
        status, ctype, body = await http_get(port, "/tables/by_id/forty-two")
        assert (status, ctype) == (400, "application/json")
        assert "'forty-two' is not a key of table 'by_id'" in orjson.loads(body)["error"]
        # str keys take any text, escaped or not
        assert (await http_get(port, "/tables/names/a%2Fb%20c"))[0] == 404
        assert names.queryable


async def test_error_topics_are_created_when_the_broker_does_not_auto_create(tmp_path: Path) -> None:
    """Apache Kafka clusters often run with auto.create.topics.enable=false: the dead-letter
    and late-records topics are created at start like the other topics the app needs, and a
    bad record and a late one reach them."""
    broker = BrokerProcess(tmp_path / "broker", {"auto.create.topics.enable": "false"}).start()
    probe = Probe(broker.bootstrap)
    try:
        await probe.start()
        app = App("no-auto-create", broker=broker.bootstrap, data_dir=tmp_path / "app", config={
            "commit.interval.ms": 100, "linger.ms": 1, "deserialization.exception.handler": "dead_letter",
            "late.records.topic.name": "late-records"})
        numbers = app.topic("numbers", value_type=int, partitions=1)
        (app.stream(numbers).window(streamkit.tumbling(ms=100)).count(name="c").final().to("counts"))
        async with running(app) as runtime:
            topics = set(await probe.admin.list_topics())
            assert {"no-auto-create-dead-letter", "late-records"} <= topics
            await probe.produce("numbers", b"not a number", key=b"k", timestamp=T0)
            await probe.produce("numbers", b"1", key=b"k", timestamp=T0 + 1000)
            await probe.produce("numbers", b"2", key=b"k", timestamp=T0)  # its window closed: late
            await probe.settle(runtime)
            dead = await probe.read("no-auto-create-dead-letter")
            assert [r.value for r in dead] == [b"not a number"]
            late = await probe.read("late-records")
            assert [r.value for r in late] == [b"2"]
            assert runtime.metrics.late_records == 1
    finally:
        await probe.close()
        broker.stop()
