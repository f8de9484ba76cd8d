"""Streaming reads and writes: per-partition offsets in Spark's checkpoint, so a query
restarted from its checkpoint reads exactly the records it had not read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamkit.testing import BrokerThread
from tests.analytics.util import T0, Rec, create_topics, produce
from tests.integration.util import wait_until

pytestmark = pytest.mark.integration


def _records(start: int, count: int) -> list[Rec]:
    return [Rec(f"k{i}".encode(), json.dumps({"n": i}).encode(), i % 2, T0 + i) for i in range(start, start + count)]


def _run_available_now(spark: SparkSession, broker: BrokerThread, topic: str, out: Path, checkpoint: Path,
                       **options: str) -> list[dict[str, Any]]:
    """One run of the query until every record available at its start is written; the
    progress of each micro-batch."""
    reader = spark.readStream.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in {"subscribe": topic, **options}.items():
        reader = reader.option(name, value)
    query = (reader.load().select("partition", "offset", F.col("value").cast("string").alias("value"))
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
        return [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()


def test_restart_from_the_checkpoint_neither_loses_nor_repeats(spark: SparkSession, broker: BrokerThread,
                                                               tmp_path: Path) -> None:
    topic = "clicks"
    create_topics(broker.bootstrap, {topic: 2})
    produce(broker.bootstrap, topic, _records(0, 250))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "100"}

    first = _run_available_now(spark, broker, topic, out, checkpoint, **options)
    assert [p["numInputRows"] for p in first] == [100, 100, 50]  # maxOffsetsPerTrigger holds
    assert json.loads(first[-1]["sources"][0]["endOffset"]) == {topic: {"0": 125, "1": 125}}

    produce(broker.bootstrap, topic, _records(250, 150))
    second = _run_available_now(spark, broker, topic, out, checkpoint, **options)
    assert sum(p["numInputRows"] for p in second) == 150  # only what is new since the checkpoint

    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 400
    assert sorted(json.loads(r.value)["n"] for r in rows) == list(range(400))
    assert len({(r.partition, r.offset) for r in rows}) == 400


def test_a_query_stopped_mid_stream_resumes_exactly(spark: SparkSession, broker: BrokerThread,
                                                    tmp_path: Path) -> None:
    """Stopped while it runs (possibly inside a micro-batch), then restarted: the parquet
    sink holds every record once. Spark replays an unfinished batch from the offsets in its
    log, so this holds only if a batch's ranges depend on nothing but those offsets."""
    topic = "interrupted"
    create_topics(broker.bootstrap, {topic: 2})
    produce(broker.bootstrap, topic, _records(0, 300))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (spark.readStream.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "60")
             .load().select("partition", "offset", F.col("value").cast("string").alias("value"))
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="0 seconds").start())
    try:
        wait_until(lambda: query.lastProgress is not None and query.lastProgress["numInputRows"] > 0, 120,
                   "a first micro-batch with records")
    finally:
        query.stop()
    produce(broker.bootstrap, topic, _records(300, 100))
    _run_available_now(spark, broker, topic, out, checkpoint)
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(json.loads(r.value)["n"] for r in rows) == list(range(400))


def test_stream_starts_at_latest_by_default(spark: SparkSession, broker: BrokerThread, tmp_path: Path) -> None:
    topic = "later"
    create_topics(broker.bootstrap, {topic: 1})
    produce(broker.bootstrap, topic, [Rec(None, b"old", 0, T0)])
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    assert _run_available_now(spark, broker, topic, out, checkpoint) == []  # the first run fixes the start
    produce(broker.bootstrap, topic, [Rec(None, b"new", 0, T0)])
    _run_available_now(spark, broker, topic, out, checkpoint)
    assert [r.value for r in spark.read.parquet(str(out)).collect()] == ["new"]


def test_streaming_write_copies_a_topic(spark: SparkSession, broker: BrokerThread, tmp_path: Path) -> None:
    create_topics(broker.bootstrap, {"src": 2, "copy": 1})
    produce(broker.bootstrap, "src", _records(0, 60))
    query = (spark.readStream.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", "src").option("startingOffsets", "earliest").load()
             .select("key", F.upper(F.col("value").cast("string")).alias("value"))
             .writeStream.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", "copy").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    copied = (spark.read.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", "copy").load().collect())
    assert sorted((r.key, r.value) for r in copied) == sorted(
        (f"k{i}".encode(), json.dumps({"n": i}).upper().encode()) for i in range(60))
