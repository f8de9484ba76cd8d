"""kcat (librdkafka 2.x, C) against the broker: metadata, keyed produce with headers and
every codec, acks, consume with a format string, offsets for times, seeking; and the
ApiVersions negotiation a client newer than the broker goes through, on a raw socket.
kcat as a consumer-group member (join, leave, SIGKILL, restarts, static membership, each
assignor) is tested with the other clients in test_groups.py."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from collections import defaultdict

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.serial import entity_reader

from streamkit.broker.codec import ADVERTISED_VERSIONS, SUPPORTED_VERSIONS
from streamkit.log.batch import Compression
from streamkit.testing import BrokerProcess
from tests.conftest import require_service
from tests.integration.clients import ConfluentClient
from tests.integration.util import (
    Rec,
    call,
    connect,
    create_topic,
    host_port,
    recv_frame,
    stored_batches,
)

pytestmark = pytest.mark.integration

KCAT = shutil.which("kcat")
BASE_TS = 1_700_000_000_000
CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
          "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
FORMAT = "%k|%s|%p|%o|%T|%h\\n"


@pytest.fixture
def kcat() -> str:
    require_service(KCAT is not None, "the kcat CLI")
    assert KCAT is not None
    return KCAT


def run_kcat(kcat: str, bootstrap: str, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
    result = subprocess.run([kcat, "-b", bootstrap, "-m", "15", "-X", "log_level=3", *args],
                            input=stdin, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"kcat {' '.join(args)} exited {result.returncode}: {result.stderr}"
    return result.stdout


def consume_lines(kcat: str, bootstrap: str, topic: str, *args: str) -> list[list[str]]:
    out = run_kcat(kcat, bootstrap, "-C", "-t", topic, "-e", "-q", "-f", FORMAT, *args)
    return [line.split("|") for line in out.splitlines()]


def test_metadata(kcat: str, broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 4)
    meta = json.loads(run_kcat(kcat, broker.bootstrap, "-L", "-J"))
    assert meta["brokers"] == [{"id": 0, "name": broker.bootstrap}]
    assert meta["controllerid"] == 0
    topics = {t["topic"]: t for t in meta["topics"]}
    assert "__consumer_offsets" in topics
    partitions = topics[topic_name]["partitions"]
    assert [p["partition"] for p in partitions] == [0, 1, 2, 3]
    for p in partitions:
        assert (p["leader"], p["replicas"], p["isrs"]) == (0, [{"id": 0}], [{"id": 0}])
        assert "error" not in p
    one = json.loads(run_kcat(kcat, broker.bootstrap, "-L", "-J", "-t", topic_name))
    assert [t["topic"] for t in one["topics"]] == [topic_name]


@pytest.mark.parametrize("codec", list(CODECS))
def test_keyed_produce_and_consume(kcat: str, broker: BrokerProcess, topic_name: str, codec: str) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    lines = [f"key-{i % 11}:value-{i}-{'x' * 200}" for i in range(60)]
    run_kcat(kcat, broker.bootstrap, "-P", "-t", topic_name, "-K:", "-z", codec,
             "-H", "app=kcat", "-H", "trace=42", "-X", "acks=all", stdin="\n".join(lines) + "\n")
    got = consume_lines(kcat, broker.bootstrap, topic_name, "-o", "beginning")
    assert sorted(f"{k}:{v}" for k, v, *_ in got) == sorted(lines)
    by_partition: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for key, value, partition, offset, timestamp, headers in got:
        # librdkafka's default partitioner (consistent_random): CRC-32 of the key.
        assert int(partition) == zlib.crc32(key.encode()) % 3, key
        assert headers == "app=kcat,trace=42"
        assert int(timestamp) > BASE_TS  # CreateTime set by the producer
        by_partition[int(partition)].append((int(offset), value))
    for partition, rows in by_partition.items():
        assert [o for o, _ in rows] == list(range(len(rows)))
        # per key, values keep the order they were produced in
        sent = [line.split(":", 1)[1] for line in lines if zlib.crc32(line.split(":")[0].encode()) % 3 == partition]
        assert [v for _, v in rows] == sent
        # Stored as kcat compressed them. librdkafka < 2.8 (kcat 1.7 has 2.0.2) compresses
        # with gzip/snappy/lz4 only if ApiVersions lists Produce v0; the broker does, as Kafka
        # 4.0 does (codec.ADVERTISED_VERSIONS), else these batches would arrive uncompressed.
        assert {h.compression for h in stored_batches(broker.data_dir, topic_name, partition)} == {CODECS[codec]}


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(kcat: str, broker: BrokerProcess, topic_name: str, acks: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    lines = [f"v{i}" for i in range(25)]
    run_kcat(kcat, broker.bootstrap, "-P", "-t", topic_name, "-X", f"acks={acks}", stdin="\n".join(lines) + "\n")
    got = consume_lines(kcat, broker.bootstrap, topic_name, "-o", "beginning")
    assert [(v, int(o)) for _k, v, _p, o, *_ in got] == [(v, i) for i, v in enumerate(lines)]


def test_timestamps_offsets_for_times_and_seek(kcat: str, broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    timestamps = [BASE_TS + t for t in (10, 20, 30, 25, 40, 50, 60, 70, 80, 90)]
    records = [Rec(f"k{i}".encode(), f"v{i}".encode(), (("h", b"1"),), ts) for i, ts in enumerate(timestamps)]
    ConfluentClient(broker.bootstrap).produce(topic_name, records, partition=1, flush_every=4)

    got = consume_lines(kcat, broker.bootstrap, topic_name, "-p", "1", "-o", "beginning")
    assert [(k, v, int(o), int(t), h) for k, v, _p, o, t, h in got] == [
        (f"k{i}", f"v{i}", i, ts, "h=1") for i, ts in enumerate(timestamps)]

    # -Q: ListOffsets by timestamp, the first offset whose timestamp is >= the target
    queries = {BASE_TS: 0, BASE_TS + 26: 2, BASE_TS + 30: 2, BASE_TS + 31: 4, BASE_TS + 90: 9, BASE_TS + 91: -1}
    for ts, offset in queries.items():  # (kcat allows one query per partition per run)
        out = run_kcat(kcat, broker.bootstrap, "-Q", "-t", f"{topic_name}:1:{ts}")
        assert out.strip() == f"{topic_name} [1] offset {offset}"

    # consume from a timestamp and from an absolute offset
    from_ts = consume_lines(kcat, broker.bootstrap, topic_name, "-p", "1", "-o", f"s@{BASE_TS + 31}")
    assert [int(row[3]) for row in from_ts] == list(range(4, 10))
    middle = consume_lines(kcat, broker.bootstrap, topic_name, "-p", "1", "-o", "6")
    assert [row[1] for row in middle] == ["v6", "v7", "v8", "v9"]
    # and the empty partition 0 has nothing
    assert consume_lines(kcat, broker.bootstrap, topic_name, "-p", "0", "-o", "beginning") == []


def test_newer_api_versions_request_gets_v0_error_then_v3_works(broker: BrokerProcess) -> None:
    """KIP-511: a client sends its newest ApiVersions version; a broker that does not know it
    answers with an ApiVersions v0 body (error UNSUPPORTED_VERSION + the supported ranges)
    under response header v0, and the client retries with a version the broker lists, on the
    same connection."""

    with connect(broker.bootstrap) as sock:
        # ApiVersions v4, flexible: header v2 (client id + empty tags), compact strings, tags.
        client_id = b"future-client"
        header = struct.pack(">hhih", 18, 4, 4242, len(client_id)) + client_id + b"\x00"
        body = b"\x0efuture-client" + b"\x066.6.6" + b"\x00"
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        frame = recv_frame(sock)
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        assert correlation_id == 4242
        response, size = entity_reader(ApiVersionsResponseV0)(frame, 4)
        assert 4 + size == len(frame)
        assert response.error_code == ErrorCode.unsupported_version
        ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        assert ranges == ADVERTISED_VERSIONS  # the same ranges as every ApiVersions answer
        assert ranges[18] == (0, 3)

        # same connection, the highest version the broker listed
        v3 = call(sock, ApiVersionsRequestV3(client_software_name="future-client",
                                              client_software_version="6.6.6"), correlation_id=4243)
        assert v3.error_code == ErrorCode.none
        advertised = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in v3.api_keys}
        # Produce is listed from v0 like Kafka 4.0 does (KAFKA-18659), everything else as served
        assert advertised == ADVERTISED_VERSIONS == {**SUPPORTED_VERSIONS, 0: (0, 9)}
        metadata = call(sock, MetadataRequestV12(topics=None, allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False), correlation_id=4244)
        assert [(int(b.node_id), b.host, int(b.port)) for b in metadata.brokers] == [
            (0, *host_port(broker.bootstrap))]


def test_balanced_consumer_group(kcat: str, broker: BrokerProcess, topic_name: str) -> None:
    """kcat -G: librdkafka 2.0.2's consumer-group protocol versions; offsets it commits are
    where the next member of the group resumes."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, topic_name, 3)
    run_kcat(kcat, broker.bootstrap, "-P", "-t", topic_name, "-K:", stdin="".join(f"k{i}:v{i}\n" for i in range(30)))
    group = f"kcat-{topic_name}"
    args = ("-G", group, "-e", "-q", "-f", "%p %o %s\\n", "-X", "auto.offset.reset=earliest", topic_name)
    first = run_kcat(kcat, broker.bootstrap, *args).splitlines()
    assert sorted(line.split()[2] for line in first) == sorted(f"v{i}" for i in range(30))
    ends = {p: 1 + max(int(o) for q, o, _v in (line.split() for line in first) if int(q) == p) for p in range(3)}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 0})
    try:
        committed = consumer.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        consumer.close()
    run_kcat(kcat, broker.bootstrap, "-P", "-t", topic_name, "-K:", stdin="k1:late\n")
    again = run_kcat(kcat, broker.bootstrap, *args).splitlines()
    assert [line.split()[2] for line in again] == ["late"]  # resumed after the commit
