"""Build kio entities of any API version from plain, version-agnostic data.

kio generates one frozen dataclass per API version, with fields that come and go between
versions. Handlers therefore return plain dicts (nested lists of dicts for arrays) keyed by
Kafka's field names as kio spells them; ``build(cls, data)`` fills the fields that ``cls``
has, converts integers to kio's primitives (milliseconds to ``timedelta``, epoch
milliseconds to ``datetime``, strings to ``UUID``, ``None`` to an empty string or bytes
where this version's field is not nullable), leaves absent keys to their defaults,
and ignores keys the version does not have. Per-class plans are computed once and cached.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

__all__ = ["build", "field_converter", "fields_of"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
Convert = Callable[[Any], Any]


def _identity(v: Any) -> Any:
    return v


def _timedelta(v: Any) -> Any:
    return v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=int(v))


def _datetime(v: Any) -> Any:
    if v is None or isinstance(v, datetime.datetime):
        return v
    return None if int(v) < 0 else _EPOCH + datetime.timedelta(milliseconds=int(v))


def _uuid(v: Any) -> Any:
    if v is None or isinstance(v, uuid.UUID):
        return v
    return uuid.UUID(str(v))


def _error(v: Any) -> Any:
    return v if isinstance(v, ErrorCode) else ErrorCode(int(v))


def _entity_type(tp: Any) -> type | None:
    """The dataclass inside ``tp`` (``Nested``, ``Nested | None``, ``tuple[Nested, ...]``)."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    for arg in typing.get_args(tp):
        if arg is not type(None) and arg is not Ellipsis:
            found = _entity_type(arg)
            if found is not None:
                return found
    return None


def _is_tuple(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is tuple:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_tuple(a) for a in typing.get_args(tp))
    return False


def _converter(field: dataclasses.Field[Any], hint: Any) -> Convert:
    kafka_type = field.metadata.get("kafka_type", "")
    nested = _entity_type(hint)
    if nested is not None:
        if _is_tuple(hint):
            return lambda items: None if items is None else tuple(
                build(nested, i) if isinstance(i, Mapping) else i for i in items
            )
        return lambda v: build(nested, v) if isinstance(v, Mapping) else v
    if kafka_type.startswith("timedelta"):
        return _timedelta
    if kafka_type.startswith("datetime"):
        return _datetime
    if kafka_type == "uuid":
        return _uuid
    if kafka_type == "error_code":
        return _error
    if _is_tuple(hint):
        return lambda items: None if items is None else tuple(items)
    if _non_nullable(hint, str):
        return lambda v: "" if v is None else v
    if _non_nullable(hint, bytes):
        return lambda v: b"" if v is None else v
    return _identity


def _non_nullable(hint: Any, kind: type) -> bool:
    """A field of this version that cannot be null (older versions of a field often can't)."""
    return isinstance(hint, type) and issubclass(hint, kind)


@cache
def _plan(cls: type) -> tuple[tuple[str, Convert], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _converter(f, hints[f.name])) for f in dataclasses.fields(cls))


@cache
def fields_of(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """An instance of the kio dataclass ``cls`` from ``data`` (see the module doc)."""
    kwargs = {name: convert(data[name]) for name, convert in _plan(cls) if name in data}
    return cls(**kwargs)


def field_converter(cls: type, name: str) -> Convert:
    """How build() turns a plain value of field ``name`` of ``cls`` into kio's value."""
    return dict(_plan(cls))[name]
