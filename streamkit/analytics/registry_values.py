"""Registry-encoded record values (Confluent's wire format: magic byte 0, 4-byte schema id)
as typed Arrow columns, for the Spark source and the Dask reader.

The columns follow the schema registered last under the topic's subject (``{topic}-value``),
read on the driver: Avro records become Arrow structs (records), lists (arrays), maps, and
timestamp, date and decimal columns for Avro's logical types; JSON Schema objects become
structs of their properties (``$ref`` to ``$defs`` followed, ``oneOf``/``anyOf`` with null
made nullable); Protobuf messages (the file's first message) become structs, repeated fields
lists, map fields maps, enums strings and ``google.protobuf.Timestamp`` timestamps.

Each value is decoded with the schema its own id names: Avro records written with another
version of the schema are read into the columns' schema by Avro schema resolution, JSON and
Protobuf fields the columns lack are dropped and missing ones are null. A tombstone (null
value) is a null row. Everything a task needs pickles: the registry URL and schema texts.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
import struct
from dataclasses import dataclass
from typing import Any

import fastavro
import orjson
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from streamkit.schemas.client import RegistryClient, RegistryClientError
from streamkit.schemas.protobuf_wire import ProtobufTypes, decode_indexes

__all__ = ["VALUE_FORMATS", "RegistryValueError", "RegistryValues", "registry_values"]

VALUE_FORMATS = {"avro": "AVRO", "json-schema": "JSON", "protobuf": "PROTOBUF"}
_HEADER = struct.Struct(">bI")


class RegistryValueError(ValueError):
    """A topic whose subject cannot be had, or a value not in the wire format."""


@dataclass(frozen=True)
class RegistryValues:
    """How to decode one topic's values: ``schema_id`` is the columns' schema."""

    url: str
    schema_type: str
    schema_id: int
    schema: str

    def arrow_type(self) -> pa.StructType:
        if self.schema_type == "AVRO":
            kind = _avro_arrow(fastavro.parse_schema(orjson.loads(self.schema)), {})
        elif self.schema_type == "JSON":
            document = orjson.loads(self.schema)
            kind = _json_arrow(document, document)
        else:
            kind = _proto_arrow(_protobuf_class(self.url, self.schema_id, (0,)).DESCRIPTOR)
        if not pa.types.is_struct(kind):
            raise RegistryValueError(f"the schema of {self.schema_type} values is not a record: {kind}")
        return kind

    def decode(self, values: pa.Array) -> pa.StructArray:
        """One row per value (null for a tombstone), typed as ``arrow_type()``."""
        kind = self.arrow_type()
        decode = {"AVRO": self._avro, "JSON": self._json, "PROTOBUF": self._protobuf}[self.schema_type]
        rows = [None if v is None else decode(v) for v in values.to_pylist()]
        return pa.array(rows, type=kind)

    def _avro(self, data: bytes) -> Any:
        schema_id, body = _split(data)
        writer = _avro_writer(self.url, schema_id)
        return fastavro.schemaless_reader(io.BytesIO(body), writer, _parsed_avro(self.schema))

    def _json(self, data: bytes) -> Any:
        _, body = _split(data)
        return orjson.loads(body)

    def _protobuf(self, data: bytes) -> Any:
        schema_id, body = _split(data)
        indexes, offset = decode_indexes(body, 0)
        message = _protobuf_class(self.url, schema_id, tuple(indexes)).FromString(body[offset:])
        return _message_values(message)


def registry_values(url: str, topic: str, value_format: str) -> RegistryValues:
    """The latest schema of ``{topic}-value`` at ``url``, for ``value_format`` (avro,
    json-schema or protobuf)."""
    kind = VALUE_FORMATS.get(value_format.lower())
    if kind is None:
        raise RegistryValueError(f"valueFormat must be avro, json-schema or protobuf, not {value_format!r}")
    try:
        with RegistryClient(url) as client:
            latest = client.version(f"{topic}-value")
    except RegistryClientError as exc:
        raise RegistryValueError(f"the schema of topic {topic}'s values (subject {topic}-value): {exc}") from None
    if latest.schema_type != kind:
        raise RegistryValueError(f"subject {topic}-value holds a {latest.schema_type} schema, not {kind}")
    return RegistryValues(url.rstrip("/"), kind, latest.id, latest.schema)


def _split(data: bytes) -> tuple[int, bytes]:
    if len(data) < _HEADER.size or data[0] != 0:
        raise RegistryValueError("a value not in the Schema Registry wire format (magic byte 0, 4-byte schema id)")
    return _HEADER.unpack_from(data)[1], data[_HEADER.size:]


@functools.lru_cache(maxsize=64)
def _parsed_avro(text: str) -> Any:
    return fastavro.parse_schema(orjson.loads(text))


@functools.lru_cache(maxsize=256)
def _avro_writer(url: str, schema_id: int) -> Any:
    with RegistryClient(url) as client:
        try:
            kind, text = client.by_id(schema_id)
        except RegistryClientError as exc:
            raise RegistryValueError(f"schema {schema_id}: {exc}") from None
    if kind != "AVRO":
        raise RegistryValueError(f"a value written with schema {schema_id}, which is {kind}, not AVRO")
    return _parsed_avro(text)


@functools.lru_cache(maxsize=16)
def _protobuf_types(url: str) -> ProtobufTypes:
    return ProtobufTypes(RegistryClient(url))


def _protobuf_class(url: str, schema_id: int, indexes: tuple[int, ...]) -> type[Message]:
    try:
        return _protobuf_types(url).message_class(schema_id, list(indexes))
    except ValueError as exc:
        raise RegistryValueError(str(exc)) from None


# -- Avro ------------------------------------------------------------------------------

_AVRO_PRIMITIVES = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
                    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}


def _avro_arrow(schema: Any, named: dict[str, pa.DataType]) -> pa.DataType:
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise RegistryValueError("Avro unions other than [null, T] have no column type")
        return _avro_arrow(branches[0], named)
    if isinstance(schema, str):
        return named[schema] if schema in named else _AVRO_PRIMITIVES[schema]
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical in ("timestamp-millis", "timestamp-micros"):
        return pa.timestamp("us", tz="UTC")
    if logical == "date":
        return pa.date32()
    if logical == "decimal":
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    if kind == "record":
        out = pa.struct([pa.field(f["name"], _avro_arrow(f["type"], named)) for f in schema["fields"]])
        named[schema["name"]] = out
        return out
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    if kind == "array":
        return pa.list_(_avro_arrow(schema["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), _avro_arrow(schema["values"], named))
    return _avro_arrow(kind, named)


# -- JSON Schema ---------------------------------------------------------------------------

_JSON_TYPES = {"integer": pa.int64(), "number": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
               "null": pa.null()}


def _json_arrow(schema: Any, document: Any) -> pa.DataType:
    if not isinstance(schema, dict):
        return pa.string()
    if "$ref" in schema:
        target: Any = document
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            target = target[part]
        return _json_arrow(target, document)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            branches = [b for b in schema[key] if b.get("type") != "null"]
            return _json_arrow(branches[0], document) if len(branches) == 1 else pa.string()
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _json_arrow(schema["allOf"][0], document)
    if "enum" in schema:
        return pa.string()
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "object" and "properties" in schema:
        return pa.struct([pa.field(name, _json_arrow(prop, document)) for name, prop in schema["properties"].items()])
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return pa.map_(pa.string(), _json_arrow(schema["additionalProperties"], document))
    if kind == "array":
        return pa.list_(_json_arrow(schema.get("items", {"type": "string"}), document))
    return _JSON_TYPES.get(str(kind), pa.string())


# -- Protobuf ------------------------------------------------------------------------------

_F = FieldDescriptor
_PROTO_TYPES = {_F.TYPE_INT32: pa.int32(), _F.TYPE_SINT32: pa.int32(), _F.TYPE_SFIXED32: pa.int32(),
                _F.TYPE_INT64: pa.int64(), _F.TYPE_SINT64: pa.int64(), _F.TYPE_SFIXED64: pa.int64(),
                _F.TYPE_UINT32: pa.int64(), _F.TYPE_FIXED32: pa.int64(), _F.TYPE_UINT64: pa.int64(),
                _F.TYPE_FIXED64: pa.int64(), _F.TYPE_FLOAT: pa.float32(), _F.TYPE_DOUBLE: pa.float64(),
                _F.TYPE_BOOL: pa.bool_(), _F.TYPE_STRING: pa.string(), _F.TYPE_BYTES: pa.binary(),
                _F.TYPE_ENUM: pa.string()}
_TIMESTAMP = "google.protobuf.Timestamp"


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _proto_single(field: FieldDescriptor) -> pa.DataType:
    if field.message_type is None:
        return _PROTO_TYPES[field.type]
    if field.message_type.full_name == _TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    return _proto_arrow(field.message_type)


def _proto_arrow(descriptor: Descriptor) -> pa.DataType:
    fields = []
    for field in descriptor.fields:
        if _is_map(field):
            key, value = field.message_type.fields
            kind = pa.map_(_proto_single(key), _proto_single(value))
        elif field.is_repeated:
            kind = pa.list_(_proto_single(field))
        else:
            kind = _proto_single(field)
        fields.append(pa.field(field.name, kind))
    return pa.struct(fields)


def _proto_value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None:
        if field.message_type.full_name == _TIMESTAMP:
            return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=value.ToMicroseconds())
        return _message_values(value)
    if field.type == _F.TYPE_ENUM:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else str(value)
    return value


def _message_values(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = [(k, _proto_value(value_field, v)) for k, v in value.items()]
        elif field.is_repeated:
            out[field.name] = [_proto_value(field, v) for v in value]
        elif field.message_type is not None and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _proto_value(field, value)
    return out
