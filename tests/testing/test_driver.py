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
        with pytest.raises(DriverError, match=r"agent 'invert' failed on record src-0@1 .*ZeroDivisionError.* "
                                              r"\(raised in invert at .*test_driver\.py:\d+\)"):
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
        with pytest.raises(DriverError, match=r"processing src-0@1 in the DSL pipelines failed: ZeroDivisionError.* "
                                              r"\(raised in <lambda> at .*test_driver\.py:\d+\)"):
            driver.input("src").send(0)
        # Nothing was committed: the restarted app reads both records again, in one batch.
        with pytest.raises(DriverError, match=r"processing src-0@0\.\.1 in the DSL pipelines failed"):
            driver.restart()
    with AppTestDriver(app) as driver, pytest.raises(DriverError, match=r"timer 'broken' failed .*no service \(raised in broken at "):
        driver.advance_time(5)


def batch_app(app_id: str = "batches") -> streamkit.App:
    """An agent summing ``take(3, within=5)`` batches of numbers into ``sums``."""
    app = streamkit.App(app_id, config={"num.partitions": 1})
    numbers = app.topic("numbers", value_type=int)
    sums = app.topic("sums", value_type=int)

    @app.agent(numbers)
    async def summed(stream: AgentStream) -> None:
        async for batch in stream.take(3, within=5):
            await sums.send(value=sum(batch))

    return app


def test_take_batches_are_handed_over_when_full_or_when_within_passes_on_the_virtual_clock() -> None:
    with AppTestDriver(batch_app(), start_time_ms=T0) as driver:
        driver.input("numbers").send_many([{"value": n} for n in range(1, 8)])
        sums = driver.output("sums")
        assert [r.value for r in sums.read_all()] == [6, 15]  # two full batches; 7 waits
        driver.advance_time(4.999)
        assert sums.read_all() == []
        driver.input("numbers").send(10)  # joins the open batch (its within runs from 7's arrival)
        driver.advance_time(0.001)
        assert [(r.value, r.timestamp) for r in sums.read_all()] == [(17, T0 + 5000)]
        driver.input("numbers").send(1)
        driver.advance_time(60)
        assert [r.value for r in sums.read_all()] == [1]


def test_a_partial_take_batch_is_not_committed_and_is_read_again_after_a_restart() -> None:
    with AppTestDriver(batch_app("batches-restart"), start_time_ms=T0) as driver:
        driver.input("numbers").send_many([{"value": n} for n in (1, 2, 3, 4)])
        driver.commit()  # 1-3 processed and committed; 4 is still being collected
        assert driver.committed() == {("numbers", 0): 3}
        driver.restart()
        driver.input("numbers").send(5)
        driver.advance_time(5)
        assert [r.value for r in driver.output("sums").read_all()] == [6, 9]


def test_a_windowed_table_s_now_is_the_virtual_clock() -> None:
    app = streamkit.App("now", config={"num.partitions": 1})
    views = app.topic("views", value_type=str)
    seen = app.topic("seen", value_type=int)
    per_minute = app.Table("per_minute", default=int).tumbling(60, expires=3600)

    @app.agent(views)
    async def count(stream: AgentStream) -> None:
        async for page in stream:
            per_minute[page] += 1

    @app.timer(60)
    async def report() -> None:
        await seen.send(key="/a", value=per_minute["/a"].now())

    with AppTestDriver(app, start_time_ms=T0 + 1000) as driver:
        driver.input("views").send("/a", timestamp=T0 + 61_500)  # in the window the first timer sees
        driver.input("views").send("/a", timestamp=T0 + 1000)
        driver.advance_time(60)  # virtual now T0 + 61 s: the second minute holds one view
        assert [r.value for r in driver.output("seen").read_all()] == [1]


def test_the_driver_processes_with_the_worker_s_gc_threshold_and_gives_the_test_s_back() -> None:
    import gc

    from streamkit.streams.worker import young_gc_threshold

    app = streamkit.App("gc", config={"num.partitions": 1})
    src = app.topic("src", value_type=int)
    seen: list[int] = []

    @app.agent(src)
    async def look(stream: AgentStream) -> None:
        async for _n in stream:
            seen.append(gc.get_threshold()[0])

    saved = gc.get_threshold()
    gc.set_threshold(123, 7, 9)
    try:
        with AppTestDriver(app) as driver:
            driver.input("src").send_many([{"value": 1}, {"value": 2}])
            assert seen == [young_gc_threshold(app.settings.max_poll_records)] * 2
            assert gc.get_threshold() == (123, 7, 9)
        assert gc.get_threshold() == (123, 7, 9)
    finally:
        gc.set_threshold(*saved)


@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_windowed_updates_without_reads_between_reach_queries_updates_the_changelog_and_expiry(store: str) -> None:
    """Runs of ``+=`` on a windowed table with nothing reading the windows in between (the
    per-record path keeps a cached window's aggregate and writes it once per commit): an
    ``apply`` right after them, a query, the changelog (a restart restores it) and expiry
    (an expired window stays deleted, in the store and after a restore) all see every update."""
    app = streamkit.App("wcounts", config={"num.partitions": 1})
    ops = app.topic("ops", value_type=dict)
    per_minute = app.Table("per_minute", default=int).tumbling(60, expires=60)

    @app.agent(ops)
    async def count(stream: AgentStream) -> None:
        async for op in stream:
            if op["op"] == "add":
                per_minute[op["page"]] += op["n"]
            else:
                per_minute[op["page"]].apply(lambda v: v * 10)

    def windows(page: str) -> list[tuple[int, int]]:
        return [(w["start"] - T0, w["value"]) for w in driver.table("per_minute").get(page, [])]

    with AppTestDriver(app, store=store, start_time_ms=T0) as driver:
        src = driver.input("ops")
        src.send_many([{"value": {"op": "add", "page": "/a", "n": 1}, "key": "/a", "timestamp": T0 + 1_000 + i}
                       for i in range(5)])
        assert windows("/a") == [(0, 5)]  # a query sees the cached updates
        src.send_many([{"value": {"op": "add", "page": "/b", "n": 2}, "key": "/b", "timestamp": T0 + 2_000 + i}
                       for i in range(3)])
        src.send({"op": "apply", "page": "/b"}, key="/b", timestamp=T0 + 2_500)
        src.send({"op": "add", "page": "/b", "n": 1}, key="/b", timestamp=T0 + 2_600)
        assert windows("/b") == [(0, 61)]  # apply read (2 + 2 + 2) * 10
        src.send_many([{"value": {"op": "add", "page": "/a", "n": 1}, "key": "/a", "timestamp": T0 + 3_000}] * 3)
        assert windows("/a") == [(0, 8)]
        driver.commit()
        driver.restart()  # the state comes back from the changelog
        assert windows("/a") == [(0, 8)]
        assert windows("/b") == [(0, 61)]
        # The next minute's window, updated again and again; then stream time passes the first
        # minute's end + expires (T0 + 120 s) in the same commit interval as those updates.
        src.send_many([{"value": {"op": "add", "page": "/a", "n": 1}, "key": "/a", "timestamp": T0 + MINUTE + i}
                       for i in range(4)])
        src.send_many([{"value": {"op": "add", "page": "/c", "n": 1}, "key": "/c", "timestamp": T0 + 2 * MINUTE}])
        assert windows("/a") == [(MINUTE, 4)]
        # updates to the second minute, then its expiry (stream time T0 + 180 s), before a commit
        src.send_many([{"value": {"op": "add", "page": "/a", "n": 1}, "key": "/a", "timestamp": T0 + MINUTE + 5}] * 2)
        src.send({"op": "add", "page": "/c", "n": 1}, key="/c", timestamp=T0 + 3 * MINUTE)
        driver.commit()
        assert windows("/a") == []
        assert windows("/b") == []
        driver.restart()
        assert windows("/a") == []
        assert windows("/c") == [(2 * MINUTE, 1), (3 * MINUTE, 1)]
