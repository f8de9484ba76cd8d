"""Hostile and broken input on raw sockets: garbage, truncated frames, absurd length
prefixes and array counts, unknown APIs and versions, corrupt and oversized record batches.
Each must close the connection or return a Kafka error; the broker process must stay up,
its memory bounded, and other clients unaffected."""

from __future__ import annotations

import datetime
import random
import re
import socket
import struct
import uuid
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i16, i32, i32Timedelta

from streamkit.log import Record, build_batch
from streamkit.log.batch import HEADER_SIZE
from streamkit.testing import BrokerProcess
from tests.integration.clients import ConfluentClient
from tests.integration.util import (
    Rec,
    call,
    closed_by_peer,
    connect,
    create_topic,
    raw_frame,
    request_frame,
    rss_kb,
    watermarks,
)

pytestmark = pytest.mark.integration

MESSAGE_MAX_BYTES = 65536
SOCKET_REQUEST_MAX_BYTES = 4 << 20
BROKER_SETTINGS = {"message.max.bytes": MESSAGE_MAX_BYTES, "socket.request.max.bytes": SOCKET_REQUEST_MAX_BYTES,
                   "num.partitions": 1}
RSS_BUDGET_KB = 200 * 1024


@pytest.fixture(scope="module")
def baseline_rss(broker: BrokerProcess) -> Iterator[int]:
    """The broker's RSS before any bad input; at the end of the module it must not have
    grown by more than RSS_BUDGET_KB."""
    assert broker.process is not None
    # warm up: a normal client round trip, so lazily built state is already there
    _roundtrip(broker, "warmup")
    before = rss_kb(broker.process.pid)
    yield before
    assert broker.process.poll() is None, "the broker died"
    growth = rss_kb(broker.process.pid) - before
    assert growth < RSS_BUDGET_KB, f"broker RSS grew by {growth} KiB over the bad-input tests"


@pytest.fixture
def healthy(broker: BrokerProcess, baseline_rss: int, request: pytest.FixtureRequest) -> Iterator[None]:
    """After the test: the broker is alive, within its memory budget, and serves a client."""
    yield
    assert broker.process is not None and broker.process.poll() is None, "the broker died"
    growth = rss_kb(broker.process.pid) - baseline_rss
    assert growth < RSS_BUDGET_KB, f"broker RSS grew by {growth} KiB"
    _roundtrip(broker, f"after-{request.node.name}")


def _roundtrip(broker: BrokerProcess, tag: str) -> None:
    topic = re.sub(r"[^a-zA-Z0-9._-]", "-", f"{tag}-{uuid.uuid4().hex[:6]}")[:200]
    create_topic(broker.bootstrap, topic, 1)
    client = ConfluentClient(broker.bootstrap)
    records = [Rec(b"k", f"v{i}".encode(), (), 1_700_000_000_000 + i) for i in range(5)]
    assert client.produce(topic, records) == [(0, i) for i in range(5)]
    assert [r.value for r in client.consume(topic, {0: 0}, 5)] == [r.value for r in records]


def _metadata_frame(correlation_id: int = 1) -> bytes:
    return request_frame(MetadataRequestV12(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False), correlation_id)


def _assert_closed_without_answer(sock: socket.socket, timeout: float = 10) -> None:
    assert closed_by_peer(sock, timeout), "the broker kept the connection open"


# -- garbage and framing -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes(broker: BrokerProcess, healthy: None, seed: int) -> None:
    rng = random.Random(seed)
    garbage = rng.randbytes(64 * 1024)
    if seed % 2:  # a plausible length prefix, then garbage: reaches the decoder
        garbage = struct.pack(">i", len(garbage) - 4) + garbage[4:]
    with connect(broker.bootstrap) as sock:
        try:
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return  # closed while we were still sending
        _assert_closed_without_answer(sock)


def test_truncated_frames_then_close(broker: BrokerProcess, healthy: None) -> None:
    frames = [_metadata_frame(), request_frame(ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(TopicProduceData(name="nope", partition_data=(PartitionProduceData(
            index=i32(0), records=build_batch([Record(b"k", b"v" * 100, 1)])),)),)))]
    for frame in frames:
        for cut in (1, 3, 4, 5, 12, len(frame) // 2, len(frame) - 1):
            with connect(broker.bootstrap) as sock:
                sock.sendall(frame[:cut])
            # and a truncated frame whose sender stays: no answer, connection kept until EOF
    with connect(broker.bootstrap) as sock:
        sock.sendall(frames[0][:-1])
        assert not closed_by_peer(sock, 0.5)
        sock.sendall(frames[0][-1:])  # completing it gets the answer
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        assert size > 0


@pytest.mark.parametrize("prefix", [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, (-100) & 0xFFFFFFFF, 0, 9,
                                    SOCKET_REQUEST_MAX_BYTES + 1])
def test_bad_length_prefix_closes_at_once(broker: BrokerProcess, healthy: None, prefix: int) -> None:
    """2 GiB - 1, 2 GiB (negative as int32), -1, -100, and too small or too large for a
    request: the connection is closed as soon as the 4 bytes arrive, without waiting for a
    body (and without allocating one)."""
    with connect(broker.bootstrap) as sock:
        sock.sendall(struct.pack(">I", prefix) + b"\x00\x03\x00\x0c")
        _assert_closed_without_answer(sock, timeout=5)


def test_many_connections_claiming_large_frames(broker: BrokerProcess, healthy: None) -> None:
    """100 connections each announce a frame of socket.request.max.bytes and send 64 KiB of
    it: the broker buffers what arrived, never what was announced (else: 400 MiB)."""
    socks = []
    try:
        for _ in range(100):
            sock = connect(broker.bootstrap)
            socks.append(sock)
            sock.sendall(struct.pack(">i", SOCKET_REQUEST_MAX_BYTES) + b"\x00" * (64 * 1024))
        assert broker.process is not None
        # still serving while all of them hang
        with connect(broker.bootstrap) as other:
            assert call(other, MetadataRequestV12(topics=None, allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False)).brokers
    finally:
        for sock in socks:
            sock.close()


# -- bodies that lie about their sizes -----------------------------------------------------


@pytest.mark.parametrize("case", ["metadata-v1-topics", "metadata-v1-name", "produce-v3-topics",
                                  "metadata-v12-compact", "produce-v9-compact-records"])
def test_huge_counts_in_tiny_bodies(broker: BrokerProcess, healthy: None, case: str) -> None:
    """Array counts and string lengths far beyond the bytes present (kio would allocate from
    the count before reading: up to 2^31 - 1 or 2^35 elements)."""
    payload = {
        # Metadata v1: topics array count 2^31 - 1, then one short topic name
        "metadata-v1-topics": (3, 1, struct.pack(">i", 0x7FFFFFFF) + b"\x00\x01t"),
        # one topic whose name claims 32767 bytes
        "metadata-v1-name": (3, 1, struct.pack(">ih", 1, 0x7FFF) + b"abc"),
        # Produce v3: transactional_id null, acks, timeout, topic_data count 2^31 - 1
        "produce-v3-topics": (0, 3, struct.pack(">hhii", -1, 1, 1000, 0x7FFFFFFF) + b"\x00"),
        # Metadata v12 (flexible; header v2 adds a tag byte): compact array count 2^35 - 1
        "metadata-v12-compact": (3, 12, b"\x00" + b"\xff\xff\xff\xff\x7f" + b"\x00\x00\x00"),
        # Produce v9: one topic, one partition whose compact records length is ~2^32
        "produce-v9-compact-records": (0, 9, b"\x00" + b"\x00" + struct.pack(">hi", -1, 1000) + b"\x02\x02t\x02"
                                       + struct.pack(">i", 0) + b"\xff\xff\xff\xff\x0f" + b"xx"),
    }[case]
    api_key, version, body = payload
    log_size = broker.log_file.stat().st_size
    with connect(broker.bootstrap) as sock:
        sock.sendall(raw_frame(api_key, version, 7, body))
        _assert_closed_without_answer(sock)
    # refused by the bounds check, before kio saw the count
    expected = {
        "metadata-v1-topics": "array of 2147483647 elements",
        "metadata-v1-name": "value of 32767 bytes",
        "produce-v3-topics": "array of 2147483647 elements",
        "metadata-v12-compact": "array of 34359738366 elements",
        "produce-v9-compact-records": "compact string of 4294967294 bytes",
    }[case]
    with broker.log_file.open("rb") as log:
        log.seek(log_size)
        new_lines = log.read().decode(errors="replace")
    assert "malformed request" in new_lines and expected in new_lines, new_lines


@pytest.mark.parametrize(("api_key", "version"), [(9999, 0), (-1, 0), (50, 1), (67, 0), (0, 10),
                                                  (1, 3), (1, 13), (3, 0), (3, 13)])
def test_unknown_api_or_unsupported_version_closes(broker: BrokerProcess, healthy: None, api_key: int,
                                                   version: int) -> None:
    """Unknown api keys and versions outside the served ranges close the connection, as
    Kafka does; the request before them on the same connection is answered."""
    with connect(broker.bootstrap) as sock:
        sock.sendall(_metadata_frame(1) + raw_frame(api_key, version, 2, b"\x00" * 32))
        (size, correlation_id) = struct.unpack(">ii", sock.recv(8, socket.MSG_WAITALL))
        assert correlation_id == 1
        remaining = size - 4
        while remaining:
            chunk = sock.recv(min(remaining, 65536))
            assert chunk
            remaining -= len(chunk)
        _assert_closed_without_answer(sock)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_is_answered_unsupported_version(broker: BrokerProcess, healthy: None, topic_name: str,
                                                        version: int) -> None:
    """Produce v0-v2 are advertised (librdkafka < 2.8 compresses only then) but not served:
    every partition gets UNSUPPORTED_VERSION, nothing is stored, the connection stays."""
    create_topic(broker.bootstrap, topic_name, 1)
    name = topic_name.encode()
    body = struct.pack(">hii", -1, 1000, 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">ii", 1, 0) + struct.pack(">i", 5) + b"\x00" * 5
    with connect(broker.bootstrap) as sock:
        sock.sendall(raw_frame(0, version, 7, body))
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        frame = sock.recv(size, socket.MSG_WAITALL)
        partition = struct.calcsize(">ihq" if version < 2 else ">ihqq")
        assert size == 4 + 4 + 2 + len(name) + 4 + partition + (4 if version else 0)
        (correlation_id, topics, length) = struct.unpack_from(">iih", frame)
        assert (correlation_id, topics, frame[10 : 10 + length]) == (7, 1, name)
        (count, index, code, offset) = struct.unpack_from(">iihq", frame, 10 + length)
        assert (count, index, code, offset) == (1, 0, ErrorCode.unsupported_version, -1)
        sock.sendall(_metadata_frame(8))
        assert struct.unpack(">ii", sock.recv(8, socket.MSG_WAITALL))[1] == 8
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)


# -- record batches --------------------------------------------------------------------------


def _produce(broker: BrokerProcess, topic: str, batch: bytes, partition: int = 0, acks: int = -1,
             transactional_id: str | None = None) -> tuple[ErrorCode, str | None, int]:
    request = ProduceRequest(transactional_id=transactional_id, acks=i16(acks),
                             timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=i32(partition), records=batch),)),))
    with connect(broker.bootstrap) as sock:
        response = call(sock, request, correlation_id=99)
    [topic_response] = response.responses
    [partition] = topic_response.partition_responses
    return partition.error_code, partition.error_message, int(partition.base_offset)


def _batch(n: int = 3, size: int = 20) -> bytes:
    return build_batch([Record(f"k{i}".encode(), bytes([65 + i]) * size, 1_700_000_000_000 + i) for i in range(n)])


@pytest.mark.parametrize("damage", ["flip-record-byte", "flip-crc", "flip-attributes", "truncate", "extend"])
def test_corrupt_batch_is_refused_and_not_stored(broker: BrokerProcess, healthy: None, topic_name: str,
                                                  damage: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    good = _batch()
    bad = bytearray(good)
    if damage == "flip-record-byte":
        bad[len(bad) - 5] ^= 0x01
    elif damage == "flip-crc":
        bad[17] ^= 0x80
    elif damage == "flip-attributes":
        bad[22] ^= 0x01  # compression bits: CRC-covered
    elif damage == "truncate":
        bad = bad[:-3]  # batchLength now says more than is there
    else:
        bad += b"\x00\x00\x00"  # trailing bytes the length field does not cover
    code, message, offset = _produce(broker, topic_name, bytes(bad))
    # Trailing bytes after a whole batch are refused as INVALID_RECORD (one batch per
    # partition); Kafka would silently trim them. Every other damage breaks the CRC-32C or
    # the framing: CORRUPT_MESSAGE.
    expected = ErrorCode.invalid_record if damage == "extend" else ErrorCode.corrupt_message
    assert code == expected, (code, message)
    assert offset == -1
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0), "a refused batch was stored"
    # the partition still takes a good batch, at offset 0
    assert _produce(broker, topic_name, good)[::2] == (ErrorCode.none, 0)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 3)


def test_batch_larger_than_message_max_bytes(broker: BrokerProcess, healthy: None, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    big = _batch(n=4, size=MESSAGE_MAX_BYTES // 4 + 100)
    assert len(big) > MESSAGE_MAX_BYTES
    code, message, offset = _produce(broker, topic_name, big)
    assert (code, offset) == (ErrorCode.message_too_large, -1), message
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    # exactly at the limit is fine
    fitting = _batch(n=1, size=10)
    pad = MESSAGE_MAX_BYTES - len(fitting)
    exact = _batch(n=1, size=10 + pad)
    exact = exact if len(exact) <= MESSAGE_MAX_BYTES else _batch(n=1, size=10 + pad - (len(exact) - MESSAGE_MAX_BYTES))
    assert len(exact) == MESSAGE_MAX_BYTES
    assert _produce(broker, topic_name, exact)[::2] == (ErrorCode.none, 0)
    # a topic-level max.message.bytes below the broker's applies to that topic
    small = f"{topic_name}-small"
    create_topic(broker.bootstrap, small, 1, {"max.message.bytes": "1000"})
    assert _produce(broker, small, _batch(n=1, size=2000))[0] == ErrorCode.message_too_large
    assert _produce(broker, small, _batch(n=1, size=500))[::2] == (ErrorCode.none, 0)


def test_client_sees_message_too_large(broker: BrokerProcess, healthy: None, topic_name: str) -> None:
    """The same through a real client: librdkafka's delivery report carries the error."""
    from confluent_kafka import KafkaError, Producer

    create_topic(broker.bootstrap, topic_name, 1)
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 10 * MESSAGE_MAX_BYTES,
                         "compression.type": "none", "log_level": 0})
    producer.produce(topic_name, b"x" * (2 * MESSAGE_MAX_BYTES), on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)


def test_header_size_guard(broker: BrokerProcess, healthy: None, topic_name: str) -> None:
    """Fewer bytes than a batch header, and a produce request without records."""
    create_topic(broker.bootstrap, topic_name, 1)
    code, _msg, _off = _produce(broker, topic_name, _batch()[: HEADER_SIZE - 1])
    assert code == ErrorCode.corrupt_message
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)


def test_produce_request_errors(broker: BrokerProcess, healthy: None, topic_name: str) -> None:
    """Well-formed batches the broker must still refuse, each with Kafka's error code."""
    create_topic(broker.bootstrap, topic_name, 2)
    batch = _batch()
    assert _produce(broker, topic_name, batch, partition=2)[0] == ErrorCode.unknown_topic_or_partition
    assert _produce(broker, topic_name, batch, partition=-1)[0] == ErrorCode.unknown_topic_or_partition
    assert _produce(broker, f"{topic_name}-nope", batch)[0] == ErrorCode.unknown_topic_or_partition
    assert _produce(broker, "__consumer_offsets", batch)[0] == ErrorCode.invalid_topic_exception
    assert _produce(broker, topic_name, batch, acks=2)[0] == ErrorCode.invalid_required_acks
    # a transactional.id with a batch that is not transactional (Kafka: InvalidRecordException)
    assert _produce(broker, topic_name, batch, transactional_id="tx")[0] == ErrorCode.invalid_record
    two = batch + _batch()  # Produce v3+: exactly one batch per partition
    assert _produce(broker, topic_name, two)[0] == ErrorCode.invalid_record
    assert [watermarks(broker.bootstrap, topic_name, p) for p in range(2)] == [(0, 0), (0, 0)]
    assert _produce(broker, topic_name, batch, partition=1)[::2] == (ErrorCode.none, 0)
