"""The shipped JDBC configs (connectors/jdbc-*.json) validate and work: SQLite orders read by
the source config (keyed by its ValueToKey transform, as Confluent's connector is keyed) and
written to PostgreSQL by the sink config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from streamkit.connect.config import validate_config
from streamkit.connect.jdbc.config import JdbcSinkConfig, JdbcSourceConfig, parse_config
from streamkit.connect.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from streamkit.connect.jdbc.source import JdbcSourceConnector
from streamkit.connect.plugins import PluginRegistry
from tests.conftest import require_service
from tests.connect.jdbc.databases import Database
from tests.connect.jdbc.driver import OffsetStore, as_sink_records, poll_until, start_source

CONNECTORS = Path(__file__).resolve().parents[3] / "connectors"


def load(name: str) -> dict:
    return json.loads((CONNECTORS / name).read_text())


def test_example_configs_validate_and_name_our_connectors() -> None:
    source, sink = load("jdbc-source-sqlite.json"), load("jdbc-sink-postgres.json")
    assert source["config"]["connector.class"] in JdbcSourceConnector.aliases
    assert sink["config"]["connector.class"] in JdbcSinkConnector.aliases
    assert parse_config(JdbcSourceConfig, source["config"]).mode == "timestamp+incrementing"
    assert parse_config(JdbcSinkConfig, sink["config"]).insert_mode == "upsert"


@pytest.mark.integration
def test_sqlite_orders_to_postgres_with_the_example_configs(
        tmp_path: Path, _servers: dict[str, str | None]) -> None:
    pg_url = _servers["postgresql"]
    require_service(pg_url is not None, "postgresql")
    assert pg_url is not None
    sqlite = Database.open("sqlite", f"sqlite:///{tmp_path / 'demo.db'}")
    pg = Database.open("postgresql", pg_url)
    try:
        sqlite.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, "
                       "qty INTEGER, updated_at TIMESTAMP NOT NULL)")
        sqlite.execute("INSERT INTO orders VALUES (1, 'tea', 2, '2024-05-01 10:00:00.000000'), "
                       "(2, 'cake', 1, '2024-05-01 10:00:01.000000')")
        source_config = {**load("jdbc-source-sqlite.json")["config"],
                         "connection.url": f"jdbc:sqlite:{tmp_path / 'demo.db'}",
                         "poll.interval.ms": "20"}
        target = pg.table_name("orders_copy")
        sink_config = {**load("jdbc-sink-postgres.json")["config"], "table.name.format": target}
        transforms = validate_config({"name": "example", **source_config}, PluginRegistry()).transforms
        store = OffsetStore()
        source = start_source(source_config, store)

        def keyed(records: list) -> list:
            return [transforms(r) for r in records]

        sink = JdbcSinkTask()
        sink.start(sink_config)
        try:
            records = poll_until(source, store, lambda got: len(got) >= 2)
            assert records[0].topic == "sqlite-orders"
            assert records[0].key is None
            assert keyed(records)[0].key == {"id": 1}
            sink.put(as_sink_records(keyed(records)))
            sink.flush({})
            sqlite.execute("UPDATE orders SET qty = 5, updated_at = '2024-05-01 10:00:02.000000' "
                           "WHERE id = 1")
            sink.put(as_sink_records(keyed(poll_until(source, store, lambda got: len(got) >= 1)), 2))
            sink.flush({})
        finally:
            source.stop()
            sink.stop()
        t = sa.Table(target, sa.MetaData(), autoload_with=pg.engine)
        with pg.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.id, t.c.item, t.c.qty).order_by(t.c.id)).fetchall()
        assert [tuple(r) for r in rows] == [(1, "tea", 5), (2, "cake", 1)]
    finally:
        pg.drop_created()
        pg.engine.dispose()
        sqlite.engine.dispose()
