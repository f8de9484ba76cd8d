"""Connect's ``io.confluent.connect.avro.AvroConverter`` (and ``JsonSchemaConverter``)
against the registry process:
Connect data written as Avro in Confluent's wire format that confluent-kafka's own
AvroDeserializer reads, records written by its AvroSerializer read as Connect data, and
Connect's logical types on the way."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from streamkit.connect.converters import make_converter
from streamkit.connect.data import DATE, DECIMAL, TIMESTAMP, Field, Schema
from streamkit.connect.errors import ConfigError, DataError
from streamkit.testing import SchemaRegistryProcess

ORDER = Schema("struct", name="shop.Order", fields=(
    Field("id", Schema("int64")),
    Field("qty", Schema("int16")),
    Field("ok", Schema("boolean")),
    Field("price", Schema("bytes", name=DECIMAL, version=1, parameters={"scale": "2"})),
    Field("day", Schema("int32", name=DATE, version=1)),
    Field("at", Schema("int64", name=TIMESTAMP, version=1)),
    Field("note", Schema("string", optional=True)),
    Field("tags", Schema("array", items=Schema("string"))),
    Field("attrs", Schema("map", keys=Schema("string"), values=Schema("float64"))),
    Field("raw", Schema("bytes")),
))

VALUE = {"id": 7, "qty": 3, "ok": True, "price": decimal.Decimal("12.34"), "day": 19_000, "at": 1_700_000_000_123,
         "note": None, "tags": ["a", "b"], "attrs": {"w": 1.5}, "raw": b"\x00\x01"}


def converter(registry: SchemaRegistryProcess) -> object:
    return make_converter("io.confluent.connect.avro.AvroConverter", {"schema.registry.url": registry.url}, False)


def test_connect_data_round_trip_and_confluent_reads_it(registry: SchemaRegistryProcess) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    conv = converter(registry)
    data = conv.from_connect_data(topic, ORDER, VALUE)  # type: ignore[attr-defined]
    assert data[0] == 0
    schema, value = converter(registry).to_connect_data(topic, data)  # type: ignore[attr-defined]
    assert value == VALUE
    assert [(f.name, f.schema.type, f.schema.name, f.schema.optional) for f in schema.fields] == [
        (f.name, f.schema.type, f.schema.name, f.schema.optional) for f in ORDER.fields]
    assert schema.name == "shop.Order"
    # another client reads the same bytes with the schema the converter registered
    decoded = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))(
        data, SerializationContext(topic, MessageField.VALUE))
    assert decoded["price"] == decimal.Decimal("12.34") and decoded["qty"] == 3
    assert decoded["day"] == dt.date(1970, 1, 1) + dt.timedelta(days=19_000)
    assert decoded["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=dt.UTC)
    registered = json.loads(SchemaRegistryClient({"url": registry.url}).get_latest_version(
        f"{topic}-value").schema.schema_str)
    qty = next(f for f in registered["fields"] if f["name"] == "qty")
    assert qty["type"] == {"type": "int", "connect.type": "int16"}


def test_records_from_confluent_serializer_become_connect_data(registry: SchemaRegistryProcess) -> None:
    topic = f"users-{uuid.uuid4().hex[:8]}"
    avro = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
        {"name": "id", "type": "long"}, {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "plan", "type": {"type": "enum", "name": "Plan", "symbols": ["FREE", "PRO"]}}]})
    data = AvroSerializer(SchemaRegistryClient({"url": registry.url}), avro)(
        {"id": 1, "email": "a@example.com", "plan": "PRO"}, SerializationContext(topic, MessageField.VALUE))
    schema, value = converter(registry).to_connect_data(topic, data)  # type: ignore[attr-defined]
    assert value == {"id": 1, "email": "a@example.com", "plan": "PRO"}
    assert schema.name == "com.example.User"
    assert [(f.name, f.schema.type, f.schema.optional) for f in schema.fields] == [
        ("id", "int64", False), ("email", "string", True), ("plan", "string", False)]


def test_errors(registry: SchemaRegistryProcess) -> None:
    with pytest.raises(ConfigError):
        make_converter("io.confluent.connect.avro.AvroConverter", {}, False)
    topic = f"evolve-{uuid.uuid4().hex[:8]}"
    conv = converter(registry)
    v1 = Schema("struct", name="E", fields=(Field("a", Schema("int32")),))
    conv.from_connect_data(topic, v1, {"a": 1})  # type: ignore[attr-defined]
    v2 = Schema("struct", name="E", fields=(Field("a", Schema("int32")), Field("b", Schema("string"))))
    with pytest.raises(DataError, match="'b'"):
        conv.from_connect_data(topic, v2, {"a": 1, "b": "x"})  # type: ignore[attr-defined]
    with pytest.raises(DataError, match="magic byte"):
        conv.to_connect_data(topic, b'{"a": 1}')  # type: ignore[attr-defined]
    assert conv.from_connect_data(topic, v1.as_optional(), None) is None  # type: ignore[attr-defined]


def test_json_schema_converter(registry: SchemaRegistryProcess) -> None:
    topic = f"json-orders-{uuid.uuid4().hex[:8]}"
    settings = {"schema.registry.url": registry.url}
    writer = make_converter("io.confluent.connect.json.JsonSchemaConverter", settings, False)
    data = writer.from_connect_data(topic, ORDER, VALUE)  # type: ignore[attr-defined]
    assert data[0] == 0
    reader = make_converter("io.confluent.connect.json.JsonSchemaConverter", settings, False)
    schema, value = reader.to_connect_data(topic, data)  # type: ignore[attr-defined]
    assert value == VALUE
    assert [(f.name, f.schema.type, f.schema.name, f.schema.optional) for f in schema.fields] == [
        (f.name, f.schema.type, f.schema.name, f.schema.optional) for f in ORDER.fields]
    # confluent-kafka's JSONDeserializer validates the payload against the registered schema
    decoded = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry.url}))(
        data, SerializationContext(topic, MessageField.VALUE))
    assert decoded["id"] == 7 and decoded["price"] == 12.34 and decoded["note"] is None
    registered = SchemaRegistryClient({"url": registry.url}).get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
