"""The compiled codecs of the hot APIs against kio's, over random messages of every version.

Responses (Produce, Fetch, ListOffsets, Metadata, Heartbeat, each supported version,
flexible ones with their tagged fields): a random kio response is encoded by the compiled
encoder, from the kio object and from the plain data a handler returns, and by kio's writer
(after ``build`` for the plain data); the bytes must be identical, and kio's reader must
decode the compiled bytes back to the same object.

Requests: a random kio request encoded by kio's writer is decoded on the fast path (compiled
guard + kio's reader) and on the generic one (guard.py + kio's reader): same object, equal to
the one written. Truncated and corrupted bodies get the same verdict from both guards
(GuardError from both, or the same end position).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from streamkit.broker.build import build
from streamkit.broker.codec import API_SPECS, FAST_PATH_APIS, Request, decode_request, encode_reply
from streamkit.broker.compiled_codec import encode_frame
from streamkit.broker.guard import GuardError
from tests.broker.kio_strategies import register

register()

HOT = sorted(k for k in API_SPECS if k[0] in FAST_PATH_APIS)
IDS = [f"{API_SPECS[k].name}-v{k[1]}" for k in HOT]
SOME = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def kio_bytes(obj: Any) -> bytes | None:
    """kio's encoding of ``obj``, or None when kio refuses it (out-of-range random values)."""
    out = io.BytesIO()
    try:
        entity_writer(type(obj))(out, obj)
    except (struct.error, TypeError, ValueError, OverflowError):
        return None
    return out.getvalue()


def compiled_bytes(encoder: Any, body: Any) -> bytes:
    out = bytearray()
    encoder(out, body)
    return bytes(out)


def to_plain(obj: Any, handler_style: bool) -> Any:
    """A kio object as a handler's plain reply: dicts and lists; with ``handler_style`` also
    integer milliseconds, integer error codes, epoch milliseconds and UUID strings, as the
    handlers write them (build() converts those back)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name), handler_style) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [to_plain(item, handler_style) for item in obj]
    if not handler_style:
        return obj
    if isinstance(obj, ErrorCode):
        return int(obj.value)
    if isinstance(obj, datetime.timedelta) and obj == datetime.timedelta(milliseconds=round(obj.total_seconds() * 1000)):
        return round(obj.total_seconds() * 1000)
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, datetime.datetime) and obj >= _EPOCH:
        ms = round(obj.timestamp() * 1000)
        if _EPOCH + datetime.timedelta(milliseconds=ms) == obj:
            return ms
    return obj


def drop_defaults(plain: dict[str, Any], cls: type) -> dict[str, Any]:
    """``plain`` without the top-level keys that kio defaults (build() fills them back)."""
    defaults = {f.name for f in dataclasses.fields(cls)
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
    return {k: v for k, v in plain.items() if k not in defaults}


@pytest.mark.parametrize("key", HOT, ids=IDS)
@SOME
@given(data=st.data())
def test_response_encoders_match_kio(key: tuple[int, int], data: st.DataObject) -> None:
    spec = API_SPECS[key]
    assert spec.compiled is not None
    from_plain, from_kio = spec.compiled
    obj = data.draw(st.from_type(spec.response_type))
    expected = kio_bytes(obj)
    assume(expected is not None)
    # compiled from the kio object -> the same bytes, and kio reads them back
    ours = compiled_bytes(from_kio, obj)
    assert ours == expected
    back, size = entity_reader(spec.response_type)(ours, 0)
    assert size == len(ours)
    assert back == obj
    # compiled from a handler's plain data -> what build() + kio's writer make of it
    handler_style = data.draw(st.booleans())
    plain = to_plain(obj, handler_style)
    if data.draw(st.booleans()):
        plain = drop_defaults(plain, spec.response_type)
    reference = kio_bytes(build(spec.response_type, plain))
    assert reference is not None
    assert compiled_bytes(from_plain, plain) == reference


def request_of(key: tuple[int, int], correlation_id: int = 7) -> Request:
    return Request(key[0], key[1], correlation_id, "c", None, 0)


@pytest.mark.parametrize("key", [(0, 9), (1, 12), (3, 12), (2, 7), (12, 4), (0, 3), (1, 4)],
                         ids=lambda k: f"{k[0]}-v{k[1]}")
@SOME
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_encode_reply_same_frames_on_both_paths(key: tuple[int, int], data: st.DataObject,
                                                correlation_id: int) -> None:
    spec = API_SPECS[key]
    obj = data.draw(st.from_type(spec.response_type))
    assume(kio_bytes(obj) is not None)
    request = request_of(key, correlation_id)
    plain = to_plain(obj, handler_style=True)
    generic = encode_reply(request, plain, fast=False)
    assert encode_reply(request, plain, fast=True) == generic
    assert encode_reply(request, {"__body__": obj}, fast=True) == encode_reply(request, {"__body__": obj}, fast=False)
    # the frame: size prefix, correlation id, header tagged fields (v1), body
    (size, cid) = struct.unpack_from(">ii", generic, 0)
    assert size == len(generic) - 4 and cid == correlation_id
    assert encode_frame(correlation_id, spec.response_header_version, spec.compiled[1], obj) == generic  # type: ignore[index]


def client_frame(body: Any, correlation_id: int = 1) -> bytes:
    """A request frame (header + body, no size prefix) as a Kafka client writes it."""
    header_type = type(body).__header_schema__
    header = header_type(request_api_key=i16(type(body).__api_key__),
                         request_api_version=i16(type(body).__version__),
                         correlation_id=i32(correlation_id), client_id="test-client")
    out = io.BytesIO()
    entity_writer(header_type)(out, header)
    entity_writer(type(body))(out, body)
    return out.getvalue()


def header_size(frame: bytes, flexible_header: bool) -> int:
    (length,) = struct.unpack_from(">h", frame, 8)
    return 10 + max(length, 0) + (1 if flexible_header else 0)


@pytest.mark.parametrize("key", HOT, ids=IDS)
@SOME
@given(data=st.data())
def test_request_decoders_match_kio(key: tuple[int, int], data: st.DataObject) -> None:
    spec = API_SPECS[key]
    assert spec.compiled_guard is not None
    obj = data.draw(st.from_type(spec.request_type))
    assume(kio_bytes(obj) is not None)
    frame = client_frame(obj)
    fast = decode_request(frame, fast=True)
    generic = decode_request(frame, fast=False)
    assert fast == generic
    assert fast.body == obj
    # Both guards judge every truncation and a corrupted byte alike.
    start = header_size(frame, spec.request_header_version >= 2)
    body = frame[start:]
    cut = data.draw(st.integers(0, len(body)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(len(body) - 1, 0)), st.integers(0, 255)),
                               max_size=3))
    mutated = bytearray(body[:cut])
    for at, value in flips:
        if at < len(mutated):
            mutated[at] = value
    view = bytes(mutated)
    assert verdict(spec.compiled_guard, view) == verdict(spec.request_guard, view)


def verdict(guard: Any, body: bytes) -> int | str:
    try:
        end: int = guard(body, 0, len(body))
    except GuardError:
        return "GuardError"
    return end


@pytest.mark.parametrize("key", HOT, ids=IDS)
def test_guards_refuse_huge_counts_alike(key: tuple[int, int]) -> None:
    """A body that is nothing but 0xff bytes: huge or negative lengths everywhere."""
    spec = API_SPECS[key]
    assert spec.compiled_guard is not None
    for size in (0, 1, 4, 7, 16, 64):
        body = b"\xff" * size
        assert verdict(spec.compiled_guard, body) == verdict(spec.request_guard, body)


@pytest.mark.parametrize("version", [4, 11, 12], ids=lambda v: f"Fetch-v{v}")
@settings(max_examples=10, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 100, 32 * 1024 - 1, 32 * 1024, 300_000]), min_size=1, max_size=4))
def test_large_records_are_framed_like_kio(version: int, sizes: list[int]) -> None:
    """Record batches from 32 KiB up are kept out of the growing buffer (one copy at the end):
    the frame is still kio's, byte for byte, around and between them."""
    partitions = [{"partition_index": i, "error_code": 0, "high_watermark": 10 + i, "last_stable_offset": 10,
                   "log_start_offset": 0, "preferred_read_replica": -1, "aborted_transactions": None,
                   "records": bytes([i + 1]) * size} for i, size in enumerate(sizes)]
    reply = {"throttle_time": 0, "error_code": 0, "session_id": 0,
             "responses": [{"topic": "t", "partitions": partitions}]}
    request = request_of((1, version))
    frame = encode_reply(request, reply, fast=True)
    assert frame == encode_reply(request, reply, fast=False)
    spec = API_SPECS[1, version]
    body, _size = entity_reader(spec.response_type)(frame, 8 + (1 if spec.response_header_version else 0))
    assert [bytes(p.records) for p in body.responses[0].partitions] == [p["records"] for p in partitions]
