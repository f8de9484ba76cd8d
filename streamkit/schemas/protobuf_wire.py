"""Protobuf records in Confluent's wire format, and message classes built from registered
schemas.

A Protobuf record value is: magic byte 0, the schema id as 4 bytes big-endian, the
*message-index array*, then the message's own encoding. The index array says which message
of the schema's file the record is: the path of positions from the file's top-level
messages down through nested ones, written as a zigzag varint count followed by zigzag
varint indexes; the common case ``[0]`` (the file's first message) is the single byte 0.

``ProtobufTypes`` turns a schema id into message classes: the schema (``.proto`` text, or a
base64 ``FileDescriptorProto`` as confluent-kafka's Python serializer registers) and the
schemas it references are built into a descriptor pool of their own; Protobuf's
well-known types (``google/protobuf/*.proto``) come from the runtime's default pool.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from google.protobuf import (
    any_pb2,  # noqa: F401  (imports fill the default pool with the well-known types)
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,  # noqa: F401
    empty_pb2,  # noqa: F401
    message_factory,
    struct_pb2,  # noqa: F401
    timestamp_pb2,  # noqa: F401
    wrappers_pb2,  # noqa: F401
)
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import Message

from streamkit.schemas.client import RegistryClient, RegistryClientError
from streamkit.schemas.protobuf_descriptor import proto_to_descriptor

__all__ = ["COMMON_FILES", "ProtobufTypes", "build_file", "decode_indexes", "encode_indexes", "file_descriptor_proto", "message_at", "message_indexes"]


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _varint(value: int, out: bytearray) -> None:
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_indexes(indexes: list[int]) -> bytes:
    """The message-index array as written after the schema id."""
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    for value in (len(indexes), *indexes):
        _varint(_zigzag(value), out)
    return bytes(out)


def _read_varint(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if offset >= len(data) or shift > 63:
            raise ValueError("the message-index array is cut short")
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), offset
        shift += 7


def decode_indexes(data: bytes | memoryview, offset: int) -> tuple[list[int], int]:
    """The message-index array starting at ``offset``, and the offset after it."""
    count, offset = _read_varint(data, offset)
    if count == 0:
        return [0], offset
    if not 0 < count <= 1000:
        raise ValueError(f"a message-index array of {count} entries")
    out = []
    for _ in range(count):
        index, offset = _read_varint(data, offset)
        out.append(index)
    return out, offset


def message_indexes(descriptor: Descriptor) -> list[int]:
    """Where ``descriptor`` sits in its file: positions from the top level down."""
    path: list[int] = []
    current = descriptor
    while current.containing_type is not None:
        parent = current.containing_type
        path.insert(0, list(parent.nested_types).index(current))
        current = parent
    path.insert(0, list(current.file.message_types_by_name.values()).index(current))
    return path


def file_descriptor_proto(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    """A registered Protobuf schema as a ``FileDescriptorProto`` named ``name``."""
    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text.strip(), validate=True))
    except Exception:  # not base64 of a descriptor: .proto text
        file = proto_to_descriptor(text, name)
    else:
        file.name = file.name or name
    return file


def message_at(file: FileDescriptor, indexes: list[int]) -> Descriptor:
    """The message ``indexes`` (a message-index array) names in ``file`` (ValueError: none)."""
    try:
        descriptor: Descriptor = list(file.message_types_by_name.values())[indexes[0]]
        for index in indexes[1:]:
            descriptor = descriptor.nested_types[index]
    except IndexError:
        raise ValueError(f"the schema has no message at index {indexes}") from None
    return descriptor


def build_file(files: list[descriptor_pb2.FileDescriptorProto]) -> FileDescriptor:
    """The last of ``files`` built in a pool of its own, after the others (its references, in
    dependency order) and the well-known types any of them imports."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    try:
        for file in files:
            _add(pool, file, added)
        return pool.FindFileByName(files[-1].name)
    except (TypeError, KeyError) as exc:  # a descriptor the pool refuses
        raise ValueError(f"{files[-1].name} cannot be built: {exc}") from None


def _common_file(name: str, package: str, message: str, fields: list[tuple[str, int]]) -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    out = file.message_type.add(name=message)
    for number, (field_name, kind) in enumerate(fields, 1):
        out.field.add(name=field_name, number=number, type=kind, label=_F.LABEL_OPTIONAL)
    return file


_F = descriptor_pb2.FieldDescriptorProto
# The types Confluent's clients know without a reference, besides google/protobuf/*: the
# logical types of its ProtobufConverter.
COMMON_FILES = {
    "confluent/type/decimal.proto": _common_file("confluent/type/decimal.proto", "confluent.type", "Decimal", [
        ("value", _F.TYPE_BYTES), ("precision", _F.TYPE_UINT32), ("scale", _F.TYPE_INT32)]),
    "google/type/date.proto": _common_file("google/type/date.proto", "google.type", "Date", [
        ("year", _F.TYPE_INT32), ("month", _F.TYPE_INT32), ("day", _F.TYPE_INT32)]),
    "google/type/timeofday.proto": _common_file("google/type/timeofday.proto", "google.type", "TimeOfDay", [
        ("hours", _F.TYPE_INT32), ("minutes", _F.TYPE_INT32), ("seconds", _F.TYPE_INT32), ("nanos", _F.TYPE_INT32)]),
}


def _known(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    try:
        known = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return COMMON_FILES.get(name)
    proto = descriptor_pb2.FileDescriptorProto()
    known.CopyToProto(proto)
    return proto


def _add(pool: descriptor_pool.DescriptorPool, file: descriptor_pb2.FileDescriptorProto, added: set[str]) -> None:
    for dependency in file.dependency:
        if dependency not in added:
            proto = _known(dependency)
            if proto is None:
                raise ValueError(f"{file.name} imports {dependency}, which is neither a reference "
                                 "nor a well-known type")
            _add(pool, proto, added)
    if file.name not in added:
        pool.Add(file)
        added.add(file.name)


class ProtobufTypes:
    """Message classes for the schemas a registry holds, built once per schema id."""

    def __init__(self, client: RegistryClient) -> None:
        self.client = client
        self._files: dict[int, FileDescriptor] = {}
        self._lock = threading.Lock()

    def message_class(self, schema_id: int, indexes: list[int]) -> type[Message]:
        """The class of the message ``indexes`` names in schema ``schema_id`` (ValueError:
        the schema cannot be had or built, or has no such message)."""
        with self._lock:
            file = self._files.get(schema_id)
            if file is None:
                file = self._build(schema_id)
                self._files[schema_id] = file
        message_class: type[Message] = message_factory.GetMessageClass(message_at(file, indexes))
        return message_class

    def _build(self, schema_id: int) -> FileDescriptor:
        try:
            body = self.client.schema_by_id(schema_id)
        except RegistryClientError as exc:
            raise ValueError(f"schema {schema_id}: {exc}") from None
        if body.get("schemaType", "AVRO") != "PROTOBUF":
            raise ValueError(f"schema {schema_id} is {body.get('schemaType', 'AVRO')}, not PROTOBUF")
        files: list[descriptor_pb2.FileDescriptorProto] = []
        self._references(body.get("references") or [], files)
        files.append(file_descriptor_proto(body["schema"], f"schema-{schema_id}.proto"))
        return build_file(files)

    def _references(self, references: list[dict[str, Any]], out: list[descriptor_pb2.FileDescriptorProto]) -> None:
        for reference in references:
            if any(f.name == reference["name"] for f in out):
                continue
            try:
                version = self.client.version_body(reference["subject"], str(reference["version"]))
            except RegistryClientError as exc:
                raise ValueError(f"reference {reference['name']}: {exc}") from None
            self._references(version.get("references") or [], out)
            out.append(file_descriptor_proto(version["schema"], reference["name"]))
