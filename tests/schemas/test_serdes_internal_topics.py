"""Registry serdes on an app's internal topics: a table whose values are Avro through the
registry writes its changelog in Confluent's wire format (registered under the changelog's
subject) and is restored from it; a stream re-keyed with ``group_by`` writes its repartition
topic with the same serde, registered under the repartition topic's subject. confluent-kafka's AvroDeserializer reads both."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pydantic import BaseModel

from streamkit.schemas.serdes import AvroSerde
from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.testing import BrokerProcess, SchemaRegistryProcess
from tests.schemas.test_serdes import FAST, _consume
from tests.streams.conftest import eventually, running

pytestmark = pytest.mark.timeout(180)


class Visit(BaseModel):
    user: str
    page: str


class Total(BaseModel):
    user: str
    visits: int
    last_page: str | None = None


def _app(app_id: str, broker: BrokerProcess, registry: SchemaRegistryProcess, data_dir: Path,
         source: str) -> tuple[App, Any]:
    app = App(app_id, broker=broker.bootstrap, data_dir=data_dir, config=FAST)
    visits = app.topic(source, value_type=AvroSerde(Visit, registry.url))
    totals = app.Table("totals", value_type=AvroSerde(Total, registry.url), store="memory")

    @app.agent(visits)
    async def count(stream: AgentStream) -> None:
        async for event in stream.group_by(lambda v: v.user).events():
            total = totals[event.key] if event.key in totals else Total(user=event.key, visits=0)
            totals[event.key] = Total(user=total.user, visits=total.visits + 1, last_page=event.value.page)

    return app, totals


async def test_a_table_with_avro_values_writes_and_restores_its_changelog(
        broker: BrokerProcess, registry: SchemaRegistryProcess, tmp_path: Path) -> None:
    app_id = f"visits-{uuid.uuid4().hex[:8]}"
    source = f"{app_id}-in"
    app, totals = _app(app_id, broker, registry, tmp_path / "app", source)
    sr = SchemaRegistryClient({"url": registry.url})
    async with running(app):
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(9):
            visit = Visit(user=f"u{i % 3}", page=f"/p{i}")
            producer.produce(source, app.topics[source].value_codec.dumps(visit), key=visit.user)
        assert producer.flush(30) == 0
        await eventually(lambda: sum(t.visits for _, t in totals.items()) == 9, "nine visits counted", timeout=60)
        before = dict(totals.items())
    assert before == {f"u{u}": Total(user=f"u{u}", visits=3, last_page=f"/p{6 + u}") for u in range(3)}

    # the changelog is Avro in the wire format, under its own subject
    changelog = totals.changelog.name
    assert sr.get_latest_version(f"{changelog}-value").schema.schema_type == "AVRO"
    decode = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    raw = _consume(broker.bootstrap, changelog, 3)
    decoded = [decode(r, SerializationContext(changelog, MessageField.VALUE)) for r in raw]
    assert {d["user"] for d in decoded} <= {"u0", "u1", "u2"} and all(d["visits"] >= 1 for d in decoded)
    # the repartition topic carries the input's serde (its records name the input's schema id)
    repartition = next(name for name in app.topics if name.endswith("-repartition"))
    raw = _consume(broker.bootstrap, repartition, 9)
    pages = sorted(decode(r, SerializationContext(repartition, MessageField.VALUE))["page"] for r in raw)
    assert pages == sorted(f"/p{i}" for i in range(9))
    assert {int.from_bytes(r[1:5], "big") for r in raw} == {sr.get_latest_version(f"{source}-value").schema_id}
    # registered under the repartition topic's own subject too (TopicNameStrategy), as Kafka
    # Streams' registry serdes register it
    assert sr.get_latest_version(f"{repartition}-value").schema_id == sr.get_latest_version(f"{source}-value").schema_id

    # a new worker with an in-memory store rebuilds the table from the Avro changelog
    again, restored_totals = _app(app_id, broker, registry, tmp_path / "again", source)
    async with running(again) as runtime:
        await eventually(lambda: dict(restored_totals.items()) == before, "the table restored", timeout=60)
        assert sum(p.restored for p in runtime.metrics.restore.values()) >= 3
