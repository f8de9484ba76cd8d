"""Batch reads through ``spark.read.format("streamkit")`` with each of Spark's Kafka
options, checked record by record against what was produced."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from pydantic import BaseModel
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamkit.spark import read_topic, record_schema
from streamkit.testing import BrokerThread
from tests.analytics.util import T0, Rec, create_topics, produce

pytestmark = pytest.mark.integration

PER_PARTITION = 20


def _records(partition: int) -> list[Rec]:
    return [Rec(f"k{i % 3}".encode(), json.dumps({"page": f"p{i % 4}", "n": i, "p": partition}).encode(),
                partition, T0 + i * 1000, (("i", str(i).encode()),) if i % 2 == 0 else ())
            for i in range(PER_PARTITION)]


@pytest.fixture(scope="module")
def events(broker: BrokerThread) -> dict[int, list[Rec]]:
    create_topics(broker.bootstrap, {"events": 2, "logs-a": 1, "logs-b": 1, "other": 1})
    data = {p: _records(p) for p in range(2)}
    for recs in data.values():
        produce(broker.bootstrap, "events", recs)
    produce(broker.bootstrap, "logs-a", [Rec(b"a", b"1", 0, T0)])
    produce(broker.bootstrap, "logs-b", [Rec(b"b", b"2", 0, T0), Rec(b"b", b"3", 0, T0)])
    produce(broker.bootstrap, "other", [Rec(b"o", b"4", 0, T0)])
    return data


def load(spark: SparkSession, broker: BrokerThread, **options: Any) -> DataFrame:
    reader = spark.read.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def positions(df: DataFrame) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())


def expected_positions(ranges: dict[int, range]) -> list[tuple[str, int, int]]:
    return sorted(("events", p, o) for p, offsets in ranges.items() for o in offsets)


def test_reads_every_record_with_the_kafka_columns(spark: SparkSession, broker: BrokerThread,
                                                   events: dict[int, list[Rec]]) -> None:
    df = load(spark, broker, subscribe="events")
    assert df.schema == record_schema(False)
    assert df.rdd.getNumPartitions() == 2  # one Spark partition per topic partition
    got = sorted(
        (r.partition, r.offset, r.key, r.value, r.ms, r.timestampType, r.topic)
        for r in df.select("*", F.unix_millis("timestamp").alias("ms")).collect())
    want = sorted((p, i, rec.key, rec.value, rec.timestamp, 0, "events")
                  for p, recs in events.items() for i, rec in enumerate(recs))
    assert got == want


def test_starting_and_ending_offsets_as_json(spark: SparkSession, broker: BrokerThread, events: Any) -> None:
    df = load(spark, broker, subscribe="events", startingOffsets='{"events": {"0": 5, "1": -2}}',
              endingOffsets='{"events": {"0": 12, "1": -1}}')
    assert positions(df) == expected_positions({0: range(5, 12), 1: range(PER_PARTITION)})


def test_offsets_past_the_end_are_refused(spark: SparkSession, broker: BrokerThread, events: Any) -> None:
    df = load(spark, broker, subscribe="events", startingOffsets='{"events": {"0": 999}}')
    with pytest.raises(PySparkException, match="past its end offset"):
        df.count()


def test_starting_timestamp(spark: SparkSession, broker: BrokerThread, events: Any) -> None:
    df = load(spark, broker, subscribe="events", startingTimestamp=str(T0 + 15_000))
    assert positions(df) == expected_positions({0: range(15, 20), 1: range(15, 20)})


def test_starting_offsets_by_timestamp_and_ending_timestamp(spark: SparkSession, broker: BrokerThread,
                                                            events: Any) -> None:
    df = load(spark, broker, subscribe="events",
              startingOffsetsByTimestamp=json.dumps({"events": {"0": T0 + 17_500, "1": T0}}),
              endingTimestamp=str(T0 + 3_000))
    # Partition 0 starts at 18, past the end (3): refused; partition 1 reads [0, 3).
    with pytest.raises(PySparkException, match="before the starting offset"):
        df.count()
    df = load(spark, broker, subscribe="events",
              startingOffsetsByTimestamp=json.dumps({"events": {"0": T0 + 17_500, "1": T0 + 1_000}}),
              endingOffsets='{"events": {"0": -1, "1": 3}}')
    assert positions(df) == expected_positions({0: range(18, 20), 1: range(1, 3)})


def test_a_time_after_every_record(spark: SparkSession, broker: BrokerThread, events: Any) -> None:
    late = json.dumps({"events": {"0": T0 + 10**9}})
    with pytest.raises(PySparkException, match="no record at or after"):
        load(spark, broker, subscribe="events", startingOffsetsByTimestamp=late).count()
    df = load(spark, broker, subscribe="events", startingOffsetsByTimestamp=late,
              startingOffsetsByTimestampStrategy="latest")
    assert positions(df) == expected_positions({1: range(PER_PARTITION)})


def test_subscribe_several_a_pattern_or_assign(spark: SparkSession, broker: BrokerThread, events: Any) -> None:
    both = [("logs-a", 0, 0), ("logs-b", 0, 0), ("logs-b", 0, 1)]
    assert positions(load(spark, broker, subscribe="logs-a, logs-b")) == both
    assert positions(load(spark, broker, subscribePattern="logs-.*")) == both
    assigned = load(spark, broker, assign='{"events": [1], "other": [0]}')
    assert positions(assigned) == sorted([("other", 0, 0), *expected_positions({1: range(PER_PARTITION)})])


def test_include_headers(spark: SparkSession, broker: BrokerThread, events: dict[int, list[Rec]]) -> None:
    df = load(spark, broker, subscribe="events", includeHeaders="true", endingOffsets='{"events": {"0": 3, "1": 0}}')
    assert df.schema == record_schema(True)
    got = sorted((r.offset, [(h.key, h.value) for h in r.headers] if r.headers else None) for r in df.collect())
    assert got == [(0, [("i", b"0")]), (1, None), (2, [("i", b"2")])]


def test_min_partitions_splits_large_ranges(spark: SparkSession, broker: BrokerThread, events: Any) -> None:
    df = load(spark, broker, subscribe="events", minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    assert positions(df) == expected_positions({0: range(PER_PARTITION), 1: range(PER_PARTITION)})


@pytest.mark.parametrize(("options", "message"), [
    ({}, "exactly one of the options subscribe"),
    ({"subscribe": "events", "startingOffsets": "latest"}, "cannot be latest"),
    ({"subscribe": "events", "kafka.isolation.level": "dirty"}, "kafka.isolation.level must be"),
    ({"subscribe": "nope"}, "do not exist"),
    ({"subscribe": "events", "startingOffsets": "{oops"}, "startingOffsets must be"),
])
def test_bad_options_say_what_is_wrong(spark: SparkSession, broker: BrokerThread, events: Any,
                                       options: dict[str, str], message: str) -> None:
    with pytest.raises(PySparkException, match=message):
        load(spark, broker, **options).count()


class PageView(BaseModel):
    page: str
    n: int
    p: int


def test_read_topic_with_a_model(spark: SparkSession, broker: BrokerThread, events: dict[int, list[Rec]]) -> None:
    df = read_topic(spark, "events", PageView, bootstrap=broker.bootstrap, metadata=True)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("page", "string"), ("n", "bigint"), ("p", "bigint"),
        ("key", "string"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp")]
    got = sorted((r.p, r.n, r.page, r.key, r.offset) for r in df.collect())
    want = sorted((p, i, f"p{i % 4}", f"k{i % 3}", i) for p in range(2) for i in range(PER_PARTITION))
    assert got == want
    totals = {r.page: r.total for r in df.groupBy("page").agg(F.sum("n").alias("total")).collect()}
    assert totals == {f"p{k}": 2 * sum(i for i in range(PER_PARTITION) if i % 4 == k) for k in range(4)}


def test_read_committed_reads_through_librdkafka_alike(spark: SparkSession, broker: BrokerThread,
                                                       events: Any) -> None:
    """read_committed takes the librdkafka path (it filters aborted transactions): with no
    transactions in the topic it gives exactly the rows of the default raw-fetch path."""
    def rows(**options: str) -> list[tuple[Any, ...]]:
        df = load(spark, broker, subscribe="events", includeHeaders="true", **options)
        return sorted((r.partition, r.offset, r.key, r.value, r.timestamp, r.timestampType,
                       [tuple(h) for h in r.headers] if r.headers else None) for r in df.collect())

    committed = rows(**{"kafka.isolation.level": "read_committed"})
    assert len(committed) == 2 * PER_PARTITION
    assert committed == rows()


class Visit(BaseModel):
    page: str
    n: int
    at: dt.datetime | None = None


class VisitWithMap(Visit):
    attrs: dict[str, int] | None = None  # a map: parsed by from_json instead of Arrow's reader


@pytest.mark.parametrize("model", [Visit, VisitWithMap])
def test_read_topic_gives_nulls_for_what_does_not_parse(spark: SparkSession, broker: BrokerThread,
                                                        model: type[Visit]) -> None:
    topic = f"visits-{model.__name__.lower()}"
    create_topics(broker.bootstrap, {topic: 1})
    produce(broker.bootstrap, topic, [
        Rec(b"a", b'{"page": "home", "n": 1, "at": "2024-01-02T03:04:05.006Z"}', 0, T0),
        Rec(b"b", None, 0, T0),                                   # a tombstone
        Rec(b"c", b"{not json", 0, T0),                           # malformed
        Rec(b"d", b'{"page": "shop", "n": 2, "extra": true}', 0, T0),
    ])
    df = read_topic(spark, topic, model, bootstrap=broker.bootstrap, metadata=True)
    got = sorted((r.offset, r.key, r.page, r.n, r.at) for r in df.collect())
    at = dt.datetime(2024, 1, 2, 3, 4, 5, 6000)  # Spark shows it in the session's time zone
    at = at.replace(tzinfo=dt.UTC).astimezone().replace(tzinfo=None)
    assert got == [(0, "a", "home", 1, at), (1, "b", None, None, None), (2, "c", None, None, None),
                   (3, "d", "shop", 2, None)]


def test_value_schema_option_gives_typed_columns(spark: SparkSession, broker: BrokerThread,
                                                 events: dict[int, list[Rec]]) -> None:
    schema = StructType([StructField("page", StringType()), StructField("n", LongType())])
    df = load(spark, broker, subscribe="events", valueSchema=schema.json(), endingOffsets='{"events": {"0": 2, "1": 0}}')
    assert df.columns == ["page", "n", "key", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert [(r.page, r.n, r.key, r.offset) for r in df.orderBy("offset").collect()] == [
        ("p0", 0, b"k0", 0), ("p1", 1, b"k1", 1)]
    clash = StructType([StructField("offset", LongType())])
    with pytest.raises(PySparkException, match="named like the record's columns"):
        load(spark, broker, subscribe="events", valueSchema=clash.json()).count()
