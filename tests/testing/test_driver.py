"""AppTestDriver: agents, DSL pipelines, tables, timers, late records, commits and restarts
of small apps declared here, run through the driver (no broker). Each test takes
milliseconds; the conformance suite (test_conformance.py) runs scenarios through a real
worker and broker as well."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel

import streamkit
from streamkit.streams.agent import AgentStream
from streamkit.streams.runtime import StartupError
from streamkit.testing import AppTestDriver, DriverError

MINUTE = 60_000
T0 = 1_700_000_000_000 // MINUTE * MINUTE


class View(BaseModel):
    user: str
    page: str


def counting_app(app_id: str = "counts", **config: object) -> streamkit.App:
    """An agent counting views per page in a table and sending each new count out."""
    app = streamkit.App(app_id, config={"num.partitions": 2, **config})
    views = app.topic("views", value_type=View)
    out = app.topic("counts", value_type=int)
    per_page = app.Table("per_page", default=int)

    @app.agent(views)
    async def count(stream: AgentStream) -> None:
        async for view in stream.group_by(lambda v: v.page, name="by_page"):
            per_page[view.page] += 1
            await out.send(key=view.page, value=per_page[view.page])

    return app


def window_app(app_id: str = "windows", **config: object) -> streamkit.App:
    """Views per page in tumbling minutes, one final result per window, on one partition."""
    app = streamkit.App(app_id, config={"num.partitions": 1, **config})
    views = app.topic("views", value_type=View, partitions=1)
    (app.stream(views)
        .group_by(lambda v: v.page, name="by_page")
        .window(streamkit.tumbling(minutes=1), grace=timedelta(seconds=10))
        .count(name="page-counts")
        .final()
        .to("page_counts"))
    return app


def test_a_record_is_processed_when_send_returns() -> None:
    app = counting_app()
    with AppTestDriver(app) as driver:
        views = driver.input("views")
        views.send(View(user="ann", page="/a"), key="ann")
        assert driver.table("per_page")["/a"] == 1
        views.send({"user": "bob", "page": "/a"}, key="bob")
        views.send({"user": "bob", "page": "/b"}, key="bob")
        assert driver.table("per_page")["/a"] == 2
        assert [(r.key, r.value) for r in driver.output("counts").read_all()] == [("/a", 1), ("/a", 2), ("/b", 1)]
        assert driver.output("counts").read_all() == []  # each record once
        with pytest.raises(KeyError):
            driver.table("per_page")["/nowhere"]


def test_send_many_keeps_timestamps_headers_and_partitions() -> None:
    app = streamkit.App("echo", config={"num.partitions": 3})
    src = app.topic("src", value_type=str)
    dst = app.topic("dst", value_type=dict)

    @app.agent(src)
    async def echo(stream: AgentStream) -> None:
        async for ev in stream.events():
            dst.send_soon(key=ev.key, value={"v": ev.value, "p": ev.partition, "o": ev.offset,
                                             "h": {k: v.decode() for k, v in ev.headers}},
                          timestamp=ev.timestamp)

    with AppTestDriver(app) as driver:
        placed = driver.input("src").send_many([
            {"value": "x", "key": "k1", "timestamp": T0, "headers": {"trace": "t1"}, "partition": 2},
            {"value": "y", "timestamp": T0 + 5, "partition": 0},
        ])
        assert placed == [(2, 0), (0, 0)]
        out = driver.output("dst")
        first = out.read_one()
        assert first is not None and first.key == "k1" and first.timestamp == T0
        assert first.value == {"v": "x", "p": 2, "o": 0, "h": {"trace": "t1"}}
        second = out.read_one()
        assert second is not None and second.value["v"] == "y" and second.timestamp == T0 + 5
        assert out.read_one() is None
        with pytest.raises(TypeError, match="unknown argument"):
            driver.input("src").send_many([{"value": "z", "ts": 1}])


def test_window_results_look_as_on_the_topic_and_late_records_are_reported() -> None:
    app = window_app()
    with AppTestDriver(app, start_time_ms=T0) as driver:
        views = driver.input("views")
        for i, page in enumerate(["/a", "/a", "/b"]):
            views.send({"user": "u", "page": page}, key="u", timestamp=T0 + i * 1000)
        assert driver.output("page_counts").read_all() == []  # the minute is still open
        assert driver.table("page-counts")["/a"] == [{"start": T0, "end": T0 + MINUTE, "value": 2}]
        views.send({"user": "u", "page": "/c"}, key="u", timestamp=T0 + MINUTE + 10_000)  # past end + grace
        results = {r.key: r.value for r in driver.output("page_counts").read_all()}
        assert results == {"/a": {"key": "/a", "start": T0, "end": T0 + MINUTE, "value": 2},
                           "/b": {"key": "/b", "start": T0, "end": T0 + MINUTE, "value": 1}}
        views.send({"user": "late", "page": "/a"}, key="u", timestamp=T0 + 30_000)
        late = driver.late("page-counts")
        assert [(e.key, e.value.user, e.timestamp) for e in late] == [("/a", "late", T0 + 30_000)]
        assert driver.output("page_counts").read_all() == []


def test_timers_fire_on_the_virtual_clock_after_their_first_interval() -> None:
    app = streamkit.App("ticks")
    ticks = app.topic("ticks", value_type=int)
    fired: list[int] = []

    @app.timer(10)
    async def tick() -> None:
        fired.append(len(fired))
        await ticks.send(value=len(fired))

    with AppTestDriver(app, start_time_ms=T0) as driver:
        driver.advance_time(9.999)
        assert fired == []
        driver.advance_time(0.001)
        assert fired == [0]
        driver.advance_time(25)
        assert fired == [0, 1, 2]
        assert [(r.value, r.timestamp) for r in driver.output("ticks").read_all()] == [
            (1, T0 + 10_000), (2, T0 + 20_000), (3, T0 + 30_000)]


def test_idle_partitions_close_windows_as_time_passes() -> None:
    app = window_app("idle", **{"window.idle.close.ms": 5000})
    with AppTestDriver(app, start_time_ms=T0) as driver:
        driver.input("views").send({"user": "u", "page": "/a"}, key="u", timestamp=T0)
        driver.advance_time(4)
        assert driver.output("page_counts").read_all() == []
        driver.advance_time(80)  # idle for window.idle.close.ms: stream time follows the clock
        assert [r.value for r in driver.output("page_counts").read_all()] == [
            {"key": "/a", "start": T0, "end": T0 + MINUTE, "value": 1}]


def test_restart_under_at_least_once_restores_tables_and_repeats_uncommitted_effects() -> None:
    app = counting_app("alos")
    with AppTestDriver(app) as driver:
        views = driver.input("views")
        views.send({"user": "ann", "page": "/a"}, key="ann")
        driver.commit()
        views.send({"user": "bob", "page": "/a"}, key="bob")
        assert driver.table("per_page")["/a"] == 2
        driver.restart()  # crash after the commit: the table is back at 1, bob's view is read again
        # At-least-once: what the lost attempt produced was delivered (its count, and bob's
        # view on the repartition topic), and the view is repartitioned a second time.
        assert driver.table("per_page")["/a"] == 3
        assert [r.value for r in driver.output("counts").read_all()] == [1, 2, 2, 3]


@pytest.mark.parametrize("guarantee", ["exactly_once", "exactly_once_v2"])
def test_restart_under_exactly_once_aborts_what_was_not_committed(guarantee: str) -> None:
    app = counting_app("eos")
    with AppTestDriver(app, config={"processing.guarantee": guarantee}) as driver:
        views = driver.input("views")
        views.send({"user": "ann", "page": "/a"}, key="ann")
        driver.commit()
        views.send({"user": "bob", "page": "/a"}, key="bob")
        committed = driver.output("counts", read_committed=True)
        assert [r.value for r in committed.read_all()] == [1]
        driver.restart()
        assert driver.table("per_page")["/a"] == 2
        driver.commit()
        assert [r.value for r in committed.read_all()] == [2]
        assert driver.aborted("counts") == 1


def test_advance_time_commits_every_commit_interval() -> None:
    app = counting_app("interval", **{"commit.interval.ms": 1000})
    with AppTestDriver(app) as driver:
        driver.input("views").send({"user": "ann", "page": "/a"}, key="ann")
        driver.advance_time(0.5)
        assert driver.committed().get(("views", driver.log.partition_for("views", b"ann", None))) is None
        driver.advance_time(0.5)
        assert ("views", driver.log.partition_for("views", b"ann", None)) in driver.committed()
        driver.restart()
        assert driver.table("per_page")["/a"] == 1


def test_rocksdb_stores_survive_a_restart(tmp_path: Path) -> None:
    app = counting_app("rocks")
    with AppTestDriver(app, config={"state.dir": str(tmp_path)}, store="rocksdb") as driver:
        driver.input("views").send({"user": "ann", "page": "/a"}, key="ann")
        driver.commit()
        driver.restart()
        assert driver.table("per_page")["/a"] == 1
    assert any((tmp_path / "rocks" / "per_page").iterdir())


def test_a_failing_agent_is_named_with_the_record_at_fault() -> None:
    app = streamkit.App("fails", config={"num.partitions": 1})
    src = app.topic("src", value_type=int)

    @app.agent(src)
    async def invert(stream: AgentStream) -> None:
        async for n in stream:
            _ = 1 / n

    with AppTestDriver(app) as driver:
        driver.input("src").send(1)
        with pytest.raises(DriverError, match=r"agent 'invert' failed on record src-0@1 .*ZeroDivisionError"):
            driver.input("src").send(0)
        with pytest.raises(DriverError, match="invert"):
            driver.input("src").send(2)  # the app is stopped, as a worker would be


def test_an_agent_waiting_on_something_else_is_named() -> None:
    app = streamkit.App("stuck", config={"num.partitions": 1})
    src = app.topic("src", value_type=int)

    @app.agent(src)
    async def sleepy(stream: AgentStream) -> None:
        async for _n in stream:
            await asyncio.sleep(3600)

    with AppTestDriver(app) as driver, \
            pytest.raises(DriverError, match=r"agent 'sleepy' has not finished with record src-0@0"):
        driver.input("src").send(1)


def test_bad_records_go_to_the_dead_letter_topic() -> None:
    app = counting_app("bad")
    with AppTestDriver(app) as driver:
        driver.input("views").send_raw(b'{"user": "ann"}', key=b"ann")  # no page: View refuses it
        dead = driver.output(app.settings.dead_letter_topic_name or "")
        (record,) = dead.read_all()
        assert record.headers["__streams.errors.topic"] == b"views"


def test_the_app_is_given_back_as_declared() -> None:
    app = counting_app("given-back")
    settings = app.settings
    with AppTestDriver(app, config={"num.partitions": 3, "processing.guarantee": "exactly_once"}) as driver:
        assert app.settings.exactly_once and app.runtime is not None
        driver.input("views").send({"user": "ann", "page": "/a"}, key="ann")
    assert app.settings is settings and app.runtime is None
    assert app.tables["per_page"].store_kind == "rocksdb"
    with AppTestDriver(app) as driver:  # and runs again, from nothing
        driver.input("views").send({"user": "ann", "page": "/a"}, key="ann")
        assert driver.table("per_page")["/a"] == 1


def test_unknown_names_are_refused_with_what_exists() -> None:
    app = counting_app("names")
    with AppTestDriver(app) as driver:
        with pytest.raises(KeyError, match=r"topics: .*views"):
            driver.input("nope")
        with pytest.raises(KeyError, match=r"tables: .*per_page"):
            driver.table("nope")["x"]


def test_global_tables_are_refused_at_start() -> None:
    app = streamkit.App("globals")
    app.GlobalTable("everywhere")
    with pytest.raises(StartupError, match="global tables"):
        AppTestDriver(app)
    assert app.runtime is None


def test_a_failing_pipeline_or_timer_is_named_with_where_it_failed() -> None:
    app = streamkit.App("dsl-fails", config={"num.partitions": 1})
    src = app.topic("src", value_type=int)
    app.stream(src).map(lambda n: 10 // n).to("out")

    @app.timer(5)
    async def broken() -> None:
        raise RuntimeError("no service")

    with AppTestDriver(app) as driver:
        driver.input("src").send(5)
        assert [r.value for r in driver.output("out").read_all()] == [2]
        with pytest.raises(DriverError, match=r"processing src-0@1 in the DSL pipelines failed: ZeroDivisionError"):
            driver.input("src").send(0)
        # Nothing was committed: the restarted app reads both records again, in one batch.
        with pytest.raises(DriverError, match=r"processing src-0@0\.\.1 in the DSL pipelines failed"):
            driver.restart()
    with AppTestDriver(app) as driver, pytest.raises(DriverError, match=r"timer 'broken' failed .*no service"):
        driver.advance_time(5)
