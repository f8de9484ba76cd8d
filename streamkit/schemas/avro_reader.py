"""A decoder generated for one flat Avro record schema: Python source written for the
schema's fields, compiled once, reading a record's bytes with no per-field dispatch.

fastavro reads any schema by walking it for every record (a call per field, each looking
up how to read its type) from a file object. For a record of primitive fields that walk is
most of the cost; a function that reads exactly those fields in order from the bytes,
with the common one-byte varints inline, does the same work in fewer Python calls.

What is generated covers a record whose fields are ``null``, ``boolean``, ``int``,
``long``, ``float``, ``double``, ``bytes``, ``string`` (no logical types), or a union of
``null`` and one of those. ``compile_reader`` returns None for any other schema, and the
caller keeps fastavro. The generated reader is strict where fastavro may be lenient (a
varint of more than 10 bytes, a length past the end, a boolean byte other than 0 or 1, a
bytes field of anything but ``bytes``): it raises, and the caller decodes that record with
fastavro again, so both give the same result on every input. Trailing bytes after the
record are ignored, as fastavro's ``schemaless_reader`` ignores them.

Encoding (Avro 1.11 specification, "Binary Encoding"): ``int`` and ``long`` are zig-zag
varints (7 bits a byte, least significant group first, high bit set on all but the last);
``float`` and ``double`` 4 and 8 bytes little-endian IEEE 754; ``bytes`` and ``string`` a
``long`` length then the bytes (UTF-8 for a string); ``boolean`` one byte 0 or 1; a union
a ``long`` branch index then the branch's value; ``null`` nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

__all__ = ["compile_reader"]

_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_MAX_VARINT = 10  # bytes of a 64-bit varint


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint of more than one byte at ``pos``: (value, position after it). The
    first four bytes unrolled (up to 28 bits: lengths, counts, most ints), then a loop."""
    n = data[pos] & 0x7F
    b = data[pos + 1]
    if b < 0x80:
        return ((n | b << 7) >> 1) ^ -(n & 1), pos + 2
    n |= (b & 0x7F) << 7
    b = data[pos + 2]
    if b < 0x80:
        return ((n | b << 14) >> 1) ^ -(n & 1), pos + 3
    n |= (b & 0x7F) << 14
    b = data[pos + 3]
    if b < 0x80:
        return ((n | b << 21) >> 1) ^ -(n & 1), pos + 4
    n |= (b & 0x7F) << 21
    shift = 28
    pos += 4
    end = pos + _MAX_VARINT - 4
    while True:
        if pos == end:
            raise ValueError("varint longer than 10 bytes")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            if n >> 64:  # more than 64 bits: fastavro's wraps, so it decides
                raise ValueError("varint out of the 64-bit range")
            return (n >> 1) ^ -(n & 1), pos
        shift += 7


def _primitive(field_type: Any) -> str | None:
    if isinstance(field_type, dict):
        if set(field_type) != {"type"}:  # logical types, or a named/complex type
            return None
        field_type = field_type["type"]
    return field_type if isinstance(field_type, str) and field_type in _PRIMITIVES else None


def _read_long(target: str, indent: str) -> list[str]:
    # the one-byte case inline (lengths, small numbers, union branches), longer ones called
    return [f"{indent}n = data[pos]",
            f"{indent}if n < 128:",
            f"{indent}    pos += 1",
            f"{indent}    {target} = (n >> 1) ^ -(n & 1)",
            f"{indent}else:",
            f"{indent}    {target}, pos = _varint(data, pos)"]


def _read(kind: str, target: str, indent: str) -> list[str]:
    """Source lines reading one value of a primitive type into ``target``."""
    if kind == "null":
        return [f"{indent}{target} = None"]
    if kind in ("int", "long"):
        return _read_long(target, indent)
    if kind == "boolean":
        return [f"{indent}n = data[pos]",
                f"{indent}if n > 1:",
                f"{indent}    raise ValueError('boolean byte not 0 or 1')",
                f"{indent}{target} = n == 1",
                f"{indent}pos += 1"]
    if kind in ("float", "double"):
        unpack, size = ("_float", 4) if kind == "float" else ("_double", 8)
        return [f"{indent}{target} = {unpack}(data, pos)[0]",
                f"{indent}pos += {size}"]
    # bytes or string: a length, then that many bytes
    lines = _read_long("size", indent)
    lines += [f"{indent}end = pos + size",
              f"{indent}if size < 0 or end > len(data):",
              f"{indent}    raise ValueError('length past the end of the record')"]
    value = "data[pos:end].decode()" if kind == "string" else "data[pos:end]"
    return [*lines, f"{indent}{target} = {value}", f"{indent}pos = end"]


def _field(field_type: Any, target: str) -> list[str] | None:
    kind = _primitive(field_type)
    if kind is not None:
        return _read(kind, target, "    ")
    if not isinstance(field_type, list) or len(field_type) != 2 or "null" not in field_type:
        return None
    other = _primitive(field_type[1 - field_type.index("null")])
    if other is None or other == "null":
        return None
    null_branch = field_type.index("null")
    lines = _read_long("branch", "    ")
    lines += [f"    if branch == {null_branch}:",
              f"        {target} = None",
              f"    elif branch == {1 - null_branch}:",
              *_read(other, target, "        "),
              "    else:",
              "        raise ValueError('union branch out of range')"]
    return lines


def compile_reader(schema: Any, build: Callable[[dict[str, Any]], Any], *, prefix: bytes = b"",
                   otherwise: Callable[[bytes], Any]) -> Callable[[bytes], Any] | None:
    """A function reading a record of ``schema`` (as written, not fastavro's parsed form)
    after ``prefix`` (the wire format's header) and returning ``build(dict of its
    fields)``; data of another prefix, or not ``bytes``, goes to ``otherwise``. None unless
    the schema is a record of primitive fields and optional ones (see the module's
    docstring)."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    body: list[str] = []
    names: list[str] = []
    for i, field in enumerate(schema.get("fields", ())):
        lines = _field(field.get("type"), f"v{i}")
        if lines is None:
            return None
        body += lines
        names.append(field["name"])
    values = ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names))
    source = "\n".join([
        "def read(data):",
        # a bytes field's slice must be bytes, not a bytearray or memoryview
        f"    if data[:{len(prefix)}] != prefix or type(data) is not bytes:",
        "        return otherwise(data)",
        f"    pos = {len(prefix)}",
        *body,
        f"    return build({{{values}}})",
    ])
    namespace: dict[str, Any] = {"_varint": _varint, "_float": _FLOAT.unpack_from, "_double": _DOUBLE.unpack_from,
                                 "build": build, "prefix": prefix, "otherwise": otherwise}
    exec(compile(source, f"<avro reader of {schema.get('name', 'record')}>", "exec"), namespace)
    reader: Callable[[bytes], Any] = namespace["read"]
    return reader
