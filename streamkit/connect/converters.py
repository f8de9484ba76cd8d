"""Converters between Connect data (a value and its ``Schema``) and Kafka's bytes.

Kafka Connect's three, with its class names and behaviour:

- ``JsonConverter`` (``org.apache.kafka.connect.json.JsonConverter``): with
  ``schemas.enable=true`` (the default) each record is the envelope
  ``{"schema": {...}, "payload": ...}``; with ``false`` the payload is plain JSON and
  values come back without a schema. ``bytes`` are base64; ``Decimal`` is the base64 of the
  unscaled two's-complement integer (``decimal.format=BASE64``) or a JSON number
  (``NUMERIC``).
- ``StringConverter`` (``org.apache.kafka.connect.storage.StringConverter``): UTF-8 text
  (``converter.encoding``), any value written as its string form.
- ``ByteArrayConverter`` (``org.apache.kafka.connect.converters.ByteArrayConverter``):
  bytes through unchanged.

A null value is a null record (a tombstone) both ways. A converter's settings come from
the ``key.converter.``/``value.converter.`` prefixed keys of the connector's config (or the
worker's, when the connector names no converter).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any, Protocol

import orjson

from streamkit.connect.avro_converter import AvroConverter
from streamkit.connect.data import DATE, DECIMAL, TIME, TIMESTAMP, Field, Schema
from streamkit.connect.errors import ConfigError, DataError
from streamkit.connect.plugins import PluginError, import_class

__all__ = [
    "CONVERTERS",
    "ByteArrayConverter",
    "Converter",
    "JsonConverter",
    "StringConverter",
    "converter_class",
    "make_converter",
    "schema_from_json",
    "schema_to_json",
]


class Converter(Protocol):
    def configure(self, configs: Mapping[str, str], is_key: bool) -> None: ...

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None: ...

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]: ...


def _bool(value: Any, key: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError({key: [f"Invalid value {value} for configuration {key}: Expected value to be either true or false"]})


class StringConverter:
    def __init__(self) -> None:
        self.encoding = "utf-8"

    def configure(self, configs: Mapping[str, str], is_key: bool) -> None:
        name = "key" if is_key else "value"
        self.encoding = str(configs.get("converter.encoding", configs.get(f"converter.{name}.encoding", "utf-8")))
        try:
            "".encode(self.encoding)
        except LookupError:
            raise ConfigError({"converter.encoding": [f"unknown encoding {self.encoding}"]}) from None

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes):
            return value
        return _java_str(value).encode(self.encoding)

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return Schema("string", optional=True), None
        try:
            return Schema("string", optional=True), data.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise DataError(f"Failed to deserialize string: {exc}") from exc


def _java_str(value: Any) -> str:
    # Java's toString spellings, so a StringConverter writes what Kafka Connect would
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return orjson.dumps(_jsonable(value)).decode()
    return str(value)


class ByteArrayConverter:
    def configure(self, configs: Mapping[str, str], is_key: bool) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type != "bytes":
            raise DataError(f"Invalid schema type for ByteArrayConverter: {schema.type.upper()}")
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise DataError(f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}")

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        return Schema("bytes", optional=True), data


# -- JSON ----------------------------------------------------------------------------------


def schema_to_json(schema: Schema) -> dict[str, Any]:
    """Kafka Connect's JSON form of a schema (JsonConverter.asJsonSchema)."""
    out: dict[str, Any] = {"type": schema.type, "optional": schema.optional}
    if schema.type == "struct":
        out["fields"] = [{**schema_to_json(f.schema), "field": f.name} for f in schema.fields]
    elif schema.type == "array" and schema.items is not None:
        out["items"] = schema_to_json(schema.items)
    elif schema.type == "map" and schema.keys is not None and schema.values is not None:
        out["keys"] = schema_to_json(schema.keys)
        out["values"] = schema_to_json(schema.values)
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = _value_to_json(schema, schema.default, "BASE64")
    return out


_TYPES = {"int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes",
          "array", "map", "struct"}


def schema_from_json(obj: Any) -> Schema:
    if not isinstance(obj, dict) or obj.get("type") not in _TYPES:
        raise DataError(f"Schema must contain 'type' field with a known type: {obj!r}")
    kind = obj["type"]
    fields: tuple[Field, ...] = ()
    items = keys = values = None
    if kind == "struct":
        raw = obj.get("fields")
        if not isinstance(raw, list):
            raise DataError("Struct schema's \"fields\" argument is not an array.")
        fields = tuple(Field(str(f.get("field")), schema_from_json(f)) for f in raw)
    elif kind == "array":
        if "items" not in obj:
            raise DataError("Array schema did not specify the items type")
        items = schema_from_json(obj["items"])
    elif kind == "map":
        if "keys" not in obj or "values" not in obj:
            raise DataError("Map schema did not specify the key and value types")
        keys, values = schema_from_json(obj["keys"]), schema_from_json(obj["values"])
    params = obj.get("parameters")
    schema = Schema(kind, optional=bool(obj.get("optional", False)), name=obj.get("name"),
                    version=obj.get("version"), doc=obj.get("doc"),
                    parameters={str(k): str(v) for k, v in params.items()} if isinstance(params, dict) else None,
                    fields=fields, items=items, keys=keys, values=values)
    if obj.get("default") is not None:
        from dataclasses import replace

        schema = replace(schema, default=_value_from_json(schema, obj["default"]))
    return schema


def _jsonable(value: Any) -> Any:
    """A schemaless value as JSON: bytes as base64, decimals as numbers, times as ms."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return _datetime_ms(value)
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


def _datetime_ms(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _unscaled_bytes(value: decimal.Decimal, scale: int) -> bytes:
    unscaled = int(value.scaleb(scale).to_integral_value())
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return unscaled.to_bytes(length, "big", signed=True)


def _value_to_json(schema: Schema | None, value: Any, decimal_format: str) -> Any:
    if value is None:
        if schema is not None and not schema.optional and schema.default is None:
            raise DataError("Conversion error: null value for field that is required and has no default value")
        return None
    if schema is None:
        return _jsonable(value)
    if schema.name == DECIMAL:
        scale = int((schema.parameters or {}).get("scale", "0"))
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        if decimal_format == "NUMERIC":
            return float(number) if number != number.to_integral_value() else int(number)
        return base64.b64encode(_unscaled_bytes(number, scale)).decode()
    if schema.name == TIMESTAMP and isinstance(value, dt.datetime):
        return _datetime_ms(value)
    if schema.name == DATE and isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    if schema.name == TIME and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    kind = schema.type
    if kind == "struct":
        if not isinstance(value, Mapping):
            raise DataError(f"Invalid type for STRUCT: {type(value).__name__}")
        return {f.name: _value_to_json(f.schema, value.get(f.name), decimal_format) for f in schema.fields}
    if kind == "array":
        return [_value_to_json(schema.items, v, decimal_format) for v in value]
    if kind == "map":
        return {str(k): _value_to_json(schema.values, v, decimal_format) for k, v in value.items()}
    if kind == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataError(f"Invalid type for BYTES: {type(value).__name__}")
        return base64.b64encode(bytes(value)).decode()
    if kind in ("int8", "int16", "int32", "int64"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataError(f"Invalid Java object for schema with type {kind.upper()}: {type(value).__name__}")
        return value
    if kind in ("float32", "float64"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DataError(f"Invalid Java object for schema with type {kind.upper()}: {type(value).__name__}")
        return float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise DataError(f"Invalid Java object for schema with type BOOLEAN: {type(value).__name__}")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise DataError(f"Invalid Java object for schema with type STRING: {type(value).__name__}")
        return value
    raise DataError(f"Unknown schema type {kind}")


def _value_from_json(schema: Schema | None, value: Any) -> Any:
    if value is None:
        return schema.default if schema is not None else None
    if schema is None:
        return value
    if schema.name == DECIMAL:
        scale = int((schema.parameters or {}).get("scale", "0"))
        if isinstance(value, str):
            unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
            return decimal.Decimal(unscaled).scaleb(-scale)
        return decimal.Decimal(str(value))
    kind = schema.type
    if kind == "struct":
        if not isinstance(value, dict):
            raise DataError(f"Struct value must be a JSON object, got {type(value).__name__}")
        return {f.name: _value_from_json(f.schema, value.get(f.name)) for f in schema.fields}
    if kind == "array":
        return [_value_from_json(schema.items, v) for v in value]
    if kind == "map":
        return {k: _value_from_json(schema.values, v) for k, v in value.items()}
    if kind == "bytes":
        return base64.b64decode(value)
    if kind in ("int8", "int16", "int32", "int64"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataError(f"Invalid type for {kind.upper()}: {value!r}")
        return value
    if kind in ("float32", "float64"):
        return float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise DataError(f"Invalid type for BOOLEAN: {value!r}")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise DataError(f"Invalid type for STRING: {value!r}")
        return value
    return value


class JsonConverter:
    def __init__(self) -> None:
        self.schemas_enable = True
        self.decimal_format = "BASE64"

    def configure(self, configs: Mapping[str, str], is_key: bool) -> None:
        self.schemas_enable = _bool(configs.get("schemas.enable", "true"), "schemas.enable")
        fmt = str(configs.get("decimal.format", "BASE64")).upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ConfigError({"decimal.format": [f"Invalid value {fmt}: must be BASE64 or NUMERIC"]})
        self.decimal_format = fmt

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = _value_to_json(schema, value, self.decimal_format)
        if self.schemas_enable:
            envelope = {"schema": schema_to_json(schema) if schema is not None else None, "payload": payload}
            return orjson.dumps(envelope)
        return orjson.dumps(payload)

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise DataError(f"Converting byte[] to Kafka Connect data failed due to serialization error: {exc}") from exc
        if not self.schemas_enable:
            return None, obj
        if not (isinstance(obj, dict) and set(obj) == {"schema", "payload"}):
            raise DataError(
                'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not '
                "contain additional fields. If you are trying to deserialize plain JSON data, set "
                "schemas.enable=false in your converter configuration.")
        if obj["schema"] is None:
            return None, obj["payload"]
        schema = schema_from_json(obj["schema"])
        return schema, _value_from_json(schema, obj["payload"])


_JSON = "org.apache.kafka.connect.json.JsonConverter"
_STRING = "org.apache.kafka.connect.storage.StringConverter"
_BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"

CONVERTERS: dict[str, type[Any]] = {
    _JSON: JsonConverter, "JsonConverter": JsonConverter,
    _STRING: StringConverter, "StringConverter": StringConverter,
    _BYTES: ByteArrayConverter, "ByteArrayConverter": ByteArrayConverter,
}
for _cls in (JsonConverter, StringConverter, ByteArrayConverter):
    CONVERTERS[f"{_cls.__module__}.{_cls.__name__}"] = _cls
# Confluent's, over the Schema Registry
CONVERTERS["io.confluent.connect.avro.AvroConverter"] = AvroConverter
CONVERTERS["AvroConverter"] = AvroConverter
CONVERTERS[f"{AvroConverter.__module__}.AvroConverter"] = AvroConverter
# imported when named: its module builds on this one's JSON values
_JSON_SCHEMA = "streamkit.connect.json_schema_converter.JsonSchemaConverter"
_PROTOBUF = "streamkit.connect.protobuf_converter.ProtobufConverter"
_BY_IMPORT = {"io.confluent.connect.json.JsonSchemaConverter": _JSON_SCHEMA, "JsonSchemaConverter": _JSON_SCHEMA,
              "io.confluent.connect.protobuf.ProtobufConverter": _PROTOBUF, "ProtobufConverter": _PROTOBUF}


def converter_class(name: str) -> type[Any]:
    cls = CONVERTERS.get(name.strip())
    if cls is not None:
        return cls
    try:
        found = import_class(_BY_IMPORT.get(name.strip(), name.strip()))
    except PluginError as exc:
        raise PluginError(f"Class {name} could not be found: not one of {_JSON}, {_STRING}, "
                          f"{_BYTES} ({exc})") from None
    if not (isinstance(found, type) and hasattr(found, "from_connect_data") and hasattr(found, "to_connect_data")):
        raise PluginError(f"{name} is not a Converter (it needs from_connect_data and to_connect_data)")
    return found


def make_converter(name: str, settings: Mapping[str, str], is_key: bool) -> Converter:
    """A configured converter; ``settings`` are the keys after the ``key.converter.`` prefix."""
    converter: Converter = converter_class(name)()
    converter.configure(settings, is_key)
    return converter
