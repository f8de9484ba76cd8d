"""The databases the JDBC tests run against: PostgreSQL and MariaDB in containers started with
``testcontainers`` when a Docker engine answers, else the local servers named by
STREAMKIT_TEST_POSTGRES_URL / STREAMKIT_TEST_MYSQL_URL; and SQLite in a temporary file."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from streamkit.connect.jdbc import dialects
from streamkit.connect.jdbc.urls import to_sqlalchemy_url

__all__ = ["Database", "docker_available", "reachable", "started"]

POSTGRES_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
MYSQL_DEFAULT = "mysql+pymysql://root@127.0.0.1:3306/test"


def docker_available() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


@contextlib.contextmanager
def started(kind: str) -> Iterator[str]:
    """A containerised ``kind`` ("postgresql" or "mariadb"); yields its SQLAlchemy URL."""
    if kind == "postgresql":
        from testcontainers.community.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver="psycopg", dbname="test") as pg:
            yield pg.get_connection_url()
    else:
        from testcontainers.community.mysql import MySqlContainer

        with MySqlContainer("mariadb:11", dialect="pymysql", dbname="test") as my:
            yield my.get_connection_url()


def reachable(url: str) -> bool:
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        return True
    except sa.exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()


@dataclass
class Database:
    """One database under test: its URL and engine, and tables that are unique per test."""

    kind: str  # postgresql, mariadb, sqlite
    url: str
    engine: sa.Engine
    created: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, kind: str, url: str) -> Database:
        return cls(kind, url, dialects.create_engine(to_sqlalchemy_url(url)))

    def table_name(self, prefix: str) -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        self.created.append(name)
        return name

    def execute(self, sql: str | Any, params: Any = None) -> None:
        with self.engine.begin() as conn:
            if isinstance(sql, str):
                conn.execute(sa.text(sql), params or {})
            else:
                conn.execute(sql, params) if params is not None else conn.execute(sql)

    def rows(self, table: str, order_by: str) -> list[tuple[Any, ...]]:
        t = sa.Table(table, sa.MetaData(), autoload_with=self.engine)
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.select(t).order_by(t.c[order_by]))]

    def drop_created(self) -> None:
        names = set(sa.inspect(self.engine).get_table_names())
        with self.engine.begin() as conn:
            for name in self.created:
                if name in names:
                    conn.exec_driver_sql(f"DROP TABLE {dialects.quote(conn, name)}")
        self.created.clear()
