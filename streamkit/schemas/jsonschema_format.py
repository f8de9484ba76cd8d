"""JSON Schemas: parsing (checked against their meta-schema by ``jsonschema``) and the
rules by which a reader schema accepts every document a writer schema accepts, as
Confluent's ``JsonSchema`` diff states them:

- ``type``: the reader's types include the writer's (an integer is a number);
  narrowing is TYPE_NARROWED;
- ``properties``: in a closed content model (``additionalProperties: false``) a writer
  property the reader lacks is PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL; in an open one a
  property the reader adds with a non-empty schema is PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL;
  properties in both are compared recursively;
- ``required``: a name the reader requires and the writer did not is
  REQUIRED_ATTRIBUTE_ADDED (unless the property has a default);
- ``additionalProperties``: true to false is ADDITIONAL_PROPERTIES_REMOVED;
- ``enum``: a writer value the reader lacks is ENUM_ARRAY_NARROWED; ``items`` recursive;
- bounds (maxLength, maximum, maxItems, ...): tightened is *_DECREASED / *_ADDED, and the
  min* counterparts *_INCREASED / *_ADDED.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

__all__ = ["JsonSchema", "json_problems", "parse_json_schema"]

_MAX_BOUNDS = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
_MIN_BOUNDS = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")


class JsonSchema:
    def __init__(self, text: str, schema: Any, canonical: str) -> None:
        self.text = text
        self.schema = schema
        self.canonical = canonical


def parse_json_schema(text: str, normalize: bool = False) -> JsonSchema:
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(schema, (dict, bool)):
        raise ValueError("a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(exc.message) from None
    return JsonSchema(text, schema, json.dumps(schema, separators=(",", ":"), sort_keys=normalize))


def _types(schema: Any) -> set[str] | None:
    if not isinstance(schema, dict) or "type" not in schema:
        return None
    declared = schema["type"]
    return set(declared if isinstance(declared, list) else [declared])


def _open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is not False


def _empty(schema: Any) -> bool:
    return schema is True or schema == {}


def _check(reader: Any, writer: Any, path: str) -> list[str]:
    if reader is True or reader == {}:
        return []
    if writer is False:
        return []
    if reader is False:
        return [f"{path}: the reader accepts nothing (TYPE_NARROWED)"]
    if writer is True:
        writer = {}
    out: list[str] = []
    rtypes, wtypes = _types(reader), _types(writer)
    if rtypes is not None:
        widened = set(rtypes) | ({"integer"} if "number" in rtypes else set())
        if wtypes is None or not wtypes <= widened:
            out.append(f"{path}/type: {sorted(wtypes) if wtypes else 'any'} narrowed to {sorted(rtypes)} "
                       "(TYPE_NARROWED)")
            return out
    out += _bounds(reader, writer, path)
    if "enum" in reader:
        missing = [v for v in writer.get("enum", [None]) if v not in reader["enum"]] if "enum" in writer else ["*"]
        if missing:
            out.append(f"{path}/enum: values {missing} are no longer accepted (ENUM_ARRAY_NARROWED)")
    if "items" in reader or "items" in writer:
        out += _check(reader.get("items", {}), writer.get("items", {}), f"{path}/items")
    if any(k in reader or k in writer for k in ("properties", "required", "additionalProperties")):
        out += _object(reader, writer, path)
    return out


def _bounds(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    out = []
    for key in _MAX_BOUNDS:
        if key in reader and key not in writer:
            out.append(f"{path}/{key}: added (MAX_ADDED)")
        elif key in reader and reader[key] < writer[key]:
            out.append(f"{path}/{key}: decreased from {writer[key]} to {reader[key]} (MAX_DECREASED)")
    for key in _MIN_BOUNDS:
        if key in reader and key not in writer:
            out.append(f"{path}/{key}: added (MIN_ADDED)")
        elif key in reader and reader[key] > writer[key]:
            out.append(f"{path}/{key}: increased from {writer[key]} to {reader[key]} (MIN_INCREASED)")
    return out


def _object(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    out = []
    rprops: dict[str, Any] = reader.get("properties", {})
    wprops: dict[str, Any] = writer.get("properties", {})
    if _open(writer) and not _open(reader):
        out.append(f"{path}/additionalProperties: the reader closes an open content model "
                   "(ADDITIONAL_PROPERTIES_REMOVED)")
    for name, wprop in wprops.items():
        if name in rprops:
            out += _check(rprops[name], wprop, f"{path}/properties/{name}")
        elif not _open(reader):
            out.append(f"{path}/properties/{name}: removed from a closed content model "
                       "(PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL)")
        elif isinstance(reader.get("additionalProperties"), dict):
            out += _check(reader["additionalProperties"], wprop, f"{path}/properties/{name}")
    for name, rprop in rprops.items():
        if name in wprops:
            continue
        if _open(writer) and not _empty(rprop):
            extra = writer.get("additionalProperties", True)
            if extra is True or _check(rprop, extra, path):
                out.append(f"{path}/properties/{name}: added to an open content model "
                           "(PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL)")
    wrequired = set(writer.get("required", ()))
    for name in reader.get("required", ()):
        if name not in wrequired and not (isinstance(rprops.get(name), dict) and "default" in rprops[name]):
            out.append(f"{path}/required/{name}: a required property was added (REQUIRED_ATTRIBUTE_ADDED)")
    return out


def json_problems(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """Why ``reader`` does not accept every document ``writer`` does (empty: it does)."""
    return _check(reader.schema, writer.schema, "#")
