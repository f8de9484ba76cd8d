"""What differs between PostgreSQL, MySQL/MariaDB and SQLite, in one place.

Sessions run in UTC so that naive TIMESTAMP/DATETIME columns and offsets mean the same instant
everywhere. Upserts use each dialect's own statement: ``INSERT ... ON CONFLICT (pk) DO UPDATE``
on PostgreSQL and SQLite, ``INSERT ... ON DUPLICATE KEY UPDATE`` on MySQL and MariaDB. Column
types for ``auto.create``/``auto.evolve`` follow Confluent's dialects (MySQL keys as VARCHAR(256),
timestamps as DATETIME(3)). Other SQLAlchemy backends work for reads and plain inserts;
upserts on them are refused with a clear error.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import types as sat
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Engine

from streamkit.connect.data import DATE, DECIMAL, TIME, TIMESTAMP, Schema
from streamkit.connect.errors import ConnectError

__all__ = [
    "column_type",
    "copy_rows",
    "copy_upsert",
    "create_engine",
    "db_utc_now",
    "quote",
    "read_numeric_as_float",
    "read_type",
    "reads_numeric_as_float",
    "supports_copy",
    "upsert_statement",
]


def create_engine(url: URL) -> Engine:
    connect_args: dict[str, Any] = {}
    if url.get_backend_name() == "postgresql":
        connect_args["options"] = "-c timezone=UTC"
    elif url.get_backend_name() in ("mysql", "mariadb"):
        connect_args["init_command"] = "SET time_zone = '+00:00'"
    return sa.create_engine(url, connect_args=connect_args, pool_pre_ping=True)


def quote(conn: Connection | Engine, name: str) -> str:
    return conn.dialect.identifier_preparer.quote(name)


def reads_numeric_as_float(conn: Connection) -> bool:
    """Whether ``read_numeric_as_float`` works on this connection's driver (psycopg)."""
    return conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg"


def read_numeric_as_float(cursor: Any) -> None:
    """Make a psycopg cursor read NUMERIC values as floats, parsed straight from the wire text:
    the float nearest the value, as ``float(Decimal)`` gives, without making the Decimal.
    Only for cursors whose NUMERIC columns all map to float64 (loaders go by type)."""
    from psycopg.types.numeric import FloatLoader

    cursor.adapters.register_loader("numeric", FloatLoader)


def db_utc_now(conn: Connection) -> dt.datetime:
    """The database's clock in naive UTC: timestamp bounds use it, as Confluent's connector
    does, so a skewed worker clock cannot skip rows."""
    backend = conn.dialect.name
    if backend == "postgresql":
        sql = "SELECT CAST(now() AT TIME ZONE 'UTC' AS timestamp)"
    elif backend in ("mysql", "mariadb"):
        sql = "SELECT UTC_TIMESTAMP(6)"
    elif backend == "sqlite":
        sql = "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')"
    else:
        return dt.datetime.now(dt.UTC).replace(tzinfo=None)
    value: dt.datetime | str = conn.exec_driver_sql(sql).scalar_one()
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=None) if value.tzinfo is None else (
        value.astimezone(dt.UTC).replace(tzinfo=None))


class _SqliteDecimal(sat.TypeDecorator[decimal.Decimal]):
    """SQLite keeps NUMERIC as an integer, a float or text: read it back through str so a
    value stored as text keeps every digit (SQLAlchemy's Numeric warns and goes via float)."""

    impl = sat.String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return None if value is None else str(value)

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return None if value is None else decimal.Decimal(str(value))


def read_type(type_: sat.TypeEngine[Any], backend: str) -> sat.TypeEngine[Any]:
    """The type to read (and bind) a reflected column with."""
    if backend == "sqlite" and isinstance(type_, sat.Numeric) and not isinstance(type_, sat.Float):
        return _SqliteDecimal()
    return type_


def column_type(schema: Schema, backend: str, key: bool) -> sat.TypeEngine[Any]:
    """The column type ``auto.create``/``auto.evolve`` give a field of ``schema``."""
    is_mysql = backend in ("mysql", "mariadb")
    if schema.name == DECIMAL:
        scale = int((schema.parameters or {}).get("scale", "0"))
        if is_mysql:
            return mysql.DECIMAL(65, scale)
        # SQLite's NUMERIC affinity keeps what it can exactly; reads go through read_type.
        return sat.NUMERIC() if backend == "sqlite" else sat.Numeric(asdecimal=True)
    if schema.name == TIMESTAMP:
        return mysql.DATETIME(fsp=3) if is_mysql else sat.DateTime()
    if schema.name == DATE:
        return sat.Date()
    if schema.name == TIME:
        return mysql.TIME(fsp=3) if is_mysql else sat.Time()
    simple: dict[str, sat.TypeEngine[Any]] = {
        "int8": sat.SmallInteger(),
        "int16": sat.SmallInteger(),
        "int32": sat.Integer(),
        "int64": sat.BigInteger(),
        "float32": sat.REAL(),
        "float64": sat.Double() if not is_mysql else mysql.DOUBLE(asdecimal=False),
        "boolean": sat.Boolean(),
    }
    if schema.type in simple:
        return simple[schema.type]
    if schema.type == "string":
        # MySQL cannot index TEXT without a prefix length.
        return sat.String(256) if is_mysql and key else sat.Text()
    if schema.type == "bytes":
        return sat.VARBINARY(256) if is_mysql and key else sat.LargeBinary()
    raise ConnectError(f"no column type for a {schema.type} field; flatten it first")


def upsert_statement(backend: str, table: sa.Table, columns: Sequence[str],
                     key_columns: Sequence[str]) -> Any:
    """An INSERT of ``columns`` that updates the row of the same key instead of failing
    (only the given columns: the table's others keep their values)."""
    others = [c for c in columns if c not in key_columns]
    if backend in ("postgresql", "sqlite"):
        ins = (postgresql.insert if backend == "postgresql" else sqlite.insert)(table)
        if not others:
            return ins.on_conflict_do_nothing(index_elements=list(key_columns))
        return ins.on_conflict_do_update(
            index_elements=list(key_columns), set_={c: ins.excluded[c] for c in others})
    if backend in ("mysql", "mariadb"):
        mins = mysql.insert(table)
        updated = others or [key_columns[0]]
        return mins.on_duplicate_key_update({c: mins.inserted[c] for c in updated})
    raise ConnectError(f"insert.mode=upsert is not supported on {backend}; "
                       "use PostgreSQL, MySQL/MariaDB or SQLite, or insert.mode=insert")


def supports_copy(backend: str) -> bool:
    return backend == "postgresql"


def _copy(conn: Connection, target: str, cols: str, rows: Iterable[Sequence[Any]]) -> None:
    if not conn.in_transaction():
        conn.begin()  # so that the Connection's commit() commits the COPY too
    raw = conn.connection.driver_connection
    sql = f"COPY {target} ({cols}) FROM STDIN"
    dbapi_error = conn.dialect.loaded_dbapi.Error
    try:
        with raw.cursor() as cur, cur.copy(sql) as copy:  # type: ignore[union-attr]
            for row in rows:
                copy.write_row(row)
    except dbapi_error as exc:
        # The driver's own error, as SQLAlchemy would have wrapped it (IntegrityError...).
        raise sa.exc.DBAPIError.instance(sql, None, exc, dbapi_error) from exc


def copy_rows(conn: Connection, table: sa.Table, columns: Sequence[str],
              rows: Iterable[Sequence[Any]]) -> None:
    """COPY rows into ``table`` on PostgreSQL, inside the connection's open transaction."""
    prep = conn.dialect.identifier_preparer
    _copy(conn, prep.format_table(table), ", ".join(prep.quote(c) for c in columns), rows)


def copy_upsert(conn: Connection, table: sa.Table, columns: Sequence[str],
                key_columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Upsert on PostgreSQL at COPY speed: COPY into a temporary staging table (dropped at
    commit), then one ``INSERT ... SELECT ... ON CONFLICT DO UPDATE``. The rows must not
    repeat a key (one statement may not update a row twice)."""
    prep = conn.dialect.identifier_preparer
    target = prep.format_table(table)
    cols = ", ".join(prep.quote(c) for c in columns)
    digest = hashlib.sha1(f"{target}|{cols}".encode()).hexdigest()[:16]
    stage = prep.quote(f"streamkit_stage_{digest}")
    if not conn.in_transaction():
        conn.begin()
    conn.exec_driver_sql(f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DROP AS "
                         f"SELECT {cols} FROM {target} WITH NO DATA")
    conn.exec_driver_sql(f"TRUNCATE {stage}")
    _copy(conn, stage, cols, rows)
    keys = ", ".join(prep.quote(k) for k in key_columns)
    others = [prep.quote(c) for c in columns if c not in key_columns]
    action = ("DO UPDATE SET " + ", ".join(f"{c} = EXCLUDED.{c}" for c in others)
              if others else "DO NOTHING")
    conn.exec_driver_sql(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {stage} "
                         f"ON CONFLICT ({keys}) {action}")
