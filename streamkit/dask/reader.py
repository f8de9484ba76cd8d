"""``read_topic`` and ``read_table`` for Dask, on the core the Spark source uses
(``streamkit.analytics``): the same planning, the same Arrow batches, the same decoders."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
from pydantic import BaseModel

from streamkit.analytics.fetch import read_range
from streamkit.analytics.options import ReadOptions, read_options
from streamkit.analytics.planning import OffsetRange, plan_ranges
from streamkit.analytics.registry_values import RegistryValues, registry_values
from streamkit.analytics.schema import model_arrow_schema, record_arrow_schema
from streamkit.analytics.tables import TableDecoder, latest_per_key, table_decoder
from streamkit.streams.codecs import ModelCodec

if TYPE_CHECKING:
    from streamkit.streams.app import App

__all__ = ["read_table", "read_topic"]

Position = str | int | dt.datetime | Mapping[int, int]


def _position(value: str | dt.datetime | Mapping[int, int], side: str, topic: str) -> dict[str, str]:
    """Spark-style options for a start or end: ``earliest``/``latest`` (or the JSON of the
    source option), {partition: offset}, or a datetime."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{side}: give the datetime a time zone (e.g. datetime.UTC)")
        return {f"{side}Timestamp": str(int(value.timestamp() * 1000))}
    if isinstance(value, str):
        return {f"{side}Offsets": value}
    return {f"{side}Offsets": json.dumps({topic: {str(p): int(o) for p, o in value.items()}})}


def _options(bootstrap: str, topic: str, start: Position, end: Position,
             config: Mapping[str, Any] | None, include_headers: bool) -> tuple[ReadOptions, dict[str, int]]:
    opts: dict[str, str] = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                            "includeHeaders": str(include_headers).lower()}
    opts.update({f"kafka.{k}": str(v) for k, v in (config or {}).items()})
    every: dict[str, int] = {}
    for side, value in (("starting", start), ("ending", end)):
        if isinstance(value, int):
            every[side] = value  # applied per partition once the partitions are known
        else:
            opts.update(_position(value, side, topic))
    return read_options(opts), every


def _plan(bootstrap: str, topic: str, start: Position, end: Position, config: Mapping[str, Any] | None,
          include_headers: bool, partition_size: int | None) -> tuple[ReadOptions, list[OffsetRange]]:
    options, every = _options(bootstrap, topic, start, end, config, include_headers)
    ranges = plan_ranges(options)
    if every:
        ranges = [OffsetRange(r.topic, r.partition, max(r.start, every.get("starting", r.start)),
                              min(r.end, every.get("ending", r.end))) for r in ranges]
    if partition_size is not None:
        if partition_size < 1:
            raise ValueError("partition_size must be positive")
        ranges = [OffsetRange(r.topic, r.partition, s, min(s + partition_size, r.end))
                  for r in ranges for s in range(r.start, r.end, partition_size)]
    return options, [r for r in ranges if r.size > 0]


def _arrow_dtype(kind: pa.DataType) -> Any:
    """Binary, nested and decimal columns stay Arrow-backed: as object columns, Dask's string
    conversion (``dataframe.convert-string``) would turn bytes and decimals into text."""
    if (pa.types.is_binary(kind) or pa.types.is_list(kind) or pa.types.is_struct(kind) or pa.types.is_map(kind)
            or pa.types.is_decimal(kind)):
        return pd.ArrowDtype(kind)
    return None


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas(types_mapper=_arrow_dtype)


@dataclass(frozen=True)
class _ReadRecords:
    """One dask partition: a range's records, raw or parsed with ``model``."""

    client_config: Mapping[str, str]
    include_headers: bool
    model: type[BaseModel] | None
    registry: RegistryValues | None = None

    def schema(self) -> pa.Schema:
        if self.registry is not None:
            return pa.schema(list(self.registry.arrow_type()))
        if self.model is None:
            return record_arrow_schema(self.include_headers)
        return model_arrow_schema(self.model)

    def __call__(self, r: OffsetRange) -> pd.DataFrame:
        batches = list(read_range(self.client_config, r, include_headers=self.include_headers))
        if self.registry is not None:
            values = pa.concat_arrays([b.column("value") for b in batches]) if batches else pa.array([], pa.binary())
            rows = self.registry.decode(values.filter(values.is_valid()))
            return _to_pandas(pa.Table.from_struct_array(rows))
        if self.model is None:
            return _to_pandas(pa.Table.from_batches(batches, self.schema()))
        codec = ModelCodec(self.model)
        rows = [codec.loads(v).model_dump() for b in batches for v in b.column("value").to_pylist()
                if v is not None]
        return _to_pandas(pa.Table.from_pylist(rows, self.schema()))


def read_topic(bootstrap: str, topic: str, model: type[BaseModel] | None = None, *,
               start: Position = "earliest", end: Position = "latest", include_headers: bool = False,
               partition_size: int | None = None, config: Mapping[str, Any] | None = None,
               value_format: str | None = None, schema_registry: str | None = None) -> dd.DataFrame:
    """The records of ``topic`` from ``start`` to ``end`` as a dask DataFrame: one partition
    per topic-partition, or per ``partition_size`` records of one.

    ``start``/``end``: ``"earliest"``, ``"latest"``, an offset for every partition,
    ``{partition: offset}`` or an aware datetime (the first record at or after it). Without
    ``model`` the columns are Spark's Kafka columns (key, value, topic, partition, offset,
    timestamp, timestampType, and headers); with a pydantic ``model``, its fields, parsed from
    the JSON values (tombstones skipped). With ``value_format`` (``avro``, ``json-schema`` or
    ``protobuf``) and ``schema_registry`` (its URL), values in the Schema Registry's wire
    format: the columns are the fields of the schema registered last under ``{topic}-value``,
    typed by it, and each value is decoded with the schema its id names (tombstones skipped).
    ``config``: librdkafka settings (security...)."""
    registry = None
    if value_format is not None:
        if model is not None or schema_registry is None:
            raise ValueError("value_format needs schema_registry= (the registry's URL) and no model")
        registry = registry_values(schema_registry, topic, value_format)
    options, ranges = _plan(bootstrap, topic, start, end, config, include_headers, partition_size)
    read = _ReadRecords(dict(options.client_config), include_headers, model, registry)
    return _frame(read, ranges, _to_pandas(read.schema().empty_table()))


def _frame(read: Callable[[OffsetRange], pd.DataFrame], ranges: list[OffsetRange],
           meta: pd.DataFrame) -> dd.DataFrame:
    """One dask partition per range (an empty frame when there is none)."""
    if not ranges:
        return cast(dd.DataFrame, dd.from_pandas(meta, npartitions=1))  # type: ignore[no-untyped-call]
    return cast(dd.DataFrame, dd.from_map(read, ranges, meta=meta, enforce_metadata=False))  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class _ReadTable:
    """One dask partition: the current rows of one changelog partition (each key lives in
    exactly one, so no other partition can hold a newer value of its keys)."""

    client_config: Mapping[str, str]
    decoder: TableDecoder

    def __call__(self, r: OffsetRange) -> pd.DataFrame:
        latest = latest_per_key(read_range(self.client_config, r), self.decoder)
        return _to_pandas(pa.Table.from_batches([self.decoder.to_batch(latest)]))


def read_table(app: App | str, table: str, *, bootstrap: str | None = None, key_type: Any = None,
               value_type: Any = None, windowed: bool | None = None,
               config: Mapping[str, Any] | None = None) -> dd.DataFrame:
    """A streams app's table as of now, like ``streamkit.spark.read_table``: ``key, value``
    or, windowed, ``key, window_start, window_end, value``; one dask partition per
    changelog partition. Pass the ``App`` object, or its id with ``bootstrap`` and types."""
    decoder = table_decoder(app, table, key_type=key_type, value_type=value_type, windowed=windowed)
    if bootstrap is None:
        bootstrap = getattr(app, "broker", None)
        if not bootstrap:
            raise ValueError("read_table needs bootstrap= (the app runs an embedded broker, or only its id was given)")
    options, ranges = _plan(bootstrap, decoder.topic, "earliest", "latest", config, False, None)
    read = _ReadTable(dict(options.client_config), decoder)
    return _frame(read, ranges, _to_pandas(decoder.schema.empty_table()))
