"""Spark and Dask read registry-encoded topics into typed columns by the registered schema:
Avro records written by confluent-kafka's AvroSerializer with two schema versions (the old
ones read into the latest by Avro resolution), JSON Schema and Protobuf values from its
JSONSerializer and ProtobufSerializer; the Spark sink connector writes Avro records (through
the AvroConverter) as typed columns. Spark runs in the test session's one SparkSession."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from pyspark.sql import types as T

import streamkit.dask
from streamkit.analytics.options import OptionError
from streamkit.connect.spark import read_committed
from streamkit.spark import register
from streamkit.testing import BrokerProcess, SchemaRegistryProcess
from tests.connect.conftest import eventually, standalone, worker_settings
from tests.connect.test_spark_sink import _committed_rows, _sink
from tests.sparkutil import spark_session

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

V1 = {"type": "record", "name": "Payment", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "who", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"],
                        {"name": "amount", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                                             "precision": 10, "scale": 2}], "default": None},
                        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
                        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
                        {"name": "card", "type": ["null", {"type": "record", "name": "Card", "fields": [
                            {"name": "last4", "type": "string"}]}], "default": None}]}
T0 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def _produce(broker: BrokerProcess, topic: str, values: list[Any], serialize: Callable[..., bytes | None]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, serialize(value, SerializationContext(topic, MessageField.VALUE)))
    producer.produce(topic, None)  # a tombstone
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def payments(broker: BrokerProcess, registry: SchemaRegistryProcess) -> str:
    topic = f"payments-{uuid.uuid4().hex[:8]}"
    sr = SchemaRegistryClient({"url": registry.url})
    _produce(broker, topic, [{"id": i, "who": f"w{i}"} for i in range(2)], AvroSerializer(sr, json.dumps(V1)))
    newer = [{"id": 10 + i, "who": f"n{i}", "amount": decimal.Decimal(f"{i}.25"), "at": T0,
              "tags": ["x"] * i, "card": {"last4": "4242"} if i else None} for i in range(2)]
    _produce(broker, topic, newer, AvroSerializer(sr, json.dumps(V2)))
    return topic


def _records(frame: Any) -> list[dict[str, Any]]:
    """A computed frame's rows as Python values (None, not pandas' NA)."""
    return list(pa.Table.from_pandas(frame, preserve_index=False).to_pylist())


EXPECTED = [
    (0, "w0", None, dt.datetime(1970, 1, 1, tzinfo=dt.UTC), [], None),
    (1, "w1", None, dt.datetime(1970, 1, 1, tzinfo=dt.UTC), [], None),
    (10, "n0", decimal.Decimal("0.25"), T0, [], None),
    (11, "n1", decimal.Decimal("1.25"), T0, ["x"], {"last4": "4242"}),
]


def test_dask_reads_avro_by_the_registered_schema(broker: BrokerProcess, registry: SchemaRegistryProcess,
                                                  payments: str) -> None:
    df = streamkit.dask.read_topic(broker.bootstrap, payments, value_format="avro", schema_registry=registry.url)
    got = df.compute()
    assert list(got.columns) == ["id", "who", "amount", "at", "tags", "card"]
    assert str(got.dtypes["id"]) == "int64" and "decimal128(10, 2)" in str(got.dtypes["amount"])
    rows = sorted(tuple(r.values()) for r in _records(got))
    assert rows == EXPECTED


def test_spark_reads_avro_by_the_registered_schema(broker: BrokerProcess, registry: SchemaRegistryProcess,
                                                   payments: str) -> None:
    spark = spark_session()
    register(spark)
    df = (spark.read.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", payments).option("valueFormat", "avro")
          .option("schema.registry.url", registry.url).load())
    types = {f.name: f.dataType for f in df.schema.fields}
    assert types["id"] == T.LongType() and types["amount"] == T.DecimalType(10, 2)
    assert types["at"] == T.TimestampType() and types["tags"] == T.ArrayType(T.StringType())
    assert types["card"] == T.StructType([T.StructField("last4", T.StringType())])
    assert "value" not in types and "offset" in types
    rows = sorted((r.id, r.who, r.amount, r.at, r.tags, r.card.asDict() if r.card else None)
                  for r in df.where("id is not null").collect())
    assert [(*r[:3], r[3].replace(tzinfo=dt.UTC), *r[4:]) for r in rows] == EXPECTED
    assert df.where("id is null").count() == 2  # the tombstones: rows of nulls, as with valueSchema
    with pytest.raises(Exception, match=r"valueFormat needs schema\.registry\.url"):
        (spark.read.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", payments).option("valueFormat", "avro").load().collect())


def test_registry_options_are_checked(registry: SchemaRegistryProcess) -> None:
    from streamkit.analytics.options import read_options

    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    with pytest.raises(OptionError, match="avro, json-schema or protobuf"):
        read_options({**base, "valueFormat": "xml", "schema.registry.url": registry.url})
    with pytest.raises(OptionError, match="without valueFormat"):
        read_options({**base, "schema.registry.url": registry.url})
    with pytest.raises(OptionError, match="one topic"):
        read_options({**base, "subscribe": "a,b", "valueFormat": "avro", "schema.registry.url": registry.url})


def test_dask_reads_json_schema_and_protobuf(broker: BrokerProcess, registry: SchemaRegistryProcess) -> None:
    sr = SchemaRegistryClient({"url": registry.url})
    topic = f"json-events-{uuid.uuid4().hex[:8]}"
    schema = {"type": "object", "title": "Event", "properties": {
        "id": {"type": "integer"}, "score": {"type": "number"}, "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "where": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/Place"}]}},
        "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    _produce(broker, topic, [{"id": 1, "score": 0.5, "ok": True, "tags": ["a"], "where": {"city": "Oslo"}},
                             {"id": 2, "score": 1.5, "ok": False, "tags": [], "where": None}],
             JSONSerializer(json.dumps(schema), sr))
    got = streamkit.dask.read_topic(broker.bootstrap, topic, value_format="json-schema",
                                    schema_registry=registry.url).compute()
    assert str(got.dtypes["id"]) == "int64" and str(got.dtypes["score"]) == "float64"
    assert sorted(tuple(r.values()) for r in _records(got)) == [
        (1, 0.5, True, ["a"], {"city": "Oslo"}), (2, 1.5, False, [], None)]

    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="visits.proto", package=f"dask{uuid.uuid4().hex[:8]}",
                                              syntax="proto3", dependency=["google/protobuf/timestamp.proto"])
    visit = file.message_type.add(name="Visit")
    visit.field.add(name="id", number=1, type=f.TYPE_INT64)
    visit.field.add(name="pages", number=2, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    visit.field.add(name="at", number=3, type=f.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
    visit.field.add(name="kind", number=4, type=f.TYPE_ENUM, type_name=f".{file.package}.Kind")
    kind = file.enum_type.add(name="Kind")
    kind.value.add(name="WEB", number=0)
    kind.value.add(name="APP", number=1)
    pool = descriptor_pool.DescriptorPool()
    stamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(stamp)
    pool.Add(stamp)
    pool.Add(file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{file.package}.Visit"))
    topic = f"pb-visits-{uuid.uuid4().hex[:8]}"
    values = []
    for i in range(2):
        value = cls(id=i, pages=["/a"] * i, kind=i)
        value.at.FromDatetime(T0)
        values.append(value)
    _produce(broker, topic, values, ProtobufSerializer(cls, sr, {"use.deprecated.format": False}))
    got = streamkit.dask.read_topic(broker.bootstrap, topic, value_format="protobuf",
                                    schema_registry=registry.url).compute()
    assert list(got.columns) == ["id", "pages", "at", "kind"] and str(got.dtypes["id"]) == "int64"
    assert sorted(tuple(r.values()) for r in _records(got)) == [
        (0, [], T0, "WEB"), (1, ["/a"], T0, "APP")]


async def test_spark_sink_writes_avro_records_as_typed_columns(broker: BrokerProcess, registry: SchemaRegistryProcess,
                                                               payments: str, tmp_path: Path) -> None:
    spark = spark_session()
    table = tmp_path / "payments"
    converter = {"value.converter": "io.confluent.connect.avro.AvroConverter",
                 "value.converter.schema.registry.url": registry.url, "include.kafka.metadata": "false"}
    async with standalone(worker_settings(broker.bootstrap, tmp_path), [_sink("pay-sink", payments, table, **converter)]):
        await eventually(lambda: _committed_rows(table) == 4, 120, "4 rows committed (tombstones skipped)")
    df = read_committed(spark, table)
    # the columns of the latest schema: rows of the first version lack the fields added later
    assert dict(df.dtypes) == {"id": "bigint", "who": "string", "amount": "decimal(38,2)", "at": "timestamp",
                               "tags": "array<string>", "card": "struct<last4:string>"}
    rows = sorted((r.id, r.who, r.amount, r.tags, r.card.asDict() if r.card else None) for r in df.collect())
    assert rows == [(0, "w0", None, None, None), (1, "w1", None, None, None),
                    (10, "n0", decimal.Decimal("0.25"), [], None), (11, "n1", decimal.Decimal("1.25"), ["x"],
                                                                     {"last4": "4242"})]
