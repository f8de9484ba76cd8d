"""confluent-kafka's own SchemaRegistryClient and its Avro, JSON Schema and Protobuf
serializers, end to end: records produced through ``streamkit schema-registry`` and a
streamkit broker with confluent-kafka's Producer, consumed and decoded with its Consumer."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from streamkit.testing import BrokerProcess, SchemaRegistryProcess

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None}]})


def client(registry: SchemaRegistryProcess) -> SchemaRegistryClient:
    """A fresh client: nothing cached, every lookup goes to the registry."""
    return SchemaRegistryClient({"url": registry.url})


def round_trip(broker: BrokerProcess, topic: str, values: list[Any], serialize: Callable[..., bytes | None],
               deserialize: Callable[..., Any]) -> tuple[list[bytes], list[Any]]:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value=serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    raw: list[bytes] = []
    try:
        while len(raw) < len(values):
            message = consumer.poll(30)
            assert message is not None, f"only {len(raw)} of {len(values)} records arrived"
            assert message.error() is None, message.error()
            raw.append(message.value())
    finally:
        consumer.close()
    return raw, [deserialize(r, SerializationContext(topic, MessageField.VALUE)) for r in raw]


def test_avro_serializer_round_trip(broker: BrokerProcess, registry: SchemaRegistryProcess) -> None:
    topic = f"users-{uuid.uuid4().hex[:8]}"
    users = [{"id": i, "name": f"user {i}"} for i in range(5)]
    raw, decoded = round_trip(broker, topic, users, AvroSerializer(client(registry), USER_V1),
                              AvroDeserializer(client(registry)))
    assert decoded == users
    schema_id = client(registry).get_latest_version(f"{topic}-value").schema_id
    assert all(r[0] == 0 and int.from_bytes(r[1:5], "big") == schema_id for r in raw)  # Confluent's wire format


def test_avro_evolution_reads_old_records_with_the_new_schema(broker: BrokerProcess,
                                                              registry: SchemaRegistryProcess) -> None:
    topic = f"users-{uuid.uuid4().hex[:8]}"
    ctx = SerializationContext(topic, MessageField.VALUE)
    old = AvroSerializer(client(registry), USER_V1)({"id": 1, "name": "old"}, ctx)
    # v2 adds an optional field: BACKWARD compatible, so the serializer may register it
    new = AvroSerializer(client(registry), USER_V2)({"id": 2, "name": "new", "email": "n@example.com"}, ctx)
    assert old is not None and new is not None and old[1:5] != new[1:5]
    assert client(registry).get_versions(f"{topic}-value") == [1, 2]
    values = iter([old, new])
    _, decoded = round_trip(broker, topic, [None, None], lambda _v, _c: next(values),
                            AvroDeserializer(client(registry), USER_V2))
    # the v1 record, read with v2, gets the default for the field it lacks
    assert decoded == [{"id": 1, "name": "old", "email": None}, {"id": 2, "name": "new", "email": "n@example.com"}]
    # a change that breaks BACKWARD is refused with Confluent's code
    breaking = json.dumps({"type": "record", "name": "User", "namespace": "com.example",
                           "fields": [{"name": "id", "type": "string"}]})
    with pytest.raises(SchemaRegistryError) as refused:
        client(registry).register_schema(f"{topic}-value", Schema(breaking, "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409


def test_client_api_calls(registry: SchemaRegistryProcess) -> None:
    sr = client(registry)
    subject = f"api-{uuid.uuid4().hex[:8]}"
    sid = sr.register_schema(subject, Schema(USER_V1, "AVRO"))
    assert sr.get_schema(sid).schema_str == json.dumps(json.loads(USER_V1), separators=(",", ":"))
    assert sr.lookup_schema(subject, Schema(USER_V1, "AVRO")).version == 1
    assert sr.test_compatibility(subject, Schema(USER_V2, "AVRO")) is True
    assert sr.set_compatibility(subject, "FULL_TRANSITIVE") == {"compatibility": "FULL_TRANSITIVE"}
    assert sr.get_compatibility(subject) == "FULL_TRANSITIVE"
    assert sr.get_versions(subject) == [1]
    assert sr.delete_version(subject, 1) == 1
    assert sr.delete_subject(subject, permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as missing:
        sr.get_latest_version(subject)
    assert missing.value.error_code == 40401


def test_json_schema_serializer_round_trip(broker: BrokerProcess, registry: SchemaRegistryProcess) -> None:
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                         "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
                         "required": ["id"]})
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    orders = [{"id": i, "item": f"item {i}"} for i in range(4)]
    raw, decoded = round_trip(broker, topic, orders, JSONSerializer(schema, client(registry)),
                              JSONDeserializer(schema, schema_registry_client=client(registry)))
    assert decoded == orders
    registered = client(registry).get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
    assert int.from_bytes(raw[0][1:5], "big") == registered.schema_id


def _order_class() -> Any:
    file = descriptor_pb2.FileDescriptorProto(name="streamkit_test_order.proto", package="streamkit.test",
                                              syntax="proto3")
    message = file.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="item", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("streamkit.test.Order"))


def test_protobuf_serializer_round_trip(broker: BrokerProcess, registry: SchemaRegistryProcess) -> None:
    order = _order_class()
    topic = f"pb-orders-{uuid.uuid4().hex[:8]}"
    values = [order(id=i, item=f"item {i}") for i in range(3)]
    _, decoded = round_trip(broker, topic, values,
                            ProtobufSerializer(order, client(registry), {"use.deprecated.format": False}),
                            ProtobufDeserializer(order, {"use.deprecated.format": False},
                                                 schema_registry_client=client(registry)))
    assert [(o.id, o.item) for o in decoded] == [(i, f"item {i}") for i in range(3)]
    registered = client(registry).get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"


def test_protobuf_registered_as_text_is_read_by_the_python_deserializer(broker: BrokerProcess,
                                                                        registry: SchemaRegistryProcess) -> None:
    """Java and Go clients register .proto text; confluent-kafka's Python deserializer asks
    for ``format=serialized`` (a FileDescriptorProto) and gets one built from the text."""
    topic = f"pb-text-{uuid.uuid4().hex[:8]}"
    text = ('syntax = "proto3";\npackage streamkit.test;\n'
            'message Order {\n  int64 id = 1;\n  string item = 2;\n  repeated string tags = 3;\n}\n')
    schema_id = client(registry).register_schema(f"{topic}-value", Schema(text, "PROTOBUF"))
    order = _order_class()
    # the wire format a Java producer writes: magic byte, id, message index [0] (one 0 byte)
    values = [b"\x00" + schema_id.to_bytes(4, "big") + b"\x00" + order(id=i, item=f"item {i}").SerializeToString()
              for i in range(2)]
    it = iter(values)
    _, decoded = round_trip(broker, topic, [None, None], lambda _v, _c: next(it),
                            ProtobufDeserializer(order, {"use.deprecated.format": False},
                                                 schema_registry_client=client(registry)))
    assert [(o.id, o.item) for o in decoded] == [(0, "item 0"), (1, "item 1")]
    # the text stays what is served by default
    assert client(registry).get_schema(schema_id).schema_str == text.strip()
