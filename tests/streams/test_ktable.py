"""Aggregations without a window: tables (Kafka Streams' KTable) in the DSL, on a real broker.

``group_by(...).count()`` (and ``sum``, ``reduce``, ``aggregate``) returns a table: queryable
over the web API, joinable, and readable as its update stream, one update per key and
commit. ``group_by_key()`` aggregates a keyed input as it is; ``repartition(partitions=)``
moves records through a repartition topic with their keys."""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import quote

import orjson
import pytest

from streamkit.streams.topic import partition_for_key
from streamkit.testing import http_get

from .conftest import Probe, eventually, running

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]

T0 = 1_700_000_000_000
PAGES = ["/", "/a", "/b"]


def views(n: int) -> list[tuple[bytes, bytes, int]]:
    return [(f"user{i % 7}".encode(), orjson.dumps({"page": PAGES[i * 5 // 7 % 3], "ms": i}), T0 + i) for i in range(n)]


async def test_count_is_a_queryable_table_with_updates_once_per_commit(make_app: Any, probe: Probe) -> None:
    # Commits only when the worker stops: every update of a key in between is folded into one.
    app = make_app(config={"commit.interval.ms": 600_000})
    source = app.topic(f"{app.id}-views", value_type=dict, partitions=2)
    counts = app.stream(source).group_by(lambda v: v["page"], name="by-page").count(name="page-counts")
    counts.to_stream().to(f"{app.id}-updates")
    records = views(90)
    expected = Counter(orjson.loads(v)["page"] for _k, v, _ts in records)
    async with running(app, web_port=0) as runtime:
        await probe.produce_many(source.name, records)
        assert runtime.web is not None

        async def queried() -> dict[str, Any] | None:
            got = {}
            for page in PAGES:
                status, body = await http_get(runtime.web.port, f"/tables/page-counts/{quote(page, safe='')}")
                if status != 200:
                    return None
                got[page] = body["value"]
            return got if got == dict(expected) else None

        await eventually(queried, "the counts to be queryable")
    updates = await probe.read(f"{app.id}-updates")
    assert sorted((r.key.decode(), orjson.loads(r.value)) for r in updates) == sorted(expected.items())


async def test_sum_reduce_aggregate_and_a_stream_table_join(make_app: Any, probe: Probe) -> None:
    app = make_app()
    source = app.topic(f"{app.id}-views", value_type=dict, partitions=2)
    by_page = app.stream(source).group_by(lambda v: v["page"], name="by-page")
    by_page.sum(lambda v: v["ms"], name="ms-sum").to(f"{app.id}-sums")
    by_page.reduce(lambda a, b: a if a["ms"] > b["ms"] else b, name="latest").to(f"{app.id}-latest")
    totals = by_page.aggregate(list, lambda acc, v: [*acc, v["ms"]], value_type=list, name="all-ms")
    lookups = app.topic(f"{app.id}-lookups", partitions=app.settings.num_partitions)
    app.stream(lookups).join(totals, joiner=lambda _v, ms: len(ms)).to(f"{app.id}-joined")
    records = views(60)
    values = [orjson.loads(v) for _k, v, _ts in records]
    async with running(app) as runtime:
        await probe.produce_many(source.name, records)
        await probe.settle(runtime)
        await probe.produce_many(lookups.name, [(p.encode(), b'"?"', T0) for p in PAGES])
        await probe.settle(runtime)

    def last(records: list[Any]) -> dict[str, Any]:
        return {r.key.decode(): orjson.loads(r.value) for r in records}

    assert last(await probe.read(f"{app.id}-sums")) == {
        p: sum(v["ms"] for v in values if v["page"] == p) for p in PAGES}
    assert last(await probe.read(f"{app.id}-latest")) == {
        p: max((v for v in values if v["page"] == p), key=lambda v: v["ms"]) for p in PAGES}
    assert last(await probe.read(f"{app.id}-joined")) == Counter(v["page"] for v in values)


async def test_group_by_key_and_repartition(make_app: Any, probe: Probe) -> None:
    """A keyed input counted as it is (no repartition topic), and the same input moved to
    a 3-partition topic by ``repartition`` first, keys unchanged."""
    # The test reads the repartition topic afterwards: nothing purged meanwhile.
    app = make_app(config={"num.partitions": 3, "repartition.purge.interval.ms": 600_000})
    source = app.topic(f"{app.id}-clicks", partitions=3)
    app.stream(source).group_by_key().count(name="direct").to(f"{app.id}-direct")
    moved = app.stream(source).repartition(partitions=3, name="spread")
    moved.count(name="moved").to(f"{app.id}-moved")
    records = [(f"k{i % 5}".encode(), b'"x"', T0 + i) for i in range(50)]
    async with running(app) as runtime:
        await probe.produce_many(source.name, records)
        await probe.settle(runtime)
    expected = {f"k{i}": 10 for i in range(5)}
    for out in ("direct", "moved"):
        got = {r.key.decode(): orjson.loads(r.value) for r in await probe.read(f"{app.id}-{out}")}
        assert got == expected
    assert f"{app.id}-direct-repartition" not in app.topics
    stamped = [r for r in await probe.read(f"{app.id}-spread-repartition") if r.value]
    assert len(stamped) == 50
    assert all(r.partition == partition_for_key(r.key, 3) for r in stamped)
