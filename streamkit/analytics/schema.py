"""Arrow schemas: the records of a topic, and the typed columns of a pydantic model.

The record columns are those of Spark's Kafka source (key, value, topic, partition, offset,
timestamp, timestampType, and headers when asked for), with the Arrow types Spark maps its
own types to, so batches pass to the JVM without a cast. A pydantic model's fields map to
Arrow types once here; Spark derives its schema from that (``from_arrow_schema``) and Dask
its dtypes, so both type a model's columns alike.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import types
import typing
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

__all__ = ["HEADERS_TYPE", "RECORD_FIELDS", "model_arrow_schema", "python_arrow_type", "record_arrow_schema"]

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

RECORD_FIELDS: tuple[pa.Field, ...] = (
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
)


def record_arrow_schema(include_headers: bool = False) -> pa.Schema:
    fields = list(RECORD_FIELDS)
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


_SCALARS: dict[Any, pa.DataType] = {
    bool: pa.bool_(),
    int: pa.int64(),
    float: pa.float64(),
    str: pa.string(),
    bytes: pa.binary(),
    dt.datetime: pa.timestamp("us", tz="UTC"),
    dt.date: pa.date32(),
    decimal.Decimal: pa.decimal128(38, 18),
}


def python_arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a field annotation: scalars, ``X | None``, ``list[X]``,
    ``dict[str, X]``, enums (as their values) and nested models."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return python_arrow_type(members[0])
        raise TypeError(f"cannot give a column one type for the union {annotation!r}")
    if origin is typing.Annotated:
        return python_arrow_type(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return python_arrow_type(type(typing.get_args(annotation)[0]))
    if origin in (list, tuple, set, frozenset):
        args = typing.get_args(annotation)
        return pa.list_(python_arrow_type(args[0] if args else str))
    if origin is dict:
        key, value = typing.get_args(annotation) or (str, str)
        return pa.map_(python_arrow_type(key), python_arrow_type(value))
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return pa.struct(list(model_arrow_schema(annotation)))
        if issubclass(annotation, enum.Enum):
            return python_arrow_type(type(next(iter(annotation)).value))
        for py, arrow in _SCALARS.items():
            if issubclass(annotation, py) and not (py is int and issubclass(annotation, bool)):
                return arrow
    raise TypeError(f"no column type for {annotation!r}: use bool, int, float, str, bytes, datetime, date, "
                    "Decimal, an enum, list/dict of those, or a nested pydantic model")


def model_arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """One column per field of ``model`` (by its alias, the name in the JSON)."""
    fields = []
    for name, info in model.model_fields.items():
        fields.append(pa.field(info.alias or name, python_arrow_type(info.annotation)))
    return pa.schema(fields)
