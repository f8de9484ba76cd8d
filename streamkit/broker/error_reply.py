"""An error answer for any request whose handler failed unexpectedly.

Kafka answers such a request with ``request.getErrorResponse(UNKNOWN_SERVER_ERROR)``: the
response of that API and version with the error code in every place that has one, mirroring
the topics, partitions, groups or resources the request named, so the client fails (or
retries) just those and keeps its connection. Kafka writes one ``getErrorResponse`` per API;
here one schema walk does it for all of them: every kio response class is a tree of frozen
dataclasses, and a response array is filled from the request array that names the same
things (``topic_data`` → ``responses``, ``partition_data`` → ``partition_responses``...).

The result is ``None`` when the response has no error code the walk could fill (e.g. a
Metadata request for all topics): then there is no honest answer, and the server closes
the connection as before.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any, Final

from kio.static.protocol import ResponsePayload

from streamkit.broker.build import build
from streamkit.broker.codec import Request, response_type_for
from streamkit.broker.errors import ErrorCode

__all__ = ["error_response"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

# Response array -> the request arrays it answers, in order of preference (then same name).
_SOURCES: Final[Mapping[str, tuple[str, ...]]] = {
    "responses": ("topic_data", "topics", "topic_names", "resources"),
    "partition_responses": ("partition_data",),
    "results": ("resources", "topics", "groups_names", "creations"),
    "coordinators": ("coordinator_keys",),
    "groups": ("groups", "group_ids"),
    "transaction_states": ("transactional_ids",),
    "filter_results": ("filters",),
}
# Identifying fields copied from a request element into its answer (target: sources).
_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "index": ("index", "partition_index", "partition"),
    "group_id": ("group_id",),
    "key": ("key",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
}
# Where a bare string of a request array (topic_names, groups_names...) goes in its answer.
_STRING_TARGETS: Final = ("name", "group_id", "key", "resource_name", "topic", "transactional_id")


class _Fill:
    """One walk: the error to place and how many places took it."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        self.code = code
        self.message = message
        self.placed = 0


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kafka_type: str
    hint: Any
    nullable: bool
    has_default: bool
    entity: type | None
    is_array: bool


@cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint)
        nullable = type(None) in args
        core = next((a for a in args if a is not type(None)), hint) if nullable else hint
        is_array = typing.get_origin(core) is tuple
        inner = typing.get_args(core)[0] if is_array else core
        entity = inner if dataclasses.is_dataclass(inner) and isinstance(inner, type) else None
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        out.append(_Field(f.name, str(f.metadata.get("kafka_type", "")), core, nullable,
                          has_default, entity, is_array))
    return tuple(out)


def _zero(f: _Field) -> Any:
    """A neutral value for a field the error answer has nothing to say about."""
    if f.is_array:
        return ()
    if f.nullable:
        return None
    kind = f.kafka_type
    if kind.startswith("int"):
        return -1
    if kind == "uint16":
        return 0
    if kind == "float64":
        return 0.0
    if kind == "bool":
        return False
    if kind == "string":
        return ""
    if kind in ("bytes", "records"):
        return b""
    if kind == "uuid":
        return uuid.UUID(int=0)
    if kind.startswith("timedelta"):
        return datetime.timedelta(0)
    if kind.startswith("datetime"):
        return _EPOCH
    raise TypeError(f"no neutral value for {f.name} ({kind or f.hint})")


def _source_array(name: str, source: Any) -> Any:
    if source is None:
        return None
    for candidate in (*_SOURCES.get(name, ()), name):
        value = getattr(source, candidate, None)
        if isinstance(value, tuple):
            return value
    return None


def _fill(cls: type, source: Any, fill: _Fill) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for f in _fields(cls):
        if f.kafka_type == "error_code":
            data[f.name] = fill.code
            fill.placed += 1
        elif f.name == "error_message" and f.kafka_type == "string":
            data[f.name] = fill.message
        elif f.entity is not None and f.is_array:
            items = _source_array(f.name, source)
            data[f.name] = tuple(_element(f.entity, item, fill) for item in items or ())
        elif f.entity is not None:
            data[f.name] = None if f.nullable else _fill(f.entity, None, fill)
        elif (value := _key_value(f.name, source)) is not None:
            data[f.name] = value
        elif not f.has_default:
            data[f.name] = _zero(f)
    return data


def _key_value(name: str, source: Any) -> Any:
    if source is None:
        return None
    for candidate in _KEYS.get(name, ()):
        value = getattr(source, candidate, None)
        if value is not None:
            return value
    return None


def _element(cls: type, item: Any, fill: _Fill) -> dict[str, Any]:
    if isinstance(item, str):
        data = _fill(cls, None, fill)
        names = {f.name for f in _fields(cls)}
        target = next((t for t in _STRING_TARGETS if t in names), None)
        if target is not None:
            data[target] = item
        return data
    return _fill(cls, item, fill)


def error_response(request: Request, code: ErrorCode = ErrorCode.unknown_server_error,
                   message: str = "the broker failed to handle this request; see its log") -> ResponsePayload | None:
    """The response to ``request`` that reports ``code`` everywhere it can, or ``None``."""
    cls = response_type_for(request)
    fill = _Fill(code, message)
    data = _fill(cls, request.body, fill)
    if not fill.placed:
        return None
    response: ResponsePayload = build(cls, data)
    return response
