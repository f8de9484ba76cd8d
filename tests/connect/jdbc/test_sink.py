"""The JDBC sink task on PostgreSQL, MariaDB and SQLite: insert, upsert, update, delete,
auto.create, auto.evolve, every pk.mode, schemaless records and transaction boundaries."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlalchemy as sa

from streamkit.connect.data import DECIMAL, TIMESTAMP, Field, Schema, SinkRecord
from streamkit.connect.errors import ConfigError, ConnectError, RetriableError
from streamkit.connect.jdbc.config import JdbcSinkConfig, parse_config
from streamkit.connect.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from tests.connect.jdbc.databases import Database

pytestmark = pytest.mark.integration

KEY = Schema("struct", fields=(Field("id", Schema("int64")),))
VALUE = Schema("struct", name="person", fields=(
    Field("id", Schema("int64")),
    Field("name", Schema("string", optional=True)),
    Field("score", Schema("bytes", optional=True, name=DECIMAL, parameters={"scale": "2"})),
    Field("at", Schema("int64", optional=True, name=TIMESTAMP)),
))
AT_MS = 1704067200123  # 2024-01-01 00:00:00.123


def record(offset: int, id_: int, name: str | None, *, topic: str, score: str = "1.50",
           value_schema: Schema = VALUE) -> SinkRecord:
    value = {"id": id_, "name": name, "score": decimal.Decimal(score), "at": AT_MS + offset}
    return SinkRecord(topic=topic, partition=0, offset=offset, key={"id": id_}, key_schema=KEY,
                      value=value, value_schema=value_schema)


def tombstone(offset: int, id_: int, *, topic: str) -> SinkRecord:
    return SinkRecord(topic=topic, partition=0, offset=offset, key={"id": id_}, key_schema=KEY,
                      value=None)


def sink(db: Database, **config: str) -> JdbcSinkTask:
    connector = JdbcSinkConnector()
    connector.start(parse_config(JdbcSinkConfig, {"connection.url": db.url, **config}))
    task = JdbcSinkTask()
    task.start(connector.task_configs(1)[0])
    connector.stop()
    return task


def write(task: JdbcSinkTask, *records: SinkRecord) -> None:
    task.put(list(records))
    task.pre_commit({(r.topic, r.partition): r.offset + 1 for r in records})


def names(db: Database, table: str) -> list[tuple[int, str | None]]:
    return [(r[0], r[1]) for r in db.rows(table, "id")]


def test_auto_create_then_insert(db: Database) -> None:
    topic = db.table_name("ins")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key"})
    try:
        write(task, record(0, 1, "ann", topic=topic, score="12.34"), record(1, 2, None, topic=topic))
    finally:
        task.stop()
    rows = db.rows(topic, "id")
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (1, "ann", decimal.Decimal("12.34")), (2, None, decimal.Decimal("1.50"))]
    assert rows[0][3] == dt.datetime(2024, 1, 1, 0, 0, 0, 123000)
    columns = {c["name"]: c for c in sa.inspect(db.engine).get_columns(topic)}
    assert list(columns) == ["id", "name", "score", "at"]
    assert not columns["id"]["nullable"] and columns["name"]["nullable"]
    assert sa.inspect(db.engine).get_pk_constraint(topic)["constrained_columns"] == ["id"]


def test_insert_into_a_missing_table_without_auto_create_fails(db: Database) -> None:
    topic = db.table_name("missing")
    task = sink(db)
    try:
        with pytest.raises(ConnectError, match=r"auto\.create"):
            write(task, record(0, 1, "a", topic=topic))
    finally:
        task.stop()


def test_upsert_updates_rows_with_the_same_key(db: Database) -> None:
    topic = db.table_name("ups")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key", "insert.mode": "upsert"})
    try:
        write(task, record(0, 1, "a", topic=topic), record(1, 2, "b", topic=topic))
        write(task, record(2, 1, "a2", topic=topic), record(3, 3, "c", topic=topic),
              record(4, 1, "a3", topic=topic))
    finally:
        task.stop()
    assert names(db, topic) == [(1, "a3"), (2, "b"), (3, "c")]


def test_update_mode_changes_existing_rows_only(db: Database) -> None:
    topic = db.table_name("upd")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key"})
    write(task, record(0, 1, "a", topic=topic), record(1, 2, "b", topic=topic))
    task.stop()
    task = sink(db, **{"pk.mode": "record_key", "insert.mode": "update"})
    try:
        write(task, record(2, 2, "b2", topic=topic), record(3, 9, "nobody", topic=topic))
    finally:
        task.stop()
    assert names(db, topic) == [(1, "a"), (2, "b2")]


def test_tombstones_delete_rows_in_order(db: Database) -> None:
    topic = db.table_name("del")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key", "insert.mode": "upsert",
                       "delete.enabled": "true"})
    try:
        write(task, record(0, 1, "a", topic=topic), record(1, 2, "b", topic=topic),
              tombstone(2, 1, topic=topic), record(3, 3, "c", topic=topic),
              tombstone(4, 3, topic=topic), record(5, 3, "c again", topic=topic))
    finally:
        task.stop()
    assert names(db, topic) == [(2, "b"), (3, "c again")]


def test_tombstones_are_skipped_without_delete_enabled(db: Database) -> None:
    topic = db.table_name("nodel")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key", "insert.mode": "upsert"})
    try:
        write(task, record(0, 1, "a", topic=topic), tombstone(1, 1, topic=topic))
    finally:
        task.stop()
    assert names(db, topic) == [(1, "a")]


def test_auto_evolve_adds_nullable_columns(db: Database) -> None:
    topic = db.table_name("evo")
    task = sink(db, **{"auto.create": "true", "auto.evolve": "true", "pk.mode": "record_key",
                       "insert.mode": "upsert"})
    wider = Schema("struct", fields=(*VALUE.fields, Field("email", Schema("string")),
                                     Field("age", Schema("int32", optional=True))))
    try:
        write(task, record(0, 1, "a", topic=topic))
        r = record(1, 2, "b", topic=topic, value_schema=wider)
        write(task, r.with_(value={**r.value, "email": "b@x", "age": 7}))
    finally:
        task.stop()
    columns = {c["name"]: c for c in sa.inspect(db.engine).get_columns(topic)}
    assert columns["email"]["nullable"] and columns["age"]["nullable"]
    assert [(row[0], row[4], row[5]) for row in db.rows(topic, "id")] == [
        (1, None, None), (2, "b@x", 7)]


def test_a_new_field_without_auto_evolve_fails(db: Database) -> None:
    topic = db.table_name("noevo")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key"})
    wider = Schema("struct", fields=(*VALUE.fields, Field("email", Schema("string"))))
    try:
        write(task, record(0, 1, "a", topic=topic))
        r = record(1, 2, "b", topic=topic, value_schema=wider)
        with pytest.raises(ConnectError, match=r"auto\.evolve"):
            write(task, r.with_(value={**r.value, "email": "b@x"}))
    finally:
        task.stop()


def test_pk_mode_kafka_keys_rows_by_coordinates(db: Database) -> None:
    topic = db.table_name("kafka")
    task = sink(db, **{"auto.create": "true", "pk.mode": "kafka", "insert.mode": "upsert",
                       "table.name.format": "${topic}"})
    try:
        write(task, record(5, 1, "a", topic=topic), record(6, 1, "a", topic=topic))
        write(task, record(5, 1, "again", topic=topic))  # redelivered: overwrites, no new row
    finally:
        task.stop()
    t = sa.Table(topic, sa.MetaData(), autoload_with=db.engine)
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.__connect_topic, t.c.__connect_partition,
                                      t.c.__connect_offset, t.c.name)
                            .order_by(t.c.__connect_offset)).fetchall()
    assert [tuple(r) for r in rows] == [(topic, 0, 5, "again"), (topic, 0, 6, "a")]


def test_pk_mode_record_value_with_pk_fields_and_fields_whitelist(db: Database) -> None:
    topic = db.table_name("rv")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_value", "pk.fields": "id",
                       "insert.mode": "upsert", "fields.whitelist": "id,name"})
    try:
        write(task, record(0, 1, "a", topic=topic), record(1, 1, "b", topic=topic))
    finally:
        task.stop()
    assert [c["name"] for c in sa.inspect(db.engine).get_columns(topic)] == ["id", "name"]
    assert names(db, topic) == [(1, "b")]


def test_primitive_record_key_needs_one_pk_field(db: Database) -> None:
    topic = db.table_name("prim")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key", "pk.fields": "id",
                       "insert.mode": "upsert"})
    value_schema = Schema("struct", fields=(Field("name", Schema("string")),))
    try:
        write(task, SinkRecord(topic=topic, partition=0, offset=0, key=7,
                               key_schema=Schema("int64"), value={"name": "seven"},
                               value_schema=value_schema))
    finally:
        task.stop()
    assert names(db, topic) == [(7, "seven")]


def test_schemaless_values_get_inferred_columns(db: Database) -> None:
    topic = db.table_name("schemaless")
    task = sink(db, **{"auto.create": "true", "auto.evolve": "true", "pk.mode": "record_value",
                       "pk.fields": "id", "insert.mode": "upsert"})
    try:
        write(task, SinkRecord(topic=topic, partition=0, offset=0, value={
            "id": 1, "name": "a", "ok": True, "ratio": 0.5, "at": dt.datetime(2024, 1, 1, 1)}))
        write(task, SinkRecord(topic=topic, partition=0, offset=1, value={
            "id": 2, "name": "b", "extra": "new"}))
    finally:
        task.stop()
    rows = db.rows(topic, "id")
    assert [(r[0], r[1], bool(r[2]) if r[2] is not None else None, r[3]) for r in rows] == [
        (1, "a", True, 0.5), (2, "b", None, None)]
    assert rows[0][4] == dt.datetime(2024, 1, 1, 1)
    assert rows[1][5] == "new"


def test_flush_commits_and_put_alone_does_not(db: Database) -> None:
    topic = db.table_name("tx")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key", "batch.size": "2"})
    try:
        task.put([record(0, 1, "a", topic=topic)])  # created, buffered, not written
        task.flush({})
        # Three records with batch.size=2: written in the open transaction, not committed.
        task.put([record(1, 2, "b", topic=topic), record(2, 3, "c", topic=topic),
                  record(3, 4, "d", topic=topic)])
        if db.kind != "sqlite":  # SQLite readers wait on the writer's lock
            assert names(db, topic) == [(1, "a")]
        task.flush({})
        assert names(db, topic) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    finally:
        task.stop()


def test_a_duplicate_key_in_insert_mode_fails_the_task(db: Database) -> None:
    topic = db.table_name("dup")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key"})
    try:
        write(task, record(0, 1, "a", topic=topic))
        task.put([record(1, 2, "b", topic=topic), record(2, 1, "dup", topic=topic)])
        with pytest.raises(ConnectError) as info:
            task.flush({})
        assert not isinstance(info.value, RetriableError)
    finally:
        task.stop()
    assert names(db, topic) == [(1, "a")]  # the failed transaction left nothing behind


def test_a_lost_connection_is_retried_without_losing_records(server_db: Database) -> None:
    db = server_db
    topic = db.table_name("lost")
    task = sink(db, **{"auto.create": "true", "pk.mode": "record_key", "insert.mode": "upsert",
                       "batch.size": "1"})
    try:
        write(task, record(0, 1, "a", topic=topic))
        task.put([record(1, 2, "b", topic=topic)])  # written, not committed
        conn = task._connection()
        if db.kind == "postgresql":
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            db.execute(f"SELECT pg_terminate_backend({pid})")
        else:
            pid = conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar_one()
            db.execute(f"KILL {pid}")
        with pytest.raises(RetriableError):
            task.put([record(2, 3, "c", topic=topic)])
        task.put([record(2, 3, "c", topic=topic)])  # the runtime's redelivery
        task.flush({})
    finally:
        task.stop()
    assert names(db, topic) == [(1, "a"), (2, "b"), (3, "c")]


def test_an_unreachable_database_fails_the_put_after_connection_attempts() -> None:
    task = JdbcSinkTask()
    task.start({"connection.url": "jdbc:postgresql://127.0.0.1:1/test", "batch.size": "1",
                "auto.create": "true", "pk.mode": "record_key", "connection.attempts": "2",
                "connection.backoff.ms": "1"})
    try:
        with pytest.raises(ConnectError) as info:
            task.put([record(0, 1, "a", topic="unreachable")])
    finally:
        task.stop()
    assert not isinstance(info.value, RetriableError)  # the runtime fails the task: no retry forever
    assert "after 2 attempt(s) (connection.attempts=2): connection failed" in str(info.value)
    assert "sqlalche.me" not in str(info.value)


def test_bad_sink_configs_are_refused() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(JdbcSinkConfig, {"connection.url": "jdbc:sqlite:x", "delete.enabled": "true"})
    assert "delete.enabled" in info.value.problems
    with pytest.raises(ConfigError) as info:
        parse_config(JdbcSinkConfig, {"connection.url": "jdbc:sqlite:x", "insert.mode": "UPSERT"})
    assert "pk.mode" in info.value.problems
    with pytest.raises(ConfigError) as info:
        parse_config(JdbcSinkConfig, {"connection.url": "x", "insert.mode": "merge",
                                      "batch.size": "0"})
    assert set(info.value.problems) == {"insert.mode", "batch.size"}


def test_pk_mode_none_appends_rows_to_a_table_without_key(db: Database) -> None:
    topic = db.table_name("append")
    task = sink(db, **{"auto.create": "true"})
    try:
        write(task, record(0, 1, "a", topic=topic), record(1, 1, "a", topic=topic))
    finally:
        task.stop()
    assert names(db, topic) == [(1, "a"), (1, "a")]
    assert sa.inspect(db.engine).get_pk_constraint(topic)["constrained_columns"] == []
