"""The declarative DSL on a real broker: every operator's exact output, and windowed
aggregations compared with oracles computed here from the same input (per partition, in
the order the worker processes it, as stream time is per partition).

Inputs are produced with explicit keys and timestamps. ``Probe.settle`` waits until the
worker has committed every input record, which is when every output of them has been
produced (a commit flushes the producer first); the output topics are then read to their
end, so "exact" means nothing missing and nothing extra."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import orjson
import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

import streamkit
from streamkit.streams.app import App
from streamkit.streams.dsl import CoPartitionError
from streamkit.streams.topic import partition_for_key
from streamkit.streams.watermarks import IDLE, WM_HEADER, InputClock, decode_stamp
from streamkit.streams.windows import (
    MIN_TIMESTAMP,
    HoppingWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    Window,
    WindowSpec,
    is_late,
    windows_for,
)
from streamkit.testing import http_get

from .conftest import Probe, eventually, running
from .oracles import sessionize, sliding_aggregate

# Tests that read a repartition topic after the app: nothing purged meanwhile.
KEEP_REPARTITIONED = {"repartition.purge.interval.ms": 600_000}

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000_000
PARTITIONS = 4


@dataclass(frozen=True)
class Out:
    key: Any
    value: Any
    timestamp: int
    partition: int


async def read_out(probe: Probe, topic: str) -> list[Out]:
    return [Out(None if r.key is None else r.key.decode(), orjson.loads(r.value) if r.value is not None else None,
                r.timestamp, r.partition) for r in await probe.read(topic)]


def by_key(outs: list[Out]) -> dict[Any, list[Any]]:
    """Output values per key, in output order (the order the DSL guarantees)."""
    grouped: dict[Any, list[Any]] = defaultdict(list)
    for o in outs:
        grouped[o.key].append(o.value)
    return dict(grouped)


def encode_records(records: list[tuple[str, Any, int]]) -> list[tuple[bytes, bytes, int]]:
    return [(k.encode(), orjson.dumps(v), ts) for k, v, ts in records]


# -- stateless operators -----------------------------------------------------------------


async def test_stateless_operators_exact_outputs(make_app: Any, probe: Probe) -> None:
    app = make_app()
    name = app.id
    nums = app.topic(f"{name}-nums", value_type=int, partitions=PARTITIONS)
    peeked: list[int] = []
    each: list[tuple[str, int]] = []
    s = app.stream(nums)
    s.filter(lambda v: v % 2 == 0).to(f"{name}-even")
    s.map(lambda v: {"n": v, "sq": v * v}).to(f"{name}-mapped")
    s.flat_map(lambda v: [v] * (v % 3)).to(f"{name}-flat")
    s.peek(peeked.append).filter(lambda v: v > 35).to(f"{name}-peeked")
    small, middle = s.branch(lambda v: v < 10, lambda v: v < 30)  # >= 30 matches none: dropped
    small.to(f"{name}-small")
    middle.to(f"{name}-middle")
    small.map(lambda v: -v).merge(middle.filter(lambda v: v % 5 == 0)).to(f"{name}-merged")
    s.map_key(lambda k, v: f"{k}/{v % 2}").to(f"{name}-rekeyed")
    s.filter(lambda v: v < 3).foreach(lambda k, v: each.append((k, v)))

    records = [(f"k{i % 5}", i, T0 + i) for i in range(40)]
    async with running(app) as runtime:
        await probe.produce_many(nums.name, encode_records(records))
        await probe.settle(runtime)

    def expect(fn: Callable[[str, int, int], list[tuple[str, Any]]]) -> dict[Any, list[Any]]:
        """Expected outputs per key, in input order, from a per-record rule."""
        out: dict[Any, list[Any]] = defaultdict(list)
        for k, v, ts in records:
            for key, value in fn(k, v, ts):
                out[key].append(value)
        return dict(out)

    cases: dict[str, dict[Any, list[Any]]] = {
        "even": expect(lambda k, v, ts: [(k, v)] if v % 2 == 0 else []),
        "mapped": expect(lambda k, v, ts: [(k, {"n": v, "sq": v * v})]),
        "flat": expect(lambda k, v, ts: [(k, v)] * (v % 3)),
        "peeked": expect(lambda k, v, ts: [(k, v)] if v > 35 else []),
        "small": expect(lambda k, v, ts: [(k, v)] if v < 10 else []),
        "middle": expect(lambda k, v, ts: [(k, v)] if 10 <= v < 30 else []),
        "merged": expect(lambda k, v, ts: [(k, -v)] if v < 10 else [(k, v)] if 10 <= v < 30 and v % 5 == 0 else []),
        "rekeyed": expect(lambda k, v, ts: [(f"{k}/{v % 2}", v)]),
    }
    by_ts = {(k, v): ts for k, v, ts in records}
    for suffix, expected in cases.items():
        outs = await read_out(probe, f"{name}-{suffix}")
        assert by_key(outs) == expected, suffix
        for o in outs:
            if suffix in ("even", "flat", "peeked", "small", "middle"):
                assert o.timestamp == by_ts[(o.key, o.value)], "records keep their timestamp"
            if suffix != "rekeyed":
                assert o.partition == partition_for_key(o.key.encode(), PARTITIONS)
    assert sorted(peeked) == list(range(40))
    assert sorted(each) == [("k0", 0), ("k1", 1), ("k2", 2)]


async def test_group_by_repartitions_and_keeps_per_key_order(make_app: Any, probe: Probe) -> None:
    app = make_app(config=KEEP_REPARTITIONED)
    views = app.topic(f"{app.id}-views", partitions=PARTITIONS)
    (app.stream(views)
        .group_by(lambda v: v["page"], name="by-page")
        .map(lambda v: v["seq"])
        .to(f"{app.id}-by-page"))
    pages = ["/", "/a", "/b", "/c", "/d"]
    # One source key (one source partition): the order of a page's records is defined.
    records = [("u", {"page": pages[(i * 3) % 5], "seq": i}, T0 + i) for i in range(50)]
    async with running(app) as runtime:
        assert f"{app.id}-by-page-repartition" in app.topics
        await probe.produce_many(views.name, encode_records(records))
        await probe.settle(runtime)
    outs = await read_out(probe, f"{app.id}-by-page")
    assert by_key(outs) == {p: [v["seq"] for _k, v, _ts in records if v["page"] == p] for p in pages}
    stamped = await probe.read(f"{app.id}-by-page-repartition")
    # Every record carries its source partition's watermark; watermark-only records are not data.
    stamps = [decode_stamp(dict(r.headers)[WM_HEADER]) for r in stamped]
    repartitioned = [r for r, stamp in zip(stamped, stamps, strict=True) if stamp.is_data]
    assert len(repartitioned) == 50
    assert {s.partition for s in stamps if s.kind != IDLE} == {partition_for_key(b"u", PARTITIONS)}
    for r in repartitioned:
        assert r.partition == partition_for_key(r.key, PARTITIONS)
        assert orjson.loads(r.value)["page"] == r.key.decode()


async def test_repartition_topics_keep_old_records_until_the_app_purges_them(make_app: Any, probe: Probe) -> None:
    """Repartition topics are created as Kafka Streams creates them (no time retention: a
    backfill's old event times must survive until read), and the worker deletes what it
    has committed (repartition.purge.interval.ms)."""
    app = make_app(config={"repartition.purge.interval.ms": 0})
    views = app.topic(f"{app.id}-views", partitions=PARTITIONS)
    app.stream(views).group_by(lambda v: v["page"], name="by-page").to(f"{app.id}-out")
    repartition = f"{app.id}-by-page-repartition"
    long_ago = 1_000_000_000_000  # 2001: far beyond any retention.ms but -1
    records = [("u", {"page": f"/p{i % 3}"}, long_ago + i) for i in range(30)]
    async with running(app) as runtime:
        described = await probe.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, repartition)])
        configs = {c[0]: c[1] for c in described[0].resources[0][4]}
        assert configs["retention.ms"] == "-1"
        await probe.produce_many(views.name, encode_records(records))
        await probe.settle(runtime)
        assert len(await probe.read(f"{app.id}-out")) == 30
        tps = await probe.partitions(repartition)

        async def purged() -> bool:
            starts = await probe.consumer.beginning_offsets(tps)
            ends = await probe.end_offsets(tps)
            return all(starts[tp] >= ends[tp] - 1 for tp in tps) and any(starts[tp] > 0 for tp in tps)

        # Everything committed is gone, but for a watermark-only record that may follow it.
        await eventually(purged, "the committed repartitioned records deleted")


async def test_to_table_materializes_latest_values(make_app: Any, probe: Probe) -> None:
    app = make_app()
    prices = app.topic(f"{app.id}-prices", partitions=PARTITIONS)
    table_node = app.stream(prices).to_table("prices")
    table_node.changes().map(lambda v: v).to(f"{app.id}-changes")
    records = [("apple", 1, T0), ("pear", 2, T0 + 1), ("apple", 3, T0 + 2), ("fig", 5, T0 + 3)]
    async with running(app) as runtime:
        await probe.produce_many(prices.name, encode_records(records))
        await probe.produce(prices.name, None, key=b"pear")  # a tombstone deletes
        await probe.settle(runtime)
        assert dict(table_node.table.items()) == {"apple": 3, "fig": 5}
    assert by_key(await read_out(probe, f"{app.id}-changes")) == {"apple": [1, 3], "pear": [2, None], "fig": [5]}


# -- windowed aggregations: oracles ------------------------------------------------------

Record = tuple[str, int, int]  # key, value, timestamp


def per_partition(records: list[Record]) -> dict[int, list[Record]]:
    """The order the worker processes records in: per partition, in production order."""
    out: dict[int, list[Record]] = defaultdict(list)
    for r in records:
        out[partition_for_key(r[0].encode(), PARTITIONS)].append(r)
    return out


@dataclass
class Agg:
    name: str
    init: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any]  # for sessions: two sessions' aggregates


COUNT = Agg("count", int, lambda a, _v: a + 1, lambda a, b: a + b)
SUM = Agg("sum", int, lambda a, v: a + v, lambda a, b: a + b)
MAX = Agg("reduce", lambda: None, lambda a, v: v if a is None else max(a, v), max)
LIST = Agg("aggregate", list, lambda a, v: [*a, v], lambda a, b: [*a, *b])
SORTED = Agg("aggregate", list, lambda a, v: sorted([*a, v]), lambda a, b: sorted([*a, *b]))


def declare(app: App, source: Any, spec: WindowSpec, agg: Agg, mode: str, out: str, session: bool,
            expires: int | None = None) -> None:
    windowed = app.stream(source).window(spec, expires=expires)
    if agg.name == "count":
        aggregation = windowed.count(name=f"{agg.name}-{mode}")
    elif agg.name == "sum":
        aggregation = windowed.sum(name=f"{agg.name}-{mode}")
    elif agg.name == "reduce":
        aggregation = windowed.reduce(max, name=f"{agg.name}-{mode}")
    else:
        extra = {"merger": agg.merge} if session else {}
        aggregation = windowed.aggregate(agg.init, agg.add, value_type=list, name=f"{agg.name}-{mode}", **extra)
    (aggregation.final() if mode == "final" else aggregation.current()).to(out)


@dataclass
class Oracle:
    current: dict[str, list[tuple[int, int, Any]]]  # per key, in order: (start, end, value)
    final: set[tuple[str, int, int, Any]]
    all_windows: dict[tuple[str, int, int], Any]  # every window's last value
    late: int


def freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def oracle_fixed(spec: TumblingWindows | HoppingWindows, records: list[Record], agg: Agg) -> Oracle:
    current: dict[str, list[tuple[int, int, Any]]] = defaultdict(list)
    final: set[tuple[str, int, int, Any]] = set()
    windows: dict[tuple[str, int, int], Any] = {}
    late = 0
    for recs in per_partition(records).values():
        st = MIN_TIMESTAMP
        state: dict[tuple[str, Window], Any] = {}
        for key, value, ts in recs:
            st = max(st, ts)
            touched = False
            for w in windows_for(spec, ts):
                if is_late(w.end, spec.grace_ms, st):
                    continue
                touched = True
                state[(key, w)] = agg.add(state.get((key, w), agg.init()), value)
                current[key].append((w.start, w.end, state[(key, w)]))
            late += not touched
        for (key, w), value in state.items():
            windows[(key, w.start, w.end)] = value
            if w.end + spec.grace_ms <= st:
                final.add((key, w.start, w.end, freeze(value)))
    return Oracle(dict(current), final, windows, late)


def oracle_sliding(spec: SlidingWindows, records: list[Record], agg: Agg) -> Oracle:
    """From scratch (``sliding_aggregate``); the input has no late record. A final result is
    emitted when the window closes (it stays stored ``size + 1`` longer, to seed newer
    windows, but can no longer change)."""
    final: set[tuple[str, int, int, Any]] = set()
    windows: dict[tuple[str, int, int], Any] = {}
    for recs in per_partition(records).values():
        st = max(ts for _k, _v, ts in recs)
        for key in {k for k, _v, _ts in recs}:
            mine = [(ts, v) for k, v, ts in recs if k == key]
            for w, value in sliding_aggregate(spec, mine, agg.init, agg.add).items():
                windows[(key, w.start, w.end)] = value
                if w.end + spec.grace_ms <= st:
                    final.add((key, w.start, w.end, freeze(value)))
    return Oracle({}, final, windows, 0)


def oracle_session(spec: SessionWindows, records: list[Record], agg: Agg) -> Oracle:
    final: set[tuple[str, int, int, Any]] = set()
    windows: dict[tuple[str, int, int], Any] = {}
    for recs in per_partition(records).values():
        st = max(ts for _k, _v, ts in recs)
        for key in {k for k, _v, _ts in recs}:
            mine = [(ts, v) for k, v, ts in recs if k == key]
            for w in sessionize(spec.gap_ms, [ts for ts, _v in mine]):
                value = agg.init()
                for ts, v in mine:
                    if w.contains(ts):
                        value = agg.add(value, v)
                windows[(key, w.start, w.end)] = value
                if w.end + spec.gap_ms + spec.grace_ms <= st:
                    final.add((key, w.start, w.end, freeze(value)))
    return Oracle({}, final, windows, 0)


def make_input(seed: int, n: int, *, back_max: int, step_max: int = 40, keys: int = 6) -> list[Record]:
    """Timestamps mostly ascending, every so often a step back of up to ``back_max`` ms."""
    rng = random.Random(seed)
    ts = T0
    out: list[Record] = []
    for _ in range(n):
        if rng.random() < 0.2:
            out.append((f"user{rng.randrange(keys)}", rng.randint(1, 9), ts - rng.randint(0, back_max)))
        else:
            ts += rng.randint(0, step_max)
            out.append((f"user{rng.randrange(keys)}", rng.randint(1, 9), ts))
    return out


SPECS: dict[str, WindowSpec] = {
    "tumbling": streamkit.tumbling(ms=100, grace=timedelta(milliseconds=30)),
    "hopping": streamkit.hopping(100, 40, grace=30),
    "sliding": streamkit.sliding(60, grace=30),
    "session": streamkit.session(50, grace=30),
}


def check(outs: list[Out], oracle: Oracle, mode: str, kind: str) -> None:
    results = [(o.key, o.value["start"], o.value["end"], o.value["value"]) for o in outs]
    for o in outs:
        assert o.value["key"] == o.key
    if mode == "final":
        assert len(results) == len(set(map(lambda r: (*r[:3], freeze(r[3])), results))), "a window emitted twice"
        assert {(*r[:3], freeze(r[3])) for r in results} == oracle.final
        for o in outs:
            assert o.timestamp == o.value["end"] - 1, "a final result is stamped with its window's last ms"
        return
    if kind in ("tumbling", "hopping"):
        got: dict[str, list[tuple[int, int, Any]]] = defaultdict(list)
        for key, start, end, value in results:
            got[key].append((start, end, value))
        assert dict(got) == oracle.current
        return
    # Sliding and session: the last result emitted for each final window is the oracle's
    # value; sessions also emit results for sessions later merged away (never final ones).
    last: dict[tuple[str, int, int], Any] = {}
    for key, start, end, value in results:
        last[(key, start, end)] = value
    for window, value in oracle.all_windows.items():
        assert last.get(window) == value, window
    if kind == "sliding":
        assert set(last) == set(oracle.all_windows)
    else:
        for key, start, end in last:
            assert any(k == key and s <= start and end <= e for k, s, e in oracle.all_windows)


@pytest.mark.parametrize(("mode", "expires"), [("final", None), ("current", None), ("final", 10_000)])
@pytest.mark.parametrize("kind", list(SPECS))
async def test_windowed_aggregations_match_the_oracle(make_app: Any, probe: Probe, kind: str, mode: str,
                                                      expires: int | None) -> None:
    """With ``expires``, closed windows stay stored (and are emitted from the by-end index
    instead of as they leave the store): the same results."""
    spec = SPECS[kind]
    session = kind == "session"
    # Fixed windows: steps back beyond the grace period (late records). Sliding and
    # session windows: within it (the incremental algorithms are exact for on-time records).
    back_max = {"tumbling": 90, "hopping": 200}.get(kind, 30)
    records = make_input(seed=sum(map(ord, kind + mode)), n=160, back_max=back_max)
    app = make_app()
    source = app.topic(f"{app.id}-in", value_type=int, partitions=PARTITIONS)
    aggs = [COUNT, SUM, MAX, SORTED if session else LIST]
    for agg in aggs:
        declare(app, source, spec, agg, mode, f"{app.id}-{agg.name}", session, expires)
    async with running(app) as runtime:
        await probe.produce_many(source.name, encode_records(records))
        await probe.settle(runtime)
        late = runtime.metrics.late_records
    for agg in aggs:
        if isinstance(spec, TumblingWindows | HoppingWindows):
            oracle = oracle_fixed(spec, records, agg)
        elif isinstance(spec, SlidingWindows):
            oracle = oracle_sliding(spec, records, agg)
        else:
            oracle = oracle_session(spec, records, agg)
        assert oracle.final, "the input closes some windows"
        outs = await read_out(probe, f"{app.id}-{agg.name}")
        check(outs, oracle, mode, kind)
    if isinstance(spec, TumblingWindows | HoppingWindows):
        assert late == len(aggs) * oracle_fixed(spec, records, COUNT).late
        assert late > 0, "the input has late records"
    else:
        assert late == 0


async def test_late_records_go_to_the_late_topic(make_app: Any, probe: Probe,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    app = make_app(config={"late.records.topic.name": f"late-{make_app().id}"})
    late_topic = app.settings.late_records_topic
    source = app.topic(f"{app.id}-in", value_type=int, partitions=PARTITIONS)
    app.stream(source).window(streamkit.tumbling(ms=100), grace=10).count(name="c").final().to(f"{app.id}-counts")
    records = [("k", 1, T0 + 5), ("k", 2, T0 + 150), ("k", 3, T0 + 50), ("k", 4, T0 + 105), ("k", 5, T0 + 250)]
    async with running(app) as runtime:
        for key, value, ts in encode_records(records):
            await probe.produce(source.name, value, key=key, timestamp=ts, headers=[("trace", b"t-%d" % ts)])
        await probe.settle(runtime)
        assert runtime.metrics.late_records == 1
        assert runtime.metrics.late_by_operator == {"c": 1}
        late = await eventually(lambda: _nonempty(probe, late_topic), "the late record")
    assert [(r.key, orjson.loads(r.value)) for r in late] == [(b'"k"', 3)]
    # Its own timestamp and headers.
    assert late[0].timestamp == T0 + 50
    assert list(late[0].headers) == [("trace", b"t-%d" % (T0 + 50))]
    assert "c: dropped 1 late record(s)" in caplog.text
    outs = await read_out(probe, f"{app.id}-counts")
    assert [(o.value["start"] - T0, o.value["value"]) for o in outs] == [(0, 1), (100, 2)]


async def test_late_log_lines_add_up_to_the_metric_in_a_running_worker(make_app: Any, probe: Probe,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Issue 17: a worker logged 'dropped 1 late record(s)' while its metric said 30, and the
    record was '0 ms behind' a watermark. Several late records within one log interval: the
    worker's lines (the first at once, the rest when it stops) add up to the metric, and each
    names a watermark its record is behind."""
    app = make_app()
    source = app.topic(f"{app.id}-in", value_type=int, partitions=1)
    app.stream(source).window(streamkit.tumbling(ms=100), grace=10).count(name="c").final().to(f"{app.id}-counts")
    late_ts = [T0 + 50, T0 + 60, T0 + 70, T0 + 80, T0 + 90]
    records = [("k", 1, T0 + 5), ("k", 2, T0 + 150), *[("k", 3, ts) for ts in late_ts], ("k", 4, T0 + 250)]
    caplog.set_level("WARNING", logger="streamkit.streams")
    async with running(app) as runtime:
        for key, value, ts in encode_records(records):
            await probe.produce(source.name, value, key=key, timestamp=ts)
        await probe.settle(runtime)
        assert runtime.metrics.late_by_operator == {"c": len(late_ts)}
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("c: dropped ")]
    assert sum(int(line.split()[2]) for line in lines) == len(late_ts), lines
    for line in lines:
        behind = int(line.split(" ms behind the watermark ")[0].rsplit(", ", 1)[1])
        assert behind > 0, line


async def _nonempty(probe: Probe, topic: str | None) -> Any:
    assert topic is not None
    if topic not in await probe.admin.list_topics():
        return None
    return await probe.read(topic) or None


async def test_window_idle_close(make_app: Any, probe: Probe) -> None:
    """With window.idle.close.ms, a partition whose input stopped has its stream time moved
    on by the wall clock, so its last window closes and its final result comes out, even
    when every input is idle."""
    app = make_app(config={"window.idle.close.ms": 200})
    source = app.topic(f"{app.id}-in", value_type=int, partitions=PARTITIONS)
    app.stream(source).window(streamkit.tumbling(ms=100)).count().final().to(f"{app.id}-counts")
    records = [("k", 1, T0 + 10), ("k", 1, T0 + 20), ("k", 1, T0 + 110)]
    async with running(app) as runtime:
        await probe.produce_many(source.name, encode_records(records))
        await probe.settle(runtime)
        # [T0, +100) closed by the record at T0+110; [T0+100, +200) only by idleness.
        outs = await eventually(lambda: _n_outputs(probe, f"{app.id}-counts", 2), "the idle window to close",
                                timeout=20)
    assert [(o.value["start"] - T0, o.value["value"]) for o in outs] == [(0, 2), (100, 1)]


async def test_no_idle_close_by_default(make_app: Any, probe: Probe) -> None:
    app = make_app()
    source = app.topic(f"{app.id}-in", value_type=int, partitions=PARTITIONS)
    app.stream(source).window(streamkit.tumbling(ms=100)).count().final().to(f"{app.id}-counts")
    async with running(app) as runtime:
        await probe.produce_many(source.name, encode_records([("k", 1, T0 + 10), ("k", 1, T0 + 110)]))
        await probe.settle(runtime)
        outs = await read_out(probe, f"{app.id}-counts")
    assert [(o.value["start"] - T0, o.value["value"]) for o in outs] == [(0, 1)]


def test_idle_clock_starts_when_stream_time_is_loaded() -> None:
    """window.idle.close.ms needs a wall-clock anchor per input: it is set when an input's
    watermark is restored from a store (after a restart or a move), not only when a record
    moves it; an input with no watermark drifts from nothing."""
    clock = InputClock(None, 0)
    clock.restore({"marks": {"0": 500}, "last": 500}, 10_000)
    assert clock.value(11_999, 2_000) == 500
    assert clock.value(12_000, 2_000) == 2_500
    assert clock.value(12_001, 2_000) == 2_501
    assert InputClock(None, 0).value(10**9, 1) == MIN_TIMESTAMP


async def _n_outputs(probe: Probe, topic: str, n: int) -> list[Out] | None:
    if topic not in await probe.admin.list_topics():
        return None
    outs = await read_out(probe, topic)
    return outs if len(outs) >= n else None


async def test_windows_survive_a_restart(make_app: Any, probe: Probe) -> None:
    """Window state and stream time are restored: a window that was open keeps counting, a
    record late before the restart is late after it, and nothing is emitted twice."""
    def build(app: App) -> Any:
        source = app.topic(f"{app.id}-in", value_type=int, partitions=PARTITIONS)
        app.stream(source).window(streamkit.tumbling(ms=100)).count(name="c").final().to(f"{app.id}-counts")
        return source

    app = make_app()
    source = build(app)
    async with running(app) as runtime:
        await probe.produce_many(source.name, encode_records([("k", 1, T0 + 10), ("k", 1, T0 + 120)]))
        await probe.settle(runtime)
    again = make_app(app_id=app.id, data_dir=app.data_dir)
    build(again)
    async with running(again) as runtime:
        await probe.produce_many(source.name, encode_records([("k", 1, T0 + 50), ("k", 1, T0 + 130), ("k", 1, T0 + 260)]))
        await probe.settle(runtime)
        assert runtime.metrics.late_records == 1
    outs = await read_out(probe, f"{app.id}-counts")
    assert [(o.value["start"] - T0, o.value["value"]) for o in outs] == [(0, 1), (100, 2)]


def test_session_aggregate_needs_a_merger(tmp_path: Any) -> None:
    app = App("a", data_dir=tmp_path)
    windowed = app.stream("t").window(streamkit.session(100))
    with pytest.raises(ValueError, match="needs merger="):
        windowed.aggregate(list, lambda a, v: [*a, v])
    windowed.aggregate(list, lambda a, v: [*a, v], merger=lambda a, b: [*a, *b], name="ok")
    # Other windows never merge: no merger needed.
    app.stream("t").window(streamkit.tumbling(100)).aggregate(list, lambda a, v: [*a, v], name="ok2")


async def test_group_by_then_window(make_app: Any, probe: Probe) -> None:
    """Views keyed by user, counted per page and minute: re-keyed through the repartition
    topic, then windowed there (one source partition, so the order is defined)."""
    app = make_app()
    views = app.topic(f"{app.id}-views", partitions=1)
    (app.stream(views)
        .filter(lambda v: v["page"] != "/health")
        .group_by(lambda v: v["page"], name="by-page")
        .window(streamkit.tumbling(minutes=1), grace=timedelta(seconds=10))
        .count(name="per-minute")
        .final()
        .to(f"{app.id}-counts"))
    rng = random.Random(3)
    pages = ["/", "/a", "/b", "/health"]
    records = [(f"user{rng.randrange(5)}", {"page": rng.choice(pages)}, T0 + i * 1_500) for i in range(200)]
    # Every page then sees a record far ahead, which closes all of its earlier windows.
    closing = [("user0", {"page": p}, T0 + 3_600_000) for p in pages]
    async with running(app) as runtime:
        await probe.produce_many(views.name, encode_records(records + closing))
        await probe.settle(runtime)
    expected: dict[tuple[str, int], int] = defaultdict(int)
    for _user, view, ts in records:
        if view["page"] != "/health":
            expected[(view["page"], ts - ts % 60_000)] += 1
    outs = await read_out(probe, f"{app.id}-counts")
    got = {(o.key, o.value["start"]): o.value["value"] for o in outs}
    assert len(got) == len(outs)
    assert got == dict(expected)
    assert {o.partition for o in outs if o.key == "/a"} == {partition_for_key(b"/a", PARTITIONS)}


@pytest.mark.parametrize("operator", ["window", "to_table"])
async def test_state_with_fewer_partitions_than_its_input_is_refused(make_app: Any, operator: str) -> None:
    """Stateful operators keep partition p of their state for input partition p: an input
    with more partitions than the state (``num.partitions``) has records with no state
    partition. The worker refuses to start, naming both, instead of failing at the first
    such record."""
    app = make_app()
    wide = app.topic(f"{app.id}-wide", partitions=8)
    stream = app.stream(wide)
    if operator == "window":
        stream.window(streamkit.tumbling(ms=100)).count(name="c").final().to(f"{app.id}-out")
    else:
        stream.to_table("latest")
    with pytest.raises(CoPartitionError) as info:
        await app.start()
    assert app.runtime is None
    message = str(info.value)
    assert f"{wide.name}: 8" in message and ": 4" in message
    assert "num.partitions" in message or "group_by" in message


# -- event time from a timestamp extractor --------------------------------------------------


def scrambled(records: list[tuple[str, int]]) -> list[tuple[bytes, bytes, int]]:
    """(key, event time) pairs as records whose *record* timestamps say nothing: they count
    down, so by record time the last record would be in the first window and every window
    but the last would close at once."""
    n = len(records)
    return [(k.encode(), orjson.dumps({"at": at, "n": i}), T0 + 10 * (n - i)) for i, (k, at) in enumerate(records)]


EVENT_TIMES = [("k", T0 + 5), ("k", T0 + 30), ("j", T0 + 90), ("k", T0 + 120), ("j", T0 + 150), ("k", T0 + 260)]
# Tumbling 100 ms by the value's "at": [0, 100) k=2 j=1; [100, 200) k=1 j=1; [200, 300) open.
EXPECTED_BY_VALUE_TIME = [("j", 0, 1), ("j", 100, 1), ("k", 0, 2), ("k", 100, 1)]


@pytest.mark.parametrize("where", ["topic", "window"])
async def test_windows_by_event_time_from_the_value(make_app: Any, probe: Probe, where: str) -> None:
    """Windows are assigned by a field of the value, through a timestamp extractor on the
    topic (every use of it) or on one window; the record timestamps are ignored. One
    partition, so stream time covers every key."""
    app = make_app()
    at = lambda event: event.value["at"]  # noqa: E731
    source = app.topic(f"{app.id}-in", partitions=1, timestamp=at if where == "topic" else None)
    (app.stream(source)
        .window(streamkit.tumbling(ms=100), timestamp=at if where == "window" else None)
        .count(name="c")
        .final()
        .to(f"{app.id}-counts"))
    async with running(app) as runtime:
        await probe.produce_many(source.name, scrambled(EVENT_TIMES))
        await probe.settle(runtime)
        assert runtime.metrics.late_records == 0
    outs = await read_out(probe, f"{app.id}-counts")
    assert sorted((o.key, o.value["start"] - T0, o.value["value"]) for o in outs) == EXPECTED_BY_VALUE_TIME
    # A final result is stamped with its window's last millisecond, in event time.
    assert all(o.timestamp == o.value["end"] - 1 for o in outs)


async def test_a_topic_timestamp_extractor_reaches_outputs_and_repartitions(make_app: Any, probe: Probe) -> None:
    """The extracted time is the event's timestamp everywhere: on records a pipeline
    writes, and on repartitioned records (so windows after a group_by use it too)."""
    app = make_app()
    source = app.topic(f"{app.id}-in", partitions=1, timestamp=lambda e: e.value["at"])
    regrouped = app.stream(source).group_by(lambda v: "all", name="all")
    regrouped.to(f"{app.id}-copy")
    regrouped.window(streamkit.tumbling(ms=100)).count(name="c").final().to(f"{app.id}-counts")
    async with running(app) as runtime:
        await probe.produce_many(source.name, scrambled(EVENT_TIMES))
        await probe.settle(runtime)
    copies = await read_out(probe, f"{app.id}-copy")
    assert [o.timestamp for o in copies] == [t for _k, t in EVENT_TIMES]
    counts = await read_out(probe, f"{app.id}-counts")
    assert [(o.value["start"] - T0, o.value["value"]) for o in counts] == [(0, 3), (100, 2)]


async def test_a_failing_timestamp_extractor_follows_the_error_policy(make_app: Any, probe: Probe) -> None:
    """A record the extractor fails on (a missing field, a float) is a bad record: with
    deserialization.exception.handler=skip it is skipped and counted, the rest goes on."""
    app = make_app(config={"deserialization.exception.handler": "skip"})
    source = app.topic(f"{app.id}-in", partitions=1, timestamp=lambda e: e.value["at"])
    app.stream(source).map(lambda v: v["n"]).to(f"{app.id}-out")
    values = [{"at": T0, "n": 1}, {"n": 2}, {"at": 1.5, "n": 3}, {"at": T0 + 1, "n": 4}]
    async with running(app) as runtime:
        await probe.produce_many(source.name, [(b"k", orjson.dumps(v), T0) for v in values])
        await probe.settle(runtime)
        assert runtime.metrics.deserialization_errors == 2
    assert [(o.value, o.timestamp) for o in await read_out(probe, f"{app.id}-out")] == [(1, T0), (4, T0 + 1)]


def test_timestamp_extractors_must_be_functions(tmp_path: Any) -> None:
    app = App("a", data_dir=tmp_path)
    with pytest.raises(TypeError, match="timestamp must be a function"):
        app.topic("t", timestamp=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timestamp must be a function"):
        app.stream("t2").window(streamkit.tumbling(ms=10), timestamp="at")  # type: ignore[arg-type]


# -- window retention (expires) and interactive queries ---------------------------------------


async def test_closed_windows_stay_queryable_until_they_expire(make_app: Any, probe: Probe, tmp_path: Any) -> None:
    """``.window(..., expires=300)``: a closed window is emitted once (final) and can no
    longer change (a record for it is late), but stays in the store, and in interactive
    queries, until ``end + 300 <= stream time``; then it is deleted. Across a restart
    nothing is emitted twice."""
    def build(app: App) -> tuple[Any, Any]:
        source = app.topic(f"{app.id}-in", value_type=int, partitions=1)
        counts = app.stream(source).window(streamkit.tumbling(ms=100), expires=300).count(name="counts")
        counts.final().to(f"{app.id}-counts")
        return source, counts.table

    def windows(table: Any, key: str) -> list[tuple[int, int, int]]:
        try:
            return [(w["start"] - T0, w["end"] - T0, w["value"]) for w in table.query(key)]
        except KeyError:
            return []

    app = make_app()
    source, table = build(app)
    async with running(app, web_port=0) as runtime:
        await probe.produce_many(source.name, encode_records([("k", 1, T0 + 10), ("k", 1, T0 + 50), ("j", 1, T0 + 60),
                                                              ("k", 1, T0 + 150)]))
        await probe.settle(runtime)
        # [0, 100) closed at stream time 150, still stored; a record for it is late.
        assert windows(table, "k") == [(0, 100, 2), (100, 200, 1)]
        await probe.produce_many(source.name, encode_records([("k", 1, T0 + 20)]))
        await probe.settle(runtime)
        assert runtime.metrics.late_records == 1
        assert windows(table, "k") == [(0, 100, 2), (100, 200, 1)]
        status, body = await http_get(runtime.web.port, "/tables/counts/j")
        assert (status, body) == (200, {"key": "j", "value": [{"start": T0, "end": T0 + 100, "value": 1}]})
        status, body = await http_get(runtime.web.port, "/tables/counts")
        assert status == 200 and set(body) == {"j", "k"}
        await probe.produce_many(source.name, encode_records([("k", 1, T0 + 400)]))  # 100 + 300 <= 400
        await probe.settle(runtime)
        assert windows(table, "k") == [(100, 200, 1), (400, 500, 1)]
        assert windows(table, "j") == []
        assert (await http_get(runtime.web.port, "/tables/counts/j"))[0] == 404
    again = make_app(app_id=app.id, data_dir=app.data_dir)
    source, table = build(again)
    async with running(again) as runtime:
        await probe.produce_many(source.name, encode_records([("k", 1, T0 + 420), ("k", 1, T0 + 530)]))
        await probe.settle(runtime)
        assert windows(table, "k") == [(400, 500, 2), (500, 600, 1)]  # [100, 200) expired at 500
    outs = await read_out(probe, f"{app.id}-counts")
    assert sorted((o.key, o.value["start"] - T0, o.value["value"]) for o in outs) == [
        ("j", 0, 1), ("k", 0, 2), ("k", 100, 1), ("k", 400, 2)]


def test_expires_must_cover_the_windows_life(tmp_path: Any) -> None:
    app = App("a", data_dir=tmp_path)
    s = app.stream("t")
    s.window(streamkit.tumbling(ms=100), grace=50, expires=50)
    with pytest.raises(ValueError, match=r"expires \(49 ms\) must be at least 50 ms"):
        s.window(streamkit.tumbling(ms=100), grace=50, expires=49)
    with pytest.raises(ValueError, match="at least 81 ms"):
        s.window(streamkit.sliding(60, grace=20), expires=timedelta(milliseconds=80))
    with pytest.raises(ValueError, match="at least 150 ms"):
        s.window(streamkit.session(100, grace=50), expires=149)


# -- default names of stateful operators -------------------------------------------------------


def _pipelines(app: App, order: list[str]) -> None:
    parts = {
        "counts": lambda: (app.stream("views")
                           .filter(lambda v: v["page"] != "/health")
                           .group_by(lambda v: v["page"])
                           .window(streamkit.tumbling(ms=100))
                           .count()
                           .final()
                           .to("counts")),
        "join": lambda: app.stream("clicks").join(app.stream("views"), within=10).to("joined"),
        "other": lambda: app.stream("other").map(lambda v: v).group_by(lambda v: v).to("other-out"),
    }
    for name in order:
        parts[name]()


def _state_names(app: App) -> tuple[list[str], list[str]]:
    return sorted(t.name for t in app.topics.values() if t.internal), sorted(app.tables)


def test_unnamed_stateful_operators_are_named_after_their_place(tmp_path: Any,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """Unnamed group_by, aggregations and joins are named from the source topic and the
    operators from it, so the names (and with them repartition topics, changelogs and
    stores) do not depend on the order pipelines are declared in, or on what else the app
    declares; each is logged with a warning that recommends naming it."""
    first = App("app", data_dir=tmp_path / "1")
    with caplog.at_level("WARNING", logger="streamkit.streams.dsl"):
        _pipelines(first, ["counts", "join"])
    warned = [r.getMessage() for r in caplog.records if "has no name=" in r.getMessage()]
    second = App("app", data_dir=tmp_path / "2")
    second.stream("views").map(lambda v: v).to("unrelated")  # more nodes, declared first
    _pipelines(second, ["other", "join", "counts"])
    topics, tables = _state_names(first)
    assert topics == ["app-clicks-join-views-left-changelog", "app-clicks-join-views-right-changelog",
                      "app-views-filter-group-by-repartition", "app-views-filter-group-by-tumbling-count-changelog"]
    assert tables == ["clicks-join-views-left", "clicks-join-views-right", "views-filter-group-by-tumbling-count"]
    assert {t for t in _state_names(second)[0] if "other" not in t} == set(topics)
    assert _state_names(second)[1] == tables
    assert len(warned) == 3 and "'views-filter-group-by'" in warned[0]


def test_structurally_identical_unnamed_operators_are_kept_apart(tmp_path: Any) -> None:
    app = App("app", data_dir=tmp_path)
    views = app.stream("views")
    views.group_by(lambda v: v["page"]).to("by-page")
    views.group_by(lambda v: v["user"]).to("by-user")
    views.group_by(lambda v: v["page"], name="pages").to("named")
    assert [t for t in _state_names(app)[0] if t.endswith("-repartition")] == [
        "app-pages-repartition", "app-views-group-by-2-repartition", "app-views-group-by-repartition"]
