"""Codecs: what ``codec_for`` picks for each kind of ``key_type``/``value_type``, round trips,
and that every failure (in either direction, built-in or user codec) is a ``CodecError``,
the one exception the runtime's deserialization policy handles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from streamkit.streams.codecs import (
    BytesCodec,
    Codec,
    CodecError,
    JsonCodec,
    ModelCodec,
    StrCodec,
    UserCodec,
    codec_for,
)
from streamkit.streams.topic import Topic, partition_for_key


class PageView(BaseModel):
    page: str
    user: str
    ms: int = 0


class Reversed:
    """A user codec: any object with dumps/loads."""

    def dumps(self, obj: Any) -> bytes:
        return str(obj)[::-1].encode()

    def loads(self, data: bytes) -> Any:
        text = data.decode()[::-1]
        if text == "bad":
            raise ValueError("reversed codec refuses 'bad'")
        return text


# -- codec_for -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        (PageView, ModelCodec),
        (bytes, BytesCodec),
        ("raw", BytesCodec),
        ("bytes", BytesCodec),
        (str, StrCodec),
        (int, JsonCodec),
        (float, JsonCodec),
        (bool, JsonCodec),
        (dict, JsonCodec),
        (list, JsonCodec),
        ("json", JsonCodec),
        (None, JsonCodec),
        (list[int], JsonCodec),
    ],
)
def test_codec_for_picks_by_type(spec: Any, kind: type) -> None:
    assert isinstance(codec_for(spec), kind)


def test_codec_for_none_uses_the_default() -> None:
    default = StrCodec()
    assert codec_for(None, default) is default


def test_every_codec_satisfies_the_protocol() -> None:
    for spec in (PageView, bytes, str, int, None, Reversed()):
        assert isinstance(codec_for(spec), Codec)


# -- round trips -----------------------------------------------------------------------


def test_pydantic_round_trip_and_dict_input() -> None:
    codec = codec_for(PageView)
    view = PageView(page="/a", user="u1", ms=5)
    data = codec.dumps(view)
    assert codec.loads(data) == view
    # A dict is validated into the model on the way out.
    assert codec.loads(codec.dumps({"page": "/b", "user": "u2"})) == PageView(page="/b", user="u2")


def test_str_codec() -> None:
    codec = StrCodec()
    assert codec.dumps("héllo") == "héllo".encode()
    assert codec.loads("héllo".encode()) == "héllo"
    assert codec.dumps(b"raw") == b"raw"
    # Numbers are written as their text (a key of 7 and "7" are the same key).
    assert codec.dumps(7) == b"7"
    assert codec.dumps(1.5) == b"1.5"


def test_bytes_codec() -> None:
    codec = BytesCodec()
    assert codec.dumps(b"\x00\xff") == b"\x00\xff"
    assert codec.dumps(bytearray(b"ab")) == b"ab"
    assert codec.dumps(memoryview(b"cd")) == b"cd"
    assert codec.dumps("é") == "é".encode()
    assert codec.loads(b"\x00\xff") == b"\x00\xff"


def test_json_codec_validates_its_type() -> None:
    assert JsonCodec(int).loads(b"42") == 42
    assert JsonCodec(list[int]).loads(b"[1, 2]") == [1, 2]
    assert JsonCodec().loads(b'{"a": [1, null]}') == {"a": [1, None]}
    assert JsonCodec().dumps({1: "x"}) == b'{"1":"x"}'  # non-str keys allowed
    assert JsonCodec().dumps(PageView(page="/", user="u")) == b'{"page":"/","user":"u","ms":0}'


def test_user_codec_is_used_as_is() -> None:
    codec = codec_for(Reversed())
    assert codec.dumps("abc") == b"cba"
    assert codec.loads(b"cba") == "abc"
    assert isinstance(codec, UserCodec)


def test_user_codec_output_is_bytes() -> None:
    """A user codec's bytes-like output becomes bytes (keys are hashed to pick partitions);
    anything else is a CodecError naming the codec, not a failure deep in the producer."""

    class Buffers:
        def dumps(self, obj: Any) -> Any:
            return bytearray(obj.encode()) if obj != "bad" else 42

        def loads(self, data: bytes) -> Any:
            return data.decode()

    codec = codec_for(Buffers())
    out = codec.dumps("key")
    assert type(out) is bytes and out == b"key"
    assert partition_for_key(out, 4) == partition_for_key(b"key", 4)
    with pytest.raises(CodecError, match=r"Buffers\.dumps returned int"):
        codec.dumps("bad")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_json_round_trip(value: Any) -> None:
    codec = codec_for(None)
    assert codec.loads(codec.dumps(value)) == value


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_str_round_trip(value: str) -> None:
    assert StrCodec().loads(StrCodec().dumps(value)) == value


@settings(max_examples=50, deadline=None)
@given(st.builds(PageView, page=st.text(), user=st.text(), ms=st.integers(-(2**53), 2**53)))
def test_model_round_trip(view: PageView) -> None:
    codec = codec_for(PageView)
    assert codec.loads(codec.dumps(view)) == view


# -- errors are CodecError -------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "data"),
    [
        (codec_for(PageView), b"{not json"),
        (codec_for(PageView), b'{"page": "/"}'),  # missing field
        (codec_for(PageView), b'{"page": "/", "user": "u", "ms": "x"}'),
        (codec_for(int), b'"forty-two"'),
        (codec_for(int), b"[1"),
        (codec_for(None), b"\xff\xfe"),
        (codec_for(str), b"\xff\xfe"),  # not UTF-8
        (codec_for(list[int]), b'["a"]'),
        (codec_for(Reversed()), b"dab"),  # the user codec raises ValueError
    ],
)
def test_loads_errors_are_codec_errors(codec: Codec, data: bytes) -> None:
    with pytest.raises(CodecError) as info:
        codec.loads(data)
    # One line: it ends up in a log line and a dead-letter header.
    assert "\n" not in str(info.value)
    assert str(info.value)


@pytest.mark.parametrize(
    ("codec", "obj"),
    [
        (codec_for(PageView), "not a model"),
        (codec_for(PageView), {"page": "/"}),  # a dict that does not validate
        (codec_for(str), object()),
        (codec_for(str), None.__class__),
        (codec_for(bytes), 12),
        (codec_for(None), object()),
        (codec_for(None), {"a": {1, 2}}),
    ],
)
def test_dumps_errors_are_codec_errors(codec: Codec, obj: Any) -> None:
    with pytest.raises(CodecError):
        codec.dumps(obj)


def test_model_error_names_the_model() -> None:
    with pytest.raises(CodecError, match="PageView"):
        codec_for(PageView).loads(b"{}")


def test_user_codec_errors_keep_their_cause() -> None:
    with pytest.raises(CodecError) as info:
        codec_for(Reversed()).loads(b"dab")
    assert isinstance(info.value.__cause__, ValueError)


def test_topic_encode_decode_pass_none_through() -> None:
    """A null key and a tombstone (null value) are never given to a codec."""

    class NoApp:
        pass

    topic = Topic(NoApp(), "t", key_type=str, value_type=PageView)  # type: ignore[arg-type]
    assert topic.encode(None, None) == (None, None)
    assert topic.decode(None, None) == (None, None)
    key, value = topic.encode("k", PageView(page="/", user="u"))
    assert topic.decode(key, value) == ("k", PageView(page="/", user="u"))
    with pytest.raises(CodecError):
        topic.decode(b"\xff", None)


# -- a model batch in one call (ModelCodec.loads_many, Topic.events) -----------------------


class Strict(BaseModel):
    model_config = ConfigDict(strict=True)
    n: int = 0
    at: datetime | None = None


_JSONISH = st.one_of(
    st.sampled_from([b'{"page":"/","user":"u"}', b'{"page":"/","user":"u","ms":"7"}', b'{"page":"/","user":"u","ms":1.0}',
                     b'{"page":"/","user":"u","ms":1.5}', b'{"page":1,"user":"u"}', b'{"page":"/"}', b"null", b"[1]",
                     b'{"page":"/","user":"u"} ', b'{"page":"/","user":"u"},{"page":"/","user":"v"}', b'"ms":1}',
                     b'{"n":"1"}', b'{"n":1}', b'{"at":"2024-01-01T00:00:00Z"}', b'{"at":1700000000}', b"{"]),
    st.builds(lambda d: orjson.dumps(d), st.dictionaries(st.sampled_from(["page", "user", "ms", "n", "at"]),
                                                         st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=3), st.none()))),
)


@given(st.sampled_from([PageView, Strict]), st.lists(_JSONISH, min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_model_loads_many_equals_loads_one_by_one(model: type[BaseModel], values: list[bytes]) -> None:
    """One call over a batch gives what loads gives value by value (pydantic's JSON-input
    rules, strict models too), and refuses the batch when any value is refused, also values
    that would form valid JSON only when joined."""
    codec = ModelCodec(model)
    one_by_one: list[Any] | None = []
    for v in values:
        try:
            one_by_one.append(codec.loads(v))  # type: ignore[union-attr]
        except CodecError:
            one_by_one = None
            break
    try:
        many: list[Any] | None = codec.loads_many(values)
    except ValueError:
        many = None
    assert many == one_by_one


class NoApp:
    pass


@dataclass
class Rec:
    """A consumed record, as ``Topic.events`` reads it."""

    key: bytes | None
    value: bytes | None
    offset: int
    timestamp: int = 5
    headers: tuple[tuple[str, bytes], ...] = ()


def test_topic_events_of_a_model_batch_stop_before_a_bad_value() -> None:
    """A batch with a bad value decodes up to it (the runtime then applies the error policy
    to that record and goes on after it), as record by record."""

    topic = Topic(NoApp(), "t", key_type=str, value_type=PageView)  # type: ignore[arg-type]
    good = [Rec(b"k%d" % i, b'{"page":"/%d","user":"u"}' % i, i) for i in range(6)]
    events = topic.events(good, 7)
    assert [(e.key, e.value, e.offset, e.partition) for e in events] == [
        (f"k{i}", PageView(page=f"/{i}", user="u"), i, 7) for i in range(6)]
    bad = [*good[:2], Rec(b"k9", b'{"page":1}', 2), *good[3:]]
    assert [e.offset for e in topic.events(bad, 0)] == [0, 1]
    assert [e.offset for e in topic.events(bad, 0, 3)] == [3, 4, 5]
    bad_key = [*good[:4], Rec(b"\xff", b'{"page":"/","user":"u"}', 4), good[5]]
    assert [e.offset for e in topic.events(bad_key, 0, 1)] == [1, 2, 3]
    tombstone = [*good[:2], Rec(b"k9", None, 2), *good[3:]]
    assert [(e.offset, e.value) for e in topic.events(tombstone, 0)][2] == (2, None)


@pytest.mark.parametrize("value_type", [None, PageView])
def test_decoded_records_build_the_events_topic_events_builds(value_type: Any) -> None:
    """A batch decoded into columns (``Topic.decoded``, agents' path) builds, record by
    record, an Event equal to the one ``Topic.events`` builds: null keys, tombstones and
    headers included, each with its own headers list; a batch with a bad key or value, or
    a topic with a timestamp extractor, is not decoded so (the caller takes ``events``
    and the error policy)."""

    topic = Topic(NoApp(), "t", key_type=str, value_type=value_type)  # type: ignore[arg-type]
    records = [Rec(b"k%d" % i, b'{"page":"/%d","user":"u"}' % i, 10 + i, 100 + i) for i in range(5)]
    records[1].key = None
    records[2].value = None
    records[3].headers = (("trace", b"t3"), ("n", b""))
    decoded = topic.decoded(records, 7)
    assert decoded is not None and len(decoded) == 5
    built = [decoded.event(i) for i in range(5)]
    assert built == topic.events(records, 7)
    assert built[3].headers == [("trace", b"t3"), ("n", b"")]
    assert built[0].headers is not decoded.event(0).headers  # a list of its own, as events'
    assert topic.decoded([*records[:4], Rec(b"\xff", b"{}", 14)], 7) is None
    if value_type is not None:
        assert topic.decoded([*records[:4], Rec(b"k", b'{"page":1}', 14)], 7) is None
    stamped = Topic(NoApp(), "t", key_type=str, value_type=value_type,  # type: ignore[arg-type]
                    timestamp=lambda event: 1)
    assert stamped.decoded(records, 7) is None
