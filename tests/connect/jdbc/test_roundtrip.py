"""DB -> records -> DB: the source's records, written by the sink into a new table, give back
the source table, on PostgreSQL, MariaDB and SQLite, including updates made while running."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from streamkit.connect.jdbc.config import JdbcSinkConfig, parse_config
from streamkit.connect.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from tests.connect.jdbc.databases import Database
from tests.connect.jdbc.driver import OffsetStore, as_sink_records, poll_until, start_source

pytestmark = pytest.mark.integration

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")
TIME = sa.Time().with_variant(mysql.TIME(fsp=6), "mysql")
BASE = dt.datetime(2024, 3, 1, 12)


def row(i: int, updated: dt.datetime, name: str = "") -> dict:
    return {
        "id": i, "name": name or f"name {i}", "qty": i * 1000, "big": 2**40 + i,
        "price": decimal.Decimal(f"{i}.25"), "ok": i % 2 == 0, "ratio": i / 4,
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "at": dt.time(1, 2, 3, (i % 1000) * 1000), "blob": bytes([i % 256, 0, 255]),
        "note": None if i % 3 else f"note {i}", "updated": updated,
    }


def raw_rows(db: Database, table: str) -> list[tuple]:
    # Driver values as stored, so that nothing in SQLAlchemy's type handling evens them out.
    with db.engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql(
            f"SELECT * FROM {conn.dialect.identifier_preparer.quote(table)} ORDER BY id")]


def test_round_trip_equals_the_source(db: Database) -> None:
    source = sa.Table(
        db.table_name("rt_src"), sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("qty", sa.Integer),
        sa.Column("big", sa.BigInteger),
        sa.Column("price", sa.Numeric(12, 2)),
        sa.Column("ok", sa.Boolean),
        sa.Column("ratio", sa.Double),
        sa.Column("day", sa.Date),
        sa.Column("at", TIME),
        sa.Column("blob", sa.LargeBinary),
        sa.Column("note", sa.Text),
        sa.Column("updated", TS, nullable=False),
    )
    source.create(db.engine)
    target = db.table_name("rt_dst")
    db.execute(sa.insert(source), [row(i, BASE + dt.timedelta(milliseconds=i)) for i in range(1, 51)])

    store = OffsetStore()
    task = start_source({
        "connection.url": db.url, "mode": "timestamp+incrementing", "topic.prefix": "",
        "incrementing.column.name": "id", "timestamp.column.name": "updated",
        "table.whitelist": source.name, "poll.interval.ms": "20", "batch.max.rows": "16",
        "key.mode": "primary_key"}, store)
    connector = JdbcSinkConnector()
    connector.start(parse_config(JdbcSinkConfig, {
        "connection.url": db.url, "insert.mode": "upsert", "pk.mode": "record_key",
        "auto.create": "true", "table.name.format": target}))
    sink = JdbcSinkTask()
    sink.start(connector.task_configs(1)[0])
    try:
        first = poll_until(task, store, lambda got: len(got) >= 50)
        sink.put(as_sink_records(first))
        sink.flush({})
        # Changes while both run: an update, a new row, and a second update of one row.
        later = BASE + dt.timedelta(minutes=5)
        db.execute(sa.update(source).where(source.c.id == 7).values(name="seven", ratio=None,
                                                                    updated=later))
        db.execute(sa.insert(source), [row(51, later + dt.timedelta(seconds=1))])
        second = poll_until(task, store, lambda got: len(got) >= 2)
        db.execute(sa.update(source).where(source.c.id == 7).values(
            note="noted", updated=later + dt.timedelta(seconds=2)))
        second += poll_until(task, store, lambda got: len(got) >= 1, settle=0.2)
        assert [r.value["id"] for r in second] == [7, 51, 7]
        sink.put(as_sink_records(second, start_offset=50))
        sink.flush({})
    finally:
        task.stop()
        sink.stop()
        connector.stop()
    copied = raw_rows(db, target)
    assert len(copied) == 51
    assert copied == raw_rows(db, source.name)
