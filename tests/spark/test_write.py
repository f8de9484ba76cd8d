"""Batch writes through ``df.write.format("streamkit")``, read back with a plain client."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from streamkit.analytics.fetch import read_range
from streamkit.analytics.options import read_options
from streamkit.analytics.planning import plan_ranges
from streamkit.testing import BrokerThread
from tests.analytics.util import create_topics

pytestmark = pytest.mark.integration

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def read_back(broker: BrokerThread, topic: str) -> list[dict]:
    """Every record of ``topic``, read with the core reader (no Spark)."""
    options = read_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                            "includeHeaders": "true"})
    rows = [row for r in plan_ranges(options)
            for batch in read_range(options.client_config, r, include_headers=True) for row in batch.to_pylist()]
    return sorted(rows, key=lambda row: (row["partition"], row["offset"]))


def write(df: DataFrame, broker: BrokerThread, **options: str) -> None:
    writer = df.write.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap).mode("append")
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


def test_write_keys_values_headers_and_partitions(spark: SparkSession, broker: BrokerThread) -> None:
    create_topics(broker.bootstrap, {"written": 3})
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                         StructField("headers", HEADERS), StructField("partition", IntegerType())])
    data = [("a", b"1", [("h", b"x")], 2), (None, b"2", None, 0), ("c", None, [], 1)]
    write(spark.createDataFrame(data, schema), broker, topic="written")
    got = [(r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"] or []], r["partition"])
           for r in read_back(broker, "written")]
    assert got == [(None, b"2", [], 0), (b"c", None, [], 1), (b"a", b"1", [("h", b"x")], 2)]


def test_a_topic_column_routes_each_row(spark: SparkSession, broker: BrokerThread) -> None:
    create_topics(broker.bootstrap, {"route-a": 1, "route-b": 1})
    df = spark.createDataFrame([("route-a", "x"), ("route-b", "y"), ("route-a", "z")], "topic string, value string")
    write(df, broker)
    assert sorted(r["value"] for r in read_back(broker, "route-a")) == [b"x", b"z"]  # two tasks: any order
    assert [r["value"] for r in read_back(broker, "route-b")] == [b"y"]


def test_many_rows_from_several_tasks(spark: SparkSession, broker: BrokerThread, tmp_path: Path) -> None:
    create_topics(broker.bootstrap, {"bulk": 2})
    df = spark.range(0, 5000, numPartitions=4).selectExpr("cast(id % 10 as string) as key", "cast(id as string) as value")
    write(df, broker, topic="bulk")
    values = sorted(int(r["value"]) for r in read_back(broker, "bulk"))
    assert values == list(range(5000))


@pytest.mark.parametrize(("ddl", "options", "message"), [
    ("key string", {"topic": "bulk"}, "needs a 'value' column"),
    ("value int", {"topic": "bulk"}, "must be string or binary"),
    ("value string", {}, "set the option topic"),
])
def test_bad_writes_say_what_is_wrong(spark: SparkSession, broker: BrokerThread, ddl: str,
                                      options: dict[str, str], message: str) -> None:
    df = spark.createDataFrame([], ddl)
    with pytest.raises(PySparkException, match=message):
        write(df, broker, **options)
