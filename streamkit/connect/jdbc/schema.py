"""Between database columns and Connect schemas, both ways, as Confluent's JDBC connector maps them.

Reading (source): a reflected column type becomes a Connect schema and a per-column converter:
integers by width (int8..int64), REAL float32, other floats float64, NUMERIC/DECIMAL with a
scale Connect's ``Decimal`` logical type (the value a ``decimal.Decimal``, as Java Connect hands
a ``BigDecimal`` to its converter), DATE/TIME/TIMESTAMP the ``Date``/``Time``/``Timestamp``
logical types as integer days / milliseconds, text-like types (VARCHAR, TEXT, ENUM, JSON,
UUID) strings, binary types bytes. A column of any other type is left out of the record, as
Confluent's connector does with a warning.

Writing (sink): ``to_db_value`` turns a Connect value back into what the driver binds
(``Timestamp`` ms into a naive UTC ``datetime``...). Schemaless records (a dict value without
a ``value_schema``) get a schema inferred from their values: bool, int (int64), float
(float64), str, bytes, ``Decimal``, ``datetime`` (Timestamp), ``date`` (Date), ``time`` (Time);
a field that is None gets an optional string column. Every inferred field is optional.

Timestamps are UTC: naive database values are read as UTC and written as naive UTC (the
engines' sessions run in UTC, see ``dialects.create_engine``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import types as sat

from streamkit.connect.data import DATE, DECIMAL, TIME, TIMESTAMP, Field, Schema
from streamkit.connect.errors import DataError

__all__ = [
    "INLINE_GLOBALS",
    "Converter",
    "column_schema",
    "datetime_to_micros",
    "infer_value_schema",
    "inline_expression",
    "inline_nullable",
    "to_connect_converter",
    "to_db_converter",
]

log = logging.getLogger(__name__)

Converter = Callable[[Any], Any]

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_MS = dt.timedelta(milliseconds=1)
_US = dt.timedelta(microseconds=1)


def _naive_utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def datetime_to_micros(value: dt.datetime) -> int:
    return (_naive_utc(value) - _EPOCH) // _US


def _int_schema(type_: sat.TypeEngine[Any]) -> str:
    if type(type_).__name__.upper() == "TINYINT":
        return "int8"
    if isinstance(type_, sat.SmallInteger):
        return "int16"
    if isinstance(type_, sat.BigInteger) or getattr(type_, "unsigned", False):
        return "int64"
    return "int32"


def column_schema(type_: sat.TypeEngine[Any], nullable: bool) -> Schema | None:
    """The Connect schema of a column, or None when the type has no mapping."""
    s: Schema
    if isinstance(type_, sat.Boolean):
        s = Schema("boolean")
    elif isinstance(type_, sat.Integer):
        s = Schema(_int_schema(type_))  # type: ignore[arg-type]
    elif isinstance(type_, sat.Float):  # not a Numeric in SQLAlchemy 2.1
        s = Schema("float32" if type(type_).__name__.upper() in ("REAL", "FLOAT4") else "float64")
    elif isinstance(type_, sat.Numeric):
        if type_.scale is None:
            s = Schema("float64")
        else:
            s = Schema("bytes", name=DECIMAL, version=1, parameters={"scale": str(type_.scale)})
    elif isinstance(type_, sat.DateTime):
        s = Schema("int64", name=TIMESTAMP, version=1)
    elif isinstance(type_, sat.Date):
        s = Schema("int32", name=DATE, version=1)
    elif isinstance(type_, sat.Time):
        s = Schema("int32", name=TIME, version=1)
    elif isinstance(type_, sat.String | sat.Enum | sat.JSON | sat.Uuid):
        s = Schema("string")
    elif isinstance(type_, sat._Binary):
        s = Schema("bytes")
    else:
        name = type(type_).__name__.upper()
        if name in ("UUID", "JSONB", "CITEXT", "INET", "CIDR", "MACADDR", "XML"):
            s = Schema("string")
        elif name in ("YEAR",):
            s = Schema("int32")
        else:
            return None
    return s.as_optional() if nullable else s


# Generated per-row code (querier._builder, fields._compile) inlines the common case of a
# converter: the value ``{x}`` passes as ``value`` when ``condition`` holds (never for None),
# else it goes through the converter itself.
_INLINE: dict[Converter, tuple[str, str]] = {}  # converter -> (condition, value)
# PostgreSQL and MySQL give a DECIMAL column's values at the column's scale already.
_DECIMAL_INLINE = ("{x}.__class__ is Decimal", "{x}")
INLINE_GLOBALS = {"Decimal": decimal.Decimal, "datetime": dt.datetime, "EPOCH": _EPOCH,
                  "MS": _MS, "timedelta": dt.timedelta}


def inline_expression(convert: Converter, x: str, c: str) -> str:
    """``convert(x)`` as an expression for generated code (``c`` names ``convert``)."""
    if convert not in _INLINE:
        return f"{c}({x})"
    condition, value = (part.format(x=x) for part in _INLINE[convert])
    return f"({value} if {condition} else {c}({x}))"


def inline_nullable(convert: Converter, x: str, c: str) -> str:
    """The same for an ``x`` that may be None (None stays None), the common case tested first."""
    if convert not in _INLINE:
        return f"(None if {x} is None else {c}({x}))"
    condition, value = (part.format(x=x) for part in _INLINE[convert])
    return f"({value} if {condition} else None if {x} is None else {c}({x}))"


def _timestamp_to_connect(value: Any) -> Any:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return (_naive_utc(value) - _EPOCH) // _MS


def _date_to_connect(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        value = value.date()
    elif isinstance(value, str):
        value = dt.date.fromisoformat(value)
    return (value - _EPOCH_DATE).days


def _time_to_connect(value: Any) -> Any:
    if isinstance(value, dt.timedelta):  # PyMySQL reads TIME as a timedelta
        return value // _MS
    if isinstance(value, str):
        value = dt.time.fromisoformat(value)
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def _decimal_to_connect(scale: int) -> Converter:
    quantum = decimal.Decimal(1).scaleb(-scale)

    def convert(value: Any) -> Any:
        if not isinstance(value, decimal.Decimal):
            value = decimal.Decimal(str(value))
        return value.quantize(quantum)

    _INLINE[convert] = _DECIMAL_INLINE
    return convert


def _to_str(value: Any) -> Any:
    return value if isinstance(value, str) else str(value)


# (x - EPOCH) // MS, from the timedelta's fields: a little cheaper, and the same floor
# (days may be negative, seconds and microseconds never are).
_INLINE[_timestamp_to_connect] = (
    "{x}.__class__ is datetime and {x}.tzinfo is None",
    "((_d := {x} - EPOCH).days * 86400000 + _d.seconds * 1000 + _d.microseconds // 1000)")
_INLINE[_to_str] = ("{x}.__class__ is str", "{x}")


def _to_float(value: Any) -> Any:
    return float(value)  # MySQL's DOUBLE reads as Decimal, and so does NUMERIC without a scale


_INLINE[_to_float] = ("{x}.__class__ is float", "{x}")


def _to_bytes(value: Any) -> Any:
    return bytes(value) if not isinstance(value, bytes) else value


def _to_bool(value: Any) -> Any:
    return bool(value)


def to_connect_converter(schema: Schema) -> Converter | None:
    """How a non-null driver value becomes the Connect value of ``schema`` (None: it already is)."""
    convert: Converter | None
    if schema.name == TIMESTAMP:
        convert = _timestamp_to_connect
    elif schema.name == DATE:
        convert = _date_to_connect
    elif schema.name == TIME:
        convert = _time_to_connect
    elif schema.name == DECIMAL:
        convert = _decimal_to_connect(int((schema.parameters or {}).get("scale", "0")))
    elif schema.type == "string":
        convert = _to_str
    elif schema.type == "bytes":
        convert = _to_bytes
    elif schema.type == "boolean":
        convert = _to_bool  # MySQL's BOOLEAN is TINYINT(1)
    elif schema.type in ("float32", "float64"):
        convert = _to_float
    else:
        return None
    return convert


def _timestamp_to_db(value: Any) -> Any:
    if isinstance(value, int):
        return _EPOCH + dt.timedelta(milliseconds=value)
    if isinstance(value, dt.datetime):
        return _naive_utc(value)
    raise DataError(f"a Timestamp value must be milliseconds or a datetime, not {value!r}")


_INLINE[_timestamp_to_db] = ("{x}.__class__ is int", "EPOCH + timedelta(0, 0, 0, {x})")


def _date_to_db(value: Any) -> Any:
    if isinstance(value, int):
        return _EPOCH_DATE + dt.timedelta(days=value)
    if isinstance(value, dt.date):
        return value
    raise DataError(f"a Date value must be days or a date, not {value!r}")


def _time_to_db(value: Any) -> Any:
    if isinstance(value, int):
        return (dt.datetime.min + dt.timedelta(milliseconds=value)).time()
    if isinstance(value, dt.time):
        return value
    raise DataError(f"a Time value must be milliseconds or a time, not {value!r}")


def _decimal_to_db(scale: int) -> Converter:
    def convert(value: Any) -> Any:
        if isinstance(value, decimal.Decimal):
            return value
        if isinstance(value, bytes | bytearray):  # Connect's wire form: unscaled two's complement
            return decimal.Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-scale)
        if isinstance(value, int | float | str):
            return decimal.Decimal(str(value))
        raise DataError(f"a Decimal value must be a Decimal, bytes or a number, not {value!r}")

    _INLINE[convert] = _DECIMAL_INLINE
    return convert


def to_db_converter(schema: Schema) -> Converter | None:
    """How a non-null Connect value of ``schema`` becomes what the driver binds (None: as it is)."""
    if schema.name == TIMESTAMP:
        return _timestamp_to_db
    if schema.name == DATE:
        return _date_to_db
    if schema.name == TIME:
        return _time_to_db
    if schema.name == DECIMAL:
        return _decimal_to_db(int((schema.parameters or {}).get("scale", "0")))
    if schema.type in ("struct", "map", "array"):
        raise DataError(f"a {schema.type} cannot be written to a column; flatten it first "
                        "(e.g. with the Flatten or ExtractField transform)")
    return None


def _infer(value: Any) -> Schema:
    if isinstance(value, bool):
        return Schema("boolean", optional=True)
    if isinstance(value, int):
        return Schema("int64", optional=True)
    if isinstance(value, float):
        return Schema("float64", optional=True)
    if isinstance(value, str) or value is None:
        return Schema("string", optional=True)
    if isinstance(value, bytes | bytearray):
        return Schema("bytes", optional=True)
    if isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
        return Schema("bytes", optional=True, name=DECIMAL, version=1,
                      parameters={"scale": str(scale)})
    if isinstance(value, dt.datetime):
        return Schema("int64", optional=True, name=TIMESTAMP, version=1)
    if isinstance(value, dt.date):
        return Schema("int32", optional=True, name=DATE, version=1)
    if isinstance(value, dt.time):
        return Schema("int32", optional=True, name=TIME, version=1)
    raise DataError(f"cannot infer a column type for {type(value).__name__} value {value!r}; "
                    "give the record a schema or flatten it first")


def infer_value_schema(value: Mapping[str, Any]) -> Schema:
    """A struct schema for a schemaless dict value (every field optional)."""
    return Schema("struct", fields=tuple(Field(str(k), _infer(v)) for k, v in value.items()))
