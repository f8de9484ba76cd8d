"""Confluent's ``io.confluent.connect.protobuf.ProtobufConverter``: Connect data as Protobuf
in the Schema Registry's wire format (magic byte 0, 4-byte schema id, message-index array),
its schema registered as ``.proto`` text under ``{topic}-value`` / ``{topic}-key`` at
``schema.registry.url``.

Connect schemas map to Protobuf as Confluent's ``ProtobufData`` maps them by default: a
struct is a proto3 message (named by the struct's name, its namespace the package;
``ConnectDefault1`` when unnamed) whose fields are numbered in order; int8, int16 and int32
are ``int32``, int64 ``int64``, float32 ``float``, float64 ``double``; arrays are repeated
fields, maps are ``map<K, V>`` fields, nested structs nested messages; the logical types
Decimal, Date, Time and Timestamp are ``confluent.type.Decimal``, ``google.type.Date``,
``google.type.TimeOfDay`` and ``google.protobuf.Timestamp``. A null optional scalar is
written as the field's default (proto3 scalars have no null), as Confluent's converter does
without ``wrapper.for.nullables``. Reading goes by the writer's schema (fetched by id, the
message the index array names): scalars are required, message fields optional, enums
strings, and Date, Time and Timestamp values the integers the JsonConverter gives.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from streamkit.connect.data import DATE, DECIMAL, TIME, TIMESTAMP, Field, Schema
from streamkit.connect.errors import DataError
from streamkit.connect.registry_converter import HEADER_LEN, RegistryConverterBase
from streamkit.schemas.protobuf_descriptor import proto_to_descriptor
from streamkit.schemas.protobuf_wire import ProtobufTypes, build_file, decode_indexes

__all__ = ["ProtobufConverter", "connect_to_proto", "proto_to_connect"]

_SCALARS = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64", "float32": "float",
            "float64": "double", "boolean": "bool", "string": "string", "bytes": "bytes"}
_LOGICAL = {DECIMAL: ("confluent.type.Decimal", "confluent/type/decimal.proto"),
            DATE: ("google.type.Date", "google/type/date.proto"),
            TIME: ("google.type.TimeOfDay", "google/type/timeofday.proto"),
            TIMESTAMP: ("google.protobuf.Timestamp", "google/protobuf/timestamp.proto")}
_BY_MESSAGE = {message: name for name, (message, _) in _LOGICAL.items()}
_MAP_KEYS = {"int8", "int16", "int32", "int64", "boolean", "string"}
_DEFAULT_NAME = "ConnectDefault1"
_EPOCH_DAY = dt.date(1970, 1, 1)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_")) or "Nested"


class _ProtoWriter:
    """``.proto`` text for one Connect struct schema."""

    def __init__(self) -> None:
        self.imports: set[str] = set()

    def message(self, schema: Schema, name: str, indent: str) -> list[str]:
        lines = [f"{indent}message {name} {{"]
        nested: list[str] = []
        for number, field in enumerate(schema.fields, 1):
            if not field.name.isidentifier():
                raise DataError(f"ProtobufConverter: field name {field.name!r} is not a Protobuf identifier")
            lines.append(f"{indent}  {self.type(field.schema, field.name, nested, indent + '  ')} "
                         f"{field.name} = {number};")
        return [*lines, *nested, f"{indent}}}"]

    def type(self, schema: Schema, field: str, nested: list[str], indent: str, in_list: bool = False) -> str:
        if schema.name in _LOGICAL:
            message, file = _LOGICAL[schema.name]
            self.imports.add(file)
            return message
        kind = schema.type
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "struct":
            name = (schema.name or "").rpartition(".")[2] or _camel(field)
            if not any(line.strip() == f"message {name} {{" for line in nested):
                nested += self.message(schema, name, indent)
            return name
        if kind == "array" and schema.items is not None and not in_list:
            if schema.items.type in ("array", "map"):
                raise DataError("ProtobufConverter cannot write an array of arrays or maps")
            return f"repeated {self.type(schema.items, field, nested, indent, in_list=True)}"
        if kind == "map" and schema.keys is not None and schema.values is not None and not in_list:
            if schema.keys.type not in _MAP_KEYS or schema.keys.name is not None:
                raise DataError(f"ProtobufConverter writes maps with integer, boolean or string keys, "
                                f"not {schema.keys.type}")
            if schema.values.type in ("array", "map"):
                raise DataError("ProtobufConverter cannot write a map of arrays or maps")
            key = _SCALARS[schema.keys.type]
            return f"map<{key}, {self.type(schema.values, field, nested, indent, in_list=True)}>"
        raise DataError(f"ProtobufConverter cannot write Connect type {kind}")


def connect_to_proto(schema: Schema) -> str:
    """The ``.proto`` text for a Connect struct schema."""
    if schema.type != "struct":
        raise DataError(f"ProtobufConverter writes structs only, not {schema.type}")
    package, _, name = (schema.name or _DEFAULT_NAME).rpartition(".")
    writer = _ProtoWriter()
    body = writer.message(schema, name, "")
    head = ['syntax = "proto3";', *(f'import "{file}";' for file in sorted(writer.imports))]
    if package:
        head.append(f"package {package};")
    return "\n".join([*head, *body]) + "\n"


def _field_schema(field: FieldDescriptor) -> Schema:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields
        return Schema("map", keys=_field_schema(key), values=_field_schema(value))
    single = _single_schema(field)
    if field.is_repeated:
        return Schema("array", items=single)
    return single


def _single_schema(field: FieldDescriptor) -> Schema:
    if field.message_type is not None:
        logical = _BY_MESSAGE.get(field.message_type.full_name)
        if logical is not None:
            kind = {DECIMAL: "bytes", DATE: "int32", TIME: "int32", TIMESTAMP: "int64"}[logical]
            return Schema(kind, optional=True, name=logical, version=1)  # type: ignore[arg-type]
        return proto_to_connect(field.message_type).as_optional()
    t = FieldDescriptor
    kinds = {t.TYPE_INT32: "int32", t.TYPE_SINT32: "int32", t.TYPE_SFIXED32: "int32", t.TYPE_INT64: "int64",
             t.TYPE_SINT64: "int64", t.TYPE_SFIXED64: "int64", t.TYPE_UINT32: "int64", t.TYPE_FIXED32: "int64",
             t.TYPE_UINT64: "int64", t.TYPE_FIXED64: "int64", t.TYPE_FLOAT: "float32", t.TYPE_DOUBLE: "float64",
             t.TYPE_BOOL: "boolean", t.TYPE_STRING: "string", t.TYPE_BYTES: "bytes", t.TYPE_ENUM: "string"}
    return Schema(kinds[field.type])  # type: ignore[arg-type]


def proto_to_connect(descriptor: Descriptor) -> Schema:
    """The Connect struct schema for a Protobuf message."""
    name = None if descriptor.full_name == _DEFAULT_NAME else descriptor.full_name
    return Schema("struct", name=name, fields=tuple(Field(f.name, _field_schema(f)) for f in descriptor.fields))


def _fill(message: Message, schema: Schema, value: Mapping[str, Any]) -> None:
    if not isinstance(value, Mapping):
        raise DataError(f"Invalid type for STRUCT: {type(value).__name__}")
    for field in schema.fields:
        item = value.get(field.name)
        if item is None:
            continue
        kind = field.schema
        if kind.type == "array" and kind.items is not None:
            target = getattr(message, field.name)
            for element in item:
                if kind.items.type == "struct" or kind.items.name in _LOGICAL:
                    _set_message(target.add(), kind.items, element)
                else:
                    target.append(element)
        elif kind.type == "map" and kind.values is not None:
            target = getattr(message, field.name)
            for key, element in item.items():
                if kind.values.type == "struct" or kind.values.name in _LOGICAL:
                    _set_message(target[key], kind.values, element)
                else:
                    target[key] = element
        elif kind.type == "struct" or kind.name in _LOGICAL:
            _set_message(getattr(message, field.name), kind, item)
        else:
            setattr(message, field.name, item)


def _set_message(target: Any, schema: Schema, value: Any) -> None:
    target.SetInParent()
    if schema.name == TIMESTAMP:
        if isinstance(value, dt.datetime):
            target.FromDatetime(value if value.tzinfo else value.replace(tzinfo=dt.UTC))
        else:
            target.FromMilliseconds(int(value))
    elif schema.name == DATE:
        day = value if isinstance(value, dt.date) else _EPOCH_DAY + dt.timedelta(days=int(value))
        target.year, target.month, target.day = day.year, day.month, day.day
    elif schema.name == TIME:
        ms = (((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
              if isinstance(value, dt.time) else int(value))
        target.hours, target.minutes, target.seconds = ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60
        target.nanos = ms % 1000 * 1_000_000
    elif schema.name == DECIMAL:
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        scale = int(dict(schema.parameters or {}).get("scale", "0"))
        unscaled = int(number.scaleb(scale).to_integral_value())
        target.value = unscaled.to_bytes((unscaled.bit_length() + 8) // 8 or 1, "big", signed=True)
        target.precision = len(str(abs(unscaled)))
        target.scale = scale
    else:
        _fill(target, schema, value)


def _read(schema: Schema, message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        kind = schema.field(field.name)
        assert kind is not None
        item = getattr(message, field.name)
        if kind.schema.type == "array" and kind.schema.items is not None:
            out[field.name] = [_read_single(kind.schema.items, field, e) for e in item]
        elif kind.schema.type == "map" and kind.schema.values is not None:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _read_single(kind.schema.values, value_field, v) for k, v in item.items()}
        elif field.message_type is not None and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _read_single(kind.schema, field, item)
    return out


def _read_single(schema: Schema, field: FieldDescriptor, value: Any) -> Any:
    if schema.name == TIMESTAMP:
        return value.ToMilliseconds()
    if schema.name == DATE:
        return (dt.date(value.year, value.month, value.day) - _EPOCH_DAY).days
    if schema.name == TIME:
        return ((value.hours * 60 + value.minutes) * 60 + value.seconds) * 1000 + value.nanos // 1_000_000
    if schema.name == DECIMAL:
        return decimal.Decimal(int.from_bytes(value.value, "big", signed=True)).scaleb(-value.scale)
    if schema.type == "struct":
        return _read(schema, value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name if value in field.enum_type.values_by_number else value
    return value


class ProtobufConverter(RegistryConverterBase):
    schema_type = "PROTOBUF"
    format_name = "Protobuf"

    def __init__(self) -> None:
        super().__init__()
        self._writers: dict[int, tuple[Schema, str, type[Message]]] = {}
        self._types: ProtobufTypes | None = None
        self._readers: dict[tuple[int, tuple[int, ...]], tuple[Schema, type[Message]]] = {}

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("ProtobufConverter needs a schema: this record's value has none")
        cached = self._writers.get(id(schema))
        if cached is None or cached[0] is not schema:
            text = connect_to_proto(schema)
            try:
                file = build_file([proto_to_descriptor(text, f"{topic}.proto")])
            except ValueError as exc:
                raise DataError(f"ProtobufConverter cannot build the schema for topic {topic}: {exc}") from None
            message_class = message_factory.GetMessageClass(file.message_types_by_name[
                (schema.name or _DEFAULT_NAME).rpartition(".")[2]])
            if len(self._writers) > 1000:
                self._writers.clear()
            cached = (schema, text, message_class)
            self._writers[id(schema)] = cached
        _, text, message_class = cached
        message = message_class()
        try:
            _fill(message, schema, value)
            encoded: bytes = message.SerializeToString()
        except (TypeError, ValueError, AttributeError) as exc:
            raise DataError(f"Failed to serialize Protobuf data from topic {topic}: {exc}") from None
        return self.header(topic, text) + b"\x00" + encoded

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        if len(data) < HEADER_LEN or data[0] != 0:
            raise DataError(f"Failed to deserialize data for topic {topic} to Protobuf: Unknown magic byte!")
        schema_id = int.from_bytes(data[1:HEADER_LEN], "big")
        try:
            indexes, offset = decode_indexes(data, HEADER_LEN)
        except ValueError as exc:
            raise DataError(f"Failed to deserialize data for topic {topic} to Protobuf: {exc}") from None
        found = self._readers.get((schema_id, tuple(indexes)))
        if found is None:
            assert self.client is not None
            if self._types is None:
                self._types = ProtobufTypes(self.client)
            try:
                message_class = self._types.message_class(schema_id, indexes)
            except ValueError as exc:
                raise DataError(f"Failed to deserialize data for topic {topic}: {exc}") from None
            found = (proto_to_connect(message_class.DESCRIPTOR), message_class)
            self._readers[(schema_id, tuple(indexes))] = found
        schema, message_class = found
        try:
            message = message_class.FromString(data[offset:])
        except DecodeError as exc:
            raise DataError(f"Failed to deserialize data for topic {topic} to Protobuf: {exc}") from None
        return schema, _read(schema, message)
