"""The JDBC source connector: tables (or one query) into topics, resuming from source offsets.

Semantics are Confluent's ``JdbcSourceConnector``'s (see ``offsets`` for the modes' queries).
A record's topic is ``topic.prefix`` + table name (``topic.prefix`` alone for ``query``), its
source partition ``{"table": name}`` (``{"query": sql}``) and its source offset the mode's
offset. As in Confluent's connector a record's key is None (set one with the ValueToKey
transform); ``key.mode=primary_key`` keys each record with a struct of its table's
primary-key columns (``<table>.Key``) instead, None for tables without one and for queries.

Tables are listed once when the connector starts (``table.whitelist``/``table.include.list``,
else every table of ``table.types`` minus ``table.blacklist``/``table.exclude.list``) and
spread over at most ``tasks.max`` tasks in contiguous groups.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

import sqlalchemy as sa

from streamkit.connect.connector import SourceConnector, SourceTask
from streamkit.connect.data import SourceRecord
from streamkit.connect.errors import ConnectError, RetriableError
from streamkit.connect.jdbc import dialects
from streamkit.connect.jdbc.config import JdbcSourceConfig, parse_config, to_task_config
from streamkit.connect.jdbc.connection import connect, driver_message, is_transient
from streamkit.connect.jdbc.offsets import Offset
from streamkit.connect.jdbc.querier import Querier, split_table_name
from streamkit.connect.jdbc.urls import to_sqlalchemy_url

__all__ = ["JdbcSourceConnector", "JdbcSourceTask", "list_tables"]

# poll() returns within this long when nothing is due, so pause and stop act promptly.
_MAX_IDLE_MS = 1000


def _engine(config: JdbcSourceConfig) -> sa.Engine:
    url = to_sqlalchemy_url(config.connection_url, config.connection_user,
                            config.connection_password)
    return dialects.create_engine(url)


def list_tables(conn: sa.Connection, config: JdbcSourceConfig) -> list[str]:
    """The tables of ``table.types`` that ``table.blacklist`` leaves, in a stable order."""
    inspector = sa.inspect(conn)
    names: list[str] = []
    types = {t.upper() for t in config.table_types}
    if "TABLE" in types:
        names.extend(inspector.get_table_names())
    if "VIEW" in types:
        names.extend(inspector.get_view_names())
    excluded = set(config.excluded)
    return sorted(n for n in names if n not in excluded and split_table_name(n)[1] not in excluded)


def _groups(items: Sequence[str], n: int) -> list[list[str]]:
    """``items`` in at most ``n`` contiguous groups whose sizes differ by at most one."""
    n = min(n, len(items))
    size, extra = divmod(len(items), n) if n else (0, 0)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return out


class JdbcSourceConnector(SourceConnector):
    config_model = JdbcSourceConfig
    aliases = ("io.confluent.connect.jdbc.JdbcSourceConnector", "JdbcSourceConnector")

    def __init__(self) -> None:
        super().__init__()
        self._config: JdbcSourceConfig | None = None
        self._tables: list[str] = []

    def start(self, config: JdbcSourceConfig) -> None:  # type: ignore[override]
        cfg = self._config = parse_config(JdbcSourceConfig, config)
        if cfg.query:
            return
        if cfg.included:
            self._tables = list(cfg.included)
            return  # the tasks connect (and fail, the database unreachable) at their start
        engine = _engine(cfg)
        try:
            with connect(engine, cfg.connection_attempts, cfg.connection_backoff_ms) as conn:
                self._tables = list_tables(conn, cfg)
        except sa.exc.SQLAlchemyError as exc:
            where = engine.url.render_as_string(hide_password=True)
            raise ConnectError(f"cannot list tables at {where}: {driver_message(exc)}") from exc
        finally:
            engine.dispose()

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        assert self._config is not None, "start() first"
        if self._config.query:
            return [to_task_config(self._config)]
        return [to_task_config(self._config, tables=",".join(group))
                for group in _groups(self._tables, max_tasks)]

    @classmethod
    def task_class(cls) -> type[JdbcSourceTask]:
        return JdbcSourceTask


class JdbcSourceTask(SourceTask):
    def __init__(self) -> None:
        super().__init__()
        self._engine: sa.Engine | None = None
        self._queriers: list[Querier] = []
        self._stopping = threading.Event()

    @staticmethod
    def _now_ms() -> int:
        return time.monotonic_ns() // 1_000_000

    def start(self, config: Mapping[str, str]) -> None:
        cfg = parse_config(JdbcSourceConfig, config)
        engine = self._engine = _engine(cfg)

        def open_connection() -> sa.Connection:
            return connect(engine, cfg.connection_attempts, cfg.connection_backoff_ms, self._stopping)

        sources: list[str | None] = [None] if cfg.query else list(cfg.tables or cfg.included)
        if not sources:
            raise ConnectError("tables: a JDBC source task needs tables (or query) to read")
        try:
            for table in sources:
                partition = {"table": table} if table is not None else {"query": cfg.query}
                stored = self.context.offset(partition) if self.context is not None else None
                offset = Offset() if cfg.mode == "bulk" else Offset.from_dict(stored)
                querier = Querier(engine, cfg, table=table, offset=offset, now_ms=self._now_ms,
                                  connect=open_connection)
                try:
                    querier.prepare()  # a missing table or column fails the start
                except sa.exc.SQLAlchemyError as exc:
                    raise ConnectError(f"describing {querier.partition}: {driver_message(exc)}") from exc
                self._queriers.append(querier)
        except BaseException:
            self.stop()
            raise

    def poll(self) -> Sequence[SourceRecord]:
        if not self._queriers:
            return []
        now = self._now_ms()
        querier = min(self._queriers, key=lambda q: q.next_due_ms)
        wait_ms = querier.next_due_ms - now
        if wait_ms > 0:
            self._stopping.wait(min(wait_ms, _MAX_IDLE_MS) / 1000)
            return []
        # Round robin among the due: the one just polled goes behind the others.
        self._queriers.remove(querier)
        self._queriers.append(querier)
        try:
            return querier.poll()
        except sa.exc.SQLAlchemyError as exc:
            querier.close()
            message = f"reading {querier.partition}: {driver_message(exc)}"
            if is_transient(exc):
                # A connection lost mid-query. The offset did not move: the runtime's retry
                # reads the same rows again (connecting anew, up to connection.attempts times).
                raise RetriableError(message) from exc
            raise ConnectError(message) from exc  # a bad query: retrying cannot mend it

    def stop(self) -> None:
        self._stopping.set()
        for querier in self._queriers:
            querier.close()
        if self._engine is not None:
            self._engine.dispose()
