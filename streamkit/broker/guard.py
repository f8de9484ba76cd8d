"""A bounds pre-scan of request bodies, run before kio decodes them.

Why this exists
---------------
kio 0.6.5 decodes with a native (Rust) reader.  For every array it does
``Vec::with_capacity(count)`` with the count *as read from the wire*, before reading a
single element.  A compact-array count is an unsigned varint of up to 5 bytes, so a
7-byte frame can ask for ``(2**35 - 2) * 8`` bytes (256 GiB): Rust's allocator cannot
satisfy that and **aborts the whole process** (``memory allocation of ... failed``), which
no ``try/except`` can catch.  A legacy (int32) count of ``2**31 - 1`` asks for 16 GiB;
on Linux that is usually only reserved, not committed, but on a box with less memory
(or ``vm.overcommit_memory=2``) it aborts too.

So before handing a body to kio we walk it once in Python, following the same schema
kio will use (built from kio's own dataclass metadata and ``kio.serial._introspect``,
mirroring kio's reader rules field by field), and check what Apache Kafka's generated
Java code checks: an array's element count must fit in the bytes that remain
(``count * min_element_size <= remaining``), and every string/bytes length must too.
After a successful scan every count kio reads is bounded by the frame size, so kio
allocates at most a small multiple of a frame that is itself capped by
``socket.request.max.bytes``.

The scan is also stricter than kio in a few harmless ways (it never accepts anything kio
would decode differently): unsigned varints longer than 5 bytes, a tagged field whose
declared size differs from its content, and unknown tags (kio raises ``KeyError`` on
those instead of skipping them as the Kafka spec says) are all rejected here.

Cost: one Python call per field group; fixed-size fields are coalesced and arrays of
fixed-size primitives are skipped in O(1).  A Produce or Fetch request takes a few
microseconds; the records blobs are skipped, not read.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import Field, fields
from functools import cache
from typing import Final, NamedTuple, TypeAlias

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

__all__ = ["FIXED_SIZES", "Buf", "GuardError", "Skip", "body_guard", "read_uvarint", "skip_legacy_sized"]

Buf: TypeAlias = bytes | memoryview
Skip: TypeAlias = Callable[[Buf, int, int], int]
"""``skip(buf, pos, end) -> new_pos``: validate one value at ``pos`` without reading past ``end``."""


class GuardError(ValueError):
    """The body is malformed or declares more data than it holds."""


_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")

# Wire sizes of kio's fixed-size kafka_types (nullable datetime_i64 is -1 for null).
FIXED_SIZES: Final[dict[str, int]] = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARINT_MAX_BYTES: Final = 5  # Kafka's readUnsignedVarint reads at most 5 bytes (an int32)


class _Kind(NamedTuple):
    skip: Skip
    min_size: int  # fewest bytes one value can take on the wire
    fixed_size: int | None  # exact size when every value takes the same number of bytes


def read_uvarint(buf: Buf, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes); return ``(value, new_pos)``."""
    value = 0
    shift = 0
    for _ in range(_VARINT_MAX_BYTES):
        if pos >= end:
            raise GuardError(f"truncated varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise GuardError(f"varint longer than {_VARINT_MAX_BYTES} bytes at byte {pos}")


def _fixed(size: int) -> Skip:
    def skip(buf: Buf, pos: int, end: int) -> int:
        if pos + size > end:
            raise GuardError(f"need {size} bytes at byte {pos}, {end - pos} left")
        return pos + size

    return skip


def _compact_string(nullable: bool) -> Skip:
    def skip(buf: Buf, pos: int, end: int) -> int:
        n, pos = read_uvarint(buf, pos, end)
        if n == 0:
            if nullable:
                return pos
            raise GuardError(f"null where a non-nullable compact string is required (byte {pos})")
        if n - 1 > end - pos:
            raise GuardError(f"compact string of {n - 1} bytes at byte {pos}, {end - pos} left")
        return pos + n - 1

    return skip


def skip_legacy_sized(buf: Buf, pos: int, end: int, length: struct.Struct, nullable: bool) -> int:
    """Skip a legacy string or bytes: an int16/int32 ``length`` (-1 = null when ``nullable``)."""
    width = length.size
    if pos + width > end:
        raise GuardError(f"truncated length at byte {pos}")
    n: int = length.unpack_from(buf, pos)[0]
    pos += width
    if n < 0:
        if n == -1 and nullable:
            return pos
        raise GuardError(f"invalid length {n} at byte {pos - width}")
    if n > end - pos:
        raise GuardError(f"value of {n} bytes at byte {pos}, {end - pos} left")
    return pos + n


def _legacy_sized(length: struct.Struct, nullable: bool) -> Skip:
    def skip(buf: Buf, pos: int, end: int) -> int:
        return skip_legacy_sized(buf, pos, end, length, nullable)

    return skip


def _primitive(kafka_type: str, flexible: bool, optional: bool) -> _Kind:
    """Mirror of kio's ``primitive_kind_from_kafka`` (wire format per kafka_type)."""
    size = FIXED_SIZES.get(kafka_type)
    if size is not None:
        return _Kind(_fixed(size), size, size)
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return _Kind(_compact_string(optional), 1, None)
        if kafka_type == "string":
            return _Kind(_legacy_sized(_I16, optional), 2, None)
        return _Kind(_legacy_sized(_I32, optional), 4, None)
    # Reached only if a kio upgrade adds a wire type; fail at start-up, not per request.
    raise TypeError(f"no guard for kafka_type {kafka_type!r}")


def _array(element: _Kind, flexible: bool) -> _Kind:
    elem_skip, fixed = element.skip, element.fixed_size
    # An element can take 0 bytes only for an empty non-flexible struct; Kafka still
    # refuses count > remaining, and so do we, which bounds the loop by the frame size.
    min_size = max(element.min_size, 1)

    def skip_items(buf: Buf, pos: int, end: int, count: int) -> int:
        if fixed is not None:
            total = count * fixed
            if total > end - pos:
                raise GuardError(
                    f"array of {count} x {fixed} bytes at byte {pos}, {end - pos} left"
                )
            return pos + total
        if count * min_size > end - pos:
            raise GuardError(f"array of {count} elements at byte {pos}, {end - pos} bytes left")
        for _ in range(count):
            pos = elem_skip(buf, pos, end)
        return pos

    if flexible:

        def skip_compact(buf: Buf, pos: int, end: int) -> int:
            n, pos = read_uvarint(buf, pos, end)
            if n == 0:  # null array
                return pos
            return skip_items(buf, pos, end, n - 1)

        return _Kind(skip_compact, 1, None)

    def skip_legacy(buf: Buf, pos: int, end: int) -> int:
        if pos + 4 > end:
            raise GuardError(f"truncated array length at byte {pos}")
        (count,) = _I32.unpack_from(buf, pos)
        pos += 4
        if count < 0:
            if count == -1:  # null array
                return pos
            raise GuardError(f"negative array length {count} at byte {pos - 4}")
        return skip_items(buf, pos, end, count)

    return _Kind(skip_legacy, 4, None)


def _field(field: Field[object], flexible: bool, is_tag: bool) -> _Kind:
    """Mirror of kio's ``build_field_schema`` (nullability rules included)."""
    field_class = classify_field(field)
    if isinstance(field_class, PrimitiveField):
        # kio reads tagged primitives as non-nullable, whatever the annotation says.
        optional = is_optional(field) and not is_tag
        return _primitive(get_schema_field_type(field), flexible, optional)
    if isinstance(field_class, PrimitiveTupleField):
        element = _primitive(get_schema_field_type(field), flexible, False)
        return _array(element, flexible)
    if isinstance(field_class, EntityField):
        return _entity(field_class.type_, is_optional(field))
    if isinstance(field_class, EntityTupleField):
        return _array(_entity(field_class.type_, False), flexible)
    raise TypeError(f"no guard for field {field.name}")


def _coalesce(kinds: list[_Kind]) -> list[Skip]:
    """Merge runs of fixed-size fields into single skips."""
    skips: list[Skip] = []
    run = 0
    for kind in kinds:
        if kind.fixed_size is not None:
            run += kind.fixed_size
            continue
        if run:
            skips.append(_fixed(run))
            run = 0
        skips.append(kind.skip)
    if run:
        skips.append(_fixed(run))
    return skips


@cache
def _entity(entity_type: type, nullable: bool) -> _Kind:
    """Mirror of kio's ``compile_entity_schema`` / ``parse_entity``."""
    flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
    regular: list[_Kind] = []
    tagged: dict[int, Skip] = {}
    for field in fields(entity_type):
        tag = get_field_tag(field)
        kind = _field(field, flexible, tag is not None)
        if tag is None:
            regular.append(kind)
        else:
            tagged[int(tag)] = kind.skip
    skips = _coalesce(regular)
    name = entity_type.__qualname__

    def skip_body(buf: Buf, pos: int, end: int) -> int:
        for skip in skips:
            pos = skip(buf, pos, end)
        if not flexible:
            return pos
        count, pos = read_uvarint(buf, pos, end)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            if size > end - pos:
                raise GuardError(f"tagged field of {size} bytes at byte {pos}, {end - pos} left")
            skip_tag = tagged.get(tag)
            if skip_tag is None:
                raise GuardError(f"unknown tagged field {tag} in {name} (kio cannot skip it)")
            if skip_tag(buf, pos, pos + size) != pos + size:
                raise GuardError(f"tagged field {tag} in {name} does not fill its {size} bytes")
            pos += size
        return pos

    fixed_size: int | None = None
    if not flexible and regular and all(k.fixed_size is not None for k in regular):
        fixed_size = sum(k.fixed_size or 0 for k in regular)
    min_size = sum(k.min_size for k in regular) + (1 if flexible else 0)

    if not nullable:
        return _Kind(skip_body, min_size, fixed_size)

    def skip_nullable(buf: Buf, pos: int, end: int) -> int:
        if pos >= end:
            raise GuardError(f"truncated nullable-struct marker at byte {pos}")
        marker = buf[pos]
        if marker == 0xFF:  # int8 -1: null (kio treats any other value as present)
            return pos + 1
        return skip_body(buf, pos + 1, end)

    return _Kind(skip_nullable, 1, None)


def body_guard(entity_type: type) -> Skip:
    """The pre-scan for one kio payload class (request or response)."""
    return _entity(entity_type, False).skip
