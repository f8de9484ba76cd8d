"""``read_topic``'s sibling ``read_table``: a real streams app counts page views per
10-second window; Spark reads the windowed table back from its changelog."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import streamkit
from streamkit.analytics.tables import table_decoder
from streamkit.spark import read_table
from streamkit.streams.app import App
from streamkit.testing import BrokerThread
from tests.analytics.util import T0, Rec, create_topics, produce, wait_for_table

pytestmark = pytest.mark.integration

FAST = {"commit.interval.ms": 100, "session.timeout.ms": 3000, "heartbeat.interval.ms": 500, "linger.ms": 1}

VIEWS = [  # (page, partition, timestamp), in event-time order per partition (no grace period)
    ("home", 0, T0 + 1_000), ("home", 0, T0 + 2_000),
    ("shop", 0, T0 + 9_999), ("shop", 0, T0 + 10_000), ("shop", 0, T0 + 10_001),
    ("home", 0, T0 + 12_000),
    ("about", 1, T0 + 5_000),
]
WINDOWS = [  # (key, window_start, window_end, value)
    ("home", T0, T0 + 10_000, 2), ("home", T0 + 10_000, T0 + 20_000, 1),
    ("about", T0, T0 + 10_000, 1),
    ("shop", T0, T0 + 10_000, 1), ("shop", T0 + 10_000, T0 + 20_000, 2),
]


def build(broker: BrokerThread, data_dir: Path) -> App:
    app = App("views-app", broker=broker.bootstrap, data_dir=data_dir, config=FAST)
    source = app.topic("page-views", partitions=2)
    (app.stream(source).window(streamkit.tumbling(ms=10_000), expires=3_600_000)
     .count(name="views").current().to("views-updates"))
    return app


async def test_read_table_of_a_windowed_aggregation(spark: SparkSession, broker: BrokerThread,
                                                    tmp_path: Path) -> None:
    create_topics(broker.bootstrap, {"page-views": 2})
    app = build(broker, tmp_path / "app")
    runtime = await app.start()
    try:
        await asyncio.to_thread(produce, broker.bootstrap, "page-views",
                                [Rec(page.encode(), json.dumps({"page": page}).encode(), p, ts) for page, p, ts in VIEWS])
        want = [dict(zip(("key", "window_start", "window_end", "value"), w, strict=True)) for w in WINDOWS]
        decoder = table_decoder(app, "views", value_type=int)
        await wait_for_table(broker.bootstrap, decoder, want)
    finally:
        await asyncio.wait_for(runtime.stop(), 60)
    assert runtime.failure is None

    def rows(df: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in df.collect())

    df = await asyncio.to_thread(read_table, spark, app, "views", value_type=int)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "string"), ("window_start", "bigint"), ("window_end", "bigint"), ("value", "bigint")]
    assert await asyncio.to_thread(rows, df) == sorted(WINDOWS)

    # By application id alone: DSL state keys are JSON (key_type="json"); keys and values
    # without a Python type come back as JSON text.
    by_id = await asyncio.to_thread(read_table, spark, "views-app", "views", bootstrap=broker.bootstrap,
                                    key_type="json", windowed=True)
    assert await asyncio.to_thread(rows, by_id) == sorted((json.dumps(k), s, e, str(v)) for k, s, e, v in WINDOWS)
