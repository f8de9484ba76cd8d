"""AvroSerde's batch path (``Topic.events``, one loop per fetch batch): the same model
instances as ``loads`` for records of the model's own schema and of an older version, the
model's validators still applied, and a record that cannot be decoded left to the error
policy (``Topic.event`` raises CodecError for it, as the runtime's dead-letter path expects)."""

from __future__ import annotations

import datetime
import io
import json
import struct
import uuid
from typing import Any, NamedTuple

import fastavro
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pydantic import BaseModel, Field, ValidationError, field_validator

from streamkit.schemas.serdes import AvroSerde
from streamkit.streams.codecs import CodecError, raw_loads
from streamkit.streams.topic import Topic
from streamkit.testing import SchemaRegistryProcess

pytestmark = pytest.mark.timeout(120)


class Reading(BaseModel):
    sensor: str
    value: float
    note: str | None = None


class Shout(BaseModel):
    word: str

    @field_validator("word")
    @classmethod
    def upper(cls, word: str) -> str:
        return word.upper()


class Positive(BaseModel):
    amount: int = Field(ge=0)


READING_V1 = json.dumps({"type": "record", "name": "Reading", "fields": [
    {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]})


class Record(NamedTuple):
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes]]
    offset: int


class NoApp:
    pass


def _topic(name: str, serde: AvroSerde, registry: SchemaRegistryProcess) -> Topic:
    serde.prepare(name, False)
    return Topic(NoApp(), name, key_type=str, value_type=serde)  # type: ignore[arg-type]


def _records(values: list[bytes]) -> list[Record]:
    return [Record(b"k", v, 1000 + i, [], i) for i, v in enumerate(values)]


def _raw(serde: AvroSerde, values: dict[str, Any]) -> bytes:
    """A record in the wire format with the serde's schema id, written without the model."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(serde.schema), values)
    assert serde.schema_id is not None
    return struct.pack(">bI", 0, serde.schema_id) + out.getvalue()


def test_a_batch_decodes_own_and_older_versions_into_the_model(registry: SchemaRegistryProcess) -> None:
    name = f"readings-{uuid.uuid4().hex[:8]}"
    sr = SchemaRegistryClient({"url": registry.url})
    older = AvroSerializer(sr, READING_V1)({"sensor": "s0", "value": 0.5}, SerializationContext(name, MessageField.VALUE))
    serde = AvroSerde(Reading, registry.url)
    topic = _topic(name, serde, registry)
    own = [serde.dumps(Reading(sensor=f"s{i}", value=i / 2, note="n" if i % 2 else None)) for i in range(1, 4)]
    records = _records([older, *own, None])  # type: ignore[list-item]

    # Topic.events takes the serde's batch path (not UserCodec.loads), built once per schema id
    assert raw_loads(topic.value_codec) is serde.batch_loads() is serde.batch_loads()
    events = topic.events(records, 0)
    assert len(events) == len(records)
    # the same instances as loads, record by record: v1 records take the defaults of the
    # fields they lack
    expected = [serde.loads(v) for v in [older, *own]]
    assert [e.value for e in events[:4]] == expected
    assert events[0].value == Reading(sensor="s0", value=0.5)
    assert events[4].value is None  # a tombstone passes through
    for event, model in zip(events, expected, strict=False):
        assert type(event.value) is Reading
        assert event.value.model_fields_set == model.model_fields_set
        assert event.value.model_dump() == model.model_dump()
    assert events[1].value == Reading.model_validate({"sensor": "s1", "value": 0.5, "note": "n"})


def test_a_corrupt_record_stops_the_batch_for_the_error_policy(registry: SchemaRegistryProcess) -> None:
    serde = AvroSerde(Reading, registry.url)
    topic = _topic(f"readings-{uuid.uuid4().hex[:8]}", serde, registry)
    good = serde.dumps(Reading(sensor="s", value=1.0))
    corrupt = good[:7]  # the header and a truncated body
    records = _records([good, corrupt, good, b"not the wire format"])

    events = topic.events(records, 0)
    assert [e.value for e in events] == [Reading(sensor="s", value=1.0)]
    with pytest.raises(CodecError):
        topic.event(corrupt, corrupt, 0, [], 0, 1)
    assert [e.value for e in topic.events(records, 2)] == [Reading(sensor="s", value=1.0)]
    with pytest.raises(CodecError, match="wire format"):
        topic.event(None, records[3].value, 0, [], 0, 3)


def test_a_model_with_validators_is_still_validated_in_a_batch(registry: SchemaRegistryProcess) -> None:
    shout = AvroSerde(Shout, registry.url)
    topic = _topic(f"shouts-{uuid.uuid4().hex[:8]}", shout, registry)
    assert [e.value for e in topic.events(_records([_raw(shout, {"word": "hi"})]), 0)] == [Shout(word="HI")]

    positive = AvroSerde(Positive, registry.url)
    topic = _topic(f"amounts-{uuid.uuid4().hex[:8]}", positive, registry)
    bad = _raw(positive, {"amount": -1})
    assert topic.events(_records([bad]), 0) == []
    with pytest.raises(CodecError, match="validation error for Positive") as info:
        topic.event(None, bad, 0, [], 0, 0)
    assert isinstance(info.value.__cause__, ValidationError)  # the dead-letter header names it


class Stamped(BaseModel):
    sensor: str
    at: datetime.datetime


def test_a_flat_model_is_read_by_the_generated_reader_and_others_by_fastavro(
        registry: SchemaRegistryProcess) -> None:
    serde = AvroSerde(Reading, registry.url)
    topic = _topic(f"readings-{uuid.uuid4().hex[:8]}", serde, registry)
    assert serde.batch_loads().__code__.co_filename == "<avro reader of Reading>"
    values = [Reading(sensor=f"s{i}", value=i * 1.5, note=None if i % 2 else "é" * i) for i in range(50)]
    encoded = [serde.dumps(v) for v in values]
    assert [e.value for e in topic.events(_records(encoded), 0)] == values
    # loads reads its own records with it too, and gives fastavro's answer for the rest
    assert [serde.loads(b) for b in encoded] == values
    with pytest.raises(EOFError):
        serde.loads(encoded[3][:-1])

    stamped = AvroSerde(Stamped, registry.url)  # a logical type: fastavro's reader
    topic = _topic(f"stamped-{uuid.uuid4().hex[:8]}", stamped, registry)
    assert stamped.batch_loads().__code__.co_filename != "<avro reader of Stamped>"
    at = datetime.datetime(2026, 11, 27, 20, 0, tzinfo=datetime.UTC)
    assert [e.value for e in topic.events(_records([stamped.dumps(Stamped(sensor="s", at=at))]), 0)] == [
        Stamped(sensor="s", at=at)]
