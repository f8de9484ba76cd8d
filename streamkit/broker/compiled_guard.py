"""The bounds pre-scan of :mod:`streamkit.broker.guard`, compiled per request schema.

``guard.body_guard`` walks a request through a tree of closures, one Python call per field
group; for a Fetch that was most of the decoding time (kio's native reader itself takes a
microsecond or two). :func:`compile_guard` generates the same checks as straight-line
Python for one kio request class: runs of fixed-size fields become one addition and one
comparison, arrays of fixed-size elements are skipped in O(1), nested structs are direct
calls. The rules are guard.py's, field by field (it documents why the scan exists): every
length and count must fit in the bytes that remain, null only where kio reads null, tagged
fields known to kio and exactly filled, varints of at most 5 bytes. Any violation raises
:class:`~streamkit.broker.guard.GuardError`. ``tests/broker/test_compiled_codec.py`` runs both
guards over random, truncated and corrupted requests of every version and expects the same
verdict and the same end position.
"""

from __future__ import annotations

import dataclasses
import struct
from functools import cache
from typing import Any, Final

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

from streamkit.broker.guard import FIXED_SIZES, GuardError, Skip, read_uvarint, skip_legacy_sized

__all__ = ["compile_guard"]

_I32: Final = struct.Struct(">i")


def _array_count(buf: Any, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    """(element count, position after the count); -1 for a null array."""
    if flexible:
        n, pos = read_uvarint(buf, pos, end)
        return n - 1, pos
    if pos + 4 > end:
        raise GuardError(f"truncated array length at byte {pos}")
    (count,) = _I32.unpack_from(buf, pos)
    if count < -1:
        raise GuardError(f"negative array length {count} at byte {pos}")
    return count, pos + 4


_I16: Final = struct.Struct(">h")


def _uvarint(var: str) -> list[str]:
    """Lines reading an unsigned varint into ``var``: one byte inline, longer ones by call."""
    return ["if pos >= end: raise GuardError(f'truncated varint at byte {pos}')",
            f"{var} = buf[pos]",
            f"if {var} < 128: pos += 1",
            f"else: {var}, pos = _uv(buf, pos, end)"]


class _Compiler:
    def __init__(self) -> None:
        self.names: dict[tuple[type, bool], str] = {}
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "GuardError": GuardError, "_uv": read_uvarint,
            "_lsized": skip_legacy_sized, "_count": _array_count, "_I16": _I16, "_I32": _I32,
        }
        self.min_sizes: dict[type, int] = {}

    # sizes -------------------------------------------------------------------------------

    def entity_sizes(self, cls: type) -> tuple[int, int | None]:
        """(fewest bytes, exact size when every value takes the same) of a non-null struct."""
        flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        regular = [f for f in dataclasses.fields(cls) if get_field_tag(f) is None]
        sizes = [self.field_sizes(f, flexible, False) for f in regular]
        min_size = sum(s[0] for s in sizes) + (1 if flexible else 0)
        fixed = None
        if not flexible and regular and all(s[1] is not None for s in sizes):
            fixed = sum(s[1] or 0 for s in sizes)
        return min_size, fixed

    def field_sizes(self, f: dataclasses.Field[Any], flexible: bool, is_tag: bool) -> tuple[int, int | None]:
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField):
            size = FIXED_SIZES.get(get_schema_field_type(f))
            if size is not None:
                return size, size
            if flexible:
                return 1, None
            return (2 if get_schema_field_type(f) == "string" else 4), None
        if isinstance(kind, EntityField):
            if is_optional(f):
                return 1, None
            return self.entity_sizes(kind.type_)
        return (1 if flexible else 4), None

    # code --------------------------------------------------------------------------------

    def entity(self, cls: type, nullable: bool) -> str:
        key = (cls, nullable)
        if key in self.names:
            return self.names[key]
        name = f"_g{len(self.names)}_{cls.__name__}"
        self.names[key] = name
        flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        body: list[str] = []
        if nullable:
            body += ["if pos >= end: raise GuardError(f'truncated nullable-struct marker at byte {pos}')",
                     "if buf[pos] == 0xFF: return pos + 1", "pos += 1"]
        run = 0
        tagged: list[tuple[int, dataclasses.Field[Any]]] = []
        for f in dataclasses.fields(cls):
            tag = get_field_tag(f)
            if tag is not None:
                tagged.append((int(tag), f))
                continue
            _size, fixed = self.field_sizes(f, flexible, False)
            if fixed is not None and isinstance(classify_field(f), PrimitiveField):
                run += fixed
                continue
            if run:
                body += self._fixed(run)
                run = 0
            body += self.field(f, flexible, False)
        if run:
            body += self._fixed(run)
        if flexible:
            body += self._tags(cls, name, tagged)
        body.append("return pos")
        self.lines.append(f"def {name}(buf, pos, end):")
        self.lines += [f"    {line}" for line in body]
        self.lines.append("")
        return name

    @staticmethod
    def _fixed(size: int) -> list[str]:
        return [f"if pos + {size} > end: raise GuardError(f'need {size} bytes at byte {{pos}}, {{end - pos}} left')",
                f"pos += {size}"]

    def field(self, f: dataclasses.Field[Any], flexible: bool, is_tag: bool) -> list[str]:
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField):
            optional = is_optional(f) and not is_tag
            return self.primitive(get_schema_field_type(f), flexible, optional, "pos")
        if isinstance(kind, EntityField):
            return [f"pos = {self.entity(kind.type_, is_optional(f))}(buf, pos, end)"]
        if flexible:
            lines = [*_uvarint("count"), "count -= 1", "if count > 0:"]
        else:
            lines = ["count, pos = _count(buf, pos, end, False)", "if count > 0:"]
        if isinstance(kind, PrimitiveTupleField):
            size = FIXED_SIZES.get(get_schema_field_type(f))
            if size is not None:
                lines += [f"    if count * {size} > end - pos: raise GuardError("
                          f"f'array of {{count}} x {size} bytes at byte {{pos}}, {{end - pos}} left')",
                          f"    pos += count * {size}"]
                return lines
            element = self.primitive(get_schema_field_type(f), flexible, False, "pos")
            min_size = 1 if flexible else (2 if get_schema_field_type(f) == "string" else 4)
        else:
            assert isinstance(kind, EntityTupleField)
            min_size, fixed = self.entity_sizes(kind.type_)
            if fixed is not None:
                lines += [f"    if count * {fixed} > end - pos: raise GuardError("
                          f"f'array of {{count}} x {fixed} bytes at byte {{pos}}, {{end - pos}} left')",
                          f"    pos += count * {fixed}"]
                return lines
            element = [f"pos = {self.entity(kind.type_, False)}(buf, pos, end)"]
        lines += [f"    if count * {max(min_size, 1)} > end - pos: raise GuardError("
                  f"f'array of {{count}} elements at byte {{pos}}, {{end - pos}} bytes left')",
                  "    for _ in range(count):"]
        lines += [f"        {line}" for line in element]
        return lines

    @staticmethod
    def primitive(kafka_type: str, flexible: bool, optional: bool, pos: str) -> list[str]:
        size = FIXED_SIZES.get(kafka_type)
        if size is not None:
            return _Compiler._fixed(size)
        if kafka_type not in ("string", "bytes", "records"):
            raise TypeError(f"no guard for kafka_type {kafka_type!r}")
        if flexible:
            null = ("pass" if optional else
                    "raise GuardError(f'null where a non-nullable compact string is required (byte {pos})')")
            return [*_uvarint("n"), "if n == 0:", f"    {null}",
                    "elif n - 1 > end - pos: raise GuardError("
                    "f'compact string of {n - 1} bytes at byte {pos}, {end - pos} left')",
                    "else: pos += n - 1"]
        width = "_I16" if kafka_type == "string" else "_I32"
        return [f"pos = _lsized(buf, pos, end, {width}, {optional})"]

    def _tags(self, cls: type, name: str, tagged: list[tuple[int, dataclasses.Field[Any]]]) -> list[str]:
        skips: dict[int, str] = {}
        for tag, f in tagged:
            fn = f"{name}_tag{tag}"
            field_lines = self.field(f, True, True)  # may define nested structs' functions first
            self.lines.append(f"def {fn}(buf, pos, end):")
            self.lines += [f"    {line}" for line in field_lines]
            self.lines += ["    return pos", ""]
            skips[tag] = fn
        table = self.constant_table(name, skips)
        qualname = cls.__qualname__
        return [
            *_uvarint("tags"),
            "for _ in range(tags):",
            "    tag, pos = _uv(buf, pos, end)",
            "    size, pos = _uv(buf, pos, end)",
            "    if size > end - pos: raise GuardError("
            "f'tagged field of {size} bytes at byte {pos}, {end - pos} left')",
            f"    skip = {table}.get(tag)",
            "    if skip is None: raise GuardError("
            f"f'unknown tagged field {{tag}} in {qualname} (kio cannot skip it)')",
            "    if skip(buf, pos, pos + size) != pos + size: raise GuardError("
            f"f'tagged field {{tag}} in {qualname} does not fill its {{size}} bytes')",
            "    pos += size",
        ]

    def constant_table(self, name: str, skips: dict[int, str]) -> str:
        table = f"{name}_tags"
        self.lines.append(f"{table} = {{{', '.join(f'{t}: {fn}' for t, fn in skips.items())}}}")
        self.lines.append("")
        return table


@cache
def compile_guard(request_type: type) -> Skip:
    """``skip(buf, pos, end) -> end of body`` for the kio request class, or GuardError."""
    compiler = _Compiler()
    name = compiler.entity(request_type, False)
    source = "\n".join(compiler.lines)
    namespace = compiler.env
    exec(compile(source, f"<guard {request_type.__module__}.{request_type.__qualname__}>", "exec"), namespace)
    skip: Skip = namespace[name]
    return skip
