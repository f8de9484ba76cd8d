"""The JDBC sink connector: records into tables, as Confluent's ``JdbcSinkConnector``.

``put`` turns records into rows and buffers them per table; a table's buffer is written (in
the open transaction) once it holds ``batch.size`` rows, and ``flush`` writes the rest and
commits. So the runtime, which commits consumer offsets only after ``flush``, never skips a
row: a crash loses an uncommitted transaction whose records are consumed again.

Order is kept per table: consecutive rows of one shape go out in one ``executemany``, and a
tombstone (with ``delete.enabled``) ends the run before it, so a delete follows the writes
that came before it. A tombstone with ``delete.enabled=false`` is skipped.

A transient database failure (a lost connection) rolls the transaction back and raises
``RetriableError``; the records put since the last commit stay in memory and are written
again on the retry, so nothing put before the failure is lost. A database that cannot be
reached in ``connection.attempts`` tries (``connection.backoff.ms`` apart) fails the task.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from string import Template
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from streamkit.connect.connector import SinkConnector, SinkTask, TopicPartition
from streamkit.connect.data import SinkRecord
from streamkit.connect.errors import ConnectError, DataError, RetriableError
from streamkit.connect.jdbc import dialects
from streamkit.connect.jdbc.config import JdbcSinkConfig, parse_config, to_task_config
from streamkit.connect.jdbc.connection import connect, driver_message, is_transient
from streamkit.connect.jdbc.fields import RowShape, row_shape, shape_key
from streamkit.connect.jdbc.urls import to_sqlalchemy_url
from streamkit.connect.jdbc.writer import TableWriter

__all__ = ["JdbcSinkConnector", "JdbcSinkTask"]

log = logging.getLogger(__name__)

# Shapes remembered per task; a stream of ever-new schemas only costs regeneration.
_MAX_SHAPES = 1024


class JdbcSinkConnector(SinkConnector):
    config_model = JdbcSinkConfig
    aliases = ("io.confluent.connect.jdbc.JdbcSinkConnector", "JdbcSinkConnector")

    def __init__(self) -> None:
        super().__init__()
        self._config: JdbcSinkConfig | None = None

    def start(self, config: JdbcSinkConfig) -> None:  # type: ignore[override]
        self._config = parse_config(JdbcSinkConfig, config)
        to_sqlalchemy_url(self._config.connection_url)  # a bad URL fails here, not in a task

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        assert self._config is not None, "start() first"
        return [to_task_config(self._config) for _ in range(max_tasks)]

    @classmethod
    def task_class(cls) -> type[JdbcSinkTask]:
        return JdbcSinkTask


@dataclass
class _Run:
    """Consecutive buffered rows of one table, kind and shape: one statement."""

    delete: bool
    shape: RowShape
    rows: list[tuple[Any, ...]] = field(default_factory=list)


@dataclass
class _Buffer:
    writer: TableWriter
    runs: list[_Run] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(run.rows) for run in self.runs)

    def rows_for(self, delete: bool, shape: RowShape) -> list[tuple[Any, ...]]:
        """The list to append rows of this kind and shape to (a new run when it changes)."""
        last = self.runs[-1] if self.runs else None
        if last is None or last.delete != delete or (
                last.shape is not shape and last.shape.signature != shape.signature):
            last = _Run(delete, shape)
            self.runs.append(last)
        return last.rows

    def write(self, conn: Connection) -> None:
        for run in self.runs:
            if run.delete:
                self.writer.delete(conn, run.shape, run.rows)
            else:
                self.writer.write(conn, run.shape, run.rows)
        self.runs.clear()


class JdbcSinkTask(SinkTask):
    def __init__(self) -> None:
        super().__init__()
        self._config: JdbcSinkConfig | None = None
        self._engine: sa.Engine | None = None
        self._conn: Connection | None = None
        self._writers: dict[str, TableWriter] = {}
        self._buffers: dict[str, _Buffer] = {}
        self._uncommitted: list[SinkRecord] = []
        self._by_identity: dict[tuple[int, int, bool], tuple[Any, Any, RowShape]] = {}
        self._by_content: dict[Any, RowShape] = {}
        self._table_format: Template | None = None

    def start(self, config: Mapping[str, str]) -> None:
        self._config = parse_config(JdbcSinkConfig, config)
        url = to_sqlalchemy_url(self._config.connection_url, self._config.connection_user,
                                self._config.connection_password)
        self._engine = dialects.create_engine(url)
        self._table_format = Template(self._config.table_name_format)

    # -- buffering (no I/O) ----------------------------------------------------------------

    def _shape(self, record: SinkRecord) -> RowShape:
        """The record's shape: by the identity of its schemas when seen just before, else by
        their content, so a shape's code is generated once per distinct schema."""
        assert self._config is not None
        ks, vs = record.key_schema, record.value_schema
        by_id = (id(ks), id(vs), record.value is None)
        hit = self._by_identity.get(by_id)
        if hit is not None and hit[0] is ks and hit[1] is vs and vs is not None:
            return hit[2]
        key = shape_key(record)
        shape = self._by_content.get(key)
        if shape is None:
            shape = row_shape(self._config, record)
            if len(self._by_content) >= _MAX_SHAPES:
                self._by_content.clear()
            self._by_content[key] = shape
        if vs is not None:
            if len(self._by_identity) >= _MAX_SHAPES:
                self._by_identity.clear()
            self._by_identity[by_id] = (ks, vs, shape)
        return shape

    def _buffer(self, topic: str) -> _Buffer:
        assert self._table_format is not None and self._config is not None
        name = self._table_format.safe_substitute(topic=topic)
        buffer = self._buffers.get(name)
        if buffer is None:
            writer = self._writers.get(name)
            if writer is None:
                writer = self._writers[name] = TableWriter(self._config, name)
            buffer = self._buffers[name] = _Buffer(writer)
        return buffer

    def _add(self, records: Sequence[SinkRecord]) -> None:
        """Buffer the rows of ``records``. This is the per-record path: while topic and
        schemas stay those of the record before, a record costs one ``extract`` and an append."""
        assert self._config is not None
        delete_enabled = self._config.delete_enabled
        topic: str | None = None
        key_schema: Any = None
        value_schema: Any = None
        extract: Any = None
        append: Any = None
        for record in records:
            value = record.value
            if (record.topic == topic and record.value_schema is value_schema
                    and record.key_schema is key_schema and isinstance(value, dict)):
                append(extract(record))
                continue
            if value is None:
                if not delete_enabled:
                    continue
            elif not isinstance(value, dict):
                raise DataError(f"the record value at {record.topic}-{record.partition}@"
                                f"{record.offset} must be a struct (dict), not "
                                f"{type(value).__name__}")
            shape = self._shape(record)
            rows = self._buffer(record.topic).rows_for(value is None, shape)
            if value is None or record.value_schema is None:
                topic = None  # tombstones and schemaless records take this path each time
                rows.append(shape.extract(record))
                continue
            topic, key_schema, value_schema = record.topic, record.key_schema, record.value_schema
            extract, append = shape.extract, rows.append
            append(extract(record))

    def _rebuild(self) -> None:
        """Back to 'nothing written since the last commit': buffer those records again."""
        self._buffers.clear()
        self._add(self._uncommitted)

    # -- I/O ---------------------------------------------------------------------------------

    def _connection(self) -> Connection:
        if self._conn is None:
            assert self._engine is not None and self._config is not None
            self._conn = connect(self._engine, self._config.connection_attempts,
                                 self._config.connection_backoff_ms)
        return self._conn

    def _fail(self, exc: Exception) -> ConnectError:
        if self._conn is not None:
            with contextlib.suppress(sa.exc.SQLAlchemyError):
                self._conn.rollback()
            self._conn.close()
            self._conn = None
        self._rebuild()
        if isinstance(exc, sa.exc.SQLAlchemyError) and is_transient(exc):
            return RetriableError(f"database write failed, will retry: {driver_message(exc)}")
        if isinstance(exc, ConnectError):
            return exc
        return ConnectError(f"database write failed: {driver_message(exc)}")

    def put(self, records: Sequence[SinkRecord]) -> None:
        assert self._config is not None
        try:
            self._add(records)
            for buffer in self._buffers.values():
                if buffer.size >= self._config.batch_size:
                    buffer.write(self._connection())
        except (sa.exc.SQLAlchemyError, ConnectError) as exc:
            # The runtime redelivers ``records``: rebuild without them.
            raise self._fail(exc) from exc
        self._uncommitted.extend(records)

    def flush(self, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            for buffer in self._buffers.values():
                if buffer.size:
                    buffer.write(self._connection())
            if self._conn is not None:
                self._conn.commit()
        except (sa.exc.SQLAlchemyError, ConnectError) as exc:
            raise self._fail(exc) from exc
        self._uncommitted.clear()

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.rollback()
            self._conn.close()
            self._conn = None
        if self._engine is not None:
            self._engine.dispose()
