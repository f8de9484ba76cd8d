"""``.proto`` text to a ``FileDescriptorProto`` (what ``?format=serialized`` serves, base64),
built from proto-schema-parser's syntax tree, so clients that want the descriptor form
(confluent-kafka's Python ProtobufDeserializer) read schemas other clients registered as
text. Messages, nested types, enums, fields with their labels, maps (as map-entry
messages), oneofs and imports are carried; options and services are not."""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast

from streamkit.schemas.protobuf import _SCALARS, _parse, _resolve, _walk_names

__all__ = ["proto_to_descriptor", "serialized"]

_F = descriptor_pb2.FieldDescriptorProto


def serialized(text: str, name: str = "schema.proto") -> str:
    """The base64 ``FileDescriptorProto`` of ``text`` (text already in that form is kept)."""
    try:
        descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text.strip(), validate=True))
        return text.strip()
    except Exception:  # not base64 of a descriptor: .proto text
        pass
    return base64.standard_b64encode(proto_to_descriptor(text, name).SerializeToString()).decode()


def proto_to_descriptor(text: str, name: str = "schema.proto") -> descriptor_pb2.FileDescriptorProto:
    parsed = _parse(text)
    file = descriptor_pb2.FileDescriptorProto(name=name, syntax=parsed.syntax or "proto2")
    package = next((e.name for e in parsed.file_elements if isinstance(e, ast.Package)), "")
    if package:
        file.package = package
    file.dependency.extend(e.name for e in parsed.file_elements if isinstance(e, ast.Import))
    messages: set[str] = set()
    enums: set[str] = set()
    scope = f".{package}" if package else ""
    _walk_names(parsed.file_elements, scope, messages, enums)
    for element in parsed.file_elements:
        if isinstance(element, ast.Message):
            _message(element, scope, file.message_type.add(), messages, enums)
        elif isinstance(element, ast.Enum):
            _enum(element, file.enum_type.add())
    return file


def _enum(element: Any, out: descriptor_pb2.EnumDescriptorProto) -> None:
    out.name = element.name
    for value in element.elements:
        if isinstance(value, ast.EnumValue):
            out.value.add(name=value.name, number=value.number)


def _type(type_name: str, scope: str, messages: set[str], enums: set[str]) -> tuple[int, str]:
    if type_name in _SCALARS:
        return getattr(_F, f"TYPE_{type_name.upper()}"), ""
    kind, full = _resolve(type_name, scope, messages, enums)
    if kind == "message" and full not in messages and "." in type_name.lstrip("."):
        full = "." + type_name.lstrip(".")  # a type from an imported file, named in full
    return (_F.TYPE_ENUM if kind == "enum" else _F.TYPE_MESSAGE), full


def _message(element: Any, scope: str, out: descriptor_pb2.DescriptorProto, messages: set[str],
             enums: set[str]) -> None:
    out.name = element.name
    full = f"{scope}.{element.name}"
    for item in element.elements:
        if isinstance(item, ast.Field):
            _field(item, full, out.field.add(), messages, enums)
        elif isinstance(item, ast.MapField):
            entry_name = "".join(part[:1].upper() + part[1:] for part in item.name.split("_")) + "Entry"
            entry = out.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            for number, (field_name, type_name) in enumerate((("key", item.key_type), ("value", item.value_type)), 1):
                kind, type_full = _type(type_name, full, messages, enums)
                entry_field = entry.field.add(name=field_name, number=number, label=_F.LABEL_OPTIONAL, type=kind)
                if type_full:
                    entry_field.type_name = type_full
            out.field.add(name=item.name, number=item.number, label=_F.LABEL_REPEATED, type=_F.TYPE_MESSAGE,
                          type_name=f"{full}.{entry_name}")
        elif isinstance(item, ast.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=item.name)
            for sub in item.elements:
                if isinstance(sub, ast.Field):
                    field = out.field.add()
                    _field(sub, full, field, messages, enums)
                    field.oneof_index = index
        elif isinstance(item, ast.Message):
            _message(item, full, out.nested_type.add(), messages, enums)
        elif isinstance(item, ast.Enum):
            _enum(item, out.enum_type.add())


def _field(item: Any, scope: str, out: descriptor_pb2.FieldDescriptorProto, messages: set[str],
           enums: set[str]) -> None:
    kind, type_full = _type(item.type, scope, messages, enums)
    label = item.cardinality.value if item.cardinality is not None else "OPTIONAL"
    out.name = item.name
    out.number = item.number
    out.label = {"REPEATED": _F.LABEL_REPEATED, "REQUIRED": _F.LABEL_REQUIRED}.get(label, _F.LABEL_OPTIONAL)
    out.type = kind
    if type_full:
        out.type_name = type_full
