"""A streams app's table, as of now, from its changelog.

A table's changelog ``{app}-{table}-changelog`` holds every change of its store: the latest
record per key is the current value, a tombstone a deleted key. Keys and values are decoded
with the very codecs the runtime wrote them with (``streamkit.streams.codecs``, the DSL's
``KeyCodec``) and windowed keys with ``streamkit.state.serialization``:

* a plain table gives rows ``key, value``;
* a windowed table (``Table(...).tumbling(...)`` or a DSL ``.window(...)`` aggregation)
  gives ``key, window_start, window_end, value``, times in ms; the store's by-end index and
  its stream-time record are not data and are skipped.

Column types come from ``key_type``/``value_type`` when given (int, str, a pydantic
model...), else from the codec (str, bytes, a model); any other value is JSON text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
from pydantic import BaseModel

from streamkit.analytics.schema import python_arrow_type
from streamkit.state.serialization import parse_window_key
from streamkit.streams.codecs import BytesCodec, Codec, CodecError, ModelCodec, StrCodec, codec_for
from streamkit.streams.processing import STREAM_TIME_KEY, KeyCodec, jsonable

if TYPE_CHECKING:
    from streamkit.streams.app import App

__all__ = ["TableDecoder", "changelog_topic", "latest_per_key", "table_decoder"]

_WINDOWS = b"\x00"  # the window namespace of ``state.windowed``; b"\x01" is its by-end index


def changelog_topic(app_id: str, table: str) -> str:
    """The changelog topic of ``table`` (Kafka Streams' naming, as ``App.internal_topic``)."""
    return f"{app_id}-{table}-changelog"


@dataclass(frozen=True)
class TableDecoder:
    """Changelog records of one table to Arrow rows (picklable: Spark ships it to workers)."""

    topic: str
    windowed: bool
    key_codec: Codec
    value_codec: Codec
    key_type: pa.DataType
    value_type: pa.DataType
    sliding: bool = False  # DSL sliding windows store ``[aggregate, max timestamp]``

    @property
    def schema(self) -> pa.Schema:
        fields = [pa.field("key", self.key_type)]
        if self.windowed:
            fields += [pa.field("window_start", pa.int64()), pa.field("window_end", pa.int64())]
        fields.append(pa.field("value", self.value_type))
        return pa.schema(fields)

    def is_data(self, key: bytes | None) -> bool:
        """Whether a changelog key holds table data (not the stream time or an index)."""
        if key is None or key == STREAM_TIME_KEY:
            return False
        return key.startswith(_WINDOWS) if self.windowed else True

    def _value(self, raw: bytes) -> Any:
        if self.sliding:  # as WindowState.decode: the aggregate's bytes travel as latin-1 text
            aggregate, _max_ts = orjson.loads(raw)
            return self.value_codec.loads(aggregate.encode("latin-1"))
        return self.value_codec.loads(raw)

    def to_batch(self, records: Iterable[tuple[bytes, bytes]]) -> pa.RecordBatch:
        """Rows from (key, value) records that ``is_data`` accepted, tombstones removed."""
        keys: list[Any] = []
        starts: list[int] = []
        ends: list[int] = []
        values: list[Any] = []
        to_key = _converter(self.key_type)
        to_value = _converter(self.value_type)
        for key, raw in records:
            if self.windowed:
                key, start, end = parse_window_key(key[1:])
                starts.append(start)
                ends.append(end)
            try:
                keys.append(to_key(self.key_codec.loads(key)))
                values.append(to_value(self._value(raw)))
            except CodecError as exc:
                raise CodecError(f"{self.topic}: cannot decode the record of key {key!r}: {exc}") from None
        arrays = [pa.array(keys, self.key_type)]
        if self.windowed:
            arrays += [pa.array(starts, pa.int64()), pa.array(ends, pa.int64())]
        arrays.append(pa.array(values, self.value_type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


_JSON_TEXT = pa.string()


def _column_type(spec: Any, codec: Codec) -> tuple[pa.DataType, bool]:
    """(Arrow type, whether values are rendered as JSON text)."""
    if spec is not None and spec != "json":
        return python_arrow_type(spec), False
    if spec is None:
        if isinstance(codec, StrCodec):
            return pa.string(), False
        if isinstance(codec, BytesCodec):
            return pa.binary(), False
        if isinstance(codec, ModelCodec):
            return python_arrow_type(codec.model), False
    return _JSON_TEXT, True


def _converter(kind: pa.DataType) -> Callable[[Any], Any]:
    if pa.types.is_struct(kind):
        return lambda v: v.model_dump() if isinstance(v, BaseModel) else v
    return lambda v: v


@dataclass(frozen=True)
class _Json:
    """Wraps a codec so that values come out as JSON text."""

    codec: Codec

    def loads(self, data: bytes) -> str:
        return orjson.dumps(jsonable(self.codec.loads(data)), option=orjson.OPT_NON_STR_KEYS).decode()

    def dumps(self, obj: Any) -> bytes:
        return self.codec.dumps(obj)


def table_decoder(app: App | str, table: str, *, key_type: Any = None, value_type: Any = None,
                  windowed: bool | None = None) -> TableDecoder:
    """The decoder of ``table``. Given the ``App`` object, its table's own codecs and
    windowing are used; given only the application id, keys decode with ``key_type`` (str
    by default, ``"json"`` for DSL state), values with ``value_type`` (JSON by default),
    and ``windowed`` says whether the table is windowed."""
    sliding = False
    key_column_codec: Codec | None = None  # the codec that says the key column's type
    if isinstance(app, str):
        topic = changelog_topic(app, table)
        key_codec = codec_for(key_type, StrCodec()) if key_type != "json" else KeyCodec()
        value_codec = codec_for(value_type if value_type != "json" else None)
        is_windowed = bool(windowed)
    else:
        from streamkit.streams.aggregate import WindowState
        from streamkit.streams.windows import SlidingWindows

        found = app.tables.get(table)
        if found is None:
            known = ", ".join(sorted(app.tables)) or "none"
            raise KeyError(f"app {app.id!r} has no table {table!r} (its tables: {known})")
        topic = found.changelog.name
        if isinstance(found, WindowState):
            key_codec, value_codec, is_windowed = KeyCodec(), found.codec, True
            sliding = isinstance(found.spec, SlidingWindows)
            # Stored as JSON, the keys are those of the topic feeding the aggregation.
            key_column_codec = found.route.key_codec
        else:
            key_codec, value_codec = found.key_codec, found.value_codec
            is_windowed = found.window is not None
        if windowed is not None and windowed != is_windowed:
            raise ValueError(f"table {table!r} is {'' if is_windowed else 'not '}windowed")
    key_arrow, key_json = _column_type(key_type, key_column_codec or key_codec)
    value_arrow, value_json = _column_type(value_type, value_codec)
    return TableDecoder(topic, is_windowed, _Json(key_codec) if key_json else key_codec,
                        _Json(value_codec) if value_json else value_codec, key_arrow, value_arrow, sliding)


def latest_per_key(batches: Iterable[pa.RecordBatch], decoder: TableDecoder) -> list[tuple[bytes, bytes]]:
    """The latest (key, value) of every data key in changelog record batches, in the order
    read; keys whose latest record is a tombstone are left out."""
    latest: dict[bytes, bytes | None] = {}
    for batch in batches:
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        for key, value in zip(keys, values, strict=True):
            if decoder.is_data(key):
                latest[key] = value
    return [(k, v) for k, v in latest.items() if v is not None]
