"""The JDBC source task on PostgreSQL, MariaDB and SQLite: every mode with rows inserted and
updated while the task runs, restarts from committed offsets, types, keys and task configs."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from streamkit.connect.data import DATE, DECIMAL, TIMESTAMP
from streamkit.connect.errors import ConfigError, ConnectError, RetriableError
from streamkit.connect.jdbc.config import JdbcSourceConfig, parse_config
from streamkit.connect.jdbc.source import JdbcSourceConnector, JdbcSourceTask
from tests.connect.jdbc.databases import Database
from tests.connect.jdbc.driver import OffsetStore, poll_until, start_source

pytestmark = pytest.mark.integration

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")
BASE = dt.datetime(2024, 1, 1)
BASE_MS = 1704067200000


def ts(seconds: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=seconds)


def make_table(db: Database, prefix: str) -> sa.Table:
    table = sa.Table(
        db.table_name(prefix), sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(50)),
        sa.Column("ts", TS, nullable=False),
    )
    table.create(db.engine)
    return table


def insert(db: Database, table: sa.Table, *rows: tuple[int, str, dt.datetime]) -> None:
    db.execute(sa.insert(table), [{"id": i, "name": n, "ts": t} for i, n, t in rows])


def config(db: Database, table: sa.Table, mode: str, **extra: str) -> dict[str, str]:
    return {"connection.url": db.url, "mode": mode, "topic.prefix": "db-",
            "table.whitelist": table.name, "poll.interval.ms": "20", **extra}


def ids(records: list) -> list[int]:
    return [r.value["id"] for r in records]


def test_incrementing_reads_inserts_as_they_arrive_and_resumes(db: Database) -> None:
    t = make_table(db, "inc")
    insert(db, t, *[(i, f"n{i}", ts(i)) for i in range(1, 6)])
    store = OffsetStore()
    task = start_source(config(db, t, "incrementing", **{
        "incrementing.column.name": "id", "batch.max.rows": "2"}), store)
    try:
        first = poll_until(task, store, lambda got: len(got) >= 5)
        assert ids(first) == [1, 2, 3, 4, 5]
        assert first[0].topic == f"db-{t.name}"
        assert first[0].source_partition == {"table": t.name}
        assert first[-1].source_offset == {"incrementing": 5}
        insert(db, t, (6, "n6", ts(6)), (7, "n7", ts(7)))
        more = poll_until(task, store, lambda got: len(got) >= 2, settle=0.2)
        assert ids(more) == [6, 7]
    finally:
        task.stop()
    insert(db, t, (8, "n8", ts(8)))
    task = start_source(config(db, t, "incrementing", **{"incrementing.column.name": "id"}), store)
    try:
        after = poll_until(task, store, lambda got: len(got) >= 1, settle=0.2)
    finally:
        task.stop()
    assert ids(after) == [8]


def test_timestamp_mode_reads_inserts_and_updates(db: Database) -> None:
    t = make_table(db, "ts")
    insert(db, t, (1, "a", ts(1)), (2, "b", ts(2)))
    store = OffsetStore()
    task = start_source(config(db, t, "timestamp", **{"timestamp.column.name": "ts"}), store)
    try:
        first = poll_until(task, store, lambda got: len(got) >= 2)
        assert [(r.value["id"], r.value["name"]) for r in first] == [(1, "a"), (2, "b")]
        assert first[1].value["ts"] == BASE_MS + 2000
        assert first[1].source_offset == {"timestamp": BASE_MS + 2000, "timestamp_nanos": 0}
        db.execute(sa.update(t).where(t.c.id == 1).values(name="a2", ts=ts(3.25)))
        insert(db, t, (3, "c", ts(4)))
        more = poll_until(task, store, lambda got: len(got) >= 2, settle=0.2)
        assert [(r.value["id"], r.value["name"]) for r in more] == [(1, "a2"), (3, "c")]
        assert more[0].source_offset == {"timestamp": BASE_MS + 3250,
                                         "timestamp_nanos": 250_000_000}
    finally:
        task.stop()


def test_timestamp_mode_restart_keeps_rows_sharing_a_timestamp(db: Database) -> None:
    t = make_table(db, "tsg")
    # Three rows per timestamp, batches of four: no batch may end inside a timestamp, or a
    # restart after it would skip the rest of that timestamp's rows.
    insert(db, t, *[(i, "x", ts(1 + i // 3)) for i in range(9)])
    store = OffsetStore()
    cfg = config(db, t, "timestamp", **{"timestamp.column.name": "ts", "batch.max.rows": "4"})
    task = start_source(cfg, store)
    try:
        first = poll_until(task, store, lambda got: len(got) >= 1)
    finally:
        task.stop()
    assert sorted(ids(first)) == [0, 1, 2]
    task = start_source(cfg, store)
    try:
        rest = poll_until(task, store, lambda got: len(got) >= 6, settle=0.2)
    finally:
        task.stop()
    assert sorted(ids(rest)) == [3, 4, 5, 6, 7, 8]


def test_timestamp_mode_reads_a_timestamp_larger_than_a_batch_whole(db: Database) -> None:
    t = make_table(db, "tsbig")
    insert(db, t, *[(i, "x", ts(1)) for i in range(5)], (5, "y", ts(2)))
    store = OffsetStore()
    task = start_source(config(db, t, "timestamp", **{"timestamp.column.name": "ts",
                                                      "batch.max.rows": "2"}), store)
    try:
        got = poll_until(task, store, lambda got: len(got) >= 6, settle=0.2)
    finally:
        task.stop()
    assert sorted(ids(got)) == [0, 1, 2, 3, 4, 5]


def test_timestamp_incrementing_resumes_exactly_within_a_timestamp(db: Database) -> None:
    t = make_table(db, "tsi")
    insert(db, t, *[(i, f"n{i}", ts(1)) for i in range(1, 11)])
    store = OffsetStore()
    cfg = config(db, t, "timestamp+incrementing", **{
        "timestamp.column.name": "ts", "incrementing.column.name": "id", "batch.max.rows": "3"})
    task = start_source(cfg, store)
    try:
        first = poll_until(task, store, lambda got: len(got) >= 6)
    finally:
        task.stop()
    assert ids(first) == [1, 2, 3, 4, 5, 6]
    assert store.offset({"table": t.name}) == {
        "incrementing": 6, "timestamp": BASE_MS + 1000, "timestamp_nanos": 0}
    # A late row with the same timestamp but a higher id, and an update to a newer timestamp.
    insert(db, t, (11, "late", ts(1)))
    db.execute(sa.update(t).where(t.c.id == 2).values(name="n2b", ts=ts(5)))
    task = start_source(cfg, store)
    try:
        rest = poll_until(task, store, lambda got: len(got) >= 6, settle=0.2)
        assert [(r.value["id"], r.value["name"]) for r in rest] == [
            (7, "n7"), (8, "n8"), (9, "n9"), (10, "n10"), (11, "late"), (2, "n2b")]
        insert(db, t, (12, "new", ts(6)))
        live = poll_until(task, store, lambda got: len(got) >= 1, settle=0.2)
        assert ids(live) == [12]
    finally:
        task.stop()


def test_timestamp_delay_holds_back_recent_rows(db: Database) -> None:
    t = make_table(db, "delay")
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    insert(db, t, (1, "old", ts(1)), (2, "recent", now))
    store = OffsetStore()
    task = start_source(config(db, t, "timestamp+incrementing", **{
        "timestamp.column.name": "ts", "incrementing.column.name": "id",
        "timestamp.delay.interval.ms": "3600000"}), store)
    try:
        got = poll_until(task, store, lambda got: len(got) >= 1, settle=0.3)
    finally:
        task.stop()
    assert ids(got) == [1]


def test_bulk_mode_reads_the_whole_table_every_interval(db: Database) -> None:
    t = make_table(db, "bulk")
    insert(db, t, (1, "a", ts(1)), (2, "b", ts(2)), (3, "c", ts(3)))
    store = OffsetStore()
    task = start_source(config(db, t, "bulk", **{"batch.max.rows": "2",
                                                 "poll.interval.ms": "200"}), store)
    try:
        first = poll_until(task, store, lambda got: len(got) >= 3)
        assert sorted(ids(first)) == [1, 2, 3]
        insert(db, t, (4, "d", ts(4)))
        db.execute(sa.update(t).where(t.c.id == 1).values(name="a2"))
        second = poll_until(task, store, lambda got: len(got) >= 4)
    finally:
        task.stop()
    assert sorted((r.value["id"], r.value["name"]) for r in second) == [
        (1, "a2"), (2, "b"), (3, "c"), (4, "d")]


def test_query_mode_appends_the_mode_condition(db: Database) -> None:
    t = make_table(db, "query")
    insert(db, t, (1, "a", ts(1)), (2, "skip", ts(2)), (3, "c", ts(3)))
    store = OffsetStore()
    cfg = {"connection.url": db.url, "mode": "incrementing", "incrementing.column.name": "id",
           "topic.prefix": "q-topic", "poll.interval.ms": "20", "key.mode": "primary_key",
           "query": f"SELECT id, name FROM {t.name} WHERE name <> 'skip'"}
    task = start_source(cfg, store)
    try:
        got = poll_until(task, store, lambda got: len(got) >= 2)
        insert(db, t, (4, "d", ts(4)))
        more = poll_until(task, store, lambda got: len(got) >= 1, settle=0.2)
    finally:
        task.stop()
    assert [(r.value["id"], r.value["name"]) for r in got + more] == [(1, "a"), (3, "c"), (4, "d")]
    assert got[0].topic == "q-topic"
    assert got[0].source_partition == {"query": cfg["query"]}
    assert got[0].key is None


def test_records_have_null_keys_by_default_as_in_confluents_connector(db: Database) -> None:
    t = make_table(db, "nullkey")
    insert(db, t, (1, "a", ts(1)), (2, "b", ts(2)))
    store = OffsetStore()
    task = start_source(config(db, t, "incrementing", **{"incrementing.column.name": "id"}), store)
    try:
        got = poll_until(task, store, lambda got: len(got) >= 2)
    finally:
        task.stop()
    assert [(r.key, r.key_schema) for r in got] == [(None, None), (None, None)]
    assert ids(got) == [1, 2]


def test_value_schema_types_and_primary_key(db: Database) -> None:
    name = db.table_name("types")
    table = sa.Table(
        name, sa.MetaData(),
        sa.Column("a", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("b", sa.String(20), primary_key=True),
        sa.Column("big", sa.BigInteger),
        sa.Column("price", sa.Numeric(10, 2)),
        sa.Column("flag", sa.Boolean),
        sa.Column("day", sa.Date),
        sa.Column("at", TS),
        sa.Column("ratio", sa.Double),
        sa.Column("blob", sa.LargeBinary),
    )
    table.create(db.engine)
    db.execute(sa.insert(table), [{
        "a": 1, "b": "k", "big": 2**40, "price": decimal.Decimal("12.34"), "flag": True,
        "day": dt.date(2024, 1, 2), "at": ts(1.5), "ratio": 0.25, "blob": b"\x00\x01"}])
    store = OffsetStore()
    task = start_source({"connection.url": db.url, "mode": "bulk", "topic.prefix": "",
                         "table.whitelist": name, "key.mode": "primary_key"}, store)
    try:
        (record,) = poll_until(task, store, lambda got: len(got) >= 1)
    finally:
        task.stop()
    assert record.key == {"a": 1, "b": "k"}
    assert record.key_schema.name == f"{name}.Key"
    assert [f.name for f in record.key_schema.fields] == ["a", "b"]
    assert record.value == {"a": 1, "b": "k", "big": 2**40, "price": decimal.Decimal("12.34"),
                            "flag": True, "day": 19724, "at": BASE_MS + 1500, "ratio": 0.25,
                            "blob": b"\x00\x01"}
    types = {f.name: (f.schema.type, f.schema.name) for f in record.value_schema.fields}
    assert types["a"] == ("int32", None)
    assert types["big"] == ("int64", None)
    assert types["price"] == ("bytes", DECIMAL)
    assert record.value_schema.field("price").schema.parameters == {"scale": "2"}
    assert types["day"] == ("int32", DATE)
    assert types["at"] == ("int64", TIMESTAMP)
    assert types["ratio"] == ("float64", None)
    assert types["blob"] == ("bytes", None)
    assert not record.value_schema.field("a").schema.optional
    assert record.value_schema.field("big").schema.optional


def test_nullable_incrementing_column_is_refused_at_start(db: Database) -> None:
    name = db.table_name("nullable")
    sa.Table(name, sa.MetaData(), sa.Column("pk", sa.Integer, primary_key=True),
             sa.Column("seq", sa.Integer, nullable=True)).create(db.engine)
    with pytest.raises(ConnectError, match="nullable"):
        start_source({"connection.url": db.url, "mode": "incrementing", "topic.prefix": "",
                      "incrementing.column.name": "seq", "table.whitelist": name}, OffsetStore())


def test_task_configs_spread_tables_and_honour_the_exclude_list(db: Database) -> None:
    names = sorted(make_table(db, "spread").name for _ in range(3))
    connector = JdbcSourceConnector()
    connector.start(parse_config(JdbcSourceConfig, {
        "connection.url": db.url, "mode": "bulk", "topic.prefix": "p-",
        "table.include.list": ",".join(names)}))
    assert [c["tables"] for c in connector.task_configs(2)] == [",".join(names[:2]), names[2]]
    assert len(connector.task_configs(10)) == 3
    connector.start(parse_config(JdbcSourceConfig, {
        "connection.url": db.url, "mode": "bulk", "topic.prefix": "p-",
        "table.exclude.list": names[0]}))
    listed = ",".join(c["tables"] for c in connector.task_configs(1)).split(",")
    assert names[0] not in listed
    assert set(names[1:]) <= set(listed)


def test_bad_configs_list_every_problem() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(JdbcSourceConfig, {"mode": "incrementing", "batch.max.rows": "many"})
    assert set(info.value.problems) == {"connection.url", "topic.prefix", "batch.max.rows"}
    with pytest.raises(ConfigError) as info:
        parse_config(JdbcSourceConfig, {"connection.url": "jdbc:sqlite:x.db", "topic.prefix": "",
                                        "mode": "timestamp+incrementing",
                                        "timestamp.column.name": "ts"})
    assert set(info.value.problems) == {"incrementing.column.name"}


def test_several_timestamp_columns_use_the_first_that_is_set(db: Database) -> None:
    name = db.table_name("coalesce")
    table = sa.Table(
        name, sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("modified", TS, nullable=True),
        sa.Column("created", TS, nullable=False),
    )
    table.create(db.engine)
    db.execute(sa.insert(table), [{"id": 1, "modified": None, "created": ts(1)},
                                  {"id": 2, "modified": ts(5), "created": ts(2)},
                                  {"id": 3, "modified": None, "created": ts(3)}])
    store = OffsetStore()
    task = start_source({"connection.url": db.url, "mode": "timestamp+incrementing",
                         "topic.prefix": "", "table.whitelist": name, "poll.interval.ms": "20",
                         "incrementing.column.name": "id",
                         "timestamp.column.name": "modified,created"}, store)
    try:
        got = poll_until(task, store, lambda got: len(got) >= 3)
        assert ids(got) == [1, 3, 2]  # ordered by COALESCE(modified, created)
        assert got[-1].source_offset["timestamp"] == BASE_MS + 5000
        db.execute(sa.update(table).where(table.c.id == 1).values(modified=ts(6)))
        more = poll_until(task, store, lambda got: len(got) >= 1, settle=0.2)
        assert ids(more) == [1]
    finally:
        task.stop()


def test_primary_key_mode_gives_null_keys_for_a_table_without_one(db: Database) -> None:
    name = db.table_name("nokey")
    table = sa.Table(name, sa.MetaData(), sa.Column("seq", sa.Integer, nullable=False),
                     sa.Column("note", sa.String(20)))
    table.create(db.engine)
    db.execute(sa.insert(table), [{"seq": 1, "note": "a"}, {"seq": 2, "note": "b"}])
    store = OffsetStore()
    task = start_source({"connection.url": db.url, "mode": "incrementing", "topic.prefix": "",
                         "incrementing.column.name": "seq", "table.whitelist": name,
                         "poll.interval.ms": "20", "key.mode": "primary_key"}, store)
    try:
        got = poll_until(task, store, lambda got: len(got) >= 2)
    finally:
        task.stop()
    assert [(r.key, r.key_schema, r.value) for r in got] == [
        (None, None, {"seq": 1, "note": "a"}), (None, None, {"seq": 2, "note": "b"})]


def test_table_types_view_reads_views(db: Database) -> None:
    t = make_table(db, "base")
    view = db.table_name("view")
    db.execute(f"CREATE VIEW {view} AS SELECT id, name, ts FROM {t.name} WHERE id > 1")
    try:
        insert(db, t, (1, "hidden", ts(1)), (2, "shown", ts(2)))
        connector = JdbcSourceConnector()
        connector.start(parse_config(JdbcSourceConfig, {
            "connection.url": db.url, "mode": "incrementing", "topic.prefix": "v-",
            "incrementing.column.name": "id", "table.types": "VIEW"}))
        listed = ",".join(c["tables"] for c in connector.task_configs(1)).split(",")
        assert view in listed and t.name not in listed
        store = OffsetStore()
        task = start_source({"connection.url": db.url, "mode": "incrementing",
                             "topic.prefix": "v-", "incrementing.column.name": "id",
                             "table.whitelist": view, "validate.non.null": "false",
                             "poll.interval.ms": "20"}, store)
        try:
            got = poll_until(task, store, lambda got: len(got) >= 1, settle=0.2)
        finally:
            task.stop()
        assert [(r.topic, r.value["name"]) for r in got] == [(f"v-{view}", "shown")]
    finally:
        db.execute(f"DROP VIEW {view}")


def test_zoned_timestamps_are_read_as_utc(server_db: Database) -> None:
    db = server_db
    name = db.table_name("zoned")
    column_type = "timestamptz" if db.kind == "postgresql" else "TIMESTAMP(6)"
    db.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, at {column_type} NOT NULL)")
    plus_two = dt.timezone(dt.timedelta(hours=2))
    at = dt.datetime(2024, 1, 1, 2, 0, 1, tzinfo=plus_two)  # 00:00:01 UTC
    value = at if db.kind == "postgresql" else at.astimezone(dt.UTC).replace(tzinfo=None)
    db.execute(f"INSERT INTO {name} VALUES (1, :at)", {"at": value})
    store = OffsetStore()
    task = start_source({"connection.url": db.url, "mode": "timestamp", "topic.prefix": "",
                         "timestamp.column.name": "at", "table.whitelist": name,
                         "poll.interval.ms": "20"}, store)
    try:
        (record,) = poll_until(task, store, lambda got: len(got) >= 1, settle=0.2)
    finally:
        task.stop()
    assert record.value["at"] == BASE_MS + 1000
    assert record.source_offset == {"timestamp": BASE_MS + 1000, "timestamp_nanos": 0}


def test_rows_committed_by_a_concurrent_writer_arrive_once_each(db: Database) -> None:
    import threading

    t = make_table(db, "live")
    store = OffsetStore()
    task = start_source(config(db, t, "timestamp+incrementing", **{
        "timestamp.column.name": "ts", "incrementing.column.name": "id",
        "batch.max.rows": "7"}), store)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for i in range(1, 101):
                now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
                insert(db, t, (i, f"n{i}", now))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        got = poll_until(task, store, lambda got: len(got) >= 100 or bool(errors), settle=0.3)
    finally:
        writer.join()
        task.stop()
    assert not errors
    assert ids(got) == list(range(1, 101))


def test_numerics_without_scale_read_as_floats_beside_exact_decimals_and_offsets(
        db: Database) -> None:
    """NUMERIC without a scale is float64 (the float nearest the stored value), a scaled one
    beside it stays an exact Decimal, and an unscaled incrementing column keeps exact offsets
    (MariaDB has no unscaled NUMERIC: there the columns are DECIMAL(30, 0))."""
    unscaled = sa.Numeric().with_variant(mysql.DECIMAL(30, 0), "mysql")
    texts = ["0.1", "2.5", "1234.5678"]
    floats = sa.Table(db.table_name("num_f"), sa.MetaData(),
                      sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                      sa.Column("amount", unscaled))
    mixed = sa.Table(db.table_name("num_m"), sa.MetaData(),
                     sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                     sa.Column("amount", unscaled), sa.Column("price", sa.Numeric(38, 10)))
    seq = sa.Table(db.table_name("num_s"), sa.MetaData(),
                   sa.Column("seq", unscaled, primary_key=True))
    for t in (floats, mixed, seq):
        t.create(db.engine)
    db.execute(sa.insert(floats), [{"id": i, "amount": decimal.Decimal(x)}
                                   for i, x in enumerate(texts, 1)] + [{"id": 4, "amount": None}])
    # More digits than a float holds (SQLite keeps NUMERIC as a float or an integer itself).
    price = "12.3400000000" if db.kind == "sqlite" else "12345678901234567890.1234567891"
    db.execute(f"INSERT INTO {mixed.name} (id, amount, price) VALUES (1, 0.1, {price})")
    big = 2**60 + 1  # no float holds it
    db.execute(f"INSERT INTO {seq.name} (seq) VALUES ({big})")  # literal: a bind may go via float

    def read(t: sa.Table, inc: str, n: int) -> list:
        store = OffsetStore()
        task = start_source(config(db, t, "incrementing", **{"incrementing.column.name": inc}),
                            store)
        try:
            return poll_until(task, store, lambda got: len(got) >= n)
        finally:
            task.stop()

    def expected(record: object, field: str, text: str) -> object:
        schema = record.value_schema.field(field).schema  # type: ignore[attr-defined]
        if schema.type == "float64":
            return float(decimal.Decimal(text))
        quantum = decimal.Decimal(1).scaleb(-int(schema.parameters["scale"]))
        return decimal.Decimal(text).quantize(quantum, rounding=decimal.ROUND_HALF_UP)

    got = read(floats, "id", 4)
    assert [r.value["amount"] for r in got] == [expected(got[0], "amount", x) for x in texts] + [None]
    (row,) = read(mixed, "id", 1)
    assert row.value["amount"] == expected(row, "amount", "0.1")
    assert str(row.value["price"]) == price
    (row,) = read(seq, "seq", 1)
    assert row.source_offset == {"incrementing": big}
    if db.kind == "postgresql":
        assert type(got[0].value["amount"]) is float


@pytest.mark.parametrize("url", ["jdbc:postgresql://127.0.0.1:1/test", "jdbc:mysql://127.0.0.1:1/test",
                                 "jdbc:sqlite:/nonexistent/dir/test.db"])
def test_an_unreachable_database_fails_the_start_after_connection_attempts(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    """As Confluent's task: connection.attempts tries, connection.backoff.ms apart, then the
    task fails with the driver's reason on one line (no SQLAlchemy footer)."""
    task = JdbcSourceTask()
    task.initialize(OffsetStore())
    with caplog.at_level("WARNING", logger="streamkit.connect.jdbc"), pytest.raises(ConnectError) as info:
        task.start({"connection.url": url, "mode": "incrementing", "incrementing.column.name": "id",
                    "topic.prefix": "", "tables": "orders", "connection.attempts": "3",
                    "connection.backoff.ms": "10"})
    retries = [r.getMessage() for r in caplog.records if "retrying in 10 ms" in r.getMessage()]
    assert [m.split(" (attempt ")[1].split(")")[0] for m in retries] == ["1 of 3", "2 of 3"]
    message = str(info.value)
    assert message.startswith("cannot connect to ") and "after 3 attempt(s) (connection.attempts=3): " in message
    assert "\n" not in message and "sqlalche.me" not in message and "Background on this error" not in message


def test_a_wrong_incrementing_column_fails_the_start_naming_the_nearest_column(db: Database) -> None:
    t = make_table(db, "wrongcol")
    with pytest.raises(ConnectError) as info:
        start_source(config(db, t, "incrementing", **{"incrementing.column.name": "idd"}), OffsetStore())
    assert str(info.value) == f"table {t.name!r} has no column 'idd' (did you mean 'id'?)"


def test_a_bad_query_fails_the_poll_with_the_drivers_reason_on_one_line(db: Database) -> None:
    store = OffsetStore()
    task = start_source({"connection.url": db.url, "mode": "bulk", "topic.prefix": "q",
                         "query": "SELECT id FROM no_such_table_anywhere"}, store)
    try:
        with pytest.raises(ConnectError) as info:
            task.poll()
    finally:
        task.stop()
    assert not isinstance(info.value, RetriableError)
    message = str(info.value)
    assert "no_such_table_anywhere" in message
    assert "\n" not in message and "sqlalche.me" not in message and "[SQL:" not in message
