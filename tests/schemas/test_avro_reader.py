"""The reader generated for a flat Avro record (``avro_reader.compile_reader``): the same
values as fastavro's for records fastavro wrote, every primitive type and both orders of an
optional union; input it does not read exactly as fastavro would (truncated, an oversized
varint, a lenient boolean) raises, for the caller to decode with fastavro, instead of
becoming a different value; another header or a bytearray goes to the fallback given;
schemas it does not cover get no reader."""

from __future__ import annotations

import io
import math
import random
import struct
from typing import Any

import fastavro
import pytest

from streamkit.schemas.avro_reader import compile_reader

HEADER = struct.pack(">bI", 0, 7)

EVERYTHING = {"type": "record", "name": "Everything", "fields": [
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "s", "type": "string"},
    {"name": "raw", "type": "bytes"},
    {"name": "nothing", "type": "null"},
    {"name": "maybe", "type": ["null", "string"], "default": None},
    {"name": "either", "type": [{"type": "long"}, "null"]},
]}


def _encode(schema: Any, values: dict[str, Any], header: bytes = HEADER) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), values)
    return header + out.getvalue()


def _fastavro(schema: Any, data: bytes) -> Any:
    return fastavro.schemaless_reader(io.BytesIO(data[len(HEADER):]), fastavro.parse_schema(schema), None)


def _fallback(data: bytes) -> Any:
    return ("fallback", data)


def _reader(schema: Any) -> Any:
    reader = compile_reader(schema, dict, prefix=HEADER, otherwise=_fallback)
    assert reader is not None
    return reader


def _random_values(rnd: random.Random) -> dict[str, Any]:
    bits = rnd.choice([6, 13, 20, 27, 34, 48, 63])
    return {"b": rnd.random() < 0.5, "i": rnd.randrange(-2**31, 2**31) >> rnd.randrange(31),
            "l": rnd.randrange(-2**bits, 2**bits), "f": rnd.uniform(-1e6, 1e6), "d": rnd.uniform(-1e300, 1e300),
            "s": "".join(rnd.choice("aé€😀\x00z") for _ in range(rnd.randrange(0, 200))),
            "raw": rnd.randbytes(rnd.randrange(0, 70)), "nothing": None,
            "maybe": None if rnd.random() < 0.5 else "x" * rnd.randrange(0, 3),
            "either": None if rnd.random() < 0.5 else rnd.randrange(-2**63, 2**63)}


def test_it_reads_what_fastavro_reads_for_every_primitive_type() -> None:
    read = _reader(EVERYTHING)
    rnd = random.Random(21)
    extremes = {"b": False, "i": -2**31, "l": -2**63, "f": 0.1, "d": math.inf, "s": "", "raw": b"", "nothing": None,
                "maybe": "", "either": 2**63 - 1}
    for values in [extremes, *(_random_values(rnd) for _ in range(2000))]:
        data = _encode(EVERYTHING, values)
        assert read(data) == _fastavro(EVERYTHING, data)
    # fastavro's float is the float32 value, not the double that was written
    assert read(_encode(EVERYTHING, extremes))["f"] == struct.unpack("<f", struct.pack("<f", 0.1))[0] != 0.1
    nan = read(_encode(EVERYTHING, {**extremes, "d": math.nan}))["d"]
    assert math.isnan(nan)


def test_the_result_is_what_build_makes_of_the_fields() -> None:
    schema = {"type": "record", "name": "Pair", "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string"}]}
    reader = compile_reader(schema, lambda fields: sorted(fields.items()), prefix=HEADER, otherwise=_fallback)
    assert reader is not None
    assert reader(_encode(schema, {"a": 3, "b": "x"})) == [("a", 3), ("b", "x")]
    # no prefix: the data is just the record
    plain = compile_reader(schema, dict, otherwise=_fallback)
    assert plain is not None
    assert plain(_encode(schema, {"a": -300, "b": "y"}, header=b"")) == {"a": -300, "b": "y"}


def _rejects(read: Any, data: bytes) -> None:
    with pytest.raises((ValueError, IndexError, struct.error)):
        read(data)


def test_records_it_cannot_read_exactly_raise_and_other_headers_go_to_the_fallback() -> None:
    read = _reader(EVERYTHING)
    good = _encode(EVERYTHING, _random_values(random.Random(1)))
    for data in [
        good[:-1],  # truncated
        good[:len(HEADER) + 3],
        HEADER,  # no body at all
        # boolean byte 2 (the first field): fastavro reads True, the reader leaves it to fastavro
        HEADER + b"\x02" + good[len(HEADER) + 1:],
    ]:
        _rejects(read, data)
    other_version = struct.pack(">bI", 0, 8) + good[len(HEADER):]
    for data in [other_version, b"not the wire format", b""]:
        assert read(data) == ("fallback", data)
    assert read(bytearray(good)) == ("fallback", bytearray(good))
    # a long of 11 bytes, and one of 10 bytes past 64 bits
    read_long = _reader({"type": "record", "name": "L", "fields": [{"name": "l", "type": "long"}]})
    for varint in [b"\xff" * 10 + b"\x01", b"\xff" * 9 + b"\x7f"]:
        _rejects(read_long, HEADER + varint)
    # a string whose length runs past the end, and a negative length
    strings = _reader({"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]})
    for body in [b"\x06ab", b"\x03ab"]:
        _rejects(strings, HEADER + body)
    # a union branch that does not exist
    union = _reader({"type": "record", "name": "U", "fields": [{"name": "u", "type": ["null", "long"]}]})
    _rejects(union, HEADER + b"\x04\x02")


def test_trailing_bytes_are_ignored_as_fastavro_ignores_them() -> None:
    schema = {"type": "record", "name": "Pair", "fields": [{"name": "a", "type": "long"}]}
    data = _encode(schema, {"a": 5}) + b"\x00\x01"
    assert _reader(schema)(data) == _fastavro(schema, data) == {"a": 5}


@pytest.mark.parametrize("field_type", [
    {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "long"}]},
    {"type": "enum", "name": "Colour", "symbols": ["RED"]},
    {"type": "array", "items": "long"},
    {"type": "map", "values": "long"},
    {"type": "fixed", "name": "Sixteen", "size": 16},
    {"type": "long", "logicalType": "timestamp-millis"},
    ["null", "string", "long"],
    ["string", "long"],
    ["null", {"type": "int", "logicalType": "date"}],
    "Named",
])
def test_a_schema_with_other_types_gets_no_reader(field_type: Any) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}, {"name": "x", "type": field_type}]}
    assert compile_reader(schema, dict, prefix=HEADER, otherwise=_fallback) is None
    assert compile_reader("long", dict, otherwise=_fallback) is None
