"""Key and value (de)serialization for topics and tables.

``codec_for(spec)`` turns what users write (``value_type=PageView``, ``str``, ``bytes``,
``int``, ``dict``, or any object with ``dumps``/``loads``) into a ``Codec``. Pydantic models go
through pydantic's Rust JSON path; other JSON through orjson. ``None`` (a null key, a
tombstone) passes through every codec untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import orjson
from pydantic import BaseModel, Json, TypeAdapter, ValidationError

__all__ = ["BytesCodec", "Codec", "CodecError", "JsonCodec", "ModelCodec", "StrCodec", "UserCodec", "codec_for",
           "raw_loads"]


class CodecError(ValueError):
    """A value that cannot be (de)serialized; the runtime applies the error policy."""


@runtime_checkable
class Codec(Protocol):
    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class BytesCodec:
    def dumps(self, obj: Any) -> bytes:
        if isinstance(obj, bytes | bytearray | memoryview):
            return bytes(obj)
        if isinstance(obj, str):
            return obj.encode()
        raise CodecError(f"expected bytes, got {type(obj).__name__}")

    def loads(self, data: bytes) -> Any:
        return data


class StrCodec:
    def dumps(self, obj: Any) -> bytes:
        if isinstance(obj, str):
            return obj.encode()
        if isinstance(obj, bytes):
            return obj
        if isinstance(obj, bool | int | float):
            return str(obj).encode()
        raise CodecError(f"expected str, got {type(obj).__name__}")

    def loads(self, data: bytes) -> Any:
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise CodecError(f"not UTF-8 text: {exc}") from None


_PLAIN_JSON = frozenset({int, float, str, bool, dict, list, tuple, type(None)})


class JsonCodec:
    """JSON via orjson; ``type_`` (int, float, dict, list[...]...) is validated on load."""

    def __init__(self, type_: Any = None) -> None:
        self.type_ = type_
        self._adapter = TypeAdapter(type_) if type_ not in (None, Any, object) else None

    def dumps(self, obj: Any) -> bytes:
        # The type test first: isinstance(obj, BaseModel) (a metaclass check) costs more than
        # orjson's encoding of a table's int (measured 3x), and this runs once per table update.
        if type(obj) not in _PLAIN_JSON and isinstance(obj, BaseModel):
            return obj.model_dump_json().encode()
        try:
            return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
        except TypeError as exc:
            raise CodecError(f"cannot serialize {type(obj).__name__} as JSON: {exc}") from None

    def loads(self, data: bytes) -> Any:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"invalid JSON: {exc}") from None
        if self._adapter is not None:
            try:
                return self._adapter.validate_python(value)
            except ValueError as exc:
                raise CodecError(validation_detail(exc)) from None
        return value


class ModelCodec:
    """A pydantic model, as JSON (validated with pydantic-core on load)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self._many: TypeAdapter[list[Any]] | None = None

    def loads_many(self, values: list[bytes]) -> list[Any]:
        """``[loads(v) for v in values]`` in one pydantic-core call (each value parsed on its
        own, as ``Json[model]``, and validated as JSON input): a third less CPU than a call
        per value. Raises pydantic's ValidationError if any value is bad: the caller then
        decodes them one by one."""
        many = self._many
        if many is None:
            many = self._many = TypeAdapter(list[Json[self.model]])  # type: ignore[name-defined]
        result: list[Any] = many.validate_python(values)
        return result

    def dumps(self, obj: Any) -> bytes:
        if isinstance(obj, self.model):
            return obj.model_dump_json().encode()
        if isinstance(obj, dict):
            # A dict that does not validate is a serialization error like any other: raised
            # as CodecError (pydantic's ValidationError would escape the runtime's policy).
            try:
                return self.model.model_validate(obj).model_dump_json().encode()
            except ValueError as exc:
                raise CodecError(f"invalid {self.model.__name__}: {validation_detail(exc)}") from None
        raise CodecError(f"expected {self.model.__name__}, got {type(obj).__name__}")

    def loads(self, data: bytes) -> Any:
        try:
            return self.model.model_validate_json(data)
        except ValueError as exc:
            raise CodecError(f"invalid {self.model.__name__}: {validation_detail(exc)}") from None


class UserCodec:
    """A user's codec (any object with ``dumps``/``loads``), with its errors turned into
    ``CodecError``: the runtime's deserialization policy (fail/skip/dead_letter) only knows
    CodecError, so a user codec raising ValueError would otherwise crash the consume loop
    whatever the policy says."""

    def __init__(self, codec: Any) -> None:
        self.codec = codec

    def dumps(self, obj: Any) -> bytes:
        try:
            data: bytes = self.codec.dumps(obj)
        except CodecError:
            raise
        except Exception as exc:
            raise CodecError(f"{type(self.codec).__name__}.dumps failed: {_one_line(exc)}") from exc
        if type(data) is bytes:
            return data
        # Keys are hashed (partitioning) and sent as is: other bytes-likes become bytes here.
        if isinstance(data, bytearray | memoryview):
            return bytes(data)
        raise CodecError(f"{type(self.codec).__name__}.dumps returned {type(data).__name__}, not bytes")

    def loads(self, data: bytes) -> Any:
        try:
            return self.codec.loads(data)
        except CodecError:
            raise
        except Exception as exc:
            raise CodecError(f"{type(self.codec).__name__}.loads failed: {_one_line(exc)}") from exc


_MAX_INPUT_SHOWN = 60


def validation_detail(exc: Exception) -> str:
    """Pydantic's errors on one line, each with where and what ("amount: Input should be a
    valid integer (got 'x')"), rather than its headline "1 validation error for Order"."""
    if not isinstance(exc, ValidationError):
        return _one_line(exc)
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"])
        text = f"{where}: {error['msg']}" if where else str(error["msg"])
        if error["type"] not in ("missing", "json_invalid") and "input" in error:
            shown = repr(error["input"])
            if len(shown) > _MAX_INPUT_SHOWN:
                shown = shown[:_MAX_INPUT_SHOWN] + "..."
            text += f" (got {shown})"
        parts.append(text)
    return "; ".join(parts) or _one_line(exc)


def _one_line(exc: Exception) -> str:
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


_JSON = JsonCodec()
_BUILT_IN = (BytesCodec, StrCodec, JsonCodec, ModelCodec, UserCodec)


def codec_for(spec: Any, default: Codec | None = None) -> Codec:
    """The codec for a topic's or table's ``key_type``/``value_type``."""
    if spec is None:
        return default or _JSON
    if isinstance(spec, type):
        if issubclass(spec, BaseModel):
            return ModelCodec(spec)
        if issubclass(spec, bytes):
            return BytesCodec()
        if issubclass(spec, str):
            return StrCodec()
        if issubclass(spec, bool | int | float | dict | list):
            return JsonCodec(spec)
    if isinstance(spec, str) and spec in ("raw", "bytes"):
        return BytesCodec()
    if isinstance(spec, str) and spec == "json":
        return _JSON
    if isinstance(spec, _BUILT_IN):
        return spec
    if hasattr(spec, "dumps") and hasattr(spec, "loads"):
        return UserCodec(spec)
    return JsonCodec(spec)


def _identity(data: bytes) -> Any:
    return data


def raw_loads(codec: Codec) -> Callable[[bytes], Any]:
    """``codec.loads`` without its error wrapping, for decoding a batch in one tight loop:
    the function may raise anything on bad input, and the caller then decodes that record
    again with ``codec.loads`` (which raises the proper CodecError). Equal results on good
    input; the built-in codecs skip a Python frame per record."""
    if type(codec) is JsonCodec and codec._adapter is None:
        return orjson.loads
    if type(codec) is StrCodec:
        return bytes.decode
    if type(codec) is BytesCodec:
        return _identity
    if type(codec) is UserCodec:
        # a codec's own batch path, e.g. the registry serdes' (header checked against the
        # schema id once, no wrapping per record)
        batch_loads = getattr(codec.codec, "batch_loads", None)
        if callable(batch_loads):
            loader: Callable[[bytes], Any] = batch_loads()
            return loader
    return codec.loads
