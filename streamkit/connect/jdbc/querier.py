"""One table (or the ``query``) read by a source task: its schema, its query, its offset.

A querier is due every ``poll.interval.ms``; when a query fills ``batch.max.rows`` it is due
again at once, so a backlog drains at full speed. Incremental modes run one short LIMITed query
per batch (see ``offsets``); bulk mode streams the whole table through a server-side cursor on
a connection of its own, a batch per poll, then waits for the next interval.

Reading is the source's hot path, all of it in Python: rows come from the DBAPI cursor as the
driver makes them (on PostgreSQL, unscaled NUMERICs parsed straight into floats), a function
generated per table turns a batch into records, and both run with the cyclic GC paused, the
batch promoted past the young generations (``streamkit.gcpause``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import types as sat
from sqlalchemy.engine import Connection, CursorResult, Engine

from streamkit.connect.data import TIMESTAMP, Field, Schema, SourceRecord
from streamkit.connect.errors import ConnectError
from streamkit.connect.jdbc import dialects
from streamkit.connect.jdbc.config import JdbcSourceConfig
from streamkit.connect.jdbc.offsets import Offset, build_query, group_offsets
from streamkit.connect.jdbc.schema import (
    INLINE_GLOBALS,
    Converter,
    column_schema,
    datetime_to_micros,
    infer_value_schema,
    inline_nullable,
    to_connect_converter,
)
from streamkit.gcpause import gc_paused
from streamkit.hints import did_you_mean

__all__ = ["Querier", "split_table_name"]

log = logging.getLogger(__name__)


def split_table_name(name: str) -> tuple[str | None, str]:
    schema, _, table = name.rpartition(".")
    return (schema or None), table


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    schema: Schema | None  # None: a type without a Connect mapping, left out of records
    convert: Converter | None


def _timestamp_us(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if not isinstance(value, dt.datetime):
        raise ConnectError(f"timestamp.column.name: column value {value!r} is not a timestamp")
    return datetime_to_micros(value)


def _fetch(conn: Connection, stmt: Any, values: dict[str, Any], *,
           numeric_as_float: bool = False) -> tuple[list[str], Sequence[Any]]:
    """Run ``stmt`` on the DBAPI cursor and fetch every row as the driver gives it: SQLAlchemy's
    Result costs more per row than the rest of a record's making. ``numeric_as_float``: see
    ``dialects.read_numeric_as_float``."""
    compiled = stmt.compile(dialect=conn.dialect)
    sql = str(compiled)
    params: Any = compiled.construct_params(values)
    if compiled.positional:
        params = tuple(params[name] for name in compiled.positiontup or ())
    dbapi_error = conn.dialect.loaded_dbapi.Error
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    if numeric_as_float:
        dialects.read_numeric_as_float(cursor)
    try:
        cursor.execute(sql, params)
        keys: list[str] = [d[0] for d in cursor.description]
        with gc_paused(promote=True):  # the rows are tuples of plain values: no cycles
            return keys, cursor.fetchall()
    except dbapi_error as exc:
        raise sa.exc.DBAPIError.instance(sql, params, exc, dbapi_error) from exc
    finally:
        cursor.close()


_Build = Callable[..., list[SourceRecord]]


@dataclass(slots=True)
class _BulkScan:
    """A bulk-mode pass over a table, served a batch per poll."""

    conn: Connection | None
    keys: list[str]
    rows: Iterator[Any]

_TS_COLUMN = "streamkit_ts"


class Querier:
    def __init__(self, engine: Engine, config: JdbcSourceConfig, *, table: str | None,
                 offset: Offset, now_ms: Callable[[], int],
                 connect: Callable[[], Connection]) -> None:
        self._engine = engine
        self._connect = connect  # with connection.attempts, then ConnectError
        self._config = config
        self._table = table
        self._now_ms = now_ms
        self.offset = offset
        self.next_due_ms = 0
        backend = engine.dialect.name
        self._backend = backend
        self.topic = config.topic_prefix + (table or "")
        self.partition: dict[str, str] = (
            {"table": table} if table is not None else {"query": config.query})
        self._columns: list[_Column] | None = None
        self._key_indexes: list[int] = []
        self._key_schema: Schema | None = None
        self._value_schema: Schema | None = None
        self._inferred: dict[str, Schema] = {}
        self._numeric_as_float = False
        self._select = ""
        self._build: _Build | None = None
        self._bulk: _BulkScan | None = None
        q = dialects.quote
        self._inc = q(engine, config.incrementing_column_name) if config.incrementing_column_name else None
        ts_cols = [q(engine, c) for c in config.timestamp_column_name]
        ts_expr = ts_cols[0] if len(ts_cols) == 1 else (f"COALESCE({', '.join(ts_cols)})" if ts_cols else None)
        # SQLite compares timestamps as text: the query compares a normalised form (ms), and
        # offsets are taken from that same form, selected as an extra last column, so they
        # never disagree with the comparison (SQLite rounds microseconds to milliseconds).
        self._extra = ""
        if ts_expr is not None and backend == "sqlite":
            ts_expr = f"strftime('%Y-%m-%d %H:%M:%f', {ts_expr})"
            self._extra = f", {ts_expr} AS {_TS_COLUMN}"
        self._ts_expr = ts_expr
        self._tiebreak: list[str] = []

    # -- schema ----------------------------------------------------------------------------

    def prepare(self) -> None:
        """Connect and describe the table now, as Confluent's task does at start: a database
        that cannot be reached, a missing table or column fails the task at once, and the
        first poll only reads."""
        if self._columns is not None:
            return
        with self._connect() as conn:
            self._describe(conn)

    def _describe(self, conn: Connection) -> None:
        config = self._config
        q = dialects.quote
        if self._table is None:
            self._select = f"SELECT *{self._extra} FROM ({config.query}) AS streamkit_query"
            self._columns = []
            return
        schema_name, name = split_table_name(self._table)
        # Only the columns and the primary key: a whole Table's reflection (indexes, foreign
        # keys, constraints...) takes several times as many queries.
        inspector = sa.inspect(conn)
        try:
            reflected = inspector.get_columns(name, schema=schema_name)
        except sa.exc.NoSuchTableError as exc:
            raise ConnectError(f"table {self._table!r} does not exist") from exc
        pk: list[str] = inspector.get_pk_constraint(name, schema=schema_name)["constrained_columns"]
        by_name = {c["name"]: c for c in reflected}
        needed = list(config.timestamp_column_name)
        if config.incrementing_column_name:
            needed.append(config.incrementing_column_name)
        # With COALESCE(a, b) the earlier columns are the nullable ones by design.
        may_be_null = set(config.timestamp_column_name[:-1])
        if config.mode != "bulk":
            for col in needed:
                if col not in by_name:
                    raise ConnectError(f"table {self._table!r} has no column {col!r}"
                                       f"{did_you_mean(col, by_name)}")
                if (config.validate_non_null and by_name[col]["nullable"] and col not in pk
                        and col not in may_be_null):
                    raise ConnectError(
                        f"column {col!r} of {self._table!r} is nullable; make it NOT NULL or "
                        "set validate.non.null=false")
        columns: list[_Column] = []
        for column in reflected:
            s = column_schema(column["type"], bool(column["nullable"]) and column["name"] not in pk)
            if s is None:
                log.warning("column %s.%s of type %s has no Connect type; left out",
                            self._table, column["name"], column["type"])
            columns.append(_Column(column["name"], s, to_connect_converter(s) if s else None))
        self._columns = columns
        # NUMERIC without a scale maps to float64; with a scale, to Decimal. When the table
        # has only the former, and the incrementing column (whose offsets must be exact) is
        # not one, the driver may parse them straight into floats.
        numerics = [c for c, r in zip(columns, reflected, strict=True)
                    if isinstance(r["type"], sat.Numeric) and not isinstance(r["type"], sat.Float)]
        self._numeric_as_float = bool(
            numerics and dialects.reads_numeric_as_float(conn)
            and all(c.schema is not None and c.schema.type == "float64" for c in numerics)
            and config.incrementing_column_name not in {c.name for c in numerics})
        self._value_schema = Schema("struct", name=name, fields=tuple(
            Field(c.name, c.schema) for c in columns if c.schema is not None))
        index = {c.name: i for i, c in enumerate(columns)}
        if (config.key_mode == "primary_key" and pk
                and all(columns[index[p]].schema is not None for p in pk)):
            self._key_indexes = [index[p] for p in pk]
            self._key_schema = Schema("struct", name=f"{name}.Key", fields=tuple(
                Field(p, columns[index[p]].schema) for p in pk))  # type: ignore[arg-type]
        self._tiebreak = [q(conn, p) for p in pk]
        src = dialects.quote(conn, name) if schema_name is None else (
            f"{q(conn, schema_name)}.{q(conn, name)}")
        self._select = (f"SELECT {', '.join(q(conn, c.name) for c in columns)}{self._extra} "
                        f"FROM {src}")

    # -- reading ---------------------------------------------------------------------------

    def _bind_ts(self, micros: int) -> Any:
        value = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
        if self._backend == "sqlite":
            return f"{value:%Y-%m-%d %H:%M:%S}.{value.microsecond // 1000:03d}"
        return value

    def _statement(self, sql: str, params: Sequence[str], offset: Offset,
                   conn: Connection) -> tuple[Any, dict[str, Any]]:
        values: dict[str, Any] = {}
        if "inc" in params:
            values["inc"] = offset.incrementing
        if "ts" in params:
            assert offset.timestamp_us is not None
            values["ts"] = self._bind_ts(offset.timestamp_us)
        if "end" in params:
            now = dialects.db_utc_now(conn) - dt.timedelta(
                milliseconds=self._config.timestamp_delay_interval_ms)
            values["end"] = self._bind_ts(datetime_to_micros(now))
        # Driver values as they come (no SQLAlchemy result types): the converters take them
        # in every form the drivers give (SQLite's text timestamps, MySQL's timedelta TIME).
        return sa.text(sql), values

    def poll(self) -> list[SourceRecord]:
        """The next batch; sets ``next_due_ms``. Offsets advance as the records carry them."""
        config = self._config
        if config.mode == "bulk":
            return self._poll_bulk()
        with self._connect() as conn:
            if self._backend == "postgresql":
                # Under PostgreSQL's READ COMMITTED each statement reads a snapshot of its own
                # anyway; without a transaction there is no BEGIN and ROLLBACK around them.
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            if self._columns is None:
                self._describe(conn)
            sql, params = build_query(
                mode=config.mode, select=self._select, inc_column=self._inc,
                ts_expr=self._ts_expr, offset=self.offset, limit=config.batch_max_rows,
                tiebreak=self._tiebreak)
            stmt, values = self._statement(sql, params, self.offset, conn)
            keys, rows = _fetch(conn, stmt, values, numeric_as_float=self._numeric_as_float)
            full = len(rows) >= config.batch_max_rows
            offsets: Sequence[dict[str, int]] | None = None  # incrementing: made with the records
            if config.mode == "timestamp":
                rows, offsets = self._timestamp_batch(conn, keys, rows, full)
            elif config.mode == "timestamp+incrementing":
                offsets = self._exact_offsets(keys, rows)
        self.next_due_ms = self._now_ms() + (0 if full else config.poll_interval_ms)
        records = self._records(keys, rows, offsets)
        if records:
            self.offset = Offset.from_dict(records[-1].source_offset)
        return records

    def _index(self, keys: Sequence[str], name: str) -> int:
        try:
            return keys.index(name)
        except ValueError:
            raise ConnectError(f"the query's result has no column {name!r}"
                               f"{did_you_mean(name, keys)}") from None

    def _row_ts(self, keys: Sequence[str]) -> Callable[[Sequence[Any]], int]:
        names = [_TS_COLUMN] if self._extra else self._config.timestamp_column_name
        idx = [self._index(keys, c) for c in names]

        def row_ts(row: Sequence[Any]) -> int:
            for i in idx:
                us = _timestamp_us(row[i])
                if us is not None:
                    return us
            raise ConnectError("a row without a timestamp was read")

        return row_ts

    def _exact_offsets(self, keys: Sequence[str], rows: Sequence[Any]) -> list[dict[str, int]]:
        """timestamp+incrementing: each row's offset, as the dict it is stored as
        (``Offset.to_dict``'s layout, built directly: this runs once per row)."""
        inc_i = self._index(keys, self._config.incrementing_column_name)
        row_ts = self._row_ts(keys)
        out = []
        for row in rows:
            us = row_ts(row)
            out.append({"incrementing": int(row[inc_i]), "timestamp": us // 1000,
                        "timestamp_nanos": (us % 1_000_000) * 1000})
        return out

    def _timestamp_batch(self, conn: Connection, keys: Sequence[str], rows: Sequence[Any],
                         full: bool) -> tuple[Sequence[Any], list[dict[str, int]]]:
        row_ts = self._row_ts(keys)
        stamps = [row_ts(r) for r in rows]
        if full and stamps and stamps[0] == stamps[-1]:
            # One timestamp fills the batch: read all its rows, they go out together.
            order = ", ".join(f"{o} ASC" for o in self._tiebreak)
            sql = f"{self._select} WHERE {self._ts_expr} = :grp" + (f" ORDER BY {order}" if order else "")
            stmt, _ = self._statement(sql, (), self.offset, conn)
            _, rows = _fetch(conn, stmt, {"grp": self._bind_ts(stamps[0])},
                             numeric_as_float=self._numeric_as_float)
            stamps = [row_ts(r) for r in rows]
            full = False
        n, offsets = group_offsets(stamps, self.offset, full)
        return rows[:n], [o.to_dict() for o in offsets]

    def _poll_bulk(self) -> list[SourceRecord]:
        if self._bulk is None:
            conn = self._connect()
            try:
                if self._columns is None:
                    self._describe(conn)
                stmt, _ = self._statement(self._select, (), self.offset, conn)
                if self._backend == "sqlite":
                    # An open SQLite read blocks every writer's commit: read the table at once.
                    result = conn.execute(stmt)
                    self._bulk = _BulkScan(None, list(result.keys()), iter(result.fetchall()))
                    conn.close()
                else:
                    result = conn.execution_options(stream_results=True).execute(stmt)
                    self._bulk = _BulkScan(conn, list(result.keys()), result)
            except BaseException:
                conn.close()
                raise
        scan = self._bulk
        batch = self._config.batch_max_rows
        rows = list(itertools.islice(scan.rows, batch))
        if len(rows) < batch:
            self.close()
            self.next_due_ms = self._now_ms() + self._config.poll_interval_ms
        else:
            self.next_due_ms = self._now_ms()
        return self._records(scan.keys, rows, [{}] * len(rows))

    def close(self) -> None:
        if self._bulk is not None:
            scan, self._bulk = self._bulk, None
            if isinstance(scan.rows, CursorResult):
                scan.rows.close()
            if scan.conn is not None:
                scan.conn.close()

    # -- records ---------------------------------------------------------------------------

    def _query_columns(self, keys: Sequence[str], rows: Sequence[Any]) -> list[_Column]:
        """Query mode: column schemas from the values (timestamp columns as Timestamp)."""
        ts_cols = set(self._config.timestamp_column_name)
        columns = []
        for i, name in enumerate(keys):
            s = self._inferred.get(name)
            if s is None or (s.type == "string" and name not in ts_cols):
                if name in ts_cols:
                    s = Schema("int64", optional=True, name=TIMESTAMP, version=1)
                else:
                    sample = next((r[i] for r in rows if r[i] is not None), None)
                    s = infer_value_schema({name: sample}).fields[0].schema
                    if s.type == "int64" and name == self._config.incrementing_column_name:
                        s = Schema("int64")
                if s is not None:
                    self._inferred[name] = s
            columns.append(_Column(name, s, to_connect_converter(s)))
        return columns

    def _builder(self, columns: Sequence[_Column], width: int, inc_index: int | None) -> _Build:
        """(rows, offsets, ...) -> records, generated so that the loop over a batch's rows
        runs without a call per row besides the record's own: the source's hot path. Each
        row (``width`` values: ``columns``, then any extra ones) is unpacked into locals.
        With ``inc_index`` (incrementing mode) each record's offset is made in the loop from
        that column (``Offset.to_dict``'s layout) and ``offsets`` is not read.
        Only column names (as repr literals) enter the code."""
        namespace: dict[str, Any] = dict(INLINE_GLOBALS)

        def expr(i: int, c: _Column) -> str:
            if c.convert is None:
                return f"x{i}"
            namespace[f"c{i}"] = c.convert
            return inline_nullable(c.convert, f"x{i}", f"c{i}")

        value = ", ".join(f"{c.name!r}: {expr(i, c)}" for i, c in enumerate(columns)
                          if c.schema is not None)
        key = "None"
        if self._key_indexes:
            key = "{" + ", ".join(f"{columns[i].name!r}: {expr(i, columns[i])}"
                                  for i in self._key_indexes) + "}"
        row = "(" + "".join(f"x{i}, " for i in range(width)) + ")"
        offset, loop = "offset", f"{row}, offset in zip(rows, offsets)"
        if inc_index is not None:
            x = f"x{inc_index}"
            offset = f"{{'incrementing': ({x} if {x}.__class__ is int else int({x}))}}"
            loop = f"{row} in rows"
        exec("def build(rows, offsets, record, partition, topic, value_schema, key_schema):\n"
             f"    return [record(partition, {offset}, topic, {{{value}}}, {key}, value_schema,"
             " key_schema)\n"
             f"            for {loop}]\n", namespace)
        return namespace["build"]  # type: ignore[no-any-return]

    def _records(self, keys: Sequence[str], rows: Sequence[Any],
                 offsets: Sequence[dict[str, int]] | None) -> list[SourceRecord]:
        """The records of ``rows``; ``offsets`` are theirs, None in incrementing mode (the
        builder makes them from the incrementing column)."""
        if not rows:
            return []
        value_schema = self._value_schema
        build = self._build
        inc_index = None
        if offsets is None:
            inc_index = self._index(keys, self._config.incrementing_column_name)
        if not self._columns:  # query mode: columns known from the result
            columns = self._query_columns(keys[:-1] if self._extra else keys, rows)
            value_schema = Schema("struct", fields=tuple(
                Field(c.name, c.schema) for c in columns if c.schema is not None))
            build = self._builder(columns, len(keys), inc_index)
        elif build is None:
            build = self._build = self._builder(self._columns, len(keys), inc_index)
        with gc_paused(promote=True):
            return build(rows, offsets, SourceRecord, self.partition, self.topic, value_schema,
                         self._key_schema)
