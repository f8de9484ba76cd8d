"""One destination table: create or evolve it to fit the records, then write batches to it.

``auto.create`` makes the table with the record's columns (primary key from ``pk.mode``,
NOT NULL where the schema is not optional); ``auto.evolve`` adds missing columns, always
nullable so that rows already in the table stay valid. Neither drops nor alters a column.
On MySQL/MariaDB DDL commits the open transaction, as it always does there.

Writes are one ``executemany`` per batch (PyMySQL folds an INSERT's rows into one statement;
psycopg pipelines them), except inserts and upserts on PostgreSQL, which use ``COPY`` (upserts
through a staging table, see ``dialects.copy_upsert``).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from streamkit.connect.errors import ConnectError
from streamkit.connect.jdbc import dialects
from streamkit.connect.jdbc.config import JdbcSinkConfig
from streamkit.connect.jdbc.fields import RowShape
from streamkit.connect.jdbc.querier import split_table_name

__all__ = ["TableWriter"]

log = logging.getLogger(__name__)


class TableWriter:
    def __init__(self, config: JdbcSinkConfig, name: str) -> None:
        self._config = config
        self.name = name
        self._schema, self._bare = split_table_name(name)
        self._table: sa.Table | None = None
        self._statements: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Any] = {}

    # -- DDL -------------------------------------------------------------------------------

    def _reflect(self, conn: Connection) -> sa.Table | None:
        if not sa.inspect(conn).has_table(self._bare, schema=self._schema):
            return None
        found = sa.Table(self._bare, sa.MetaData(), schema=self._schema, autoload_with=conn)
        backend = conn.dialect.name
        # A copy whose types bind as the reads do (SQLite's NUMERIC through text).
        return sa.Table(self._bare, sa.MetaData(), *[
            sa.Column(c.name, dialects.read_type(c.type, backend), primary_key=c.primary_key,
                      autoincrement=False)
            for c in found.columns], schema=self._schema)

    def _create(self, conn: Connection, shape: RowShape) -> None:
        backend = conn.dialect.name
        columns = [
            sa.Column(c.name, dialects.column_type(c.schema, backend, c.name in shape.key),
                      primary_key=c.name in shape.key, autoincrement=False,
                      nullable=c.name not in shape.key and c.schema.optional)
            for c in shape.columns]
        sa.Table(self._bare, sa.MetaData(), *columns, schema=self._schema).create(conn)
        log.info("created table %s with columns %s", self.name, ", ".join(shape.names))

    def _evolve(self, conn: Connection, shape: RowShape, missing: Sequence[str]) -> None:
        backend = conn.dialect.name
        prep = conn.dialect.identifier_preparer
        assert self._table is not None
        target = prep.format_table(self._table)
        for c in shape.columns:
            if c.name not in missing:
                continue
            type_sql = dialects.column_type(c.schema, backend, False).compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {target} ADD COLUMN {prep.quote(c.name)} {type_sql} NULL")
        log.info("added columns %s to table %s", ", ".join(missing), self.name)

    def ensure(self, conn: Connection, shape: RowShape) -> sa.Table:
        """The table, created or evolved so it has every column of ``shape``."""
        if self._table is None:
            self._table = self._reflect(conn)
            if self._table is None:
                if not self._config.auto_create:
                    raise ConnectError(f"table {self.name!r} does not exist; create it or set "
                                       "auto.create=true")
                self._create(conn, shape)
                self._table = self._reflect(conn)
                assert self._table is not None
        missing = [n for n in shape.names if n not in self._table.c]
        if missing:
            # Someone else may have added them: look again before changing anything.
            self._table = self._reflect(conn)
            assert self._table is not None
            missing = [n for n in shape.names if n not in self._table.c]
        if missing:
            if not self._config.auto_evolve:
                raise ConnectError(f"table {self.name!r} has no columns {missing}; add them or "
                                   "set auto.evolve=true")
            self._evolve(conn, shape, missing)
            self._table = self._reflect(conn)
            self._statements.clear()
            assert self._table is not None
        return self._table

    # -- DML -------------------------------------------------------------------------------

    def _statement(self, conn: Connection, kind: str, shape: RowShape) -> Any:
        cache_key = (kind, shape.names, shape.key)
        stmt = self._statements.get(cache_key)
        if stmt is not None:
            return stmt
        table = self._table
        assert table is not None
        if kind == "insert":
            stmt = sa.insert(table)
        elif kind == "upsert":
            stmt = dialects.upsert_statement(conn.dialect.name, table, shape.names, shape.key)
        elif kind == "update":
            stmt = sa.update(table).where(*[table.c[k] == sa.bindparam(f"k_{i}")
                                            for i, k in enumerate(shape.key)]).values(
                {n: sa.bindparam(f"v_{i}") for i, n in enumerate(shape.names) if n not in shape.key})
        else:
            stmt = sa.delete(table).where(*[table.c[k] == sa.bindparam(f"k_{i}")
                                            for i, k in enumerate(shape.key)])
        self._statements[cache_key] = stmt
        return stmt

    def write(self, conn: Connection, shape: RowShape, rows: list[tuple[Any, ...]]) -> None:
        """Write rows (values in ``shape.names`` order) per ``insert.mode``."""
        table = self.ensure(conn, shape)
        mode = self._config.insert_mode
        names = shape.names
        if mode == "insert":
            if dialects.supports_copy(conn.dialect.name):
                dialects.copy_rows(conn, table, names, rows)
            else:
                conn.execute(self._statement(conn, "insert", shape),
                             [dict(zip(names, r, strict=True)) for r in rows])
            return
        key_at = [names.index(k) for k in shape.key]
        if mode == "upsert":
            if len(rows) > 1 and key_at:
                # One statement may not touch a row twice (PostgreSQL); the last write wins.
                key_of = operator.itemgetter(*key_at)
                rows = list({key_of(r): r for r in rows}.values())
            if dialects.supports_copy(conn.dialect.name):
                dialects.copy_upsert(conn, table, names, shape.key, rows)
                return
            conn.execute(self._statement(conn, "upsert", shape),
                         [dict(zip(names, r, strict=True)) for r in rows])
            return
        value_at = [i for i, n in enumerate(names) if n not in shape.key]
        if not value_at:
            return  # nothing but the key: nothing to update
        params = [{**{f"k_{j}": r[i] for j, i in enumerate(key_at)},
                   **{f"v_{i}": r[i] for i in value_at}} for r in rows]
        conn.execute(self._statement(conn, "update", shape), params)

    def delete(self, conn: Connection, shape: RowShape, keys: list[tuple[Any, ...]]) -> None:
        """Delete the rows of these keys (values in ``shape.key`` order)."""
        if self._table is None:
            self._table = self._reflect(conn)
            if self._table is None:
                return  # no table, no row to delete
        key_at = [shape.names.index(k) for k in shape.key]
        params = [{f"k_{j}": r[i] for j, i in enumerate(key_at)} for r in keys]
        conn.execute(self._statement(conn, "delete", shape), params)
