"""The vectorized DSL: column expressions (typing, row vs Arrow evaluation), explain(), and
the columnar executor against the row path over random pipelines and inputs."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, field_validator

import streamkit
from streamkit.streams.app import App
from streamkit.streams.columnar import ExprTypeError, col, count, lit, max, min, sum
from streamkit.streams.columnar.executor import ColumnarSource
from streamkit.streams.columnar.expr import Expr

from .pipeline_driver import LATE_TOPIC, Record, Topology

T0 = 1_700_000_040_000
PARTITIONS = 2
PAGES = ["/a", "/b", "/health", "/c"]


class View(BaseModel):
    page: str
    user: str | None = None
    amount: int | None = None
    ok: bool = True


class CheckedView(BaseModel):
    page: str

    @field_validator("page")
    @classmethod
    def no_spaces(cls, v: str) -> str:
        return v.strip()


# -- typing at build time ----------------------------------------------------------------------


def _views(model: Any = View) -> tuple[App, Any]:
    app = App("typed", config={"num.partitions": PARTITIONS})
    return app, app.stream(app.topic("views", value_type=model, partitions=PARTITIONS))


def test_unknown_field_names_the_model_and_its_fields() -> None:
    _app, views = _views()
    with pytest.raises(ExprTypeError, match=r"col\('pgae'\): View has no field 'pgae' \(its fields: page, user"):
        views.filter(col("pgae") != "/health")


def test_comparing_a_string_field_with_a_number_is_refused() -> None:
    _app, views = _views()
    with pytest.raises(ExprTypeError, match=r"cannot compare View.page \(str\) with 5 \(int\)"):
        views.filter(col("page") == 5)


def test_sum_over_a_string_and_a_non_condition_filter_are_refused() -> None:
    _app, views = _views()
    with pytest.raises(ExprTypeError, match=r"sum\(col\('page'\)\): View.page \(str\) is not a number"):
        views.window(streamkit.tumbling(seconds=1)).agg(count(), sum("page"))
    with pytest.raises(ExprTypeError, match="not a bool"):
        views.filter(col("amount") + 1)
    with pytest.raises(ExprTypeError, match="alike"):
        views.window(streamkit.tumbling(seconds=1)).agg(sum("amount"), sum("amount"))
    with pytest.raises(TypeError, match="no truth value"):
        bool(col("a") == 1)


def test_dict_values_are_not_typed_but_a_model_is() -> None:
    app = App("untyped", config={"num.partitions": PARTITIONS})
    views = app.stream(app.topic("views", partitions=PARTITIONS))
    views.filter(col("anything") == 5)  # no model: nothing to check against


# -- one expression, two evaluations -------------------------------------------------------------

_value = st.fixed_dictionaries({
    "page": st.one_of(st.none(), st.sampled_from(PAGES)),
    "amount": st.one_of(st.none(), st.integers(-1000, 1000)),
    "ok": st.one_of(st.none(), st.booleans()),
})


@st.composite
def _exprs(draw: st.DrawFn, depth: int = 2) -> Expr:
    leaf = draw(st.sampled_from(["page", "amount", "ok", "in"]))
    if leaf == "page":
        e: Expr = col("page") == draw(st.sampled_from(PAGES)) if draw(st.booleans()) else \
            col("page") != draw(st.sampled_from(PAGES))
    elif leaf == "amount":
        lhs = col("amount") * draw(st.integers(-3, 3)) + draw(st.integers(-5, 5))
        e = draw(st.sampled_from([lhs > 0, lhs <= 10, lhs == 2, 3 - col("amount") >= lit(0)]))
    elif leaf == "ok":
        e = col("ok") == True  # noqa: E712 - a column expression, not a truth test
    else:
        e = col("page").is_in(draw(st.lists(st.sampled_from(PAGES), max_size=2)))
    if depth and draw(st.booleans()):
        other = draw(_exprs(depth - 1))
        e = draw(st.sampled_from([e & other, e | other, ~e]))
    return e


@settings(max_examples=150, deadline=None)
@given(st.lists(_value, min_size=1, max_size=20), _exprs())
def test_row_and_arrow_evaluations_agree_with_nulls(values: list[dict[str, Any]], expr: Expr) -> None:
    table = pa.table({"page": pa.array([v["page"] for v in values], pa.string()),
                      "amount": pa.array([v["amount"] for v in values], pa.int64()),
                      "ok": pa.array([v["ok"] for v in values], pa.bool_())})
    assert expr.arrow(table).to_pylist() == [expr.row()(v) for v in values]


# -- explain ---------------------------------------------------------------------------------


def test_explain_says_which_path_each_step_takes_and_why() -> None:
    app = App("explained", config={"num.partitions": PARTITIONS})
    views = app.topic("views", value_type=View, partitions=PARTITIONS)
    (app.stream(views).filter(col("page") != "/health").window(streamkit.tumbling(minutes=1))
        .agg(count(), sum("amount"), name="stats").final().to("stats"))
    clicks = app.topic("clicks", partitions=PARTITIONS)
    app.stream(clicks).filter(lambda v: v["page"] != "/health").window(streamkit.tumbling(minutes=1)).count(
        name="clicks").final().to("click-counts")
    text = app.streams[0].explain()
    lines = text.splitlines()
    assert lines[0] == "topic views:"
    assert "columnar" in lines[1] and "Arrow columns" in lines[1]
    assert "filter (col('page') != '/health')" in lines[2] and "Arrow compute kernel" in lines[2]
    assert "tumbling 'stats': count(), sum(col('amount')) .final()" in lines[3] and "columnar" in lines[3]
    assert "to stats" in lines[4] and "row" in lines[4] and "per window result" in lines[4]
    clicks_at = lines.index("topic clicks:")
    assert "row path: filter(lambda)" in lines[clicks_at + 1]
    assert "filter <lambda>" in lines[clicks_at + 2] and " row " in lines[clicks_at + 2]


def test_explain_names_what_keeps_a_chain_on_the_row_path() -> None:
    app = App("reasons", config={"num.partitions": PARTITIONS})
    checked = app.topic("checked", value_type=CheckedView, partitions=PARTITIONS)
    app.stream(checked).window(streamkit.tumbling(seconds=1)).count(name="a").final().to("a")
    views = app.topic("views", value_type=View, partitions=PARTITIONS)
    app.stream(views).window(streamkit.tumbling(seconds=1)).count(name="b").current().to("b")
    text = app.streams[0].explain()
    assert "CheckedView has validators" in text
    assert ".current() emits a result per record" in text


# -- the columnar executor against the row path ----------------------------------------------


@st.composite
def _pipelines(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.sampled_from([100, 250, 1000]))
    hopping = draw(st.booleans())
    advance = draw(st.sampled_from([d for d in (50, 100, 125, 250) if size % d == 0 and d < size])) \
        if hopping else size
    return {
        "filters": draw(st.lists(_exprs(1), max_size=2)),
        "size": size, "advance": advance, "grace": draw(st.sampled_from([0, 50, 300])),
        "aggs": draw(st.sampled_from(["count", "sum", "agg"])),
        "model": draw(st.sampled_from(["model", "json", "dict"])),  # value_type: View, none, dict
    }


@st.composite
def _inputs(draw: st.DrawFn) -> dict[int, list[tuple[str | None, dict[str, Any], int]]]:
    out: dict[int, list[tuple[str | None, dict[str, Any], int]]] = {}
    for p in range(PARTITIONS):
        ts = T0
        records = []
        for _ in range(draw(st.integers(0, 40))):
            ts += draw(st.integers(0, 120))
            late_by = draw(st.sampled_from([0, 0, 0, 30, 400, 2000]))  # some out of order, some late
            value = draw(_value)
            if value["page"] is None:
                value["page"] = "/a"  # page is required by the model
            if value["ok"] is None:
                value["ok"] = True  # a null (or a missing field with a default) is pydantic's to judge
            if draw(st.booleans()):
                value.pop("amount")  # missing, and optional: null in both paths
            # A key lives in one partition (as the partitioner puts it); no key, in partition 0.
            keys = st.sampled_from([f"p{p}k{i}" for i in range(4)])
            key = draw(st.one_of(keys, st.none()) if p == 0 else keys)
            records.append((key, value, ts - late_by))
        out[p] = records
    return out


def _app(pipeline: dict[str, Any], columnar: bool, *, through_filter: bool = False) -> App:
    app = App("columnar", config={"num.partitions": PARTITIONS, "late.records.topic.name": LATE_TOPIC,
                                  "dsl.columnar.enable": columnar})
    model = {"model": View, "json": None, "dict": dict}[pipeline["model"]]
    views = app.topic("views", value_type=model, partitions=PARTITIONS)
    node = app.stream(views)
    for f in pipeline["filters"]:
        node = node.filter(f)
    spec = (streamkit.tumbling(timedelta(milliseconds=pipeline["size"])) if pipeline["advance"] == pipeline["size"]
            else streamkit.hopping(timedelta(milliseconds=pipeline["size"]),
                                   timedelta(milliseconds=pipeline["advance"])))
    windowed = node.window(spec, grace=timedelta(milliseconds=pipeline["grace"]))
    agg = {"count": lambda: windowed.count(name="out"), "sum": lambda: windowed.sum(col("amount"), name="out"),
           "agg": lambda: windowed.agg(count(), sum("amount"), min("amount"), max(col("page")).alias("last"),
                                       name="out")}[pipeline["aggs"]]()
    final = agg.final()
    if through_filter:  # results reach the sink as events (WindowAggregate._final), not encoded by _finals
        final = final.filter(lambda _r: True)
    final.to("results")
    return app


def _run(pipeline: dict[str, Any], inputs: dict[int, list[Any]], columnar: bool, seed: int, *,
         through_filter: bool = False) -> Topology:
    topology = Topology(_app(pipeline, columnar, through_filter=through_filter))
    for p, records in inputs.items():
        log = topology.worker.produced[("views", p)]
        for key, value, ts in records:
            log.append(Record("views", p, len(log), ts, None if key is None else key.encode(),
                              orjson.dumps(value), ()))
    asyncio.run(topology.run(random.Random(seed), 12))
    return topology


def _late(topology: Topology) -> list[tuple[Any, int]]:
    return sorted((r.key or b"", r.timestamp) for (topic, _p), log in topology.worker.produced.items()
                  if topic == LATE_TOPIC for r in log)


@settings(max_examples=60, deadline=None)
@given(_pipelines(), _inputs(), st.integers(0, 1000))
def test_columnar_results_equal_the_row_paths(pipeline: dict[str, Any], inputs: dict[int, list[Any]],
                                              seed: int) -> None:
    row = _run(pipeline, inputs, columnar=False, seed=seed)
    columnar = _run(pipeline, inputs, columnar=True, seed=seed)
    assert not any(isinstance(s, ColumnarSource) for s in row.sources.values())
    source = columnar.sources["views"]
    assert isinstance(source, ColumnarSource)
    if any(inputs.values()):
        assert source.columnar_batches > 0  # every generated value fits: no batch fell back
        assert source.row_batches == 0
    assert columnar.windows("results") == row.windows("results")
    assert _late(columnar) == _late(row)
    assert columnar.worker.metrics.late_records == row.worker.metrics.late_records


@settings(max_examples=30, deadline=None)
@given(_pipelines(), _inputs(), st.integers(0, 1000), st.booleans())
def test_final_results_written_straight_to_a_sink_equal_those_sent_through_the_chain(
        pipeline: dict[str, Any], inputs: dict[int, list[Any]], seed: int, columnar: bool) -> None:
    """A windowed aggregation's final results go into its sink encoded per window
    (``WindowAggregate._finals``): the same records, byte for byte, partition, order and
    timestamp, as results going through a step first (an Event per result, the sink's own
    encoding)."""
    direct = _run(pipeline, inputs, columnar=columnar, seed=seed)
    through = _run(pipeline, inputs, columnar=columnar, seed=seed, through_filter=True)

    def results(topology: Topology) -> dict[Any, list[Any]]:
        return {tp: [(r.key, r.value, r.timestamp) for r in log]
                for tp, log in topology.worker.produced.items() if tp[0] == "results"}

    assert results(direct) == results(through)


# Values pydantic coerces and Arrow's typed reader refuses: the row path takes their batches.
_COERCED = [{"page": "/a", "amount": "12", "ok": True}, {"page": "/a", "amount": 12.0, "ok": True},
            {"page": "/a", "amount": True, "ok": True}, {"page": "/a", "amount": 3, "ok": 1}]


@pytest.mark.parametrize("odd", _COERCED)
def test_a_batch_the_decode_refuses_runs_on_the_row_path_with_the_same_results(odd: dict[str, Any]) -> None:
    pipeline = {"filters": [col("page") != "/health"], "size": 100, "advance": 100, "grace": 0, "aggs": "agg",
                "model": "model"}
    rng = random.Random(7)
    inputs: dict[int, list[Any]] = {p: [(f"p{p}k{rng.randint(1, 3)}", {"page": rng.choice(PAGES), "amount": i, "ok": True}, T0 + i * 7)
                                        for i in range(60)] for p in range(PARTITIONS)}
    inputs[0][10] = ("p0k1", odd, T0 + 70)
    row = _run(pipeline, inputs, columnar=False, seed=3)
    columnar = _run(pipeline, inputs, columnar=True, seed=3)
    source = columnar.sources["views"]
    assert isinstance(source, ColumnarSource)
    assert source.row_batches >= 1 and source.columnar_batches >= 1
    assert columnar.windows("results") == row.windows("results")
    assert any(v["sum_amount"] for v in row.windows("results").values())


def test_group_by_a_column_expression_equals_the_lambda_and_explains_the_repartition() -> None:
    def app_with(key: Any, columnar: bool) -> App:
        app = App("regroup", config={"num.partitions": PARTITIONS, "dsl.columnar.enable": columnar})
        views = app.topic("views", value_type=View, partitions=PARTITIONS)
        (app.stream(views).filter(col("page") != "/health").group_by(key, name="by-page")
            .window(streamkit.tumbling(timedelta(milliseconds=100))).count(name="out").final().to("results"))
        return app

    rng = random.Random(11)
    records = [(p, f"u{rng.randint(1, 4)}", rng.choice(PAGES), T0 + i * 13) for p in range(PARTITIONS)
               for i in range(80)]
    outputs = []
    for key in (col("page"), lambda v: v.page):
        topology = Topology(app_with(key, columnar=True))
        for p, user, page, ts in records:
            log = topology.worker.produced[("views", p)]
            log.append(Record("views", p, len(log), ts, user.encode(), orjson.dumps({"page": page, "user": user}), ()))
        asyncio.run(topology.run(random.Random(5), 10))
        outputs.append(topology.windows("results"))
    assert outputs[0] == outputs[1]
    assert {key for key, _s, _e in outputs[0]} == {"/a", "/b", "/c"}
    text = app_with(col("page"), columnar=True).streams[0].explain()
    assert "group_by col('page') -> regroup-by-page-repartition" in text
    assert "(repartitioned records)" in text


def test_an_arithmetic_overflow_sends_the_batch_to_the_row_path() -> None:
    pipeline = {"filters": [col("amount") * 4 > 0], "size": 100, "advance": 100, "grace": 0, "aggs": "count",
                "model": "model"}
    inputs: dict[int, list[Any]] = {p: [(f"p{p}k{i % 3}", {"page": "/a", "amount": 2**62 if i == 5 else i,
                                                          "ok": True}, T0 + i * 9) for i in range(1, 50)]
                                    for p in range(PARTITIONS)}
    row = _run(pipeline, inputs, columnar=False, seed=1)
    columnar = _run(pipeline, inputs, columnar=True, seed=1)
    source = columnar.sources["views"]
    assert isinstance(source, ColumnarSource)
    assert source.row_batches >= 1 and source.columnar_batches >= 1
    assert columnar.windows("results") == row.windows("results")
