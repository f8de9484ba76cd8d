"""The PySpark data source ``streamkit``: Kafka-protocol topics as DataFrames.

Options and columns mirror Spark's own Kafka source (``streamkit.analytics.options``), so
``spark.read.format("kafka")`` code works with ``format("streamkit")`` and no Kafka jar, on
the streamkit broker and on Apache Kafka alike:

* batch reads plan the offset ranges once on the driver and read each range in a Spark task
  (one per topic-partition, large ones split to ``minPartitions``), as Arrow record batches;
* streaming reads use per-partition offsets as the stream offset
  (``{"topic": {"0": 42}}``, checkpointed by Spark), with ``maxOffsetsPerTrigger`` and
  ``Trigger.AvailableNow``; a micro-batch reads exactly the range between two checkpointed
  offsets, so a restart from the checkpoint neither loses nor repeats a record;
* writes take the columns ``value`` and optionally ``key``, ``headers``, ``topic`` and
  ``partition`` (the ``topic`` option, when set, wins over the column, as in Spark).

The classes are module-level and hold only picklable options, because Spark runs ``read``
and ``write`` in its Python worker processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamkit.analytics.fetch import read_range
from streamkit.analytics.jsonvalues import parse_json_values
from streamkit.analytics.options import OptionError, ReadOptions, client_config, read_options
from streamkit.analytics.planning import (
    Cluster,
    OffsetRange,
    plan_ranges,
    rate_limit,
    resolve_offsets,
    split_ranges,
)
from streamkit.analytics.produce import ProduceError, RecordWriter, as_bytes
from streamkit.analytics.registry_values import RegistryValueError, RegistryValues, registry_values

try:  # Spark 4.2+: admission control (maxOffsetsPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0/4.1 read every available record per batch
    ReadAllAvailable = ReadMaxRows = ReadLimit = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

__all__ = ["StreamkitDataSource", "record_schema", "register"]

TP = tuple[str, int]

HEADERS_SPARK_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def record_schema(include_headers: bool = False, value_schema: StructType | None = None) -> StructType:
    """The columns of a read: Spark's Kafka source schema; with ``value_schema`` (the
    ``valueSchema`` option) the value's fields come first, in place of ``value``."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_SPARK_TYPE))
    if value_schema is not None:
        kafka = [f for f in fields if f.name != "value"]
        clash = sorted({f.name for f in value_schema.fields} & {f.name for f in kafka})
        if clash:
            raise OptionError(f"valueSchema has fields named like the record's columns: {clash}")
        fields = [*value_schema.fields, *kafka]
    return StructType(fields)


def _value_schema(text: str | None) -> StructType | None:
    """The ``valueSchema`` option: the JSON of a StructType (``schema.json()``)."""
    if text is None:
        return None
    try:
        schema = StructType.fromJson(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise OptionError(f"valueSchema must be the JSON of a Spark StructType (schema.json()): {exc}") from None
    return schema


def register(spark: SparkSession) -> None:
    """Make ``format("streamkit")`` available in ``spark`` (once per session)."""
    # A Spark Connect session registers Python data sources the same way; its class is
    # not a subclass of the classic one, and importing it needs Connect's extras.
    if not (isinstance(spark, SparkSession) or type(spark).__module__ == "pyspark.sql.connect.session"):
        raise TypeError(f"register() takes a SparkSession (e.g. SparkSession.builder.getOrCreate() or "
                        f"streamkit.spark.local_session()), not {_describe(spark)}")
    spark.dataSource.register(StreamkitDataSource)


def _describe(value: object) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__


class StreamkitDataSource(DataSource):
    """``spark.read.format("streamkit")``, ``readStream``, ``write`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("streamkit")``."""
        return "streamkit"

    def schema(self) -> StructType:
        """Kafka's record columns (key, value, topic, partition, offset, timestamp, ...), with
        headers when ``includeHeaders`` is true and typed value columns from ``valueSchema``,
        or from the registered schema with ``valueFormat`` and ``schema.registry.url``."""
        include = str(self.options.get("includeheaders", "false")).lower() == "true"
        registry = _registry(read_options(dict(self.options))) if self.options.get("valueformat") else None
        if registry is not None:
            return record_schema(include, from_arrow_schema(pa.schema(list(registry.arrow_type()))))
        return record_schema(include, _value_schema(self.options.get("valueschema")))

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch read between ``startingOffsets`` and ``endingOffsets``."""
        options = read_options(dict(self.options))
        return _BatchReader(options, _registry(options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A micro-batch stream, its offsets kept in the query's checkpoint."""
        options = read_options(dict(self.options), streaming=True)
        return _StreamReader(options, _registry(options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Write a DataFrame's rows (a ``value`` column, optionally key, headers, topic,
        partition) as records."""
        return _BatchWriter(_write_options(dict(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Write each micro-batch's rows as records."""
        return _StreamWriter(_write_options(dict(self.options), schema))


# -- reads -------------------------------------------------------------------------------


def _registry(options: ReadOptions) -> RegistryValues | None:
    """The registered schema of the topic's values (read on the driver), with valueFormat."""
    if options.value_format is None or options.schema_registry_url is None:
        return None
    try:
        return registry_values(options.schema_registry_url, options.subscribe[0], options.value_format)
    except RegistryValueError as exc:
        raise OptionError(str(exc)) from None


def _read(options: ReadOptions, partition: InputPartition,
          registry: RegistryValues | None = None) -> Iterator[pa.RecordBatch]:
    r: OffsetRange = partition.value
    batches = read_range(options.client_config, r, include_headers=options.include_headers)
    values = _value_schema(options.value_schema)
    if values is None and registry is None:
        yield from batches
        return
    if values is None:
        assert registry is not None
        values = from_arrow_schema(pa.schema(list(registry.arrow_type())))
    arrow = _arrow_schema(values)
    for batch in batches:
        if registry is not None:
            # Spark's own Arrow form of the columns (e.g. its timestamp unit)
            parsed = registry.decode(batch.column("value")).cast(pa.struct(list(arrow)))
        else:
            parsed = parse_json_values(batch.column("value"), arrow)
        columns = parsed.flatten()  # a null row nulls each of its fields
        rest = [name for name in batch.schema.names if name != "value"]
        yield pa.RecordBatch.from_arrays(columns + [batch.column(n) for n in rest],
                                         names=[*arrow.names, *rest])


def _arrow_schema(schema: StructType) -> pa.Schema:
    """Spark's Arrow form of ``schema``, timestamps in UTC as its Python workers expect."""
    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # older Sparks take no timezone: their Arrow timestamps are UTC anyway
        return to_arrow_schema(schema)


class _BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions, registry: RegistryValues | None = None) -> None:
        self.options = options
        self.registry = registry

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(r) for r in plan_ranges(self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition, self.registry)


def _offsets_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _offsets(data: Mapping[str, Mapping[str, int]]) -> dict[TP, int]:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stream offsets are ``{"topic": {"partition": next offset}}``. Partitions that appear
    while the query runs (a topic grown, or a new one matching ``subscribePattern``) are
    read from their earliest offset, as Spark's Kafka source does."""

    def __init__(self, options: ReadOptions, registry: RegistryValues | None = None) -> None:
        self.options = options
        self.registry = registry
        self._target: dict[TP, int] | None = None  # Trigger.AvailableNow: where to stop
        self._last: dict[TP, int] | None = None  # for Spark < 4.2, which passes no start

    def _marks(self) -> dict[TP, tuple[int, int]]:
        with Cluster(self.options.client_config) as cluster:
            return cluster.watermarks(cluster.partitions(self.options))

    def initialOffset(self) -> dict[str, dict[str, int]]:
        with Cluster(self.options.client_config) as cluster:
            tps = cluster.partitions(self.options)
            marks = cluster.watermarks(tps)
            starts = resolve_offsets(cluster, self.options.starting, tps, side="starting", marks=marks,
                                     strategy=self.options.by_timestamp_strategy)
        self._last = starts
        return _offsets_json(starts)

    def getDefaultReadLimit(self) -> Any:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: high for tp, (_low, high) in self._marks().items()}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, dict[str, int]]:
        marks = self._marks()
        latest = {tp: high for tp, (_low, high) in marks.items()}
        if self._target is not None:
            latest = {tp: min(high, self._target.get(tp, marks[tp][0])) for tp, high in latest.items()}
        begin = _offsets(start) if start is not None else dict(self._last or {})
        for tp, (low, _high) in marks.items():
            begin.setdefault(tp, low)
        # Never go back: a partition's end can only drop if its log was truncated.
        latest = {tp: max(latest[tp], begin[tp]) for tp in latest}
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        self._last = latest
        return _offsets_json(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin, stop = _offsets(start), _offsets(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            with Cluster(self.options.client_config) as cluster:
                for tp, (low, _high) in cluster.watermarks(new).items():
                    begin[tp] = low
        ranges = [OffsetRange(t, p, begin[(t, p)], o) for (t, p), o in sorted(stop.items())]
        return [InputPartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition, self.registry)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in a consumer group."""


# -- writes ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _WriteOptions:
    client_config: Mapping[str, str]
    topic: str | None
    columns: tuple[str, ...]


def _write_options(options: Mapping[str, Any], schema: StructType) -> _WriteOptions:
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    config = client_config(opts)
    config.pop("isolation.level", None)  # a consumer setting
    names = tuple(schema.fieldNames())
    kinds = {f.name: f.dataType for f in schema.fields}
    if "value" not in kinds:
        raise OptionError("the DataFrame to write needs a 'value' column (string or binary)")
    for column in ("key", "value"):
        if column in kinds and not isinstance(kinds[column], StringType | BinaryType):
            raise OptionError(f"column {column!r} must be string or binary, not {kinds[column].simpleString()}: "
                              "cast it, e.g. to_json(struct(*)) for the value")
    topic = opts.get("topic") or None
    if topic is None and "topic" not in kinds:
        raise OptionError("set the option topic, or give the DataFrame a 'topic' column")
    if "partition" in kinds and not isinstance(kinds["partition"], IntegerType | LongType):
        raise OptionError("column 'partition' must be an integer")
    if "headers" in kinds and kinds["headers"] != HEADERS_SPARK_TYPE:
        raise OptionError("column 'headers' must be array<struct<key: string, value: binary>>")
    return _WriteOptions(config, topic, names)


@dataclass(frozen=True)
class _Written(WriterCommitMessage):
    records: int


def _write(options: _WriteOptions, rows: Iterator[Any]) -> _Written:
    index = {name: i for i, name in enumerate(options.columns)}
    key_at, value_at = index.get("key"), index["value"]
    topic_at = None if options.topic is not None else index["topic"]
    headers_at, partition_at = index.get("headers"), index.get("partition")
    writer = RecordWriter(options.client_config)
    try:
        for row in rows:
            topic = options.topic if topic_at is None else row[topic_at]
            if not topic:
                raise ProduceError("a row has no topic (its 'topic' column is null)")
            headers = None
            if headers_at is not None and row[headers_at]:
                headers = [(h[0], as_bytes(h[1], "headers.value")) for h in row[headers_at]]
            partition = row[partition_at] if partition_at is not None else None
            writer.send(topic, as_bytes(row[key_at], "key") if key_at is not None else None,
                        as_bytes(row[value_at], "value"), headers=headers, partition=partition)
    finally:
        sent = writer.close()
    return _Written(sent)


class _BatchWriter(DataSourceWriter):
    """At least once, like Spark's Kafka sink: Kafka cannot take back what a failed job
    already produced, so ``abort`` has nothing to undo."""

    def __init__(self, options: _WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> _Written:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class _StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: _WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> _Written:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
