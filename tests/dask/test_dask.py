"""Dask reads equal the records produced; tables read back from a real app's changelog."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import BaseModel

import streamkit.dask
from streamkit.analytics.tables import table_decoder
from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.streams.topic import partition_for_key
from streamkit.testing import BrokerThread
from tests.analytics.util import T0, Rec, create_topics, produce, wait_for_table

pytestmark = pytest.mark.integration

FAST = {"commit.interval.ms": 100, "session.timeout.ms": 3000, "heartbeat.interval.ms": 500, "linger.ms": 1}


class Order(BaseModel):
    item: str
    qty: int
    price: float
    at: dt.datetime


def _order(i: int) -> Order:
    return Order(item=f"i{i % 5}", qty=i, price=i / 2, at=dt.datetime.fromtimestamp((T0 + i) / 1000, dt.UTC))


@pytest.fixture(scope="module")
def orders(broker: BrokerThread) -> list[Rec]:
    create_topics(broker.bootstrap, {"orders": 3})
    records = [Rec(f"c{i % 4}".encode(), _order(i).model_dump_json().encode(), i % 3, T0 + i) for i in range(90)]
    produce(broker.bootstrap, "orders", records)
    return records


def test_read_topic_equals_the_records_produced(broker: BrokerThread, orders: list[Rec]) -> None:
    df = streamkit.dask.read_topic(broker.bootstrap, "orders")
    assert df.npartitions == 3
    got = df.compute()
    assert list(got.columns) == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows = sorted(zip(got.partition, got.offset, got.key, got.value,
                      got.timestamp.map(lambda t: int(t.timestamp() * 1000)), strict=True))
    offsets: dict[int, int] = {}
    want = []
    for r in orders:
        offset = offsets.get(r.partition, 0)
        offsets[r.partition] = offset + 1
        want.append((r.partition, offset, r.key, r.value, r.timestamp))
    assert rows == sorted(want)


def test_read_topic_with_a_model_and_a_range(broker: BrokerThread, orders: list[Rec]) -> None:
    df = streamkit.dask.read_topic(broker.bootstrap, "orders", Order, start={0: 10, 1: 0, 2: 29}, end=20,
                                   partition_size=7)
    assert df.npartitions == 2 + 3 + 0  # [10, 20) in 7s; [0, 20) in 7s; [29, 20) is empty
    got = df.compute()
    assert list(got.columns) == ["item", "qty", "price", "at"]
    assert str(got.dtypes["qty"]) == "int64" and str(got.dtypes["price"]) == "float64"
    want = [_order(i) for i in range(90) if (i % 3 == 0 and 10 <= i // 3 < 20) or (i % 3 == 1 and i // 3 < 20)]
    assert sorted(got.qty) == sorted(o.qty for o in want)
    assert sorted(got.itertuples(index=False), key=lambda r: r.qty) == [
        (o.item, o.qty, o.price, pd.Timestamp(o.at)) for o in sorted(want, key=lambda o: o.qty)]
    totals = got.groupby("item").qty.sum().to_dict()
    assert totals == {item: sum(o.qty for o in want if o.item == item) for item in {o.item for o in want}}


def test_headers_and_an_offset_for_every_partition(broker: BrokerThread) -> None:
    create_topics(broker.bootstrap, {"tagged": 2})
    produce(broker.bootstrap, "tagged", [Rec(b"k", b"v%d" % i, i % 2, T0, (("n", b"%d" % i),) if i else ())
                                         for i in range(6)])
    got = streamkit.dask.read_topic(broker.bootstrap, "tagged", start=1, include_headers=True).compute()
    rows = sorted((r.partition, r.offset, bytes(r.value), [(h["key"], h["value"]) for h in r.headers])
                  for r in got.itertuples(index=False))
    assert rows == [(0, 1, b"v2", [("n", b"2")]), (0, 2, b"v4", [("n", b"4")]),
                    (1, 1, b"v3", [("n", b"3")]), (1, 2, b"v5", [("n", b"5")])]


def test_start_from_a_time(broker: BrokerThread, orders: list[Rec]) -> None:
    start = dt.datetime.fromtimestamp((T0 + 80) / 1000, dt.UTC)
    got = streamkit.dask.read_topic(broker.bootstrap, "orders", Order, start=start).compute()
    assert sorted(got.qty) == list(range(80, 90))


def _app(broker: BrokerThread, data_dir: Path) -> tuple[App, Any]:
    app = App("totals-app", broker=broker.bootstrap, data_dir=data_dir, config=FAST)
    source = app.topic("amounts", value_type=int, partitions=2)
    totals = app.Table("totals", default=int, partitions=2)
    hourly = app.Table("hourly", default=int, partitions=2).tumbling(3600, expires=10 * 3600)

    @app.agent(source)
    async def add(stream: AgentStream) -> None:
        async for event in stream.events():
            if event.value == 0:
                del totals[event.key]
            else:
                totals[event.key] += event.value
                hourly[event.key] += event.value

    return app, source


async def test_read_table_plain_and_windowed(broker: BrokerThread, tmp_path: Path) -> None:
    create_topics(broker.bootstrap, {"amounts": 2})
    app, _source = _app(broker, tmp_path / "app")
    H = 3_600_000
    base = T0 - T0 % H
    sends = [("a", 5, base), ("b", 1, base + 10), ("a", 2, base + H), ("c", 7, base), ("c", 0, base + 20)]
    records = [Rec(k.encode(), json.dumps(v).encode(), partition_for_key(k.encode(), 2), ts) for k, v, ts in sends]
    runtime = await app.start()
    try:
        await asyncio.to_thread(produce, broker.bootstrap, "amounts", records)
        await wait_for_table(broker.bootstrap, table_decoder(app, "totals", value_type=int),
                             [{"key": "a", "value": 7}, {"key": "b", "value": 1}])
        await wait_for_table(broker.bootstrap, table_decoder(app, "hourly", value_type=int), [
            {"key": "a", "window_start": base, "window_end": base + H, "value": 5},
            {"key": "a", "window_start": base + H, "window_end": base + 2 * H, "value": 2},
            {"key": "b", "window_start": base, "window_end": base + H, "value": 1},
            {"key": "c", "window_start": base, "window_end": base + H, "value": 7}])
    finally:
        await asyncio.wait_for(runtime.stop(), 60)
    assert runtime.failure is None

    totals = await asyncio.to_thread(lambda: streamkit.dask.read_table(app, "totals", value_type=int))
    # One dask partition per changelog partition that has records.
    assert totals.npartitions == len({partition_for_key(k.encode(), 2) for k, _v, _ts in sends})
    got = (await asyncio.to_thread(totals.compute)).sort_values("key")
    assert list(got.itertuples(index=False)) == [("a", 7), ("b", 1)]  # c was deleted

    hourly = await asyncio.to_thread(
        lambda: streamkit.dask.read_table("totals-app", "hourly", bootstrap=broker.bootstrap, windowed=True).compute())
    assert sorted(hourly.itertuples(index=False)) == sorted([
        ("a", base, base + H, "5"), ("a", base + H, base + 2 * H, "2"), ("b", base, base + H, "1"),
        ("c", base, base + H, "7")])
