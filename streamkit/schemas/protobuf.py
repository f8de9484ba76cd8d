"""Protobuf schemas: ``.proto`` text parsed by ``proto-schema-parser``, and the wire
compatibility rules Confluent's ``ProtobufSchema`` diff applies. Messages are compared by
their full name and fields by number (the wire identifies a field by its number):

- a message the writer has and the reader lacks: MESSAGE_REMOVED;
- a field number whose kind changes (scalar, message, enum, map), or whose scalar type
  leaves its wire-compatible group (int32/uint32/int64/uint64/bool; sint32/sint64;
  fixed32/sfixed32; fixed64/sfixed64; string/bytes): FIELD_KIND_CHANGED /
  FIELD_SCALAR_KIND_CHANGED; a message or enum type changed: FIELD_NAMED_TYPE_CHANGED;
- a required (proto2) field added or removed: REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED;
- a field moved into an existing oneof, or several fields into a new one:
  FIELD_MOVED_TO_EXISTING_ONEOF / MULTIPLE_FIELDS_MOVED_TO_ONEOF.

Adding or removing optional fields is compatible, as in Confluent's rules: the reader skips
unknown numbers and defaults missing ones.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

__all__ = ["ProtobufSchema", "parse_protobuf", "protobuf_problems"]

_SCALARS = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "bool", "string", "bytes"}
_GROUPS = [{"int32", "uint32", "int64", "uint64", "bool"}, {"sint32", "sint64"}, {"fixed32", "sfixed32"},
           {"fixed64", "sfixed64"}, {"string", "bytes"}]


@dataclass
class _Field:
    name: str
    number: int
    type: str  # a scalar name, a resolved message/enum name, or "map<K,V>"
    kind: str  # scalar | message | enum | map
    label: str  # optional | repeated | required
    oneof: str | None


@dataclass
class _Message:
    fields: dict[int, _Field] = field(default_factory=dict)


class ProtobufSchema:
    def __init__(self, text: str, package: str, messages: dict[str, _Message], canonical: str) -> None:
        self.text = text
        self.package = package
        self.messages = messages
        self.canonical = canonical


class _Raise(ErrorListener):  # type: ignore[misc]
    """ANTLR recovers from syntax errors and prints them; a registry refuses the schema."""

    def syntaxError(self, _recognizer: Any, _symbol: Any, line: int, column: int, msg: str, _e: Any) -> None:
        raise ValueError(f"line {line}:{column}: {msg}")


def _strict(target: Any) -> None:
    target.removeErrorListeners()
    target.addErrorListener(_Raise())


def _parse(text: str) -> Any:
    return Parser(setup_lexer=_strict, setup_parser=_strict).parse(text)


def _walk_names(elements: list[Any], prefix: str, messages: set[str], enums: set[str]) -> None:
    for element in elements:
        if isinstance(element, ast.Message):
            name = f"{prefix}.{element.name}"
            messages.add(name)
            _walk_names(element.elements, name, messages, enums)
        elif isinstance(element, ast.Enum):
            enums.add(f"{prefix}.{element.name}")


def _resolve(type_name: str, scope: str, messages: set[str], enums: set[str]) -> tuple[str, str]:
    """A field type's kind and full name, looked up from the innermost scope outwards, as
    protoc does (``scope`` is the enclosing message's full name, e.g. ``.pkg.Outer``)."""
    if type_name in _SCALARS:
        return "scalar", type_name
    if type_name.startswith("."):
        candidates = [type_name]
    else:
        parts = scope.split(".")
        candidates = [".".join([*parts[:i], type_name]) for i in range(len(parts), 0, -1)]
    for candidate in candidates:
        if candidate in messages:
            return "message", candidate
        if candidate in enums:
            return "enum", candidate
    return "message", candidates[-1]  # defined in a file not given as a reference


def parse_protobuf(text: str, references: list[str] = ()) -> ProtobufSchema:  # type: ignore[assignment]
    """Parse ``.proto`` text, or a base64-encoded ``FileDescriptorProto`` (what
    confluent-kafka's Python ``ProtobufSerializer`` registers)."""
    described = _from_descriptor(text)
    if described is not None:
        return described
    try:
        parsed = _parse(text)
        deps = [_parse(ref) for ref in references]
    except Exception as exc:  # a syntax error, or one of the parser's own
        raise ValueError(f"not a valid .proto: {exc}") from None
    if not any(isinstance(e, (ast.Message, ast.Enum)) for e in parsed.file_elements):
        raise ValueError("a .proto schema defines at least one message or enum")
    messages: set[str] = set()
    enums: set[str] = set()
    package = ""
    for i, file in enumerate([*deps, parsed]):
        pkg = next((e.name for e in file.file_elements if isinstance(e, ast.Package)), "")
        if i == len(deps):
            package = pkg
        _walk_names(file.file_elements, f".{pkg}" if pkg else "", messages, enums)
    out: dict[str, _Message] = {}
    _collect(parsed.file_elements, f".{package}" if package else "", messages, enums, out)
    canonical = "\n".join(line.rstrip() for line in text.strip().splitlines())
    return ProtobufSchema(text, package, out, canonical)


def _from_descriptor(text: str) -> ProtobufSchema | None:
    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text.strip(), validate=True))
    except (binascii.Error, ValueError, Exception):  # protobuf's DecodeError is an Exception
        return None
    if not file.message_type and not file.enum_type:
        return None
    out: dict[str, _Message] = {}
    _collect_descriptors(list(file.message_type), f".{file.package}" if file.package else "", out)
    return ProtobufSchema(text, file.package, out, text.strip())


_TYPE_NAMES = {number: name.removeprefix("TYPE_").lower()
               for name, number in descriptor_pb2.FieldDescriptorProto.Type.items()}


def _collect_descriptors(messages: list[Any], scope: str, out: dict[str, _Message]) -> None:
    for message_proto in messages:
        name = f"{scope}.{message_proto.name}"
        entries = {f"{name}.{n.name}": n for n in message_proto.nested_type if n.options.map_entry}
        message = _Message()
        out[name] = message
        for f in message_proto.field:
            type_name = _TYPE_NAMES[f.type]
            if f.type_name in entries:
                key, value = entries[f.type_name].field
                value_type = value.type_name or _TYPE_NAMES[value.type]
                kind, type_name = "map", f"map<{_TYPE_NAMES[key.type]},{value_type}>"
            elif type_name in ("message", "group"):
                kind, type_name = "message", f.type_name
            elif type_name == "enum":
                kind, type_name = "enum", f.type_name
            else:
                kind = "scalar"
            label = {3: "repeated", 2: "required"}.get(f.label, "optional")
            oneof = (message_proto.oneof_decl[f.oneof_index].name
                     if f.HasField("oneof_index") and not f.proto3_optional else None)
            message.fields[f.number] = _Field(f.name, f.number, type_name, kind, label, oneof)
        _collect_descriptors([n for n in message_proto.nested_type if not n.options.map_entry], name, out)


def _collect(elements: list[Any], scope: str, messages: set[str], enums: set[str], out: dict[str, _Message]) -> None:
    for element in elements:
        if not isinstance(element, ast.Message):
            continue
        name = f"{scope}.{element.name}"
        message = _Message()
        out[name] = message
        for item in element.elements:
            if isinstance(item, ast.Field):
                message.fields[item.number] = _field(item, name, None, messages, enums)
            elif isinstance(item, ast.MapField):
                message.fields[item.number] = _Field(item.name, item.number, f"map<{item.key_type},{item.value_type}>",
                                                     "map", "repeated", None)
            elif isinstance(item, ast.OneOf):
                for sub in item.elements:
                    if isinstance(sub, ast.Field):
                        message.fields[sub.number] = _field(sub, name, item.name, messages, enums)
        _collect(element.elements, name, messages, enums, out)


def _field(item: Any, scope: str, oneof: str | None, messages: set[str], enums: set[str]) -> _Field:
    kind, type_name = _resolve(item.type, scope, messages, enums)
    label = item.cardinality.value.lower() if item.cardinality is not None else "optional"
    return _Field(item.name, item.number, type_name, kind, label, oneof)


def _same_group(a: str, b: str) -> bool:
    return a == b or any(a in g and b in g for g in _GROUPS)


def protobuf_problems(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    """Why ``reader`` cannot read what ``writer`` wrote (empty: it can)."""
    out: list[str] = []
    for name, wmsg in writer.messages.items():
        rmsg = reader.messages.get(name)
        if rmsg is None:
            out.append(f"{name}: message removed (MESSAGE_REMOVED)")
            continue
        moved_to_new: dict[str, int] = {}
        for number, wf in wmsg.fields.items():
            rf = rmsg.fields.get(number)
            where = f"{name}.{wf.name} = {number}"
            if rf is None:
                if wf.label == "required":
                    out.append(f"{where}: required field removed (REQUIRED_FIELD_REMOVED)")
                continue
            if rf.kind != wf.kind:
                out.append(f"{where}: field kind changed from {wf.kind} to {rf.kind} (FIELD_KIND_CHANGED)")
            elif rf.kind == "scalar" and not _same_group(rf.type, wf.type):
                out.append(f"{where}: scalar type changed from {wf.type} to {rf.type} (FIELD_SCALAR_KIND_CHANGED)")
            elif rf.kind != "scalar" and rf.type != wf.type:
                out.append(f"{where}: type changed from {wf.type} to {rf.type} (FIELD_NAMED_TYPE_CHANGED)")
            if wf.oneof is None and rf.oneof is not None:
                existing = any(f.oneof == rf.oneof for f in wmsg.fields.values())
                if existing:
                    out.append(f"{where}: moved to existing oneof {rf.oneof} (FIELD_MOVED_TO_EXISTING_ONEOF)")
                else:
                    moved_to_new[rf.oneof] = moved_to_new.get(rf.oneof, 0) + 1
        for oneof, count in moved_to_new.items():
            if count > 1:
                out.append(f"{name}: {count} fields moved to the new oneof {oneof} (MULTIPLE_FIELDS_MOVED_TO_ONEOF)")
        for number, rf in rmsg.fields.items():
            if number not in wmsg.fields and rf.label == "required":
                out.append(f"{name}.{rf.name} = {number}: required field added (REQUIRED_FIELD_ADDED)")
    return out
