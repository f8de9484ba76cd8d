"""Connect's ``io.confluent.connect.protobuf.ProtobufConverter`` against the registry
process: Connect data (with its logical types, nested structs, arrays and maps) written as
Protobuf that confluent-kafka's own ProtobufDeserializer reads, and records written by its
ProtobufSerializer read as Connect data."""

from __future__ import annotations

import decimal
import uuid

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from streamkit.connect.converters import make_converter
from streamkit.connect.data import DATE, DECIMAL, TIME, TIMESTAMP, Field, Schema
from streamkit.connect.errors import DataError
from streamkit.testing import SchemaRegistryProcess

CONVERTER = "io.confluent.connect.protobuf.ProtobufConverter"
LINE = Schema("struct", name="shop.Line", fields=(Field("sku", Schema("string")), Field("qty", Schema("int32"))))
ORDER = Schema("struct", name="shop.Order", fields=(
    Field("id", Schema("int64")),
    Field("ok", Schema("boolean")),
    Field("price", Schema("bytes", name=DECIMAL, version=1, parameters={"scale": "2"})),
    Field("day", Schema("int32", name=DATE, version=1)),
    Field("time", Schema("int32", name=TIME, version=1)),
    Field("at", Schema("int64", name=TIMESTAMP, version=1)),
    Field("tags", Schema("array", items=Schema("string"))),
    Field("attrs", Schema("map", keys=Schema("string"), values=Schema("float64"))),
    Field("raw", Schema("bytes")),
    Field("lines", Schema("array", items=LINE)),
    Field("first", LINE.as_optional()),
))
VALUE = {"id": 7, "ok": True, "price": decimal.Decimal("-12.34"), "day": 19_000, "time": 45_296_789,
         "at": 1_700_000_000_123, "tags": ["a", "b"], "attrs": {"w": 1.5}, "raw": b"\x00\x01",
         "lines": [{"sku": "x", "qty": 2}], "first": None}


def converter(registry: SchemaRegistryProcess) -> object:
    return make_converter(CONVERTER, {"schema.registry.url": registry.url}, False)


def test_connect_data_round_trip_and_confluent_reads_it(registry: SchemaRegistryProcess) -> None:
    topic = f"pb-orders-{uuid.uuid4().hex[:8]}"
    data = converter(registry).from_connect_data(topic, ORDER, VALUE)  # type: ignore[attr-defined]
    assert data[0] == 0 and data[5] == 0  # the file's first message: index array [0]
    schema, value = converter(registry).to_connect_data(topic, data)  # type: ignore[attr-defined]
    assert value == VALUE
    assert schema.name == "shop.Order"
    # nested structs come back as nested messages: shop.Line is read as shop.Order.Line
    assert [(f.name, f.schema.type, (f.schema.name or "").rpartition(".")[2]) for f in schema.fields] == [
        (f.name, f.schema.type, (f.schema.name or "").rpartition(".")[2]) for f in ORDER.fields]
    # the registered schema is .proto text, as Confluent's converter registers it
    sr = SchemaRegistryClient({"url": registry.url})
    registered = sr.get_latest_version(f"{topic}-value").schema
    assert registered.schema_type == "PROTOBUF" and "message Order {" in registered.schema_str
    assert "confluent.type.Decimal price = 3;" in registered.schema_str
    # confluent-kafka reads the bytes with a class built from the same fields
    file = descriptor_pb2.FileDescriptorProto(name="o.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)
    message.field.add(name="tags", number=7, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    order = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    decoded = ProtobufDeserializer(order, {"use.deprecated.format": False}, schema_registry_client=sr)(
        data, SerializationContext(topic, MessageField.VALUE))
    assert decoded.id == 7 and list(decoded.tags) == ["a", "b"]


def test_records_from_confluent_serializer_become_connect_data(registry: SchemaRegistryProcess) -> None:
    topic = f"pb-users-{uuid.uuid4().hex[:8]}"
    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="users.proto", package="com.example", syntax="proto3")
    plan = file.enum_type.add(name="Plan")
    plan.value.add(name="FREE", number=0)
    plan.value.add(name="PRO", number=1)
    outer = file.message_type.add(name="Directory")
    user = outer.nested_type.add(name="User")
    user.field.add(name="id", number=1, type=f.TYPE_UINT32)
    user.field.add(name="email", number=2, type=f.TYPE_STRING)
    user.field.add(name="plan", number=3, type=f.TYPE_ENUM, type_name=".com.example.Plan")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("com.example.Directory.User"))
    data = ProtobufSerializer(cls, SchemaRegistryClient({"url": registry.url}), {"use.deprecated.format": False})(
        cls(id=1, email="a@example.com", plan=1), SerializationContext(topic, MessageField.VALUE))
    schema, value = converter(registry).to_connect_data(topic, data)  # type: ignore[attr-defined]
    assert value == {"id": 1, "email": "a@example.com", "plan": "PRO"}
    assert schema.name == "com.example.Directory.User"
    assert [(f.name, f.schema.type, f.schema.optional) for f in schema.fields] == [
        ("id", "int64", False), ("email", "string", False), ("plan", "string", False)]


def test_errors(registry: SchemaRegistryProcess) -> None:
    topic = f"pb-evolve-{uuid.uuid4().hex[:8]}"
    conv = converter(registry)
    v1 = Schema("struct", name="E", fields=(Field("a", Schema("int32")), Field("b", Schema("string"))))
    conv.from_connect_data(topic, v1, {"a": 1, "b": "x"})  # type: ignore[attr-defined]
    v2 = Schema("struct", name="E", fields=(Field("a", Schema("int32")), Field("b", Schema("float64"))))
    with pytest.raises(DataError, match=r"E\.b = 2"):
        conv.from_connect_data(topic, v2, {"a": 1, "b": 1.5})  # type: ignore[attr-defined]
    with pytest.raises(DataError, match="magic byte"):
        conv.to_connect_data(topic, b'{"a": 1}')  # type: ignore[attr-defined]
    with pytest.raises(DataError, match="structs only"):
        conv.from_connect_data(topic, Schema("string"), "x")  # type: ignore[attr-defined]
    with pytest.raises(DataError, match="Protobuf identifier"):
        conv.from_connect_data(topic, Schema("struct", fields=(Field("a-b", Schema("int32")),)), {})  # type: ignore[attr-defined]
    assert conv.from_connect_data(topic, v1.as_optional(), None) is None  # type: ignore[attr-defined]
