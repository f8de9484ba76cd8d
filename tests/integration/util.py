"""Helpers shared by the integration tests (no fixtures here; see conftest.py)."""

from __future__ import annotations

import io
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from streamkit.log.batch import BatchHeader, iter_batch_spans, parse_header

T = TypeVar("T")

# librdkafka logs every broker disconnect at level 3-6; tests that stop brokers on purpose
# do not want that noise, errors still reach error_cb / delivery reports.
QUIET: dict[str, Any] = {"log_level": 0}


def wait_until(predicate: Callable[[], T], timeout: float, what: str | Callable[[], str],
               interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds
    (``what`` may be a callable, to describe the state at the time of the failure)."""
    deadline = time.monotonic() + timeout
    last: T = predicate()
    while not last:
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {described} (last: {last!r})")
        time.sleep(interval)
        last = predicate()
    return last


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    client = admin(bootstrap)  # must outlive the future: destroying it fails pending requests
    futures = client.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                   operation_timeout=10, request_timeout=15)
    futures[name].result(15)


@dataclass(frozen=True)
class Rec:
    """A record as a test produces or reads it."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = 0
    partition: int = -1
    offset: int = -1

    def content(self) -> tuple[Any, ...]:
        """What must survive the round trip (not partition/offset)."""
        return self.key, self.value, self.headers, self.timestamp


def read_partition(bootstrap: str, topic: str, partition: int, start: int = OFFSET_BEGINNING,
                   timeout: float = 30) -> list[Rec]:
    """Every record of one partition from ``start`` up to its high watermark (confluent-kafka)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streamkit-test-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True, **QUIET})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        out: list[Rec] = []
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= high:
                        return out
                    continue
                raise KafkaException(msg.error())
            out.append(Rec(msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1],
                           msg.partition(), msg.offset()))
            if msg.offset() >= high - 1:
                return out
        raise AssertionError(f"reading {topic}-{partition} timed out with {len(out)} records (hw {high})")
    finally:
        consumer.close()


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streamkit-test-wm", **QUIET})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def stored_batches(data_dir: Path, topic: str, partition: int) -> list[BatchHeader]:
    """Headers of the batches in a partition's segment files, read straight from disk."""
    directory = data_dir / f"{topic}-{partition}"
    headers = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        headers.extend(parse_header(data, pos) for pos, _size, _b, _l in iter_batch_spans(data))
    return headers


def stored_batch_bytes(data_dir: Path, topic: str, partition: int) -> list[bytes]:
    """The stored batches themselves (as the producer sent them, base offset rewritten)."""
    directory = data_dir / f"{topic}-{partition}"
    out = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        out.extend(data[pos : pos + size] for pos, size, _b, _l in iter_batch_spans(data))
    return out


def produce_raw(bootstrap: str, topic: str, partition: int, batch: bytes, acks: int = -1) -> Any:
    """One Produce v9 of ``batch`` on a fresh socket; the partition's response."""
    import datetime

    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.types import TopicName
    from kio.static.primitive import i32Timedelta

    request = ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
            PartitionProduceData(index=i32(partition), records=batch),)),))
    with connect(bootstrap) as sock:
        [response] = call(sock, request).responses
    [result] = response.partition_responses
    return result


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


# -- raw Kafka protocol over a socket (kio encoders) ---------------------------------------


def encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def request_frame(body: Any, correlation_id: int = 1, client_id: str | None = "raw-test") -> bytes:
    """A size-prefixed request frame, exactly as a Kafka client sends it."""
    header = type(body).__header_schema__(
        request_api_key=i16(type(body).__api_key__),
        request_api_version=i16(type(body).__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    data = encode(header) + encode(body)
    return struct.pack(">i", len(data)) + data


def raw_frame(api_key: int, api_version: int, correlation_id: int, payload: bytes = b"",
              client_id: bytes = b"raw") -> bytes:
    """A hand-made frame with a v1 request header and ``payload`` as the body."""
    data = struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id + payload
    return struct.pack(">i", len(data)) + data


def connect(bootstrap: str, timeout: float = 10) -> socket.socket:
    sock = socket.create_connection(host_port(bootstrap), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def recv_frame(sock: socket.socket) -> bytes:
    """One size-prefixed response frame, without the prefix."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def decode_response(frame: bytes, api_key: int, api_version: int) -> tuple[int, Any]:
    """(correlation_id, body) of a response frame read by recv_frame."""
    response_type = load_response_schema(api_key, api_version)
    header, header_size = entity_reader(response_type.__header_schema__)(frame, 0)
    body, body_size = entity_reader(response_type)(frame, header_size)
    assert header_size + body_size == len(frame), "trailing bytes in the response"
    return int(header.correlation_id), body


def call(sock: socket.socket, body: Any, correlation_id: int = 1) -> Any:
    """Send one request, read and decode its response (checking the correlation id)."""
    sock.sendall(request_frame(body, correlation_id))
    got, response = decode_response(recv_frame(sock), type(body).__api_key__, type(body).__version__)
    assert got == correlation_id
    return response


def closed_by_peer(sock: socket.socket, timeout: float = 10) -> bool:
    """True once the broker has closed the connection (EOF or reset) within ``timeout``."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


def free_port() -> int:
    """A port nobody listens on (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
