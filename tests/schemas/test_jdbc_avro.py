"""Confluent's classic pipeline, PostgreSQL -> Avro topic -> MariaDB: the JDBC source's
records through ``io.confluent.connect.avro.AvroConverter`` (schemas from the table's
columns, registered in the registry process), read back by a fresh converter from the
schema ids alone, and written by the JDBC sink into a table it creates on MariaDB."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from streamkit.connect.converters import make_converter
from streamkit.connect.data import SinkRecord
from streamkit.connect.jdbc.config import JdbcSinkConfig, parse_config
from streamkit.connect.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from streamkit.testing import SchemaRegistryProcess
from tests.connect.jdbc.conftest import _open, _servers  # noqa: F401  (_servers is a fixture)
from tests.connect.jdbc.databases import Database
from tests.connect.jdbc.driver import OffsetStore, poll_until, start_source

pytestmark = pytest.mark.integration

AVRO = "io.confluent.connect.avro.AvroConverter"


def _database(kind: str, tmp_path: Path, servers: dict[str, str | None]) -> Iterator[Database]:
    database = _open(kind, tmp_path, servers)
    try:
        yield database
    finally:
        database.drop_created()
        database.engine.dispose()


@pytest.fixture
def postgres(tmp_path: Path, _servers: dict[str, str | None]) -> Iterator[Database]:  # noqa: F811
    yield from _database("postgresql", tmp_path, _servers)


@pytest.fixture
def mariadb(tmp_path: Path, _servers: dict[str, str | None]) -> Iterator[Database]:  # noqa: F811
    yield from _database("mariadb", tmp_path, _servers)


def test_postgres_to_avro_to_mariadb(postgres: Database, mariadb: Database, registry: SchemaRegistryProcess) -> None:
    source = sa.Table(
        postgres.table_name("avro_src"), sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("price", sa.Numeric(12, 2)),
        sa.Column("day", sa.Date),
        sa.Column("updated", sa.DateTime, nullable=False),
        sa.Column("note", sa.Text),
    )
    source.create(postgres.engine)
    base = dt.datetime(2024, 3, 1, 12)
    rows = [{"id": i, "name": f"name {i}", "price": decimal.Decimal(f"{i}.25"),
             "day": dt.date(2024, 1, 1) + dt.timedelta(days=i), "updated": base + dt.timedelta(milliseconds=i),
             "note": None if i % 3 else f"note {i}"} for i in range(1, 21)]
    postgres.execute(sa.insert(source), rows)

    store = OffsetStore()
    task = start_source({
        "connection.url": postgres.url, "mode": "incrementing", "topic.prefix": "avro-",
        "incrementing.column.name": "id", "table.whitelist": source.name, "poll.interval.ms": "20",
        "key.mode": "primary_key"}, store)
    try:
        records = poll_until(task, store, lambda got: len(got) >= 20)
    finally:
        task.stop()
    settings = {"schema.registry.url": registry.url}
    writers = make_converter(AVRO, settings, False), make_converter(AVRO, settings, True)
    readers = make_converter(AVRO, settings, False), make_converter(AVRO, settings, True)
    sink_records: list[SinkRecord] = []
    for offset, record in enumerate(records):
        value = writers[0].from_connect_data(record.topic, record.value_schema, record.value)
        key = writers[1].from_connect_data(record.topic, record.key_schema, record.key)
        assert value is not None and value[0] == 0  # Confluent's wire format on the topic
        value_schema, value_data = readers[0].to_connect_data(record.topic, value)
        key_schema, key_data = readers[1].to_connect_data(record.topic, key)
        sink_records.append(SinkRecord(topic=record.topic, partition=0, offset=offset, value=value_data,
                                       key=key_data, value_schema=value_schema, key_schema=key_schema))

    target = mariadb.table_name("avro_dst")
    connector = JdbcSinkConnector()
    connector.start(parse_config(JdbcSinkConfig, {
        "connection.url": mariadb.url, "insert.mode": "upsert", "pk.mode": "record_key",
        "auto.create": "true", "table.name.format": target}))
    sink = JdbcSinkTask()
    sink.start(connector.task_configs(1)[0])
    try:
        sink.put(sink_records)
        sink.flush({})
    finally:
        sink.stop()
        connector.stop()

    def normal(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in row)

    copied = [normal(r) for r in mariadb.rows(target, "id")]
    assert copied == [normal(r) for r in postgres.rows(source.name, "id")]
