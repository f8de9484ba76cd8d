"""Response encoders compiled from kio's schema classes, for the hot APIs.

kio's writer walks a schema at run time: one Python call per field, a ``struct.pack`` per
integer and a ``BytesIO`` per tagged field; and before it runs, ``build`` turns a handler's
plain reply into kio's frozen dataclasses. For the requests every client sends all the time
(Produce, Fetch, ListOffsets, Metadata, Heartbeat) that was most of the broker's CPU per
request. :func:`compile_encoder` reads the same schema class once (kio's own field metadata,
through ``kio.serial._introspect``, as kio's writer does) and generates straight-line Python
for it: runs of fixed-size fields packed by one precompiled ``struct.Struct``, arrays of
fixed-size primitives in one pack, compact lengths from a table.

Each entity gets two functions: one reading a handler's plain mapping (keys as kio spells
them, absent keys at kio's defaults, values converted as :func:`streamkit.broker.build.build`
converts them), one reading a kio object (a ``__body__`` reply, or a nested entity a handler
put in its mapping). The bytes are kio's, byte for byte: ``tests/broker/test_compiled_codec.py``
checks that with random responses of every version, and decodes them back with kio.

Wire rules mirrored from kio 0.6 (``kio.serial._serialize``): tagged fields are written in
tag order, only when they differ from their default, as non-nullable values; a nullable
struct is an int8 marker (-1 null, 1 present) then the struct; flexible versions use compact
strings and arrays (UVARINT length + 1, 0 = null) and end every struct with tagged fields.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.serial._implicit_defaults import get_tagged_field_default
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

from streamkit.broker.build import field_converter

__all__ = ["Encoder", "compile_encoder", "encode_frame"]

Encoder = Callable[[bytearray, Any], None]
"""``encode(out, body)``: append ``body`` (a plain mapping or a kio object) to ``out``."""

# struct codes of kio's fixed-size kafka_types, and how a value becomes the packed integer.
_FIXED: Final[dict[str, tuple[str, str | None]]] = {
    "int8": ("b", None),
    "uint8": ("B", None),
    "bool": ("?", None),
    "int16": ("h", None),
    "uint16": ("H", None),
    "error_code": ("h", "_ec"),
    "int32": ("i", None),
    "uint32": ("I", None),
    "timedelta_i32": ("i", "_ms"),
    "int64": ("q", None),
    "uint64": ("Q", None),
    "float64": ("d", None),
    "timedelta_i64": ("q", "_ms"),
    "datetime_i64": ("q", "_dt"),
    "uuid": ("16s", "_uuid"),
}
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_UUID_ZERO: Final = bytes(16)
_UVARINT_SMALL: Final = tuple(bytes([n]) for n in range(128))
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


def _uv(n: int) -> bytes:
    """An unsigned varint."""
    if n < 128:
        return _UVARINT_SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ec(v: Any) -> int:
    return int(v.value) if v.__class__ is ErrorCode else int(ErrorCode(int(v)).value)


def _ms(v: Any) -> int:
    if isinstance(v, datetime.timedelta):
        return round(v.total_seconds() * 1000)
    return int(v)


def _dt(v: Any) -> int:
    if v is None:
        return -1
    if isinstance(v, datetime.datetime):
        return round(v.timestamp() * 1000)
    return -1 if int(v) < 0 else int(v)


def _uuid(v: Any) -> bytes:
    if v is None:
        return _UUID_ZERO
    return v.bytes if isinstance(v, uuid.UUID) else uuid.UUID(str(v)).bytes


def _legacy_string(v: Any) -> bytes:
    if v is None:
        return b"\xff\xff"
    data: bytes = v.encode()
    return _I16.pack(len(data)) + data


def _legacy_bytes(v: Any) -> bytes:
    if v is None:
        return b"\xff\xff\xff\xff"
    return _I32.pack(len(v)) + bytes(v)


def _compact(v: Any) -> bytes:
    if v is None:
        return b"\0"
    data = v.encode() if isinstance(v, str) else bytes(v)
    return _uv(len(data) + 1) + data


class _Frame(bytearray):
    """A frame being encoded. Values of ``_BIG`` bytes or more (a Fetch's record batches) are
    set aside in ``chunks`` instead of being copied into the growing buffer, so that the
    frame costs one copy of them (the final join), not a copy per buffer growth and another
    for the result."""

    def __init__(self, head: bytes) -> None:
        super().__init__(head)
        self.chunks: list[Any] = []


_BIG: Final = 32 * 1024


def _put(out: bytearray, value: Any) -> None:
    if len(value) >= _BIG and out.__class__ is _Frame:
        chunks = out.chunks
        chunks.append(bytearray(out))
        chunks.append(value)
        del out[:]
    else:
        out += value


_HELPERS: Final[dict[str, Any]] = {
    "_ec": _ec,
    "_ms": _ms,
    "_dt": _dt,
    "_uuid": _uuid,
    "_uv": _uv,
    "_legacy_string": _legacy_string,
    "_legacy_bytes": _legacy_bytes,
    "_compact": _compact,
    "_put": _put,
    "_I32": _I32,
    "Mapping": Mapping,
}


class _Compiler:
    """Generates the source of every entity reachable from one payload class."""

    def __init__(self) -> None:
        self.names: dict[type, str] = {}
        self.lines: list[str] = []
        self.env: dict[str, Any] = dict(_HELPERS)
        self.counter = 0

    def constant(self, value: Any, prefix: str = "_k") -> str:
        self.counter += 1
        name = f"{prefix}{self.counter}"
        self.env[name] = value
        return name

    def entity(self, cls: type) -> str:
        """The base name of ``cls``'s two encoders (``_o_<name>``, ``_d_<name>``)."""
        if cls in self.names:
            return self.names[cls]
        name = f"{cls.__name__}_{len(self.names)}"
        self.names[cls] = name
        regular: list[dataclasses.Field[Any]] = []
        tagged: list[tuple[int, dataclasses.Field[Any]]] = []
        for f in dataclasses.fields(cls):
            tag = get_field_tag(f)
            if tag is None:
                regular.append(f)
            else:
                tagged.append((int(tag), f))
        tagged.sort(key=lambda item: item[0])
        flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        for source in ("o", "d"):
            self._function(cls, name, source, regular, tagged, flexible)
        return name

    def _function(self, cls: type, name: str, source: str, regular: list[dataclasses.Field[Any]],
                  tagged: list[tuple[int, dataclasses.Field[Any]]], flexible: bool) -> None:
        body: list[str] = []
        pending: list[tuple[str, str]] = []  # (struct code, value expression) of a fixed run

        def flush() -> None:
            if pending:
                fmt = self.constant(struct.Struct(">" + "".join(c for c, _ in pending)), "_s")
                body.append(f"out += {fmt}.pack({', '.join(e for _, e in pending)})")
                pending.clear()

        for i, f in enumerate(regular):
            var = f"v{i}"
            body_value = self._read(f, source, var)
            fixed = self._fixed(f)
            if fixed is not None:
                # Reads may run ahead of the pack of the fields before them: one pack per run.
                code, convert = fixed
                body.append(body_value)
                pending.append((code, f"{convert}({var})" if convert else var))
                continue
            flush()
            body.append(body_value)
            body.extend(self._variable(f, var, flexible, source, nullable=is_optional(f)))
        flush()
        if flexible:
            body.extend(self._tags(cls, tagged, source))
        fn = f"_{source}_{name}"
        reader = "o" if source == "o" else "d"
        self.lines.append(f"def {fn}(out, {reader}):")
        self.lines.extend(f"    {line}" for line in body or ["pass"])
        self.lines.append("")

    def _read(self, f: dataclasses.Field[Any], source: str, var: str) -> str:
        if source == "o":
            return f"{var} = o.{f.name}"
        if f.default is not dataclasses.MISSING:
            return f"{var} = d.get({f.name!r}, {self.constant(f.default)})"
        if f.default_factory is not dataclasses.MISSING:
            return f"{var} = d.get({f.name!r}, {self.constant(f.default_factory())})"
        return f"{var} = d[{f.name!r}]"

    @staticmethod
    def _fixed(f: dataclasses.Field[Any]) -> tuple[str, str | None] | None:
        if not isinstance(classify_field(f), PrimitiveField):
            return None
        return _FIXED.get(get_schema_field_type(f))

    def _variable(self, f: dataclasses.Field[Any], var: str, flexible: bool, source: str,
                  nullable: bool) -> list[str]:
        """Lines that append the non-fixed field in ``var``."""
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type", "")
        if isinstance(kind, PrimitiveField):
            lines = []
            if source == "d" and not nullable:
                # build() turns None into an empty string or bytes for a non-nullable field.
                empty = '""' if kafka_type == "string" else 'b""'
                lines.append(f"if {var} is None: {var} = {empty}")
            elif not nullable:
                lines.append(f"if {var} is None: raise TypeError({f.name!r} + ' is None')")
            if flexible:
                lines += [f"if {var} is None: out += b'\\0'", "else:",
                          f"    {var} = {var}.encode() if {var}.__class__ is str else {var}",
                          f"    out += _uv(len({var}) + 1)", f"    _put(out, {var})"]
            elif kafka_type == "string":
                lines.append(f"out += _legacy_string({var})")
            else:
                lines += [f"if {var} is None: out += b'\\xff\\xff\\xff\\xff'", "else:",
                          f"    out += _I32.pack(len({var}))", f"    _put(out, {var})"]
            return lines
        if isinstance(kind, EntityField):
            enc = self.entity(kind.type_)
            call = self._entity_call(enc, var, source)
            if nullable:
                return [f"if {var} is None:", "    out += b'\\xff'", "else:", "    out += b'\\x01'",
                        f"    {call}"]
            return [call]
        # arrays
        length = (f"out += b'\\0' if {var} is None else _uv(len({var}) + 1)" if flexible
                  else f"out += b'\\xff\\xff\\xff\\xff' if {var} is None else _I32.pack(len({var}))")
        lines = [length, f"if {var} is not None:"]
        if isinstance(kind, EntityTupleField):
            enc = self.entity(kind.type_)
            lines += [f"    for item in {var}:", f"        {self._entity_call(enc, 'item', source)}"]
            return lines
        assert isinstance(kind, PrimitiveTupleField)
        fixed = _FIXED.get(kafka_type)
        if fixed is not None and fixed[1] is None:
            lines.append(f"    out += struct.pack('>%d{fixed[0]}' % len({var}), *{var})")
            self.env["struct"] = struct
            return lines
        if fixed is not None:
            code, convert = fixed
            pack = self.constant(struct.Struct(">" + code), "_s")
            lines += [f"    for item in {var}:", f"        out += {pack}.pack({convert}(item))"]
            return lines
        element = "_compact(item)" if flexible else (
            "_legacy_string(item)" if kafka_type == "string" else "_legacy_bytes(item)")
        lines += [f"    for item in {var}:",
                  f"        if item is None: raise TypeError({f.name!r} + ' holds None')",
                  f"        out += {element}"]
        return lines

    @staticmethod
    def _entity_call(enc: str, var: str, source: str) -> str:
        if source == "o":
            return f"_o_{enc}(out, {var})"
        return f"(_d_{enc} if isinstance({var}, Mapping) else _o_{enc})(out, {var})"

    def _tags(self, cls: type, tagged: list[tuple[int, dataclasses.Field[Any]]], source: str) -> list[str]:
        if not tagged:
            return ["out += b'\\0'"]
        lines = ["tags = []"]
        for i, (tag, f) in enumerate(tagged):
            var = f"t{i}"
            default = self.constant(get_tagged_field_default(f))
            if source == "o":
                lines.append(f"{var} = o.{f.name}")
            else:
                # A mapping's value becomes kio's value first (as build() would make it), so
                # that "equal to the default" is judged exactly as kio's writer judges it.
                convert = self.constant(field_converter(cls, f.name))
                lines.append(f"{var} = {convert}(d[{f.name!r}]) if {f.name!r} in d else {default}")
            lines.append(f"if {var} != {default}:")
            lines.append("    buf = bytearray()")
            fixed = self._fixed(f)
            if fixed is not None:
                code, convert_fn = fixed
                pack = self.constant(struct.Struct(">" + code), "_s")
                inner = [f"out += {pack}.pack({convert_fn}({var}))" if convert_fn
                         else f"out += {pack}.pack({var})"]
            else:
                inner = self._variable(f, var, True, "o", nullable=False)
            lines.extend("    " + line.replace("out +=", "buf +=").replace("(out,", "(buf,") for line in inner)
            lines.append(f"    tags.append(_uv({tag}) + _uv(len(buf)) + bytes(buf))")
        lines.append("out += _uv(len(tags))")
        lines.append("for t in tags: out += t")
        return lines


@cache
def compile_encoder(payload: type) -> tuple[Encoder, Encoder]:
    """(from a plain mapping, from a kio object) encoders of the kio class ``payload``."""
    compiler = _Compiler()
    name = compiler.entity(payload)
    source = "\n".join(compiler.lines)
    namespace = compiler.env
    exec(compile(source, f"<compiled {payload.__module__}.{payload.__qualname__}>", "exec"), namespace)
    return namespace[f"_d_{name}"], namespace[f"_o_{name}"]


def encode_frame(correlation_id: int, header_version: int, encoder: Encoder, body: Any) -> bytes:
    """The size-prefixed response frame: header (v0, or v1 with empty tagged fields), body."""
    out = _Frame(_I32.pack(0) + _I32.pack(correlation_id) + (b"\0" if header_version >= 1 else b""))
    encoder(out, body)
    if not out.chunks:
        _I32.pack_into(out, 0, len(out) - 4)
        return bytes(out)
    parts = [*out.chunks, out]
    _I32.pack_into(parts[0], 0, sum(len(p) for p in parts) - 4)
    return b"".join(parts)
