"""Registry serdes in stream apps, both directions with confluent-kafka: records produced
by its AvroSerializer (another schema version) decode into the app's model by Avro
resolution, and what the app writes, its AvroDeserializer reads. An app whose schema breaks
the subject's compatibility does not start, and says which field broke it."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import time
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pydantic import BaseModel

from streamkit.schemas.serdes import (
    AvroSerde,
    JsonSchemaSerde,
    SchemaRegistrationError,
    avro_schema_for,
)
from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.testing import BrokerProcess, SchemaRegistryProcess

pytestmark = pytest.mark.timeout(120)

FAST = {"commit.interval.ms": 100, "session.timeout.ms": 3000, "heartbeat.interval.ms": 500, "linger.ms": 1}


class Tier(enum.Enum):
    FREE = "FREE"
    PRO = "PRO"


class Address(BaseModel):
    city: str


class User(BaseModel):
    id: int
    name: str
    email: str | None = None
    tier: Tier = Tier.FREE


class Greeting(BaseModel):
    user_id: int
    text: str


def test_avro_schema_for_a_model() -> None:
    class Signup(BaseModel):
        id: int
        score: float
        active: bool
        tags: list[str]
        address: Address
        seen: datetime.datetime
        note: str | None = None
        count: int = 3

    schema = avro_schema_for(Signup, namespace="com.example")
    fastavro.parse_schema(schema)
    assert schema["name"] == "Signup" and schema["namespace"] == "com.example"
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["id"]["type"] == "long" and fields["score"]["type"] == "double"
    assert fields["active"]["type"] == "boolean"
    assert fields["tags"]["type"] == {"type": "array", "items": "string"}
    assert fields["address"]["type"]["type"] == "record" and fields["address"]["type"]["name"] == "Address"
    assert fields["seen"]["type"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert fields["note"] == {"name": "note", "type": ["null", "string"], "default": None}
    assert fields["count"] == {"name": "count", "type": "long", "default": 3}
    assert "default" not in fields["id"]


USER_V1 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count:
            assert time.monotonic() < deadline, f"only {len(out)} of {count} records on {topic}"
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                out.append(message.value())
    finally:
        consumer.close()
    return out


async def test_app_reads_and_writes_confluent_avro(broker: BrokerProcess, registry: SchemaRegistryProcess,
                                                   tmp_path: Path) -> None:
    source, sink = f"users-{uuid.uuid4().hex[:8]}", f"greetings-{uuid.uuid4().hex[:8]}"
    sr = SchemaRegistryClient({"url": registry.url})
    # another producer writes with the subject's first version (no email, no tier)
    serialize = AvroSerializer(sr, USER_V1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        producer.produce(source, serialize({"id": i, "name": f"user {i}"},
                                           SerializationContext(source, MessageField.VALUE)))
    assert producer.flush(30) == 0

    app = App(f"greeter-{uuid.uuid4().hex[:8]}", broker=broker.bootstrap, data_dir=tmp_path / "app", config=FAST)
    users = app.topic(source, value_type=AvroSerde(User, registry.url))
    greetings = app.topic(sink, value_type=AvroSerde(Greeting, registry.url))
    seen: list[User] = []

    @app.agent(users)
    async def greet(stream: AgentStream) -> None:
        async for user in stream:
            seen.append(user)
            await greetings.send(Greeting(user_id=user.id, text=f"hello {user.name}"), key=str(user.id))

    await run_until_seen(app, seen, 3)
    # v1 records read as the app's model: the fields v1 lacks take their defaults
    assert sorted(seen, key=lambda u: u.id) == [User(id=i, name=f"user {i}") for i in range(3)]
    # the app registered its model as version 2 of the subject (BACKWARD compatible)
    assert sr.get_latest_version(f"{source}-value").version == 2
    raw = await asyncio.to_thread(_consume, broker.bootstrap, sink, 3)
    decode = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    decoded = [decode(r, SerializationContext(sink, MessageField.VALUE)) for r in raw]
    assert sorted(decoded, key=lambda g: g["user_id"]) == [
        {"user_id": i, "text": f"hello user {i}"} for i in range(3)]
    assert int.from_bytes(raw[0][1:5], "big") == sr.get_latest_version(f"{sink}-value").schema_id


async def run_until_seen(app: App, seen: list[Any], count: int) -> None:
    """Run ``app`` until its agent has appended ``count`` values to ``seen``; then stop it."""
    runtime = await app.start()
    try:
        deadline = time.monotonic() + 60
        while len(seen) < count:
            assert runtime.failure is None, runtime.failure
            assert time.monotonic() < deadline, f"the app saw {seen}"
            await asyncio.sleep(0.05)
    finally:
        await asyncio.wait_for(runtime.stop(), 60)


async def refused_start(broker: BrokerProcess, tmp_path: Path, topic: str, serde: Any) -> str:
    """Start an app reading ``topic`` with ``serde``: the start must be refused; its message."""
    app = App(f"refused-{uuid.uuid4().hex[:8]}", broker=broker.bootstrap, data_dir=tmp_path / "app", config=FAST)
    source = app.topic(topic, value_type=serde)

    @app.agent(source)
    async def ignore(stream: AgentStream) -> None:
        async for _ in stream:
            pass

    with pytest.raises(SchemaRegistrationError) as refused:
        await app.start()
    return str(refused.value)


async def test_an_incompatible_model_refuses_the_start(broker: BrokerProcess, registry: SchemaRegistryProcess,
                                                       tmp_path: Path) -> None:
    topic = f"accounts-{uuid.uuid4().hex[:8]}"
    SchemaRegistryClient({"url": registry.url}).register_schema(f"{topic}-value", Schema(USER_V1, "AVRO"))

    class User(BaseModel):  # a new required field: old records cannot be read with it
        id: int
        name: str
        balance: int

    message = await refused_start(broker, tmp_path, topic, AvroSerde(User, registry.url))
    assert f"subject {topic}-value" in message and "'balance'" in message
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in message


def test_json_schema_serde_with_confluent_wire_format(registry: SchemaRegistryProcess) -> None:
    serde = JsonSchemaSerde(User, registry.url)
    with pytest.raises(SchemaRegistrationError):
        serde.dumps(User(id=1, name="a"))  # not prepared: no id to write
    topic = f"json-users-{uuid.uuid4().hex[:8]}"
    serde.prepare(topic, is_key=False)
    data = serde.dumps(User(id=1, name="a", tier=Tier.PRO))
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == serde.schema_id
    assert serde.loads(data) == User(id=1, name="a", tier=Tier.PRO)
    registered: Any = SchemaRegistryClient({"url": registry.url}).get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
    assert json.loads(registered.schema.schema_str)["title"] == "User"


def test_json_schema_serde_against_confluent_json_serdes(broker: BrokerProcess, registry: SchemaRegistryProcess
                                                         ) -> None:
    """Both directions through the broker: confluent-kafka's JSONSerializer writes, the
    serde reads into the model; the serde writes, confluent-kafka's JSONDeserializer reads
    (and validates against the schema the serde registered)."""
    topic = f"json-both-{uuid.uuid4().hex[:8]}"
    sr = SchemaRegistryClient({"url": registry.url})
    serde = JsonSchemaSerde(User, registry.url)
    serde.prepare(topic, is_key=False)
    theirs = JSONSerializer(serde.schema_text(), sr)
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, theirs({"id": 1, "name": "from confluent", "tier": "PRO"}, ctx))
    producer.produce(topic, serde.dumps(User(id=2, name="from streamkit")))
    assert producer.flush(30) == 0
    raw = _consume(broker.bootstrap, topic, 2)
    assert [serde.loads(r) for r in raw] == [User(id=1, name="from confluent", tier=Tier.PRO),
                                             User(id=2, name="from streamkit")]
    read = JSONDeserializer(None, schema_registry_client=sr)
    assert [read(r, ctx) for r in raw][1] == {"id": 2, "name": "from streamkit", "email": None, "tier": "FREE"}
    assert {int.from_bytes(r[1:5], "big") for r in raw} == {serde.schema_id}
