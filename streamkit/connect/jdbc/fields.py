"""Which columns a sink record fills, and with what: Confluent's ``pk.mode`` rules, pure.

- ``none``: the value's fields, no primary key;
- ``kafka``: ``__connect_topic``, ``__connect_partition``, ``__connect_offset`` (or the three
  ``pk.fields`` names) are the key, then the value's fields;
- ``record_key``: a primitive key becomes one column named by ``pk.fields``; a struct key's
  fields (all, or those in ``pk.fields``) become the key columns;
- ``record_value``: the value's fields named by ``pk.fields`` (all of them when empty) are the key.

``fields.whitelist``/``fields.include.list`` limit the value's fields written. A record without
a schema gets one inferred from its values (``schema.infer_value_schema``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from streamkit.connect.data import Field, Schema, SinkRecord
from streamkit.connect.errors import ConfigError, DataError
from streamkit.connect.jdbc.config import JdbcSinkConfig
from streamkit.connect.jdbc.schema import (
    INLINE_GLOBALS,
    Converter,
    infer_value_schema,
    inline_expression,
    to_db_converter,
)

__all__ = ["Column", "RowShape", "row_shape", "shape_key"]

KAFKA_PK = ("__connect_topic", "__connect_partition", "__connect_offset")


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    schema: Schema
    source: Literal["key", "value", "topic", "partition", "offset"]
    field: str | None  # the struct field it comes from (None: the whole key)
    convert: Converter | None


def _compile(columns: Sequence[Column]) -> Callable[[SinkRecord], tuple[Any, ...]]:
    """A function from a record to its row, generated so a row costs one call: this is the
    sink's per-record hot path. Only field names (as repr literals) enter the code."""
    namespace: dict[str, Any] = dict(INLINE_GLOBALS)
    parts = []
    for i, c in enumerate(columns):
        if c.source == "value":
            src = f"v.get({c.field!r})"
        elif c.source == "key":
            src = "k" if c.field is None else f"k.get({c.field!r})"
        else:
            src = f"r.{c.source}"
        if c.convert is not None:
            namespace[f"c{i}"] = c.convert
            converted = inline_expression(c.convert, f"x{i}", f"c{i}")
            src = f"(None if (x{i} := {src}) is None else {converted})"
        parts.append(src)
    code = f"def extract(r):\n    v = r.value\n    k = r.key\n    return ({', '.join(parts)},)\n"
    exec(code, namespace)
    return namespace["extract"]  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class RowShape:
    """The columns one kind of record fills; ``key`` names the primary-key columns.
    ``extract`` gives a record's row: its values in the order of ``columns``."""

    columns: tuple[Column, ...]
    key: tuple[str, ...]
    names: tuple[str, ...] = ()
    extract: Callable[[SinkRecord], tuple[Any, ...]] = field(default=lambda r: ())

    @classmethod
    def of(cls, columns: Sequence[Column], key: Sequence[str]) -> RowShape:
        return cls(tuple(columns), tuple(key), tuple(c.name for c in columns), _compile(columns))

    @property
    def signature(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return self.names, self.key


def _struct(schema: Schema | None, value: Any, what: str) -> Schema:
    if schema is None:
        if not isinstance(value, dict):
            raise DataError(f"a schemaless record {what} must be a dict (a JSON object), "
                            f"not {type(value).__name__}")
        return infer_value_schema(value)
    if schema.type != "struct":
        raise DataError(f"the record {what} must be a struct, not {schema.type}")
    return schema


def _column(f: Field, source: Any, key: bool) -> Column:
    schema = f.schema
    if key and schema.optional:
        schema = Schema(schema.type, name=schema.name, version=schema.version,
                        parameters=schema.parameters)
    return Column(f.name, schema, source, f.name, to_db_converter(schema))


def row_shape(config: JdbcSinkConfig, record: SinkRecord) -> RowShape:
    """The columns ``record`` fills under ``config`` (a tombstone: its key columns only)."""
    mode = config.pk_mode
    tombstone = record.value is None
    value_schema = None if tombstone else _struct(record.value_schema, record.value, "value")
    value_fields: Sequence[Field] = value_schema.fields if value_schema else ()
    included = set(config.included_fields)
    columns: list[Column] = []
    key: list[str] = []
    if mode == "kafka":
        names = config.pk_fields or KAFKA_PK
        kinds: tuple[Any, ...] = ("topic", "partition", "offset")
        types = (Schema("string"), Schema("int32"), Schema("int64"))
        for name, kind, s in zip(names, kinds, types, strict=True):
            columns.append(Column(name, s, kind, None, None))
            key.append(name)
    elif mode == "record_key":
        if record.key is None:
            raise DataError(f"pk.mode=record_key but the record at {record.topic}-"
                            f"{record.partition}@{record.offset} has no key")
        ks = record.key_schema
        if ks is None and not isinstance(record.key, dict):
            ks = infer_value_schema({"k": record.key}).fields[0].schema
        if ks is not None and ks.type != "struct":
            if len(config.pk_fields) != 1:
                raise ConfigError({"pk.fields": [
                    "with pk.mode=record_key and a primitive key give exactly one column name"]})
            primitive = _column(Field(config.pk_fields[0], ks), "key", True)
            columns.append(Column(primitive.name, primitive.schema, "key", None, primitive.convert))
            key.append(config.pk_fields[0])
        else:
            struct = _struct(ks, record.key, "key")
            wanted = config.pk_fields or tuple(f.name for f in struct.fields)
            for name in wanted:
                f = struct.field(name)
                if f is None:
                    raise DataError(f"pk.fields: the record key has no field {name!r}")
                columns.append(_column(f, "key", True))
                key.append(name)
    if tombstone:
        return RowShape.of(columns, key)
    if mode == "record_value":
        wanted = config.pk_fields or tuple(f.name for f in value_fields)
        for name in wanted:
            if value_schema is None or value_schema.field(name) is None:
                raise DataError(f"pk.fields: the record value has no field {name!r}")
        key.extend(wanted)
    taken = set(key) if mode != "record_value" else set()
    for f in value_fields:
        if f.name in taken:
            continue
        if included and f.name not in included and f.name not in key:
            continue
        columns.append(_column(f, "value", f.name in key))
    return RowShape.of(columns, key)


def _fingerprint(schema: Schema | None) -> Any:
    if schema is None:
        return None
    return (schema.type, schema.optional, schema.name,
            tuple(sorted((schema.parameters or {}).items())),
            tuple((f.name, _fingerprint(f.schema)) for f in schema.fields))


def _value_types(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, type(v)) for k, v in value.items())
    return type(value)


def shape_key(record: SinkRecord) -> Any:
    """What ``row_shape`` depends on, hashable: equal keys give equal shapes. Schemas count by
    content (a converter may build a new Schema object per record), schemaless values by their
    field names and value types."""
    key = (_fingerprint(record.key_schema) if record.key_schema is not None
           else _value_types(record.key))
    if record.value is None:
        return key, None
    if record.value_schema is None:
        return key, ("schemaless", _value_types(record.value))
    return key, _fingerprint(record.value_schema)
