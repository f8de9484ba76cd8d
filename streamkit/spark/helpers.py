"""Typed reads on top of the ``streamkit`` data source.

* ``read_topic(spark, "page_views", model=PageView, bootstrap=...)``: the JSON values of a
  topic as the typed columns of a pydantic model (parsed in the JVM by ``from_json``);
* ``read_table(spark, app, "counts")``: a streams app's table as of now, from its
  changelog: the latest value per key (``streamkit.analytics.tables``), deduplicated by
  Spark and decoded in the Python workers with the app's own codecs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from pydantic import BaseModel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from streamkit.analytics.jsonvalues import readable
from streamkit.analytics.options import read_options
from streamkit.analytics.planning import plan_ranges
from streamkit.analytics.schema import model_arrow_schema
from streamkit.analytics.tables import TableDecoder, table_decoder
from streamkit.spark.source import register

if TYPE_CHECKING:
    from streamkit.streams.app import App

__all__ = ["read_table", "read_topic", "spark_schema"]

_METADATA = ("key", "topic", "partition", "offset", "timestamp")


def spark_schema(model: type[BaseModel]) -> StructType:
    """The Spark schema of a pydantic model's JSON (fields by alias)."""
    return from_arrow_schema(model_arrow_schema(model))


def _reader(spark: SparkSession, bootstrap: str, options: dict[str, Any]) -> Any:
    """The source's reader with ``options``, checked here first: Spark plans a read in a
    Python worker and reports a bad option or a missing topic as a long
    PYTHON_DATA_SOURCE_ERROR with the worker's traceback; planned on the driver, the
    ``OptionError`` or ``PlanError`` comes alone (``topic(s) x do not exist``)."""
    register(spark)
    settings = {"kafka.bootstrap.servers": bootstrap, **{name: str(value) for name, value in options.items()}}
    plan_ranges(read_options(settings))
    reader = spark.read.format("streamkit")
    for name, value in settings.items():
        reader = reader.option(name, value)
    return reader


def read_topic(spark: SparkSession, topic: str, model: type[BaseModel] | None = None, *, bootstrap: str,
               starting_offsets: str = "earliest", ending_offsets: str = "latest", metadata: bool = False,
               **options: Any) -> DataFrame:
    """The records of ``topic`` between two offsets (``earliest``/``latest``/JSON, as the
    source's options). With ``model``: one column per field of the model, parsed from the
    JSON value (a value that does not parse gives nulls, as ``from_json`` does), plus
    ``key`` (string), ``topic``, ``partition``, ``offset`` and ``timestamp`` when
    ``metadata``. Without: the source's columns. ``options`` are further source options."""
    options = {"subscribe": topic, "startingOffsets": starting_offsets, "endingOffsets": ending_offsets, **options}
    if model is None:
        return cast(DataFrame, _reader(spark, bootstrap, options).load())
    schema = spark_schema(model)
    if metadata:
        clash = sorted(set(schema.fieldNames()) & set(_METADATA))
        if clash:
            raise ValueError(f"{model.__name__} has fields named like the metadata columns: {clash}")
    if readable(model_arrow_schema(model)):
        # Parsed in the Python workers by Arrow's JSON reader: about 4x cheaper than from_json.
        df = _reader(spark, bootstrap, {**options, "valueSchema": schema.json()}).load()
        key = [F.col("key").cast("string").alias("key")] if metadata else []
        rest = list(_METADATA[1:]) if metadata else []
        fields = [F.col(f"`{name}`") for name in schema.fieldNames()]
        return cast(DataFrame, df.select(*fields, *key, *rest))
    df = _reader(spark, bootstrap, options).load()
    columns: list[Column | str] = [F.from_json(F.col("value").cast("string"), schema).alias("_value")]
    if metadata:
        columns += [F.col("key").cast("string").alias("key"), "topic", "partition", "offset", "timestamp"]
    selected = ["_value.*", *(_METADATA if metadata else ())]
    return cast(DataFrame, df.select(*columns).select(*selected))


def read_table(spark: SparkSession, app: App | str, table: str, *, bootstrap: str | None = None,
               key_type: Any = None, value_type: Any = None, windowed: bool | None = None) -> DataFrame:
    """``table`` of the streams app ``app`` as of now: ``key, value``, or for a windowed
    table ``key, window_start, window_end, value`` (ms). Pass the ``App`` object to decode
    with its table's codecs and connect to its broker; or its application id, with
    ``bootstrap`` and the types (see ``streamkit.analytics.tables.table_decoder``).
    ``key_type``/``value_type`` type the columns (values are JSON text otherwise)."""
    decoder = table_decoder(app, table, key_type=key_type, value_type=value_type, windowed=windowed)
    if bootstrap is None:
        bootstrap = getattr(app, "broker", None)
        if not bootstrap:
            raise ValueError("read_table needs bootstrap= (the app runs an embedded broker, or only its id was given)")
    records = _reader(spark, bootstrap, {"subscribe": decoder.topic}).load()
    # Every record of a key is in one changelog partition: the latest is the one with the
    # highest offset. Wrapped in a struct so that a tombstone's null stays a row to see.
    latest = (records.groupBy("key")
              .agg(F.max_by(F.struct("value"), "offset").alias("last"))
              .select("key", F.col("last.value").alias("value")))
    schema = from_arrow_schema(decoder.schema)
    return cast(DataFrame, latest.mapInArrow(_Decode(decoder), schema))


class _Decode:
    """The decoding step, run in Spark's Python workers (a picklable callable)."""

    def __init__(self, decoder: TableDecoder) -> None:
        self.decoder = decoder

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        is_data = self.decoder.is_data
        for batch in batches:
            keys = batch.column("key").to_pylist()
            values = batch.column("value").to_pylist()
            rows = [(k, v) for k, v in zip(keys, values, strict=True) if v is not None and is_data(k)]
            if rows:
                yield self.decoder.to_batch(rows)
