"""Compatibility levels (Confluent's names) and the check of a new schema against a
subject's earlier ones, dispatched to each format's rules:

- BACKWARD: the new schema reads data written with the latest one;
- FORWARD: the latest schema reads data written with the new one;
- FULL: both; the ``_TRANSITIVE`` forms check against every earlier version, not just the
  latest; NONE checks nothing.
"""

from __future__ import annotations

from typing import Any

from streamkit.schemas.avro import AvroSchema, avro_problems, parse_avro
from streamkit.schemas.jsonschema_format import JsonSchema, json_problems, parse_json_schema
from streamkit.schemas.protobuf import ProtobufSchema, parse_protobuf, protobuf_problems

__all__ = ["LEVELS", "SCHEMA_TYPES", "ParsedSchema", "check_compatibility", "parse_schema", "reader_problems"]

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")

ParsedSchema = AvroSchema | JsonSchema | ProtobufSchema


def parse_schema(schema_type: str, text: str, references: list[str], normalize: bool = False) -> ParsedSchema:
    """Parse ``text`` as ``schema_type`` after its references' texts (dependencies first);
    ValueError says why it is not a valid schema."""
    if schema_type == "AVRO":
        return parse_avro(text, references, normalize)
    if schema_type == "JSON":
        return parse_json_schema(text, normalize)
    if schema_type == "PROTOBUF":
        return parse_protobuf(text, references)
    raise ValueError(f"unknown schema type {schema_type}")


def reader_problems(reader: Any, writer: Any) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    if type(reader) is not type(writer):
        return ["the schema type changed (TYPE_MISMATCH)"]
    if isinstance(reader, AvroSchema):
        return avro_problems(reader, writer)
    if isinstance(reader, JsonSchema):
        return json_problems(reader, writer)
    return protobuf_problems(reader, writer)


def check_compatibility(level: str, new: ParsedSchema, earlier: list[tuple[int, ParsedSchema]]) -> list[str]:
    """The problems that make ``new`` break ``level`` against ``earlier`` (version, schema)
    pairs, oldest first; empty: compatible."""
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    direction = level.removesuffix("_TRANSITIVE")
    out: list[str] = []
    for version, old in reversed(against):
        found: list[str] = []
        if direction in ("BACKWARD", "FULL"):
            found += reader_problems(new, old)
        if direction in ("FORWARD", "FULL"):
            found += reader_problems(old, new)
        out += [f"{{oldSchemaVersion: {version}}} {p}" for p in found]
    return out
