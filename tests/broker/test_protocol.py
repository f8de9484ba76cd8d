"""The sans-IO protocol layer against in-memory peers (h11 style).

The "client" side encodes requests exactly as a Kafka client does (kio writers for
header + body, int32 size prefix; or kafka-python's own encoders) and decodes responses
with kio readers / kafka-python decoders.  The broker side is ``Connection``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import itertools
import os
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from streamkit.broker.guard import GuardError, body_guard
from streamkit.broker.protocol import (
    ADVERTISED_VERSIONS,
    API_SPECS,
    MIN_REQUEST_SIZE,
    SUPPORTED_VERSIONS,
    ApiSpec,
    Connection,
    DecodeError,
    Disposition,
    FrameError,
    LocalProtocolError,
    Request,
    api_versions_response,
    decode_request,
    disposition,
    encode_response,
    unsupported_api_versions_response,
)
from tests.broker import kio_strategies

# kafka-python 3 loads its JSON schemas with importlib.resources.read_text (deprecated).
pytestmark = pytest.mark.filterwarnings(
    r"ignore:\w+ is deprecated. Use files\(\) instead:DeprecationWarning"
)

kio_strategies.register()

SPECS = sorted(API_SPECS)
FEW = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- client-side helpers -------------------------------------------------------------


def write(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def client_frame(
    body: Any, correlation_id: int = 1, client_id: str | None = "test-client"
) -> bytes:
    """A request frame as a Kafka client sends it."""
    header_type = type(body).__header_schema__
    header = header_type(
        request_api_key=i16(type(body).__api_key__),
        request_api_version=i16(type(body).__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    data = write(header) + write(body)
    return struct.pack(">i", len(data)) + data


def raw_frame(
    api_key: int, api_version: int, correlation_id: int, payload: bytes, client_id: bytes = b"c"
) -> bytes:
    """A hand-made frame with header v1 layout (plus ``payload`` verbatim)."""
    data = (
        struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id))
        + client_id
        + payload
    )
    return struct.pack(">i", len(data)) + data


def client_read_response(data: bytes, request_type: type[Any]) -> tuple[int, int, Any]:
    """Decode a response frame as the client does: (correlation_id, header_size, body)."""
    (size,) = struct.unpack_from(">i", data, 0)
    assert size == len(data) - 4
    response_type = load_response_schema(request_type.__api_key__, request_type.__version__)
    header, header_size = entity_reader(response_type.__header_schema__)(data, 4)
    body, body_size = entity_reader(response_type)(data, 4 + header_size)
    assert 4 + header_size + body_size == len(data)
    return header.correlation_id, header_size, body


def kio_reads_back(body: Any) -> bool:
    try:
        entity_reader(type(body))(write(body), 0)
    except ValueError:
        return False
    return True


def feed(conn: Connection, chunks: Iterator[bytes] | list[bytes]) -> list[Request]:
    out: list[Request] = []
    for chunk in chunks:
        conn.receive_data(chunk)
        while (request := conn.next_request()) is not None:
            out.append(request)
    return out


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def specs(kind: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    ids = [f"{API_SPECS[k].name}-v{k[1]}" for k in SPECS]
    return pytest.mark.parametrize(kind, [API_SPECS[k] for k in SPECS], ids=ids)


# -- the table ---------------------------------------------------------------------


def test_table_covers_supported_versions() -> None:
    expected = {(k, v) for k, (lo, hi) in SUPPORTED_VERSIONS.items() for v in range(lo, hi + 1)}
    assert set(API_SPECS) == expected
    for (key, version), spec in API_SPECS.items():
        assert spec.request_type is load_request_schema(key, version)
        assert spec.response_type is load_response_schema(key, version)
        assert spec.request_type.__api_key__ == key and spec.request_type.__version__ == version
        assert spec.request_header_version == (2 if spec.flexible else 1)
        flexible_response = spec.response_type.__flexible__ and key != 18
        assert spec.response_header_version == (1 if flexible_response else 0)


def test_supported_versions_table_is_final() -> None:
    assert SUPPORTED_VERSIONS[18] == (0, 3)
    assert SUPPORTED_VERSIONS[1] == (4, 12)  # no topic-id Fetch
    assert SUPPORTED_VERSIONS[0] == (3, 9)
    assert SUPPORTED_VERSIONS[3] == (1, 12)
    # 134 + the transaction APIs (4 x v0-v3, DescribeTransactions v0, ListTransactions v0-v1)
    # + the share-group APIs (ShareGroupHeartbeat/Describe v1, ShareFetch/Acknowledge v1-v2,
    # DescribeShareGroupOffsets v0-v1, Alter/DeleteShareGroupOffsets v0)
    # + KIP-848: ConsumerGroupHeartbeat v0-v1, ConsumerGroupDescribe v0-v1, OffsetCommit v9,
    # OffsetFetch v9, ListGroups v5
    # + the cluster's: OffsetForLeaderEpoch v2-v4, WriteTxnMarkers v1, ElectLeaders v0-v2,
    # AlterPartitionReassignments v0, ListPartitionReassignments v0
    # + security: SaslHandshake v0-v1, SaslAuthenticate v0-v2, Describe/AlterUserScramCredentials v0
    # + the ACL APIs: DescribeAcls, CreateAcls, DeleteAcls v1-v3
    # + DescribeClientQuotas, AlterClientQuotas v0-v1
    assert len(API_SPECS) == 199


# -- requests: every supported (api_key, version) ------------------------------------


@specs("spec")
@FEW
@given(data=st.data())
def test_request_roundtrip_all_versions(spec: ApiSpec, data: st.DataObject) -> None:
    body = data.draw(st.from_type(spec.request_type))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    client_id = data.draw(st.none() | st.text(max_size=20))
    frame = client_frame(body, correlation_id, client_id)
    cuts = data.draw(st.lists(st.integers(0, len(frame)), max_size=6))
    conn = Connection()
    if not kio_reads_back(body):
        # kio writes some values it cannot read (an i64 timedelta beyond Python's
        # timedelta range, e.g. OffsetCommit v2-4 retention_time near Long.MAX_VALUE):
        # the broker must reject those with DecodeError, not crash.
        with pytest.raises(DecodeError, match="timedelta"):
            feed(conn, split(frame, cuts))
        return
    [request] = feed(conn, split(frame, cuts))
    assert request == Request(
        spec.api_key, spec.api_version, correlation_id, client_id, body, len(frame) - 4, True
    )
    assert disposition(request) is Disposition.HANDLE
    assert conn.buffered == 0 and conn.pending == 1


@FEW
@given(data=st.data())
def test_pipelined_requests_in_random_chunks(data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from(SPECS), min_size=2, max_size=6))
    bodies = [data.draw(st.from_type(API_SPECS[k].request_type)) for k in chosen]
    stream = b"".join(client_frame(b, correlation_id=i) for i, b in enumerate(bodies))
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    conn = Connection()
    requests = feed(conn, split(stream, cuts))
    assert [r.body for r in requests] == bodies
    assert [r.correlation_id for r in requests] == list(range(len(bodies)))
    assert conn.pending == len(bodies)
    # responses come back in order, each decodable by the client
    for request in requests:
        response_type = API_SPECS[request.api_key, request.api_version].response_type
        body = data.draw(st.from_type(response_type))
        out = conn.encode_response(request, body)
        correlation_id, _, decoded = client_read_response(out, type(request.body))
        assert (correlation_id, decoded) == (request.correlation_id, body)
    assert conn.pending == 0


def test_whole_stream_in_one_chunk_and_byte_by_byte() -> None:
    from kio.schema.metadata.v1.request import MetadataRequest as MetadataV1
    from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
    from kio.schema.metadata.v12.request import MetadataRequestTopic

    bodies = [
        MetadataV1(topics=None),
        MetadataV12(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName("t")),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=True,
        ),
    ] * 3
    stream = b"".join(client_frame(b, i) for i, b in enumerate(bodies))
    assert [r.body for r in feed(Connection(), [stream])] == bodies
    assert [
        r.body for r in feed(Connection(), [stream[i : i + 1] for i in range(len(stream))])
    ] == bodies


def test_truncated_frame_waits_for_more_bytes() -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    frame = client_frame(ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    conn = Connection()
    for i in range(len(frame) - 1):
        conn.receive_data(frame[i : i + 1])
        assert conn.next_request() is None
    assert conn.buffered == len(frame) - 1
    conn.receive_data(frame[-1:])
    assert conn.next_request() is not None
    assert conn.buffered == 0


# -- responses ---------------------------------------------------------------------


def make_request(spec: ApiSpec, correlation_id: int = 42) -> Request:
    return Request(spec.api_key, spec.api_version, correlation_id, "c", None, 0, True)


@specs("spec")
@FEW
@given(data=st.data())
def test_response_roundtrip_all_versions(spec: ApiSpec, data: st.DataObject) -> None:
    body = data.draw(st.from_type(spec.response_type))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    out = encode_response(make_request(spec, correlation_id), body)
    got_id, header_size, decoded = client_read_response(out, spec.request_type)
    assert (got_id, decoded) == (correlation_id, body)
    flexible_header = spec.flexible and spec.api_key != 18
    assert header_size == (5 if flexible_header else 4)
    if flexible_header:
        assert out[8] == 0  # no tagged fields in the response header


def test_response_type_is_checked() -> None:
    with pytest.raises(LocalProtocolError):
        encode_response(make_request(API_SPECS[3, 12]), api_versions_response(3))
    with pytest.raises(LocalProtocolError):  # right API, wrong version
        encode_response(make_request(API_SPECS[18, 2]), api_versions_response(3))


def test_responses_must_follow_request_order() -> None:
    from kio.schema.heartbeat.v4.request import HeartbeatRequest

    conn = Connection()
    body = HeartbeatRequest(
        group_id=GroupId("g"), generation_id=i32(1), member_id="m", group_instance_id=None
    )
    first, second, third = feed(
        conn, [client_frame(body, 1) + client_frame(body, 2) + client_frame(body, 3)]
    )
    response = api_versions_response(3)  # wrong type on purpose: must not consume the slot
    with pytest.raises(LocalProtocolError):
        conn.encode_response(first, response)
    ok = make(
        load_response_schema(12, 4), throttle_time=datetime.timedelta(0), error_code=ErrorCode.none
    )
    with pytest.raises(LocalProtocolError):
        conn.encode_response(second, ok)
    assert client_read_response(conn.encode_response(first, ok), HeartbeatRequest)[0] == 1
    conn.discard(second)  # e.g. acks=0
    assert client_read_response(conn.encode_response(third, ok), HeartbeatRequest)[0] == 3
    assert conn.pending == 0


# -- ApiVersions -------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_response_lists_supported_versions(version: int) -> None:
    request_type = load_request_schema(18, version)
    body = api_versions_response(version, throttle_time_ms=7 if version else 0)
    out = encode_response(make_request(API_SPECS[18, version], 9), body)
    correlation_id, header_size, decoded = client_read_response(out, request_type)
    assert (correlation_id, header_size) == (9, 4)  # header v0 even for flexible v3
    assert decoded.error_code == ErrorCode.none
    assert {
        k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys
    } == ADVERTISED_VERSIONS


def test_api_versions_v3_parsed_by_kafka_python() -> None:
    from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse

    out = encode_response(make_request(API_SPECS[18, 3], 5), api_versions_response(3))
    decoded = KpApiVersionsResponse.decode(out, version=3, header=True, framed=True)
    assert decoded.header.correlation_id == 5 and decoded.error_code == 0
    assert {
        k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys
    } == ADVERTISED_VERSIONS


@pytest.mark.parametrize("version", [4, 5, 99, 32767])
def test_unsupported_api_versions_version_gets_v0_error(version: int) -> None:
    # A newer client's ApiVersions body is opaque to us: only the header is read.
    frame = raw_frame(18, version, 77, b"\x00\x05hello-future-body", client_id=b"new-client")
    conn = Connection()
    [request] = feed(conn, [frame])
    assert (request.supported, request.body, request.correlation_id, request.client_id) == (
        False,
        None,
        77,
        "new-client",
    )
    assert disposition(request) is Disposition.REJECT_API_VERSIONS
    out = conn.encode_unsupported_api_versions(request)
    assert out == unsupported_api_versions_response(request)
    # the client reads header v0 + ApiVersions v0, whatever version it sent
    (size, correlation_id) = struct.unpack_from(">ii", out, 0)
    assert (size, correlation_id) == (len(out) - 4, 77)
    body, n = entity_reader(ApiVersionsResponseV0)(out, 8)
    assert 8 + n == len(out)
    assert body.error_code == ErrorCode.unsupported_version
    # the same ranges as every other ApiVersions answer: one source of truth
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == ADVERTISED_VERSIONS
    assert ADVERTISED_VERSIONS[0] == (0, 9)


def test_kafka_python_api_versions_v4_negotiation() -> None:
    from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersionsRequest
    from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse

    request = KpApiVersionsRequest(
        client_software_name="kafka-python", client_software_version="3.0", version=4
    )
    request.with_header(correlation_id=3, client_id="kp")
    conn = Connection()
    [decoded] = feed(conn, [bytes(request.encode(header=True, framed=True))])
    assert disposition(decoded) is Disposition.REJECT_API_VERSIONS
    response = KpApiVersionsResponse.decode(
        conn.encode_unsupported_api_versions(decoded), version=4, header=True, framed=True
    )
    assert response.header.correlation_id == 3
    assert response.error_code == ErrorCode.unsupported_version
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}[18] == (0, 3)


@pytest.mark.parametrize(
    ("api_key", "version"), [(3, 13), (1, 13), (0, 10), (9999, 0), (-1, 0), (17, 2), (3, -1)]
)
def test_unknown_api_or_version_means_close(api_key: int, version: int) -> None:
    [request] = feed(Connection(), [raw_frame(api_key, version, 5, b"\x00\x00\x00")])
    assert (request.supported, request.body, request.correlation_id) == (False, None, 5)
    assert disposition(request) is Disposition.CLOSE
    with pytest.raises(LocalProtocolError):
        encode_response(request, api_versions_response(0))
    with pytest.raises(LocalProtocolError):
        unsupported_api_versions_response(request)


# -- frame errors ------------------------------------------------------------------


@pytest.mark.parametrize("size", [2**31 - 1, -(2**31), -1, 0, 1, MIN_REQUEST_SIZE - 1, 104857601])
def test_bad_length_prefix_fails_before_body(size: int) -> None:
    conn = Connection()
    conn.receive_data(struct.pack(">i", size))  # no body bytes at all: must not wait for them
    with pytest.raises(FrameError):
        conn.next_request()
    assert conn.failed
    conn.receive_data(b"more")
    with pytest.raises(FrameError):  # sticky
        conn.next_request()


def test_max_request_size_is_configurable() -> None:
    from kio.schema.metadata.v1.request import MetadataRequest

    frame = client_frame(MetadataRequest(topics=()))
    assert feed(Connection(max_request_size=len(frame) - 4), [frame])
    conn = Connection(max_request_size=len(frame) - 5)
    conn.receive_data(frame[:4])
    with pytest.raises(FrameError, match=r"socket\.request\.max\.bytes"):
        conn.next_request()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=5))
def test_random_bytes_only_raise_frame_errors(data: bytes, cuts: list[int]) -> None:
    conn = Connection(max_request_size=1024)
    try:
        feed(conn, split(data, cuts))
    except FrameError:
        assert conn.failed


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_mutated_requests_decode_or_raise_decode_error(data: st.DataObject) -> None:
    """Corrupt valid frames (size prefix kept consistent): decode or DecodeError, nothing else."""
    spec = API_SPECS[data.draw(st.sampled_from(SPECS))]
    frame = bytearray(client_frame(data.draw(st.from_type(spec.request_type)))[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        pos = data.draw(st.integers(MIN_REQUEST_SIZE, max(MIN_REQUEST_SIZE, len(frame))))
        if action == "flip" and pos < len(frame):
            frame[pos] = data.draw(
                st.sampled_from([0x00, 0x7F, 0x80, 0xFF, data.draw(st.integers(0, 255))])
            )
        elif action == "cut":
            del frame[pos:]
        else:
            frame[pos:pos] = data.draw(st.binary(min_size=1, max_size=5))
    if len(frame) < MIN_REQUEST_SIZE:
        return
    with contextlib.suppress(DecodeError):
        decode_request(bytes(frame))


def test_trailing_bytes_after_the_body_are_ignored() -> None:
    """As in Kafka (librdkafka 2.x sends extra bytes after some Metadata v12 requests)."""
    from kio.schema.metadata.v12.request import MetadataRequest

    body = MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    frame = client_frame(body, correlation_id=3)
    data = frame[4:] + b"\x00\x00\x00"
    [request] = feed(Connection(), [struct.pack(">i", len(data)) + data])
    assert (request.body, request.correlation_id, request.raw_size) == (body, 3, len(data))


def test_decode_error_carries_header_fields() -> None:
    frame = raw_frame(3, 1, 1234, b"\x00\x00")  # Metadata v1 body needs 4 bytes
    with pytest.raises(DecodeError) as info:
        feed(Connection(), [frame])
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (3, 1, 1234)


# Bogus counts: each tiny body claims a huge array.  kio's native reader reserves
# count * 8 bytes *before* reading elements; a 5-byte compact count asks for 256 GiB
# and aborts the process.  The guard must reject all of these without calling kio.
EVIL_BODIES: dict[str, tuple[int, int, bytes]] = {
    "legacy count 2^31-1 (Metadata v1)": (3, 1, struct.pack(">i", 2**31 - 1) + b"\x00\x01x"),
    "compact count 2^35-2 (Metadata v12)": (3, 12, b"\xff\xff\xff\xff\x7f" + b"\x00" * 8),
    "compact count 2^31-1 (Metadata v9)": (3, 9, b"\x80\x80\x80\x80\x08" + b"\x00" * 8),
    "nested legacy partitions (Produce v3)": (
        0,
        3,
        struct.pack(">hhi", -1, 1, 1000)
        + struct.pack(">i", 1)
        + b"\x00\x01t"
        + struct.pack(">i", 2**31 - 1),
    ),
    "nested compact partitions (Produce v9)": (
        0,
        9,
        b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02\x02t" + b"\xff\xff\xff\xff\x0f",
    ),
    "legacy topics count (Fetch v4)": (
        1,
        4,
        struct.pack(">iiiib", -1, 0, 1, 1, 0) + struct.pack(">i", 2**31 - 1) + b"\x00" * 4,
    ),
    "tagged field size 2^31 (Fetch v12)": (
        1,
        12,
        b"\x00" * 25 + b"\x01\x01\x01" + b"\x01\x00\x80\x80\x80\x80\x08",
    ),
}


@pytest.mark.parametrize("name", list(EVIL_BODIES))
def test_guard_rejects_bogus_counts(name: str) -> None:
    api_key, version, payload = EVIL_BODIES[name]
    frame = raw_frame(api_key, version, 1, payload)
    header_end = 4 + 10 + 1  # size + fixed header + "c"
    if API_SPECS[api_key, version].request_header_version == 2:
        frame = (
            struct.pack(">i", len(frame) - 3) + frame[4:header_end] + b"\x00" + frame[header_end:]
        )
        header_end += 1
    guard = body_guard(API_SPECS[api_key, version].request_type)
    with pytest.raises(GuardError):
        guard(frame, header_end, len(frame))
    with pytest.raises(DecodeError):
        feed(Connection(), [frame])


def test_bogus_counts_do_not_allocate_in_a_memory_capped_process() -> None:
    """Decode every evil frame in a child with a 1 GiB address-space cap and tracemalloc.

    Run out of process because a regression makes kio abort(), which would kill pytest.
    """
    script = textwrap.dedent(
        """
        import resource, struct, sys, time, tracemalloc
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        sys.path[:0] = [{tests!r}]
        from test_protocol import EVIL_BODIES, raw_frame
        from streamkit.broker.protocol import API_SPECS, Connection, DecodeError
        tracemalloc.start()
        for name, (api_key, version, payload) in EVIL_BODIES.items():
            frame = raw_frame(api_key, version, 1, payload)
            if API_SPECS[api_key, version].request_header_version == 2:
                frame = struct.pack(">i", len(frame) - 3) + frame[4:15] + b"\\x00" + frame[15:]
            conn = Connection()
            conn.receive_data(frame)
            start = time.perf_counter()
            try:
                conn.next_request()
            except DecodeError:
                pass
            else:
                raise SystemExit(f"accepted: {{name}}")
            assert time.perf_counter() - start < 0.5, name
        peak = tracemalloc.get_traced_memory()[1]
        assert peak < 1 << 20, peak
        print("ok")
        """
    ).format(tests=os.path.dirname(__file__))
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


# -- cross-check with kafka-python's encoders/decoders -------------------------------


def make(cls: Any, **kwargs: Any) -> Any:
    """Instantiate a kio class, dropping the kwargs this version does not have."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in kwargs.items() if k in names})


def kp_frame(message: Any, correlation_id: int = 11) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id="kafka-python")
    return bytes(message.encode(header=True, framed=True))


def records_blob() -> bytes:
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"v" * 100, headers=[])
    builder.close()
    return bytes(builder.buffer())


@pytest.mark.parametrize("version", [1, 4, 8, 9, 10, 12])
def test_kafka_python_metadata_request(version: int) -> None:
    from kafka.protocol.metadata import MetadataRequest as KpMetadataRequest

    topics = [KpMetadataRequest.MetadataRequestTopic(name=n) for n in ("a", "b")]
    [request] = feed(
        Connection(),
        [
            kp_frame(
                KpMetadataRequest(topics=topics, allow_auto_topic_creation=False, version=version)
            )
        ],
    )
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        3,
        version,
        11,
        "kafka-python",
    )
    assert [t.name for t in request.body.topics] == ["a", "b"]
    if version >= 4:
        assert request.body.allow_auto_topic_creation is False


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_api_versions_request(version: int) -> None:
    from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersionsRequest

    message = KpApiVersionsRequest(
        client_software_name="kafka-python", client_software_version="3.0", version=version
    )
    [request] = feed(Connection(), [kp_frame(message)])
    assert request.supported and request.api_version == version
    if version >= 3:
        assert request.body.client_software_name == "kafka-python"


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9])
def test_kafka_python_produce_request_and_response(version: int) -> None:
    from kafka.protocol.producer import ProduceRequest as KpProduceRequest
    from kafka.protocol.producer import ProduceResponse as KpProduceResponse

    blob = records_blob()
    partition = KpProduceRequest.TopicProduceData.PartitionProduceData(index=2, records=blob)
    topic = KpProduceRequest.TopicProduceData(name="events", partition_data=[partition])
    message = KpProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[topic], version=version
    )
    conn = Connection()
    [request] = feed(conn, [kp_frame(message)])
    body: Any = request.body
    assert (body.acks, body.timeout.total_seconds(), body.transactional_id) == (-1, 30.0, None)
    [topic_data] = body.topic_data
    assert topic_data.name == "events"
    assert [(p.index, p.records) for p in topic_data.partition_data] == [(2, blob)]

    response_type = API_SPECS[0, version].response_type
    module = sys.modules[response_type.__module__]
    partition_response = make(
        module.PartitionProduceResponse,
        index=i32(2),
        error_code=ErrorCode.none,
        base_offset=41,
        record_errors=(),
    )
    topic_response = module.TopicProduceResponse(
        name="events", partition_responses=(partition_response,)
    )
    response = make(response_type, responses=(topic_response,), throttle_time=datetime.timedelta(0))
    out = conn.encode_response(request, response)
    decoded = KpProduceResponse.decode(out, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 11
    [kp_partition] = decoded.responses[0].partition_responses
    assert (kp_partition.index, kp_partition.error_code, kp_partition.base_offset) == (2, 0, 41)
    assert kp_partition.log_append_time_ms == -1


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_kafka_python_fetch_request_and_response(version: int) -> None:
    from kafka.protocol.consumer import FetchRequest as KpFetchRequest
    from kafka.protocol.consumer import FetchResponse as KpFetchResponse

    partition = KpFetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=5, partition_max_bytes=1 << 20
    )
    message = KpFetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        topics=[KpFetchRequest.FetchTopic(topic="events", partitions=[partition])],
        version=version,
    )
    conn = Connection()
    [request] = feed(conn, [kp_frame(message)])
    body: Any = request.body
    assert body.max_wait.total_seconds() == 0.5 and body.isolation_level == 1
    assert body.topics[0].topic == "events" and body.topics[0].partitions[0].fetch_offset == 5

    blob = records_blob()
    module = sys.modules[API_SPECS[1, version].response_type.__module__]
    partition_data = make(
        module.PartitionData,
        partition_index=i32(0),
        error_code=ErrorCode.none,
        high_watermark=6,
        last_stable_offset=6,
        log_start_offset=0,
        aborted_transactions=None,
        records=blob,
    )
    topic_response = module.FetchableTopicResponse(topic="events", partitions=(partition_data,))
    response = make(
        module.FetchResponse,
        responses=(topic_response,),
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=i32(0),
    )
    out = conn.encode_response(request, response)
    decoded = KpFetchResponse.decode(out, version=version, header=True, framed=True)
    [kp_partition] = decoded.responses[0].partitions
    assert kp_partition.high_watermark == 6
    records = kp_partition.records
    assert (records if isinstance(records, bytes) else bytes(records.buffer())) == blob


# -- Produce v0-v2: advertised, answered with UNSUPPORTED_VERSION -------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_gets_unsupported_version_per_partition(version: int) -> None:
    """kafka-python's own encoder and decoder for Produce v0-v2, independent of ours."""
    from kafka.protocol.producer import ProduceRequest as KpProduceRequest
    from kafka.protocol.producer import ProduceResponse as KpProduceResponse

    data = KpProduceRequest.TopicProduceData
    topics = [data(name="a", partition_data=[data.PartitionProduceData(index=i, records=b"x" * 30) for i in (0, 4)]),
              data(name="b", partition_data=[data.PartitionProduceData(index=1, records=None)])]
    message = KpProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=topics, version=version)
    conn = Connection()
    [request] = feed(conn, [kp_frame(message, correlation_id=21)])
    assert not request.supported and disposition(request) is Disposition.REJECT_PRODUCE
    out = conn.encode_unsupported_produce(request)
    assert conn.pending == 0
    decoded = KpProduceResponse.decode(out, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 21
    got = [(t.name, p.index, p.error_code, p.base_offset) for t in decoded.responses for p in t.partition_responses]
    code = ErrorCode.unsupported_version
    assert got == [("a", 0, code, -1), ("a", 4, code, -1), ("b", 1, code, -1)]


def test_legacy_produce_with_acks_0_closes() -> None:
    # no response is expected, so no error can be delivered: close, as Kafka does
    payload = struct.pack(">hii", 0, 1000, 0)
    [request] = feed(Connection(), [raw_frame(0, 1, 3, payload)])
    assert disposition(request) is Disposition.CLOSE


@pytest.mark.parametrize("payload", [b"", struct.pack(">hii", 1, 10, 2**31 - 1),
                                     struct.pack(">hiih", 1, 10, 1, 50) + b"ab",
                                     struct.pack(">hiih", 1, 10, 1, 1) + b"t" + struct.pack(">iii", 1, 0, 99)])
def test_malformed_legacy_produce_is_a_decode_error(payload: bytes) -> None:
    with pytest.raises(DecodeError, match="Produce v0-v2"):
        feed(Connection(), [raw_frame(0, 2, 3, payload)])
