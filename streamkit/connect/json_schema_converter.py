"""Confluent's ``io.confluent.connect.json.JsonSchemaConverter``: Connect data as JSON in the
Schema Registry's wire format (magic byte 0, 4-byte schema id), its JSON Schema registered
under ``{topic}-value`` / ``{topic}-key`` at ``schema.registry.url``.

Connect schemas map to JSON Schema as Confluent's ``JsonSchemaData`` maps them: structs are
objects (``title`` the struct's name, ``connect.index`` each field's position), integers and
numbers carry ``connect.type`` (int8 ... float64), bytes are base64 strings
(``connect.type: bytes``), string-keyed maps are objects with ``additionalProperties``,
optional schemas are ``oneOf`` null and the type, and the logical types Decimal, Date, Time
and Timestamp are numbers and integers titled with Connect's names. Values are written as
plain JSON (decimals as numbers) and read back by the writer's schema.
"""

from __future__ import annotations

from typing import Any

import orjson

from streamkit.connect.converters import _value_from_json, _value_to_json
from streamkit.connect.data import DATE, DECIMAL, TIME, TIMESTAMP, Field, Schema
from streamkit.connect.errors import DataError
from streamkit.connect.registry_converter import HEADER_LEN, RegistryConverterBase

__all__ = ["JsonSchemaConverter", "connect_to_json_schema", "json_schema_to_connect"]

_LOGICAL = {DATE: "integer", TIME: "integer", TIMESTAMP: "integer", DECIMAL: "number"}
_NUMBERS = {"int8": "integer", "int16": "integer", "int32": "integer", "int64": "integer",
            "float32": "number", "float64": "number"}


def connect_to_json_schema(schema: Schema) -> dict[str, Any]:
    """The JSON Schema for a Connect schema."""
    required = _required(schema)
    if schema.optional:
        return {"oneOf": [{"type": "null"}, required]}
    return required


def _required(schema: Schema) -> dict[str, Any]:
    if schema.name in _LOGICAL:
        out: dict[str, Any] = {"type": _LOGICAL[schema.name], "title": schema.name, "connect.version": 1}
        if schema.parameters:
            out["connect.parameters"] = dict(schema.parameters)
        return out
    kind = schema.type
    if kind in _NUMBERS:
        return {"type": _NUMBERS[kind], "connect.type": kind}
    if kind in ("boolean", "string"):
        return {"type": kind}
    if kind == "bytes":
        return {"type": "string", "connect.type": "bytes"}
    if kind == "array":
        assert schema.items is not None
        return {"type": "array", "items": connect_to_json_schema(schema.items)}
    if kind == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type != "string":
            raise DataError(f"JsonSchemaConverter writes maps with string keys only, not {schema.keys.type}")
        return {"type": "object", "additionalProperties": connect_to_json_schema(schema.values), "connect.type": "map"}
    if kind == "struct":
        properties = {}
        for i, f in enumerate(schema.fields):
            properties[f.name] = {**connect_to_json_schema(f.schema), "connect.index": i}
        out = {"type": "object", "properties": properties, "additionalProperties": False}
        if schema.name:
            out["title"] = schema.name
        return out
    raise DataError(f"JsonSchemaConverter cannot write Connect type {kind}")


def json_schema_to_connect(obj: Any) -> Schema:
    """The Connect schema for a JSON Schema (as written by this converter or Confluent's)."""
    if not isinstance(obj, dict):
        raise DataError("JsonSchemaConverter reads object schemas only")
    if "oneOf" in obj:
        branches = [b for b in obj["oneOf"] if b.get("type") != "null"]
        if len(branches) != 1:
            raise DataError("JsonSchemaConverter reads oneOf of null and one type only")
        return json_schema_to_connect(branches[0]).as_optional()
    title = obj.get("title")
    if title in _LOGICAL:
        params = obj.get("connect.parameters")
        kind = {DATE: "int32", TIME: "int32", TIMESTAMP: "int64", DECIMAL: "bytes"}[title]
        return Schema(kind, name=title, version=1, parameters=dict(params) if params else None)  # type: ignore[arg-type]
    declared = obj.get("type")
    connect_type = obj.get("connect.type")
    if declared == "integer":
        return Schema(connect_type or "int64")
    if declared == "number":
        return Schema(connect_type or "float64")
    if declared == "boolean":
        return Schema("boolean")
    if declared == "string":
        return Schema("bytes" if connect_type == "bytes" else "string")
    if declared == "array":
        return Schema("array", items=json_schema_to_connect(obj.get("items", {"type": "string"})))
    if declared == "object" and "properties" not in obj and isinstance(obj.get("additionalProperties"), dict):
        return Schema("map", keys=Schema("string"), values=json_schema_to_connect(obj["additionalProperties"]))
    if declared == "object":
        props = sorted(obj.get("properties", {}).items(), key=lambda kv: kv[1].get("connect.index", 0))
        fields = tuple(Field(name, json_schema_to_connect(prop)) for name, prop in props)
        return Schema("struct", name=title, fields=fields)
    raise DataError(f"JsonSchemaConverter cannot read JSON Schema type {declared!r}")


class JsonSchemaConverter(RegistryConverterBase):
    schema_type = "JSON"
    format_name = "JSON"

    def __init__(self) -> None:
        super().__init__()
        self._readers: dict[int, Schema] = {}

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("JsonSchemaConverter needs a schema: this record's value has none")
        header = self.header(topic, orjson.dumps(connect_to_json_schema(schema)).decode())
        return header + orjson.dumps(_value_to_json(schema, value, "NUMERIC"))

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        schema_id = int.from_bytes(data[1:HEADER_LEN], "big") if len(data) >= HEADER_LEN and data[0] == 0 else -1
        schema = self._readers.get(schema_id)
        if schema is None:
            schema_id, text = self.writer_schema(topic, data)
            schema = json_schema_to_connect(orjson.loads(text))
            self._readers[schema_id] = schema
        try:
            payload = orjson.loads(data[HEADER_LEN:])
        except orjson.JSONDecodeError as exc:
            raise DataError(f"Failed to deserialize data for topic {topic} to JSON: {exc}") from None
        return schema, _value_from_json(schema, payload)
