"""Connect's data model: schemas and the records that flow through connectors.

A record's key and value are plain Python values (None, bool, int, float, str, bytes,
list, dict) with an optional ``Schema`` that says what they are, as in Kafka Connect's
``org.apache.kafka.connect.data``. A struct is a ``dict`` keyed by field name in field order.
Converters turn them into bytes on the way to Kafka and back; the JSON converter with
``schemas.enable=true`` writes Kafka Connect's ``{"schema": ..., "payload": ...}`` envelope,
so records interoperate with Kafka Connect's own connectors.

Time is integer milliseconds; Connect's logical types (``Timestamp``, ``Date``, ``Time``,
``Decimal``) are named by ``Schema.name`` exactly as Kafka Connect names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "DATE",
    "DECIMAL",
    "TIME",
    "TIMESTAMP",
    "Field",
    "Header",
    "Schema",
    "SchemaType",
    "SinkRecord",
    "SourceRecord",
]

SchemaType = Literal[
    "int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes",
    "array", "map", "struct",
]

# Kafka Connect's logical type names (Schema.name), so envelopes round-trip with Java Connect.
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"  # int64 ms since the epoch
DATE = "org.apache.kafka.connect.data.Date"  # int32 days since the epoch
TIME = "org.apache.kafka.connect.data.Time"  # int32 ms since midnight
DECIMAL = "org.apache.kafka.connect.data.Decimal"  # bytes, parameters {"scale": "2"}


@dataclass(frozen=True, slots=True)
class Field:
    """One named field of a struct ``Schema``."""

    name: str
    schema: Schema


@dataclass(frozen=True, slots=True)
class Schema:
    """A Connect schema. ``fields`` for structs, ``items`` for arrays, ``keys``/``values`` for maps."""

    type: SchemaType
    optional: bool = False
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    default: Any = None
    parameters: Mapping[str, str] | None = None
    fields: tuple[Field, ...] = ()
    items: Schema | None = None
    keys: Schema | None = None
    values: Schema | None = None

    def field(self, name: str) -> Field | None:
        """The struct field called ``name``, or None."""
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def as_optional(self) -> Schema:
        """The same schema, accepting null."""
        return self if self.optional else replace(self, optional=True)


Header = tuple[str, bytes | None]

# Records are values: transforms make changed copies with ``with_`` and never assign to a
# field. They are not ``frozen`` only because building one is on every source's hot path and
# a frozen dataclass's ``__init__`` costs about four times as much.


@dataclass(slots=True)
class SourceRecord:
    """What a source task's ``poll`` returns.

    ``source_partition`` names where the data came from (a file, a table) and
    ``source_offset`` how far it has been read there; both are small JSON-able dicts, which
    the runtime stores once the record is acknowledged, and hands back to the task on start
    through ``SourceTaskContext.offset``. ``partition=None`` lets the producer's partitioner
    choose from the key.
    """

    source_partition: Mapping[str, Any]
    source_offset: Mapping[str, Any]
    topic: str
    value: Any
    key: Any = None
    value_schema: Schema | None = None
    key_schema: Schema | None = None
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: tuple[Header, ...] = ()

    def with_(self, **changes: Any) -> SourceRecord:
        """A copy with some fields changed (transforms build records this way)."""
        return replace(self, **changes)


@dataclass(slots=True)
class SinkRecord:
    """What a sink task's ``put`` receives: a consumed Kafka record, converted."""

    topic: str
    partition: int
    offset: int
    value: Any
    key: Any = None
    value_schema: Schema | None = None
    key_schema: Schema | None = None
    timestamp_ms: int | None = None
    headers: tuple[Header, ...] = field(default=())

    def with_(self, **changes: Any) -> SinkRecord:
        """A copy with ``changes`` (what transforms return), e.g. ``record.with_(topic="t2")``."""
        return replace(self, **changes)
