"""Protobuf in Confluent's wire format, both directions with confluent-kafka's own
ProtobufSerializer and ProtobufDeserializer: records it writes (a nested message, so a
message-index array that is not ``[0]``, with an import of a well-known type) are read by a
streamkit app, and what the app writes it reads back. The message classes are built with
protobuf's descriptor_pool and message_factory, as generated code would build them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from streamkit.schemas.protobuf_serde import ProtobufSerde
from streamkit.schemas.protobuf_wire import decode_indexes, encode_indexes, message_indexes
from streamkit.schemas.serdes import SchemaRegistrationError
from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.testing import BrokerProcess, SchemaRegistryProcess
from tests.schemas.test_serdes import FAST, _consume, refused_start, run_until_seen

pytestmark = pytest.mark.timeout(120)

_F = descriptor_pb2.FieldDescriptorProto
CONF = {"use.deprecated.format": False}


def _field(message: Any, name: str, number: int, kind: int, type_name: str = "", repeated: bool = False) -> None:
    field = message.field.add(name=name, number=number, type=kind,
                              label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = type_name


def _classes(package: str) -> tuple[Any, Any]:
    """``Shop.Order`` (nested: its index array is [0, 0]) and ``Receipt``, in a file that
    imports google/protobuf/timestamp.proto; each test gets its own package."""
    file = descriptor_pb2.FileDescriptorProto(name=f"{package}/shop.proto", package=package, syntax="proto3")
    file.dependency.append("google/protobuf/timestamp.proto")
    shop = file.message_type.add(name="Shop")
    order = shop.nested_type.add(name="Order")
    _field(order, "id", 1, _F.TYPE_INT64)
    _field(order, "item", 2, _F.TYPE_STRING)
    _field(order, "tags", 3, _F.TYPE_STRING, repeated=True)
    _field(order, "placed", 4, _F.TYPE_MESSAGE, ".google.protobuf.Timestamp")
    receipt = file.message_type.add(name="Receipt")
    _field(receipt, "order_id", 1, _F.TYPE_INT64)
    _field(receipt, "text", 2, _F.TYPE_STRING)
    pool = descriptor_pool.DescriptorPool()
    stamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(stamp)
    pool.Add(stamp)
    pool.Add(file)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Shop.Order")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Receipt")))


def test_message_index_arrays_as_confluent_writes_them() -> None:
    order, receipt = _classes("idx")
    assert message_indexes(order.DESCRIPTOR) == [0, 0] and message_indexes(receipt.DESCRIPTOR) == [1]
    assert encode_indexes([0]) == b"\x00"
    assert encode_indexes([0, 0]) == b"\x04\x00\x00"  # zigzag count 2, then 0 and 0
    assert encode_indexes([1]) == b"\x02\x02"
    for indexes in ([0], [1], [0, 0], [3, 70, 2]):
        assert decode_indexes(encode_indexes(indexes) + b"rest", 0) == (indexes, len(encode_indexes(indexes)))
    with pytest.raises(ValueError, match="cut short"):
        decode_indexes(b"\x04\x00", 0)


async def test_app_reads_and_writes_confluent_protobuf(broker: BrokerProcess, registry: SchemaRegistryProcess,
                                                       tmp_path: Path) -> None:
    package = f"shop{uuid.uuid4().hex[:8]}"
    order, receipt = _classes(package)
    source, sink = f"pb-orders-{package}", f"pb-receipts-{package}"
    sr = SchemaRegistryClient({"url": registry.url})
    serialize = ProtobufSerializer(order, sr, CONF)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        value = order(id=i, item=f"item {i}", tags=["a", str(i)])
        value.placed.FromMilliseconds(1_700_000_000_000 + i)
        producer.produce(source, serialize(value, SerializationContext(source, MessageField.VALUE)))
    assert producer.flush(30) == 0

    app = App(f"pb-{package}", broker=broker.bootstrap, data_dir=tmp_path / "app", config=FAST)
    orders = app.topic(source, value_type=ProtobufSerde(order, registry.url))
    receipts = app.topic(sink, value_type=ProtobufSerde(receipt, registry.url))
    seen: list[Any] = []

    @app.agent(orders)
    async def confirm(stream: AgentStream) -> None:
        async for placed in stream:
            seen.append(placed)
            text = f"{placed.item} at {placed.placed.ToMilliseconds()} {list(placed.tags)}"
            await receipts.send(receipt(order_id=placed.id, text=text), key=str(placed.id))

    await run_until_seen(app, seen, 3)
    assert sorted((o.id, o.item, list(o.tags)) for o in seen) == [(i, f"item {i}", ["a", str(i)]) for i in range(3)]
    # the app's Order is the schema confluent-kafka registered: the same id, no new version
    assert [v for v in sr.get_versions(f"{source}-value")] == [1]
    raw = await asyncio.to_thread(_consume, broker.bootstrap, sink, 3)
    assert all(r[5:7] == b"\x02\x02" for r in raw)  # Receipt is the file's second message: [1]
    decode = ProtobufDeserializer(receipt, CONF, schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    decoded = sorted((decode(r, SerializationContext(sink, MessageField.VALUE)) for r in raw),
                     key=lambda r: r.order_id)
    assert [(r.order_id, r.text) for r in decoded] == [
        (i, f"item {i} at {1_700_000_000_000 + i} ['a', '{i}']") for i in range(3)]
    # the well-known import is not registered as a reference, as confluent-kafka skips it
    assert sr.get_latest_version(f"{sink}-value").schema.references == []


async def test_a_protobuf_change_that_breaks_compatibility_refuses_the_start(
        broker: BrokerProcess, registry: SchemaRegistryProcess, tmp_path: Path) -> None:
    topic = f"pb-kinds-{uuid.uuid4().hex[:8]}"
    # the subject's first version: field 2 is a string
    SchemaRegistryClient({"url": registry.url}).register_schema(
        f"{topic}-value", Schema('syntax = "proto3";\npackage kinds;\nmessage Receipt {\n'
                                 '  int64 order_id = 1;\n  string text = 2;\n}\n', "PROTOBUF"))
    file = descriptor_pb2.FileDescriptorProto(name="kinds.proto", package="kinds", syntax="proto3")
    message = file.message_type.add(name="Receipt")
    _field(message, "order_id", 1, _F.TYPE_INT64)
    _field(message, "text", 2, _F.TYPE_DOUBLE)  # now a double: old records cannot be read
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    changed = message_factory.GetMessageClass(pool.FindMessageTypeByName("kinds.Receipt"))

    message_text = await refused_start(broker, tmp_path, topic, ProtobufSerde(changed, registry.url))
    assert f"subject {topic}-value" in message_text and "kinds.Receipt.text = 2" in message_text
    assert "FIELD_SCALAR_KIND_CHANGED" in message_text or "FIELD_KIND_CHANGED" in message_text


def test_serde_checks_what_it_writes(registry: SchemaRegistryProcess) -> None:
    order, receipt = _classes(f"check{uuid.uuid4().hex[:8]}")
    serde = ProtobufSerde(receipt, registry.url)
    with pytest.raises(SchemaRegistrationError, match="not registered yet"):
        serde.dumps(receipt(order_id=1))
    serde.prepare(f"pb-check-{uuid.uuid4().hex[:8]}", is_key=False)
    data = serde.dumps({"order_id": 7, "text": "from a dict"})
    assert serde.loads(data) == receipt(order_id=7, text="from a dict")
    with pytest.raises(SchemaRegistrationError, match=r"writes .*Receipt messages"):
        serde.dumps(order(id=1))
    with pytest.raises(ValueError, match="wire format"):
        serde.loads(b"\x01junk")
    with pytest.raises(TypeError, match="generated Protobuf message class"):
        ProtobufSerde(dict, registry.url)  # type: ignore[arg-type]


def test_produce_and_consume_protobuf(broker: BrokerProcess, registry: SchemaRegistryProcess, tmp_path: Path) -> None:
    package = f"cli{uuid.uuid4().hex[:8]}"
    order, _ = _classes(package)
    topic = f"pb-cli-{package}"
    # confluent-kafka writes Shop.Order (index array [0, 0]); the CLI prints it as JSON
    serialize = ProtobufSerializer(order, SchemaRegistryClient({"url": registry.url}), CONF)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    value = order(id=1, item="tea", tags=["hot"])
    value.placed.FromMilliseconds(1_700_000_000_000)
    producer.produce(topic, serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumed = subprocess.run(
        [sys.executable, "-m", "streamkit", "consume", topic, "-b", broker.bootstrap, "--from-beginning",
         "--max-messages", "1", "--value-format", "protobuf", "--schema-registry", registry.url],
        capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert json.loads(consumed.stdout) == {"id": "1", "item": "tea", "tags": ["hot"],
                                           "placed": "2023-11-14T22:13:20Z"}

    # the CLI writes from a .proto file; confluent-kafka's deserializer reads it
    sink = f"pb-cli-out-{package}"
    proto = tmp_path / "receipt.proto"
    proto.write_text(f'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\npackage {package}.out;\n'
                     'message Order {\n  int64 id = 1;\n  string item = 2;\n  repeated string tags = 3;\n'
                     '  google.protobuf.Timestamp placed = 4;\n}\n'
                     'message Receipt {\n  int64 order_id = 1;\n  string text = 2;\n}\n')
    lines = '{"id": 5, "item": "cake"}\n{"id": 6, "tags": ["a", "b"]}\n{"id": "six", "colour": 1}\n'
    produced = subprocess.run(
        [sys.executable, "-m", "streamkit", "produce", sink, "-b", broker.bootstrap, "--value-format", "protobuf",
         "--value-schema", str(proto), "--schema-registry", registry.url],
        input=lines, capture_output=True, text=True, timeout=60)
    # the third line does not fit the file's first message: the two before it are written
    assert produced.returncode == 2 and "line 3" in produced.stderr and "lines 1 to 2 were written" in produced.stderr
    raw = _consume(broker.bootstrap, sink, 2)
    # the file's first message, index array [0]; confluent-kafka decodes it by field numbers
    assert all(r[5] == 0 for r in raw)
    decode = ProtobufDeserializer(order, CONF, schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    got = [decode(r, SerializationContext(sink, MessageField.VALUE)) for r in raw]
    assert [(o.id, o.item, list(o.tags)) for o in got] == [(5, "cake", []), (6, "", ["a", "b"])]


def test_imports_are_registered_as_references(registry: SchemaRegistryProcess) -> None:
    """A message whose file imports another of the user's files: the import is registered
    under its file name (a subject with a slash) and referenced, by the serde as by
    confluent-kafka's serializer; readers that build classes from the registry resolve it."""
    from streamkit.connect.converters import make_converter

    package = f"refs{uuid.uuid4().hex[:8]}"
    common = descriptor_pb2.FileDescriptorProto(name=f"{package}/common.proto", package=package, syntax="proto3")
    money = common.message_type.add(name="Money")
    _field(money, "cents", 1, _F.TYPE_INT64)
    orders = descriptor_pb2.FileDescriptorProto(name=f"{package}/orders.proto", package=package, syntax="proto3",
                                                dependency=[common.name])
    order = orders.message_type.add(name="Order")
    _field(order, "id", 1, _F.TYPE_STRING)
    _field(order, "price", 2, _F.TYPE_MESSAGE, f".{package}.Money")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(common)
    pool.Add(orders)
    order_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Order"))
    sr = SchemaRegistryClient({"url": registry.url})

    topic = f"pb-refs-{package}"
    serde = ProtobufSerde(order_class, registry.url)
    serde.prepare(topic, is_key=False)
    ours = serde.dumps(order_class(id="a", price={"cents": 250}))
    latest = sr.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject) for r in latest.schema.references] == [(common.name, common.name)]
    ctx = SerializationContext(topic, MessageField.VALUE)
    read = ProtobufDeserializer(order_class, CONF, schema_registry_client=sr)
    assert read(ours, ctx).price.cents == 250
    # what confluent-kafka writes, read as Connect data: the reference is fetched and built
    theirs = ProtobufSerializer(order_class, sr, CONF)(order_class(id="b", price={"cents": 99}), ctx)
    converter = make_converter("io.confluent.connect.protobuf.ProtobufConverter",
                               {"schema.registry.url": registry.url}, False)
    schema, value = converter.to_connect_data(topic, theirs)
    assert value == {"id": "b", "price": {"cents": 99}}
    assert schema is not None and schema.field("price") is not None
