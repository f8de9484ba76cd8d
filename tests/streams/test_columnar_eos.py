"""The columnar path under exactly-once, end to end on a real broker: a column-expression
pipeline fed by a transactional producer (commits and aborts) gives exactly the committed
records' windows, each once, with its changelog and output in the task's transactions."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

import streamkit
from streamkit.streams.app import App
from streamkit.streams.columnar import col, count, sum
from streamkit.streams.columnar.executor import ColumnarSource

from .conftest import Probe, running

pytestmark = [pytest.mark.timeout(300), pytest.mark.integration]


class _View(BaseModel):
    user: str
    page: str
    amount: int


async def test_columnar_pipeline_under_exactly_once_gives_the_committed_windows(make_app: Any,
                                                                                probe: Probe) -> None:
    app: App = make_app(config={"processing.guarantee": "exactly_once", "linger.ms": 5})
    pages = ["/home", "/cart", "/health", "/a", "/b"]
    window_ms = 10_000
    t0 = 1_700_000_040_000
    views = app.topic(f"{app.id}-views", value_type=_View, partitions=4)
    out = f"{app.id}-stats"
    (app.stream(views)
        .filter(col("page") != "/health")
        .window(streamkit.tumbling(seconds=window_ms // 1000), grace=timedelta(seconds=1))
        .agg(count(), sum("amount"), name="page-stats")
        .final()
        .to(out))
    assert "page-stats" in app.streams[0].explain() and "row path" not in app.streams[0].explain()
    counts: Counter[tuple[str, int]] = Counter()
    sums: Counter[tuple[str, int]] = Counter()
    async with running(app) as runtime:
        await probe.settle(runtime)
        source = runtime._pipelines[views.name][0]
        assert isinstance(source, ColumnarSource)
        producer = AIOKafkaProducer(bootstrap_servers=probe.bootstrap, transactional_id=f"{app.id}-producer")
        await producer.start()
        try:
            i = 0
            for commit in [True, False, True, True, False, True]:
                await producer.begin_transaction()
                for _ in range(200):  # the page is the key: each page's records in one partition, in order
                    page, ts, amount = pages[i % len(pages)], t0 + i * 500, i % 13
                    await producer.send(views.name, orjson.dumps({"user": f"u{i % 7}", "page": page,
                                                                  "amount": amount}),
                                        key=page.encode(), timestamp_ms=ts)
                    if commit and page != "/health":
                        counts[(page, ts - ts % window_ms)] += 1
                        sums[(page, ts - ts % window_ms)] += amount
                    i += 1
                await (producer.commit_transaction() if commit else producer.abort_transaction())
            await producer.begin_transaction()  # a record on every partition closes every window
            for p in range(4):
                await producer.send(views.name, orjson.dumps({"user": "x", "page": "/health", "amount": 0}),
                                    partition=p, timestamp_ms=t0 + (i + 100) * 500)
            await producer.commit_transaction()
        finally:
            await producer.stop()
        await probe.settle(runtime, timeout=60)
        assert runtime.metrics.late_records == 0
        assert source.columnar_batches > 0 and source.row_batches == 0
    results = [orjson.loads(r.value) for r in await probe.read(out, read_committed=True)]
    assert {(v["key"], v["start"]): v["value"] for v in results} == {
        w: {"count": n, "sum_amount": sums[w]} for w, n in counts.items()}
    assert len(results) == len(counts), "a window came out twice"
