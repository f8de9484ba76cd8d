"""Joins. First the join logic alone (``streamkit.streams.joins``), with no broker: unit
tests at the window's edges and properties against batch joins, over any arrival order,
late data and grace, in memory and over a real state store. Then on a real broker:
stream-table (inner, left, with a GlobalTable), windowed stream-stream (inner, left,
outer) and table-table, each compared with a result computed here; and the refusal to
start when join inputs are not co-partitioned.

A join's result depends on the order its two inputs are processed in, and the two inputs
are two topics. The tests therefore feed them in steps, one topic at a time, waiting after
each step until the worker has committed it (``Probe.settle``): the processing order is then
the step order, per partition in offset order, and the oracle follows the same order."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.state import MemoryBackend, StorePartition
from streamkit.state.windowed import WindowedTransaction
from streamkit.streams.app import App
from streamkit.streams.dsl import CoPartitionError
from streamkit.streams.joins import (
    JoinBuffers,
    Joined,
    JoinHow,
    JoinWindows,
    TableJoinUpdate,
    expire_stream_join,
    stream_join,
    table_join_update,
)
from streamkit.streams.pipeline import _StoreJoinBuffers
from streamkit.streams.processing import KeyCodec
from streamkit.streams.topic import partition_for_key
from streamkit.streams.windows import MIN_TIMESTAMP

from .conftest import Probe, running
from .oracles import MemoryJoinBuffers

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000_000
PARTITIONS = 4
PROPS = settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
HOWS: list[JoinHow] = ["inner", "left", "outer"]
FOREVER = 2**62  # a stream time that makes every buffered record final

Arrival = tuple[int, str, str, int]  # (side, key, value, timestamp), in arrival order
Result = tuple[str, Any, Any, int]  # (key, left, right, timestamp)


def not_late(arrivals: Sequence[Arrival], within: int, grace: int = 0) -> list[Arrival]:
    """The records a join keeps, by arrival order: late when ``ts + within + grace`` is
    below the stream time including the record."""
    kept, stream_time = [], MIN_TIMESTAMP
    for arrival in arrivals:
        stream_time = max(stream_time, arrival[3])
        if arrival[3] + within + grace >= stream_time:
            kept.append(arrival)
    return kept


def batch_join(records: Sequence[Arrival], within: int, how: JoinHow) -> list[Result]:
    """The join of two sets of records, by definition: every pair of one key within
    ``within`` ms (stamped with the later of the two), then each record without a pair
    with None (left ones for left/outer joins, right ones for outer joins)."""
    out: list[Result] = []
    matched: set[int] = set()
    for i, (s1, k1, v1, t1) in enumerate(records):
        for j, (s2, k2, v2, t2) in enumerate(records):
            if s1 == 0 and s2 == 1 and k1 == k2 and abs(t1 - t2) <= within:
                out.append((k1, v1, v2, max(t1, t2)))
                matched |= {i, j}
    for i, (side, key, value, ts) in enumerate(records):
        if i not in matched and ((side == 0 and how != "inner") or (side == 1 and how == "outer")):
            out.append((key, value, None, ts) if side == 0 else (key, None, value, ts))
    return sorted(out, key=repr)


def run_join(buffers: JoinBuffers[str], arrivals: Sequence[Arrival], windows: JoinWindows, how: JoinHow,
             *, flush: bool = True) -> tuple[list[Result], list[Arrival]]:
    """Feed ``arrivals`` through the join logic as the DSL does (observe, join, expire);
    the results, and the records dropped as late."""
    out: list[Joined[str]] = []
    late: list[Arrival] = []
    stream_time = MIN_TIMESTAMP
    for arrival in arrivals:
        side, key, value, ts = arrival
        stream_time = max(stream_time, ts)
        step = stream_join(buffers, windows, how, side, key, value, ts, stream_time)
        if step.late:
            late.append(arrival)
        out.extend(step.results)
        out.extend(expire_stream_join(buffers, windows, how, stream_time))
    if flush:
        out.extend(expire_stream_join(buffers, windows, how, FOREVER))
    return [(r.key, r.left, r.right, r.timestamp) for r in out], late


arrivals_strategy = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from("abc"), st.integers(0, 60)), max_size=40,
).map(lambda items: [(side, key, f"{'LR'[side]}{i}", ts) for i, (side, key, ts) in enumerate(items)])


# -- join logic, no broker -----------------------------------------------------------------


@PROPS
@given(arrivals=arrivals_strategy, within=st.integers(0, 12), grace=st.integers(0, 12), how=st.sampled_from(HOWS))
def test_stream_join_equals_the_batch_join_of_records_not_late(arrivals: list[Arrival], within: int, grace: int,
                                                               how: JoinHow) -> None:
    """In any arrival order (out of order, late, with any grace), the results are the batch
    join of the records that were not late: each pair once, and an unmatched record with
    None only if it never matched (never a (left, None) and then a pair)."""
    windows = JoinWindows(within, grace)
    got, late = run_join(MemoryJoinBuffers(), arrivals, windows, how)
    kept = not_late(arrivals, within, grace)
    assert sorted(got, key=repr) == batch_join(kept, within, how)
    assert len(late) + len(kept) == len(arrivals)


@PROPS
@given(arrivals=arrivals_strategy, within=st.integers(0, 12), grace=st.integers(0, 12), how=st.sampled_from(HOWS))
def test_stream_join_emits_unmatched_records_only_once_final(arrivals: list[Arrival], within: int, grace: int,
                                                             how: JoinHow) -> None:
    """Without the final flush: every pair is out at once, an unmatched record once stream
    time is past ``ts + 2*within + grace``, and the buffers hold nothing older."""
    windows = JoinWindows(within, grace)
    buffers: MemoryJoinBuffers[str] = MemoryJoinBuffers()
    got, _late = run_join(buffers, arrivals, windows, how, flush=False)
    kept = not_late(arrivals, within, grace)
    stream_time = max((a[3] for a in arrivals), default=MIN_TIMESTAMP)
    final_before = stream_time - 2 * within - grace
    expected = [r for r in batch_join(kept, within, how) if None not in (r[1], r[2]) or r[3] < final_before]
    assert sorted(got, key=repr) == expected
    assert len(buffers) == sum(1 for a in kept if a[3] >= final_before)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(arrivals=arrivals_strategy, within=st.integers(0, 12), grace=st.integers(0, 6), how=st.sampled_from(HOWS))
def test_store_buffers_behave_like_memory_buffers(arrivals: list[Arrival], within: int, grace: int,
                                                  how: JoinHow) -> None:
    """The DSL's buffers over a state store (windows [ts, ts + 1) of JSON entries) give the
    same results as the in-memory ones (records final at one stream time may come out in
    another order: by key in the store, by arrival in memory)."""
    windows = JoinWindows(within, grace)
    left, right = StorePartition(MemoryBackend()).begin(), StorePartition(MemoryBackend()).begin()
    store = _StoreJoinBuffers(WindowedTransaction(left), WindowedTransaction(right), KeyCodec())
    got, late = run_join(store, arrivals, windows, how)
    expected, expected_late = run_join(MemoryJoinBuffers(), arrivals, windows, how)
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert late == expected_late


def test_stream_join_window_edges() -> None:
    """within=10, grace=5: records 10 ms apart join, 11 ms apart do not; a record is late
    once stream time is more than within + grace past it; an unmatched left record comes
    out once stream time is more than 2*within + grace past it."""
    windows = JoinWindows(10, 5)
    buffers: MemoryJoinBuffers[str] = MemoryJoinBuffers()

    def step(side: int, value: str, ts: int, stream_time: int) -> tuple[bool, list[Result]]:
        done = stream_join(buffers, windows, "left", side, "k", value, ts, stream_time)
        out = done.results + expire_stream_join(buffers, windows, "left", stream_time)
        return done.late, [(r.key, r.left, r.right, r.timestamp) for r in out]

    assert step(0, "l100", 100, 100) == (False, [])
    assert step(1, "r110", 110, 110) == (False, [("k", "l100", "r110", 110)])
    assert step(1, "r111", 111, 111) == (False, [])  # 11 ms after l100
    assert step(1, "r116", 116, 116) == (False, [])
    # 101 + within + grace == 116: not late; it joins r110 and r111, not r116 (15 ms apart).
    assert step(0, "l101", 101, 116) == (False, [("k", "l101", "r110", 110), ("k", "l101", "r111", 111)])
    assert step(0, "l100bis", 100, 116) == (True, [])  # 100 + 15 < 116: late, dropped
    # Matched records leave quietly; a lone left record is reported once stream time is
    # past 200 + 2 * within + grace.
    assert step(0, "l200", 200, 200) == (False, [])
    assert step(1, "r225", 225, 225) == (False, [])
    assert step(1, "r226", 226, 226) == (False, [("k", "l200", None, 200)])


def test_join_windows_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        JoinWindows(-1)
    with pytest.raises(TypeError, match="int of milliseconds"):
        JoinWindows(10, 1.5)  # type: ignore[arg-type]
    assert JoinWindows(0).final_before(100) == 100


def batch_table_join(left: dict[str, Any], right: dict[str, Any], how: JoinHow) -> dict[str, Any]:
    keys = {"inner": left.keys() & right.keys(), "left": set(left), "outer": left.keys() | right.keys()}[how]
    return {k: (left.get(k), right.get(k)) for k in keys}


@PROPS
@given(updates=st.lists(st.tuples(st.integers(0, 1), st.sampled_from("abcd"), st.one_of(st.none(), st.integers(0, 9))),
                        max_size=40),
       how=st.sampled_from(HOWS))
def test_table_join_output_materializes_to_the_batch_join(updates: list[tuple[int, str, int | None]],
                                                          how: JoinHow) -> None:
    """Materialized (a tombstone deletes), the update stream of a table-table join is always
    the batch join of the two tables as they stand; and it is what the e2e oracle says."""
    tables: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    materialized: dict[str, Any] = {}
    emitted: list[tuple[str, Any]] = []
    for side, key, value in updates:
        if value is None:
            tables[side].pop(key, None)
        else:
            tables[side][key] = value
        update = table_join_update(how, tables[0].get(key), tables[1].get(key), deleted=value is None)
        if update is not None:
            emitted.append((key, None if update.pair is None else list(update.pair)))
            if update.pair is None:
                materialized.pop(key, None)
            else:
                materialized[key] = update.pair
        assert materialized == batch_table_join(*tables, how)
    assert emitted == oracle_table_join([(side, [(key, value, 0)]) for side, key, value in updates], how)


def test_table_join_update_cases() -> None:
    assert table_join_update("inner", 1, None, deleted=False) is None
    assert table_join_update("inner", 1, None, deleted=True) == TableJoinUpdate(None)
    assert table_join_update("left", 1, None, deleted=True) == TableJoinUpdate((1, None))
    assert table_join_update("outer", None, 2, deleted=True) == TableJoinUpdate((None, 2))
    assert table_join_update("outer", None, None, deleted=True) == TableJoinUpdate(None)
    assert table_join_update("outer", None, None, deleted=False) is None


def records(items: list[tuple[str, Any, int]]) -> list[tuple[bytes, bytes | None, int]]:
    return [(k.encode(), None if v is None else orjson.dumps(v), ts) for k, v, ts in items]


async def outputs(probe: Probe, topic: str) -> list[tuple[str, Any, int]]:
    return [(r.key.decode(), None if r.value is None else orjson.loads(r.value), r.timestamp)
            for r in await probe.read(topic)]


def per_key(outs: list[tuple[str, Any, int]]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = defaultdict(list)
    for k, v, _ts in outs:
        grouped[k].append(v)
    return dict(grouped)


# -- stream-table ------------------------------------------------------------------------


async def test_stream_table_join_inner_and_left(make_app: Any, probe: Probe) -> None:
    app = make_app()
    users = app.topic(f"{app.id}-users", partitions=PARTITIONS)
    orders = app.topic(f"{app.id}-orders", partitions=PARTITIONS)
    users_table = app.stream(users).to_table("users")
    app.stream(orders).join(users_table).to(f"{app.id}-inner")
    (app.stream(orders)
        .join(users_table, how="left", joiner=lambda order, user: {"order": order, "name": user and user["name"]})
        .to(f"{app.id}-left"))
    # A table an agent-free pipeline did not build: an app.Table filled by to_table's changes.
    async with running(app) as runtime:
        await probe.produce_many(users.name, records([("u1", {"name": "ann"}, T0), ("u2", {"name": "bob"}, T0)]))
        await probe.settle(runtime)
        await probe.produce_many(orders.name, records([("u1", 10, T0 + 1), ("u3", 30, T0 + 2), ("u2", 20, T0 + 3),
                                                       ("u1", 11, T0 + 4)]))
        await probe.settle(runtime)
        await probe.produce_many(users.name, records([("u1", {"name": "ann2"}, T0 + 5), ("u3", {"name": "cid"}, T0 + 5),
                                                      ("u2", None, T0 + 5)]))  # u2 deleted
        await probe.settle(runtime)
        await probe.produce_many(orders.name, records([("u1", 12, T0 + 6), ("u2", 21, T0 + 7), ("u3", 31, T0 + 8)]))
        await probe.settle(runtime)
    inner = await outputs(probe, f"{app.id}-inner")
    assert per_key(inner) == {
        "u1": [[10, {"name": "ann"}], [11, {"name": "ann"}], [12, {"name": "ann2"}]],
        "u2": [[20, {"name": "bob"}]],
        "u3": [[31, {"name": "cid"}]],
    }
    # The stream record's timestamp is the result's.
    assert sorted(ts - T0 for _k, _v, ts in inner) == [1, 3, 4, 6, 8]
    left = await outputs(probe, f"{app.id}-left")
    assert per_key(left) == {
        "u1": [{"order": 10, "name": "ann"}, {"order": 11, "name": "ann"}, {"order": 12, "name": "ann2"}],
        "u2": [{"order": 20, "name": "bob"}, {"order": 21, "name": None}],
        "u3": [{"order": 30, "name": None}, {"order": 31, "name": "cid"}],
    }


async def test_stream_joins_a_table_kept_by_an_agent(make_app: Any, probe: Probe) -> None:
    app = make_app()
    prices = app.topic(f"{app.id}-prices", value_type=int, partitions=PARTITIONS)
    sales = app.topic(f"{app.id}-sales", value_type=int, partitions=PARTITIONS)
    table = app.Table("prices", default=int)

    @app.agent(prices)
    async def keep(stream: Any) -> None:
        async for event in stream.events():
            table[event.key] = event.value

    app.stream(sales).join(table, joiner=lambda qty, price: qty * price).to(f"{app.id}-revenue")
    async with running(app) as runtime:
        await probe.produce_many(prices.name, records([("apple", 3, T0), ("pear", 5, T0)]))
        await probe.settle(runtime)
        await runtime.commit()  # the agent's writes are in its transaction: visible at once
        await probe.produce_many(sales.name, records([("apple", 2, T0), ("pear", 1, T0), ("fig", 9, T0)]))
        await probe.settle(runtime)
    assert per_key(await outputs(probe, f"{app.id}-revenue")) == {"apple": [6], "pear": [5]}


@pytest.mark.parametrize("table_partitions", [2, PARTITIONS])
async def test_stream_joins_a_global_table(make_app: Any, probe: Probe, table_partitions: int) -> None:
    """A GlobalTable is whole on every worker: a stream of any partition count joins it
    (no co-partitioning check), and processing starts only once the table has read its
    changelog to the end it had at start, so even the first records find their rows."""
    app = make_app()
    orders = app.topic(f"{app.id}-orders", partitions=PARTITIONS)
    customers = app.GlobalTable("customers", partitions=table_partitions)
    (app.stream(orders)
        .join(customers, joiner=lambda order, customer: {"order": order, "tier": customer["tier"]})
        .to(f"{app.id}-enriched"))
    # Many changelog records (every customer updated several times), all there before the
    # worker starts, so a worker that processes before catching up misses some.
    await probe.create_topic(customers.changelog.name, table_partitions, {"cleanup.policy": "compact"})
    n = 2000
    updates = [(f"c{i}", {"tier": f"t{i}-{version}"}, T0) for version in range(10) for i in range(n)]
    await probe.produce_many(customers.changelog.name, records(updates))
    await probe.produce_many(orders.name, records([(f"c{i}", i, T0 + i) for i in range(0, n, 7)]))
    async with running(app) as runtime:
        await probe.settle(runtime)
    got = {k: v for k, v, _ts in await outputs(probe, f"{app.id}-enriched")}
    assert got == {f"c{i}": {"order": i, "tier": f"t{i}-9"} for i in range(0, n, 7)}


# -- stream-stream -----------------------------------------------------------------------


def oracle_stream_join(steps: list[tuple[int, list[tuple[str, Any, int]]]], within: int,
                       how: JoinHow) -> list[Result]:
    """What the worker has emitted after ``steps``: per partition, the batch join of the
    records that were not late with respect to their own topic partition, with the
    unmatched ones only once final at the join's stream time, the smaller of the two
    sides' watermarks (Flink's model: a side that has not reached a time holds it back)."""
    per_partition: dict[int, list[Arrival]] = defaultdict(list)
    for side, items in steps:
        for key, value, ts in items:
            per_partition[partition_for_key(key.encode(), PARTITIONS)].append((side, key, value, ts))
    out: list[Result] = []
    for arrivals in per_partition.values():
        sides = [[a for a in arrivals if a[0] == side] for side in (0, 1)]
        if not all(sides):
            final_before = MIN_TIMESTAMP
        else:
            final_before = min(max(ts for *_r, ts in side) for side in sides) - 2 * within
        kept = [a for side in sides for a in not_late(side, within)]
        out += [r for r in batch_join(kept, within, how) if None not in (r[1], r[2]) or r[3] < final_before]
    return out


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
async def test_windowed_stream_stream_join(make_app: Any, probe: Probe, how: str) -> None:
    app = make_app()
    left = app.topic(f"{app.id}-clicks", partitions=PARTITIONS)
    right = app.topic(f"{app.id}-views", partitions=PARTITIONS)
    within = 100
    (app.stream(left)
        .join(app.stream(right), within=timedelta(milliseconds=within), how=how, name="cv")
        .to(f"{app.id}-joined"))
    steps: list[tuple[int, list[tuple[str, Any, int]]]] = [
        (0, [("a", "a1", T0 + 10), ("b", "b1", T0 + 20), ("a", "a2", T0 + 50), ("c", "c1", T0 + 60)]),
        (1, [("a", "A1", T0 + 40), ("b", "B1", T0 + 130), ("d", "D1", T0 + 70), ("a", "A2", T0 + 151)]),
        # Two records of one key at one timestamp on one side: both are buffered, both join
        # the right record that comes after them (and, for left/outer joins, neither is
        # reported unmatched).
        (0, [("a", "a3", T0 + 160), ("a", "a3bis", T0 + 160), ("f", "f1", T0 + 165), ("f", "f1bis", T0 + 165)]),
        (1, [("a", "A3", T0 + 200), ("c", "C1", T0 + 420), ("e", "E1", T0 + 500)]),
        (0, [("a", "a4", T0 + 900), ("b", "b3", T0 + 900), ("c", "c2", T0 + 900), ("d", "d2", T0 + 900),
             ("e", "e2", T0 + 900)]),
        # Late (700 + within < 850, its own partition's watermark): dropped, though a4 is
        # buffered within reach; a right record within the window of a4 still joins it.
        (1, [("a", "A4", T0 + 850), ("a", "A-late", T0 + 700)]),
    ]
    async with running(app) as runtime:
        for side, items in steps:
            await probe.produce_many((left, right)[side].name, records(items))
            await probe.settle(runtime)
        assert runtime.metrics.late_records == 1
    got = sorted(((k, v[0], v[1], ts) for k, v, ts in await outputs(probe, f"{app.id}-joined")), key=repr)
    expected = sorted(oracle_stream_join(steps, within, how), key=repr)
    assert got == expected
    assert any(lv is not None and rv is not None for _k, lv, rv, _ts in expected)
    if how != "inner":
        assert any(rv is None for _k, _lv, rv, _ts in expected)


async def test_stream_stream_join_by_extracted_event_time(make_app: Any, probe: Probe) -> None:
    """With timestamp extractors on both topics, the join window is over the values' event
    times; the record timestamps (an hour apart here) play no part."""
    app = make_app()
    at = lambda event: event.value["at"]  # noqa: E731
    clicks = app.topic(f"{app.id}-clicks", partitions=PARTITIONS, timestamp=at)
    views = app.topic(f"{app.id}-views", partitions=PARTITIONS, timestamp=at)
    (app.stream(clicks)
        .join(app.stream(views), within=100, name="cv", joiner=lambda c, v: [c["n"], v["n"]])
        .to(f"{app.id}-joined"))
    async with running(app) as runtime:
        await probe.produce_many(clicks.name, records([("a", {"at": T0 + 50, "n": "c1"}, T0),
                                                       ("b", {"at": T0 + 50, "n": "c2"}, T0)]))
        await probe.settle(runtime)
        await probe.produce_many(views.name, records([("a", {"at": T0 + 120, "n": "v1"}, T0 + 3_600_000),
                                                      ("b", {"at": T0 + 151, "n": "v2"}, T0 - 3_600_000)]))
        await probe.settle(runtime)
    assert await outputs(probe, f"{app.id}-joined") == [("a", ["c1", "v1"], T0 + 120)]


# -- table-table ---------------------------------------------------------------------------


def oracle_table_join(steps: list[tuple[int, list[tuple[str, Any, int]]]], how: str) -> list[tuple[str, Any]]:
    """On every update of either table, the joined value of that key: the joiner's result
    when the join has one (inner: both sides; left: the left side; outer: either), else a
    tombstone when the update was a delete (the key's previous result is gone)."""
    tables: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    out: list[tuple[str, Any]] = []
    for side, items in steps:
        for key, value, _ts in items:
            if value is None:
                tables[side].pop(key, None)
            else:
                tables[side][key] = value
            lv, rv = tables[0].get(key), tables[1].get(key)
            present = {"inner": lv is not None and rv is not None, "left": lv is not None,
                       "outer": lv is not None or rv is not None}[how]
            if present:
                out.append((key, [lv, rv]))
            elif value is None:
                out.append((key, None))
    return out


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
async def test_table_table_join(make_app: Any, probe: Probe, how: str) -> None:
    app = make_app()
    names = app.topic(f"{app.id}-names", partitions=PARTITIONS)
    emails = app.topic(f"{app.id}-emails", partitions=PARTITIONS)
    names_t = app.stream(names).to_table("names")
    emails_t = app.stream(emails).to_table("emails")
    names_t.join(emails_t, how=how).to(f"{app.id}-joined")
    steps: list[tuple[int, list[tuple[str, Any, int]]]] = [
        (0, [("u1", "ann", T0), ("u2", "bob", T0)]),
        (1, [("u1", "ann@x", T0), ("u3", "cid@x", T0)]),
        (0, [("u1", "anne", T0), ("u3", "cid", T0)]),
        (1, [("u1", None, T0), ("u2", "bob@x", T0)]),  # u1's email deleted
        (0, [("u2", None, T0), ("u4", None, T0)]),  # u2's name deleted; u4 never existed
    ]
    async with running(app) as runtime:
        for side, items in steps:
            await probe.produce_many((names, emails)[side].name, records(items))
            await probe.settle(runtime)
    got = per_key(await outputs(probe, f"{app.id}-joined"))
    expected: dict[str, list[Any]] = defaultdict(list)
    for key, value in oracle_table_join(steps, how):
        expected[key].append(value)
    assert got == dict(expected)


# -- co-partitioning ---------------------------------------------------------------------


async def _refused(app: App) -> CoPartitionError:
    with pytest.raises(CoPartitionError) as info:
        await app.start()
    # Nothing is left running: the next start of the app is a clean one.
    assert app.runtime is None
    return info.value


async def test_stream_stream_join_inputs_must_be_copartitioned(make_app: Any) -> None:
    app = make_app()
    left = app.topic(f"{app.id}-left", partitions=2)
    right = app.topic(f"{app.id}-right", partitions=4)
    app.stream(left).join(app.stream(right), within=1000).to(f"{app.id}-out")
    message = str(await _refused(app))
    assert message.startswith("stream-stream join: inputs are not co-partitioned")
    assert f"{left.name}: 2" in message and f"{right.name}: 4" in message
    assert "group_by" in message
    assert "\n" not in message


async def test_existing_topic_partition_counts_are_checked(make_app: Any, probe: Probe) -> None:
    """A topic declared without a partition count has the count it has on the broker: the
    check must use that, not skip it."""
    app = make_app()
    orders = app.topic(f"{app.id}-orders")  # exists with 3 partitions
    await probe.create_topic(orders.name, 3)
    table = app.Table("users", partitions=4)
    app.stream(orders).join(table).to(f"{app.id}-out")
    message = str(await _refused(app))
    assert f"join with table 'users': inputs are not co-partitioned ({orders.name}: 3, users: 4)" in message


async def test_stream_table_join_with_a_table_of_other_partitions(make_app: Any) -> None:
    app = make_app()
    orders = app.topic(f"{app.id}-orders", partitions=4)
    app.stream(orders).join(app.Table("users", partitions=2), how="left").to(f"{app.id}-out")
    assert "users: 2" in str(await _refused(app))


async def test_copartitioned_join_starts(make_app: Any, tmp_path: Path) -> None:
    app = make_app()
    left = app.topic(f"{app.id}-left", partitions=4)
    right = app.topic(f"{app.id}-right", partitions=4)
    app.stream(left).join(app.stream(right), within=1000, how="outer").to(f"{app.id}-out")
    async with running(app):
        pass


def test_join_arguments_are_checked(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path)
    s = app.stream("x")
    with pytest.raises(ValueError, match="needs within="):
        s.join(app.stream("y"))
    with pytest.raises(ValueError, match="inner, left or outer"):
        s.join(app.stream("y"), within=10, how="cross")
    with pytest.raises(ValueError, match="inner or left"):
        s.join(app.Table("t"), how="outer")
    with pytest.raises(ValueError, match="inner, left or outer"):
        s.to_table("a").join(s.to_table("b"), how="semi")
