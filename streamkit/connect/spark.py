"""The Spark sink connector: a topic exported continuously into a Spark table, exactly once.

Configured as JSON like every connector (``connectors/spark-sink.json``)::

    {"connector.class": "SparkSinkConnector", "topics": "page_counts",
     "path": "data/tables/page_counts", "format": "parquet",
     "offset.flush.interval.ms": "2000", "spark.master": "local[1]"}

Keys:

- ``path`` (required): the table's directory;
- ``format``: ``parquet`` (default) or ``delta`` (needs ``delta-spark`` installed and its jars
  on the session, e.g. through ``spark.jars.packages``);
- ``flush.size``: a micro-batch is committed once this many rows are buffered, besides every
  ``offset.flush.interval.ms`` (the runtime's commit interval) and at shutdown;
- ``include.kafka.metadata``: add the columns ``kafka_topic``, ``kafka_partition``,
  ``kafka_offset`` and ``kafka_timestamp`` (ms) to each row;
- every ``spark.*`` key configures the task's SparkSession (``spark.master``, default
  ``local[1]``; ``spark.sql.shuffle.partitions``...). The task creates the session in the
  background when it starts and reuses one already running in the process.

Rows: a struct value (with a Connect schema, e.g. from ``JsonConverter`` with
``schemas.enable=true``) maps field by field to columns of the matching Spark types
(Connect's Timestamp and Date logical types to ``timestamp`` and ``date``); a schemaless map
(JSON without a schema) gets its columns from its keys, with types from its values (nested
maps and lists as JSON strings). A value of any other type is one column ``value``. New
fields add columns (null in earlier rows); tombstones (null values) are skipped. A column's
type is fixed by its first value: a later value of another type (other than an integer in a
double column) is a ``DataError``, so with ``errors.tolerance=all`` that record goes to the
dead-letter topic; a ``Cast`` transform or a value schema avoids it.

Exactly once: every micro-batch is written to staging, then committed by one atomic manifest
holding its files and the next Kafka offset of every partition (``streamkit.connect.
spark_log``). On start the task recovers the table (publish what was committed, delete what
was not) and seeks its partitions to the committed offsets, and ``pre_commit`` hands the
runtime only committed offsets, so the consumer group never runs ahead of the table.
One task writes a table (``tasks.max`` above 1 still runs one).

Read the table with ``read_committed(spark, path)`` or simply ``spark.read.parquet(path)``.
"""

from __future__ import annotations

import base64
import datetime as dt
import importlib.util
import logging
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import orjson
from pydantic import Field as PField
from pydantic import field_validator, model_validator

from streamkit.connect.connector import ConnectorConfig, SinkConnector, SinkTask, TopicPartition
from streamkit.connect.data import DATE, DECIMAL, TIMESTAMP, Schema, SinkRecord
from streamkit.connect.errors import ConnectError, DataError
from streamkit.connect.spark_log import Batch, CommitLog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "SparkSinkConfig",
    "SparkSinkConnector",
    "SparkSinkTask",
    "acquire_spark_session",
    "committed_files",
    "read_committed",
    "release_spark_session",
]

log = logging.getLogger(__name__)

METADATA_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp")
_EPOCH_DAY = dt.date(1970, 1, 1)


class SparkSinkConfig(ConnectorConfig):
    path: str = PField(min_length=1, description="The table's directory (created if absent).")
    format: Literal["parquet", "delta"] = PField("parquet", description="parquet, or delta with delta-spark.")
    flush_size: int = PField(100_000, alias="flush.size", ge=1,
                             description="Commit a micro-batch once this many rows are buffered.")
    include_kafka_metadata: bool = PField(False, alias="include.kafka.metadata",
                                          description="Add kafka_topic/partition/offset/timestamp columns.")
    spark_conf: dict[str, str] = PField(default_factory=dict, alias="spark.*",
                                        description="Every spark.* key configures the SparkSession.")

    @model_validator(mode="before")
    @classmethod
    def _collect_spark_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "spark_conf" not in data:
            conf = {"spark.master": "local[1]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"}
            conf.update({str(k): str(v) for k, v in data.items() if str(k).startswith("spark.")})
            return {**data, "spark_conf": conf}
        return data

    @field_validator("path")
    @classmethod
    def _pyspark_installed(cls, value: str) -> str:
        if importlib.util.find_spec("pyspark") is None:
            raise ValueError("the Spark sink needs pyspark: pip install 'streamkit[spark]'")
        return value

    @field_validator("format")
    @classmethod
    def _delta_installed(cls, value: str) -> str:
        if value == "delta" and importlib.util.find_spec("delta") is None:
            raise ValueError("format=delta needs the delta-spark package (pip install delta-spark); "
                             "use format=parquet without it")
        return value

    def task_config(self) -> dict[str, str]:
        return {"path": self.path, "format": self.format, "flush.size": str(self.flush_size),
                "include.kafka.metadata": "true" if self.include_kafka_metadata else "false", **self.spark_conf}


class SparkSinkConnector(SinkConnector):
    config_model: ClassVar[type[ConnectorConfig]] = SparkSinkConfig
    aliases = ("SparkSinkConnector", "SparkSink", "streamkit.connect.spark.SparkSinkConnector")

    def start(self, config: ConnectorConfig) -> None:
        assert isinstance(config, SparkSinkConfig)
        self._config = config

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # one writer per table: the manifests are numbered by a single committer
        return [self._config.task_config()]

    @classmethod
    def task_class(cls) -> type[SinkTask]:
        return SparkSinkTask


# -- Connect schema -> Spark types --------------------------------------------------------------


def spark_type(schema: Schema) -> DataType:
    """The Spark type of a Connect schema (logical types included)."""
    from pyspark.sql import types as T

    if schema.name == TIMESTAMP:
        return T.TimestampType()
    if schema.name == DATE:
        return T.DateType()
    if schema.name == DECIMAL:
        scale = int((schema.parameters or {}).get("scale", "0"))
        return T.DecimalType(38, scale)
    simple: dict[str, DataType] = {
        "int8": T.ByteType(), "int16": T.ShortType(), "int32": T.IntegerType(), "int64": T.LongType(),
        "float32": T.FloatType(), "float64": T.DoubleType(), "boolean": T.BooleanType(),
        "string": T.StringType(), "bytes": T.BinaryType(),
    }
    if schema.type in simple:
        return simple[schema.type]
    if schema.type == "array":
        assert schema.items is not None
        return T.ArrayType(spark_type(schema.items), True)
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        return T.MapType(spark_type(schema.keys), spark_type(schema.values), True)
    return T.StructType([T.StructField(f.name, spark_type(f.schema), True) for f in schema.fields])


def _inferred_type(value: Any) -> DataType | None:
    from pyspark.sql import types as T

    if value is None:
        return None
    if isinstance(value, bool):
        return T.BooleanType()
    if isinstance(value, int):
        return T.LongType()
    if isinstance(value, float):
        return T.DoubleType()
    if isinstance(value, bytes):
        return T.BinaryType()
    if isinstance(value, Decimal):
        return T.DecimalType(38, max(0, -int(value.as_tuple().exponent)))
    return T.StringType()  # str, and nested maps and lists as JSON text


def _to_spark(value: Any, schema: Schema | None, target: DataType) -> Any:
    """A Connect value as the Python object PySpark stores in a column of ``target``."""
    from pyspark.sql import types as T

    if value is None:
        return None
    if schema is not None and schema.name == TIMESTAMP and isinstance(value, int):
        return dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
    if schema is not None and schema.name == DATE and isinstance(value, int):
        return _EPOCH_DAY + dt.timedelta(days=value)
    if isinstance(target, T.StringType) and not isinstance(value, str):
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        return orjson.dumps(value, default=str).decode()
    if isinstance(target, T.DoubleType) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(target, T.StructType) and isinstance(value, Mapping):
        fields = {f.name: f for f in schema.fields} if schema is not None else {}
        return tuple(_to_spark(value.get(f.name), fields[f.name].schema if f.name in fields else None, f.dataType)
                     for f in target.fields)
    if isinstance(target, T.ArrayType) and isinstance(value, list):
        items = schema.items if schema is not None else None
        return [_to_spark(v, items, target.elementType) for v in value]
    if isinstance(target, T.MapType) and isinstance(value, Mapping):
        vs = schema.values if schema is not None else None
        return {k: _to_spark(v, vs, target.valueType) for k, v in value.items()}
    return value


def _compatible(existing: DataType, new: DataType) -> DataType | None:
    """The column type that holds both (None: they conflict)."""
    from pyspark.sql import types as T

    if existing == new:
        return existing
    if isinstance(existing, T.DoubleType) and isinstance(new, (T.LongType, T.IntegerType)):
        return existing
    if isinstance(existing, T.StringType) and not isinstance(new, T.StructType):
        return existing  # schemaless text columns take any scalar as its JSON text
    return None


class _Columns:
    """The table's columns in order; grows as new fields arrive, never changes a type."""

    def __init__(self, schema_json: Mapping[str, Any] | None) -> None:
        from pyspark.sql import types as T

        self.types: dict[str, DataType] = {}
        if schema_json:
            for f in T.StructType.fromJson(dict(schema_json)).fields:
                self.types[f.name] = f.dataType

    def struct(self) -> StructType:
        from pyspark.sql import types as T

        return T.StructType([T.StructField(n, t, True) for n, t in self.types.items()])

    def merged(self, fields: Mapping[str, DataType], base: Mapping[str, DataType] | None = None
               ) -> dict[str, DataType]:
        """The columns (``base``, by default the table's) with ``fields`` added; DataError on
        a type conflict."""
        out = dict(self.types if base is None else base)
        for name, new in fields.items():
            old = out.get(name)
            if old is None:
                out[name] = new
                continue
            fit = _compatible(old, new)
            if fit is None:
                raise DataError(f"field {name!r} is {new.simpleString()} here but the table's column is "
                                f"{old.simpleString()}: convert it with a Cast transform, or give the "
                                "records a value schema")
            out[name] = fit
        return out


# -- the task ------------------------------------------------------------------------------------


_sessions_lock = threading.Lock()
_session_users = 0
_session_ours = False


def acquire_spark_session(conf: Mapping[str, str]) -> SparkSession:
    """The process's SparkSession (created with ``conf`` unless one runs already), counted as
    in use until ``release_spark_session``: tasks and an embedding program (the demo) share
    one JVM, and the last user stops it, only if this module created it."""
    global _session_users, _session_ours
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    with _sessions_lock:
        if _session_users == 0:
            _session_ours = SparkContext._active_spark_context is None
        # Spark's Python workers run this interpreter (where streamkit is installed) unless
        # the config names another, not whatever python3 is first on the PATH.
        builder = (SparkSession.builder.appName("streamkit-spark-sink")
                   .config("spark.pyspark.python", sys.executable))
        for key, value in conf.items():
            builder = builder.config(key, value)
        if "spark.master" in conf:
            builder = builder.master(conf["spark.master"])
        session = builder.getOrCreate()
        _session_users += 1
        return session


def release_spark_session(session: SparkSession) -> None:
    global _session_users
    with _sessions_lock:
        _session_users = max(0, _session_users - 1)
        if _session_users == 0 and _session_ours:
            session.stop()


class SparkSinkTask(SinkTask):
    def start(self, config: Mapping[str, str]) -> None:
        c = SparkSinkConfig.model_validate(config)
        self.config = c
        self.path = Path(c.path).absolute()
        self.path.mkdir(parents=True, exist_ok=True)
        self.log = CommitLog(self.path)
        import pyspark.sql  # noqa: F401 - here, once: importing it from two threads at once breaks it

        self._spark: Future[SparkSession] = Future()
        threading.Thread(target=self._create_session, name="spark-sink-session", daemon=True).start()
        last = self.log.recover(self._publish, delete_strays=c.format == "parquet")
        self._batch_id = last.id if last else 0
        self._committed: dict[TopicPartition, int] = dict(last.offsets) if last else {}
        self._columns = _Columns(last.schema if last else None)
        self._rows: list[dict[str, Any]] = []
        self._seen: dict[TopicPartition, int] = {}
        log.info("spark sink on %s: %d committed batches, resuming at %s", self.path, self._batch_id,
                 self._committed)

    def _create_session(self) -> None:
        try:
            self._spark.set_result(acquire_spark_session(self.config.spark_conf))
        except BaseException as exc:
            self._spark.set_exception(exc)

    def spark(self) -> SparkSession:
        try:
            return self._spark.result()
        except Exception as exc:
            raise ConnectError(f"cannot start the SparkSession ({self.config.spark_conf.get('spark.master')}): "
                               f"{exc}") from exc

    def open(self, partitions: frozenset[TopicPartition]) -> None:
        # The table, not the consumer group, is the source of truth for positions.
        seeks = {tp: self._committed[tp] for tp in partitions if tp in self._committed}
        if seeks and self.context is not None:
            self.context.offset(seeks)

    def close(self, partitions: frozenset[TopicPartition]) -> None:
        self._rows = [r for r in self._rows if (r["__tp"]) not in partitions]
        for tp in partitions:
            self._seen.pop(tp, None)

    def put(self, records: Sequence[SinkRecord]) -> None:
        rows: list[dict[str, Any]] = []
        columns = self._columns.types
        for record in records:  # in order: a column's first type wins, as it would one by one
            if record.value is None:
                continue
            row, types = self._row(record)
            columns = self._columns.merged(types, columns)  # DataError before anything is buffered
            rows.append(row)
        self._columns.types = columns
        self._rows.extend(rows)
        for record in records:
            tp = (record.topic, record.partition)
            self._seen[tp] = max(self._seen.get(tp, 0), record.offset + 1)
        if len(self._rows) >= self.config.flush_size and self.context is not None:
            self.context.request_commit()

    def _row(self, record: SinkRecord) -> tuple[dict[str, Any], dict[str, DataType]]:
        from pyspark.sql import types as T

        value, schema = record.value, record.value_schema
        row: dict[str, Any] = {"__tp": (record.topic, record.partition), "__schema": {}}
        types: dict[str, DataType] = {}
        if isinstance(value, Mapping) and (schema is None or schema.type in ("struct", "map")):
            fields = {f.name: f.schema for f in schema.fields} if schema is not None and schema.type == "struct" else {}
            for name, v in value.items():
                name = str(name)
                t = spark_type(fields[name]) if name in fields else _inferred_type(v)
                if t is not None:
                    types[name] = t
                row[name] = v
                row["__schema"][name] = fields.get(name)
        else:
            t = spark_type(schema) if schema is not None else _inferred_type(value)
            if t is not None:
                types["value"] = t
            row["value"] = value
            row["__schema"]["value"] = schema
        if self.config.include_kafka_metadata:
            meta = {"kafka_topic": (record.topic, T.StringType()), "kafka_partition": (record.partition, T.IntegerType()),
                    "kafka_offset": (record.offset, T.LongType()), "kafka_timestamp": (record.timestamp_ms, T.LongType())}
            for name, (v, t) in meta.items():
                row[name] = v
                types[name] = t
        return row, types

    def pre_commit(self, offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        self.flush(offsets)
        return {tp: self._committed[tp] for tp in offsets if tp in self._committed}

    def flush(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit one micro-batch: the buffered rows and the next offsets, together."""
        next_offsets = dict(self._committed)
        for source in (offsets, self._seen):
            for tp, offset in source.items():
                next_offsets[tp] = max(next_offsets.get(tp, 0), offset)
        if not self._rows and next_offsets == self._committed:
            return
        batch_id = self._batch_id + 1
        started = time.monotonic()
        files = self._write(batch_id) if self._rows else ()
        batch = Batch(batch_id, files, len(self._rows), next_offsets,
                      orjson.loads(self._columns.struct().json()), self.config.format, time.time_ns() // 1_000_000)
        self.log.commit(batch)
        self._batch_id, self._committed = batch_id, next_offsets
        self._rows, self._seen = [], {}
        self._publish(batch)
        log.debug("spark sink committed batch %d: %d rows in %.2f s", batch_id, batch.rows,
                  time.monotonic() - started)

    def _write(self, batch_id: int) -> tuple[str, ...]:
        """The buffered rows as Parquet files in the batch's staging directory."""
        stage = self.log.stage_dir(batch_id)
        shutil.rmtree(stage, ignore_errors=True)
        struct = self._columns.struct()
        data = [tuple(_to_spark(row.get(f.name), row["__schema"].get(f.name), f.dataType) for f in struct.fields)
                for row in self._rows]
        spark = self.spark()
        spark.createDataFrame(data, struct).coalesce(1).write.parquet(str(stage))
        names = []
        for i, part in enumerate(sorted(stage.glob("part-*.parquet"))):
            name = f"part-{batch_id:010d}-{i:05d}.parquet"
            part.rename(stage / name)
            names.append(name)
        for other in stage.iterdir():  # _SUCCESS and the .crc checksums of the old names
            if other.name not in names:
                other.unlink()
        return tuple(names)

    def _publish(self, batch: Batch) -> None:
        if batch.format != "delta":
            self.log.publish_files(batch)
            return
        stage = self.log.stage_dir(batch.id)
        files = [str(stage / name) for name in batch.files if (stage / name).exists()]
        if files:
            from pyspark.sql import types as T

            schema = T.StructType.fromJson(dict(batch.schema or {"type": "struct", "fields": []}))
            # Delta skips a (txnAppId, txnVersion) it has already committed: republishing a
            # batch after a crash is idempotent.
            (self.spark().read.schema(schema).parquet(*files).write.format("delta").mode("append")
             .option("mergeSchema", "true").option("txnAppId", f"streamkit-{self.path}")
             .option("txnVersion", batch.id).save(str(self.path)))
        shutil.rmtree(stage, ignore_errors=True)

    def stop(self) -> None:
        future = getattr(self, "_spark", None)
        if future is None:
            return
        try:
            spark = future.result(timeout=120)
        except Exception:
            return
        release_spark_session(spark)


# -- reading -------------------------------------------------------------------------------------


def committed_files(path: str | Path) -> list[Path]:
    """The data files of every committed batch of the table at ``path``."""
    return CommitLog(path).committed_files()


def read_committed(spark: SparkSession, path: str | Path) -> DataFrame:
    """The table at ``path`` as a DataFrame of committed rows only, with the table's schema
    (columns added later are null in older rows)."""
    from pyspark.sql import types as T

    commit_log = CommitLog(path)
    last = commit_log.latest()
    schema = T.StructType.fromJson(dict(last.schema)) if last and last.schema else T.StructType([])
    if last is not None and last.format == "delta":
        return spark.read.format("delta").load(str(commit_log.path))
    files = commit_log.committed_files()
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*(str(f) for f in files))
