"""Avro schemas: parsing (fastavro) and Avro's schema resolution rules, as the Avro spec
and Java's ``SchemaCompatibility`` state them. ``problems(reader, writer)`` lists why data
written with ``writer`` cannot be read with ``reader`` (empty: it can):

- primitives match, or the writer's promotes to the reader's (int to long, float or
  double; long to float or double; float to double; string and bytes either way);
- records: each reader field is a writer field (by name or alias) of a readable type, or
  has a default; named types' unqualified names match (or a reader alias does);
- enums: every writer symbol is a reader symbol, unless the reader has a default;
- fixed: same size; arrays and maps: their items and values resolve;
- unions: every writer branch resolves to the reader (a union: to one of its branches).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

__all__ = ["AvroSchema", "avro_problems", "parse_avro"]

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class AvroSchema:
    """A parsed Avro schema: ``schema`` as fastavro expands names (named types defined
    here and in its references are in ``names``), ``canonical`` the stored text."""

    def __init__(self, text: str, schema: Any, names: dict[str, Any], canonical: str) -> None:
        self.text = text
        self.schema = schema
        self.names = names
        self.canonical = canonical


def parse_avro(text: str, references: list[str] = (), normalize: bool = False) -> AvroSchema:  # type: ignore[assignment]
    """Parse ``text`` after the referenced schemas' texts (in dependency order). Raises
    ValueError with the parser's reason."""
    named: dict[str, Any] = {}
    try:
        for ref in references:
            fastavro.parse_schema(json.loads(ref), named_schemas=named)
        raw = json.loads(text)
        _check_records(raw)
        parsed = fastavro.parse_schema(raw, named_schemas=named)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    except (SchemaParseException, UnknownType, TypeError, AttributeError, KeyError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    canonical = json.dumps(raw, separators=(",", ":"), sort_keys=normalize)
    return AvroSchema(text, parsed, named, canonical)


def _check_records(schema: Any) -> None:
    """What Java's parser refuses and fastavro lets through: a record without ``fields``
    and a field name used twice."""
    if isinstance(schema, list):
        for branch in schema:
            _check_records(branch)
    if not isinstance(schema, dict):
        return
    if schema.get("type") in ("record", "error"):
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise ValueError(f"record {schema.get('name')} has no fields")
        names = [f.get("name") for f in fields if isinstance(f, dict)]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"record {schema.get('name')}: duplicate field {name}")
        for f in fields:
            if isinstance(f, dict):
                _check_records(f.get("type"))
    for key in ("items", "values"):
        if key in schema:
            _check_records(schema[key])


def _type_name(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema["type"])
    return str(schema)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Checker:
    def __init__(self, reader_names: Mapping[str, Any], writer_names: Mapping[str, Any]) -> None:
        self.reader_names = reader_names
        self.writer_names = writer_names
        self.assumed: set[tuple[int, int]] = set()  # recursive types: a pair met again is assumed fine

    def resolve(self, schema: Any, names: Mapping[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return names.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES and "logicalType" not in schema:
            return schema["type"]
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES:
            return schema
        return schema

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self.resolve(reader, self.reader_names)
        writer = self.resolve(writer, self.writer_names)
        pair = (id(reader), id(writer))
        if isinstance(reader, dict) and isinstance(writer, dict) and "name" in reader:
            if pair in self.assumed:
                return []
            self.assumed.add(pair)
        rtype, wtype = _type_name(reader), _type_name(writer)
        if wtype == "union":
            out: list[str] = []
            for i, branch in enumerate(writer):
                out += self.check(reader, branch, f"{path}/{i}")
            return out
        if rtype == "union":
            for branch in reader:
                if not self.check(branch, writer, path):
                    return []
            return [f"{path}: reader union lacks a branch for the writer's type {wtype} (TYPE_MISMATCH)"]
        if rtype in _PRIMITIVES or wtype in _PRIMITIVES:
            if rtype == wtype or rtype in _PROMOTIONS.get(wtype, ()):
                return []
            return [f"{path}: reader type {rtype} is not compatible with writer type {wtype} (TYPE_MISMATCH)"]
        if rtype != wtype:
            return [f"{path}: reader type {rtype} is not compatible with writer type {wtype} (TYPE_MISMATCH)"]
        if rtype in ("record", "enum", "fixed") and not self._names_match(reader, writer):
            return [f"{path}: expected name {_short(writer['name'])}, found {_short(reader['name'])} (NAME_MISMATCH)"]
        if rtype == "record":
            return self._record(reader, writer, path)
        if rtype == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and reader.get("default") is None:
                return [f"{path}/symbols: reader enum {_short(reader['name'])} lacks writer symbols {missing} "
                        "(MISSING_ENUM_SYMBOLS)"]
            return []
        if rtype == "fixed":
            if reader["size"] != writer["size"]:
                return [f"{path}/size: expected {writer['size']}, found {reader['size']} (FIXED_SIZE_MISMATCH)"]
            return []
        if rtype == "array":
            return self.check(reader["items"], writer["items"], f"{path}/items")
        if rtype == "map":
            return self.check(reader["values"], writer["values"], f"{path}/values")
        return []

    @staticmethod
    def _names_match(reader: Mapping[str, Any], writer: Mapping[str, Any]) -> bool:
        wname = _short(writer["name"])
        return _short(reader["name"]) == wname or any(_short(a) == wname for a in reader.get("aliases", ()))

    def _record(self, reader: Mapping[str, Any], writer: Mapping[str, Any], path: str) -> list[str]:
        written = {f["name"]: f for f in writer["fields"]}
        out: list[str] = []
        for i, field in enumerate(reader["fields"]):
            source = written.get(field["name"])
            if source is None:
                source = next((written[a] for a in field.get("aliases", ()) if a in written), None)
            if source is None:
                if "default" not in field:
                    out.append(f"{path}/fields/{i}: reader field '{field['name']}' has no default value and is "
                               "missing in the writer (READER_FIELD_MISSING_DEFAULT_VALUE)")
                continue
            out += self.check(field["type"], source["type"], f"{path}/fields/{i}/type")
        return out


def avro_problems(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why ``reader`` cannot read what ``writer`` wrote (empty: it can)."""
    return _Checker(reader.names, writer.names).check(reader.schema, writer.schema, "")
