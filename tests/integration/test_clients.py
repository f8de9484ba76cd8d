"""Produce and consume through confluent-kafka, aiokafka and kafka-python against a real
broker process: keys, headers, explicit timestamps, every compression codec, acks 0/1/all,
the clients' default partitioners, ListOffsets by timestamp and seeking; then idempotent
producers, records larger than the fetch limits, LogAppendTime, long-polling fetches,
out-of-range resets, auto-created topics and compacted topics.

(kcat, the fourth client, has its own module: test_kcat.py.)
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import defaultdict

import pytest
from kio.schema.errors import ErrorCode

from streamkit.log.batch import Compression, crc_of
from streamkit.testing import BrokerProcess
from tests.integration.clients import (
    CLIENTS,
    NO_OFFSET,
    Client,
    ConfluentClient,
    kafka_python_codecs,
)
from tests.integration.util import (
    Rec,
    admin,
    create_topic,
    produce_raw,
    read_partition,
    stored_batch_bytes,
    stored_batches,
    wait_until,
    watermarks,
)

pytestmark = pytest.mark.integration

# A quick log cleaner, for test_compacted_topic (it only touches cleanup.policy=compact topics).
BROKER_SETTINGS = {"log.cleaner.backoff.ms": 200}

BASE_TS = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
             "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


def sample_records(n: int = 40) -> list[Rec]:
    """Keys (some null), values (one null, one empty, some large and compressible), headers
    (repeated keys, empty values) and explicit timestamps, some out of order."""
    out = []
    for i in range(n):
        key = None if i % 10 == 3 else f"key-{i % 7}".encode()
        if i % 10 == 7:
            value: bytes | None = None
        elif i == 9:
            value = b""
        else:
            value = (f"value-{i}-" * (200 if i % 5 == 0 else 1)).encode()
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if i % 2 == 0:
            headers = (("trace", f"t{i}".encode()), ("dup", b"1"), ("dup", b"2"), ("empty", b""))
        timestamp = BASE_TS + i * 1000 - (2500 if i % 4 == 1 else 0)
        out.append(Rec(key, value, headers, timestamp))
    return out


def client_for(name: str, broker: BrokerProcess) -> Client:
    return CLIENTS[name](broker.bootstrap)


CLIENT_NAMES = list(CLIENTS)


def test_kafka_python_codecs_available_here() -> None:
    # kafka-python has its own codec modules: python-snappy (0.7, itself on cramjam), lz4 and
    # zstandard, which the dev extras install; aiokafka uses cramjam directly. Every codec
    # must be usable here, so the codec matrix below runs in full for all three clients.
    assert kafka_python_codecs() == CODECS


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_roundtrip_keys_headers_timestamps(broker: BrokerProcess, topic_name: str, client_name: str,
                                           codec: str) -> None:
    client = client_for(client_name, broker)
    create_topic(broker.bootstrap, topic_name, 1)
    records = sample_records()
    reports = client.produce(topic_name, records, compression=codec, flush_every=15)
    assert reports == [(0, i) for i in range(len(records))]

    got = client.consume(topic_name, {0: 0}, len(records))
    assert [r.offset for r in got] == list(range(len(records)))
    assert [r.content() for r in got] == [r.content() for r in records]

    # The batches are stored as the client compressed them (the broker never recompresses).
    headers = stored_batches(broker.data_dir, topic_name, 0)
    assert sum(h.record_count for h in headers) == len(records)
    assert {h.compression for h in headers} == {CODEC_IDS[codec]}
    assert all(h.timestamp_type == 0 for h in headers)  # CreateTime: the client's timestamps

    # Another client reads the same bytes back identically.
    other = read_partition(broker.bootstrap, topic_name, 0)
    assert [r.content() for r in other] == [r.content() for r in records]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_acks(broker: BrokerProcess, topic_name: str, client_name: str, acks: str) -> None:
    client = client_for(client_name, broker)
    create_topic(broker.bootstrap, topic_name, 2)
    records = [Rec(f"k{i}".encode(), f"v{i}".encode(), (), BASE_TS + i) for i in range(30)]
    reports = client.produce(topic_name, records, acks=acks, partition=1)
    if acks == "0":
        # No response, so no offset: confluent-kafka and aiokafka report none; kafka-python
        # reports a made-up one (its base offset -1 plus the record's index), not checked.
        assert all(p == 1 for p, _o in reports)
        if client_name != "kafka-python":
            assert all(o == NO_OFFSET for _p, o in reports)
    else:
        assert reports == [(1, i) for i in range(30)]
    # With acks=0 the records still arrive (the broker must not answer, nor drop them).
    got = client.consume(topic_name, {1: 0}, len(records))
    assert [r.content() for r in got] == [r.content() for r in records]
    assert read_partition(broker.bootstrap, topic_name, 0) == []


def _murmur2_partition(key: bytes, partitions: int) -> int:
    from kafka.partitioner import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


def _expected_partition(client_name: str, partitioner: str | None, key: bytes, partitions: int) -> int:
    if client_name == "confluent" and partitioner is None:
        # librdkafka's default, consistent_random: CRC-32 of the key (random for null keys).
        return zlib.crc32(key) % partitions
    # Java's murmur2 (positive) modulo partitions: aiokafka, kafka-python, and librdkafka's
    # murmur2_random.
    if client_name == "aiokafka":
        from aiokafka.partitioner import murmur2 as aiokafka_murmur2

        return (aiokafka_murmur2(key) & 0x7FFFFFFF) % partitions
    return _murmur2_partition(key, partitions)


@pytest.mark.parametrize(
    ("client_name", "partitioner"),
    [("confluent", None), ("confluent", "murmur2_random"), ("aiokafka", None), ("kafka-python", None)],
)
def test_default_partitioner(broker: BrokerProcess, topic_name: str, client_name: str,
                             partitioner: str | None) -> None:
    partitions = 5
    create_topic(broker.bootstrap, topic_name, partitions)
    keys = [f"user-{i}".encode() for i in range(40)]
    expected = {k: _expected_partition(client_name, partitioner, k, partitions) for k in keys}
    if client_name == "confluent":
        # The two hashes disagree on many keys, so the test tells them apart.
        other = "murmur2_random" if partitioner is None else None
        assert sum(expected[k] != _expected_partition("confluent", other, k, partitions) for k in keys) > 10
    records = [Rec(k, f"{k.decode()}#{n}".encode(), (), BASE_TS + n) for n in range(3) for k in keys]
    extra = {"partitioner": partitioner} if partitioner else None
    reports = client_for(client_name, broker).produce(topic_name, records, extra=extra)

    stored: dict[bytes, tuple[int, int]] = {}
    for p in range(partitions):
        for rec in read_partition(broker.bootstrap, topic_name, p):
            assert rec.value is not None
            stored[rec.value] = (rec.partition, rec.offset)
    assert len(stored) == len(records)
    by_key: dict[bytes, set[int]] = defaultdict(set)
    for rec, (partition, offset) in zip(records, reports, strict=True):
        assert rec.value is not None and rec.key is not None
        assert stored[rec.value] == (partition, offset), "delivery report differs from the log"
        by_key[rec.key].add(partition)
    assert {k: ps for k, ps in by_key.items()} == {k: {expected[k]} for k in keys}
    assert len({expected[k] for k in keys}) == partitions  # every partition got some keys


@pytest.mark.parametrize("layout", ["one-segment", "many-segments"])
@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_offsets_for_times(broker: BrokerProcess, topic_name: str, client_name: str, layout: str) -> None:
    client = client_for(client_name, broker)
    # many-segments: a segment per batch or two and a time-index entry per batch, so the
    # lookup crosses segment and index boundaries.
    config = {"segment.bytes": "150", "index.interval.bytes": "1"} if layout == "many-segments" else {}
    create_topic(broker.bootstrap, topic_name, 1, config)
    # Timestamps out of order on purpose, over several batches.
    timestamps = [BASE_TS + t for t in (100, 300, 200, 400, 400, 250, 900, 500, 700, 650, 1000, 1000)]
    records = [Rec(b"k", f"v{i}".encode(), (), ts) for i, ts in enumerate(timestamps)]
    client.produce(topic_name, records, flush_every=3)
    assert len(stored_batches(broker.data_dir, topic_name, 0)) >= 4
    segments = list((broker.data_dir / f"{topic_name}-0").glob("*.log"))
    assert (len(segments) > 2) == (layout == "many-segments")

    def expected(target: int) -> int | None:
        return next((i for i, ts in enumerate(timestamps) if ts >= target), None)

    targets = sorted({0, BASE_TS, *timestamps, *(t + 1 for t in timestamps), *(t - 1 for t in timestamps)})
    got = dict(zip(targets, client.offsets_for_times(topic_name, 0, targets), strict=True))
    assert got == {t: expected(t) for t in targets}
    assert got[BASE_TS + 1001] is None


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_seek_to_the_middle(broker: BrokerProcess, topic_name: str, client_name: str) -> None:
    client = client_for(client_name, broker)
    create_topic(broker.bootstrap, topic_name, 3)
    records = [Rec(None, f"v{i}".encode(), (), BASE_TS + i) for i in range(50)]
    client.produce(topic_name, records, partition=2, flush_every=7)
    got = client.consume(topic_name, {2: 23}, 50 - 23)
    assert [r.offset for r in got] == list(range(23, 50))
    assert [r.value for r in got] == [r.value for r in records[23:]]
    # and from the last offset: exactly one record
    last = client.consume(topic_name, {2: 49}, 1)
    assert [(r.offset, r.value) for r in last] == [(49, b"v49")]


IDEMPOTENCE = {"confluent": {"enable.idempotence": True}, "aiokafka": {"enable_idempotence": True},
               "kafka-python": {"enable_idempotence": True}}


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_idempotent_producer(broker: BrokerProcess, topic_name: str, client_name: str) -> None:
    """InitProducerId gives the producer an id; its batches carry it with sequence numbers
    that continue from batch to batch; the broker tracks them: a retry of the client's last
    batch gets its original offset and is not stored again, a skipped sequence is refused."""
    client = client_for(client_name, broker)
    create_topic(broker.bootstrap, topic_name, 1)
    records = [Rec(b"k", f"v{i}".encode(), (), BASE_TS + i) for i in range(30)]
    assert client.produce(topic_name, records, flush_every=10, extra=IDEMPOTENCE[client_name]) == [
        (0, i) for i in range(30)]
    headers = stored_batches(broker.data_dir, topic_name, 0)
    assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
    assert {h.producer_epoch for h in headers} == {0}
    sequence = 0
    for h in headers:
        assert h.base_sequence == sequence
        sequence += h.record_count
    assert [r.value for r in client.consume(topic_name, {0: 0}, 30)] == [r.value for r in records]
    last = stored_batch_bytes(broker.data_dir, topic_name, 0)[-1]
    retry = produce_raw(broker.bootstrap, topic_name, 0, last)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.none, headers[-1].base_offset)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 30)
    skipped = bytearray(last)
    skipped[53:57] = (sequence + 1).to_bytes(4, "big")  # baseSequence: one past the next
    skipped[17:21] = crc_of(skipped).to_bytes(4, "big")
    assert produce_raw(broker.bootstrap, topic_name, 0, bytes(skipped)).error_code == (
        ErrorCode.out_of_order_sequence_number)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 30)


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_record_larger_than_fetch_limits(broker: BrokerProcess, topic_name: str, client_name: str) -> None:
    """KIP-74: the first batch of a fetch is returned even when it exceeds the partition and
    response limits, so a consumer never gets stuck behind a large record."""
    limits = {"confluent": {"max.partition.fetch.bytes": 1024, "fetch.max.bytes": 1024, "message.max.bytes": 1024},
              "aiokafka": {"max_partition_fetch_bytes": 1024, "fetch_max_bytes": 1024},
              "kafka-python": {"max_partition_fetch_bytes": 1024, "fetch_max_bytes": 1024}}[client_name]
    client = client_for(client_name, broker)
    create_topic(broker.bootstrap, topic_name, 1)
    records = [Rec(None, bytes([97 + i]) * 300_000, (), BASE_TS + i) for i in range(3)]
    client.produce(topic_name, records, flush_every=1)
    got = client.consume(topic_name, {0: 0}, 3, extra=limits)
    assert [(r.offset, r.value) for r in got] == [(i, r.value) for i, r in enumerate(records)]


def test_log_append_time_topic(broker: BrokerProcess, topic_name: str) -> None:
    """message.timestamp.type=LogAppendTime: consumers see the broker's clock, not the
    producer's timestamps, and ListOffsets by time uses it too."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition

    create_topic(broker.bootstrap, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    ConfluentClient(broker.bootstrap).produce(topic_name, [Rec(b"k", b"v", (), BASE_TS)])
    after = int(time.time() * 1000)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lat", "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        msg = None
        while msg is None:
            msg = consumer.poll(1)
        kind, timestamp = msg.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= timestamp <= after + 1000
        [found] = consumer.offsets_for_times([TopicPartition(topic_name, 0, BASE_TS + 1)], timeout=10)
        assert found.offset == 0  # the append time is after BASE_TS
    finally:
        consumer.close()
    [batch] = stored_batches(broker.data_dir, topic_name, 0)
    assert batch.timestamp_type == 1 and batch.max_timestamp == timestamp


def test_fetch_long_poll_wakes_on_append(broker: BrokerProcess, topic_name: str) -> None:
    """A fetch waiting on an empty partition (fetch.wait.max.ms=10s) is answered as soon as
    a record is appended, not when its wait runs out."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, topic_name, 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "long-poll",
                         "fetch.wait.max.ms": 10_000, "fetch.min.bytes": 1, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        assert consumer.poll(1.5) is None  # a fetch is now parked on the empty partition
        produced_at: list[float] = []

        def produce_one() -> None:
            produced_at.append(time.monotonic())
            ConfluentClient(broker.bootstrap).produce(topic_name, [Rec(None, b"wake", (), BASE_TS)])

        thread = threading.Thread(target=produce_one)
        thread.start()
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
        thread.join(30)
        assert msg is not None and msg.value() == b"wake"
        assert time.monotonic() - produced_at[0] < 5, "the parked fetch was not woken by the append"
    finally:
        consumer.close()


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_out_of_range_offset_resets(broker: BrokerProcess, topic_name: str, reset: str) -> None:
    """Fetching past the log end gets OFFSET_OUT_OF_RANGE, and the client applies
    auto.offset.reset."""
    create_topic(broker.bootstrap, topic_name, 1)
    client = ConfluentClient(broker.bootstrap)
    client.produce(topic_name, [Rec(None, f"v{i}".encode(), (), BASE_TS + i) for i in range(10)])
    if reset == "earliest":
        got = client.consume(topic_name, {0: 500}, 10, extra={"auto.offset.reset": "earliest"})
        assert [r.offset for r in got] == list(range(10))
    else:
        result: list[list[Rec]] = []
        thread = threading.Thread(target=lambda: result.append(
            client.consume(topic_name, {0: 500}, 1, timeout=30, extra={"auto.offset.reset": "latest"})))
        thread.start()
        # the consumer resets to the end (10): only records appended afterwards arrive
        deadline = time.monotonic() + 30
        while thread.is_alive() and time.monotonic() < deadline:
            client.produce(topic_name, [Rec(None, b"new", (), BASE_TS)])
            thread.join(0.5)
        assert result and result[0][0].offset >= 10 and result[0][0].value == b"new"


def test_auto_create_topic(broker: BrokerProcess, topic_name: str) -> None:
    """auto.create.topics.enable (default true): producing to an unknown topic creates it
    with num.partitions (1 here)."""
    client = ConfluentClient(broker.bootstrap)
    assert client.produce(topic_name, [Rec(None, b"v", (), BASE_TS)]) == [(0, 0)]
    assert len(admin(broker.bootstrap).list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 1


COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
           "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}


def _compacted_topic(broker: BrokerProcess, topic: str) -> tuple[list[Rec], dict[bytes, bytes]]:
    """A compacted partition with gaps: 20 keys x 10 versions, 5 keys deleted (tombstones),
    then filler that pushes them all into closed segments. Returns (records stored after
    compaction, expected latest value per surviving key)."""
    create_topic(broker.bootstrap, topic, 1, COMPACT)
    now = int(time.time() * 1000)
    records = [Rec(f"k{i}".encode(), f"v{version}-k{i}".encode(), (), now)
               for version in range(9) for i in range(20)]
    # the last versions interleaved with filler that goes later: batches keep only some records
    records += [rec for i in range(20) for rec in (Rec(f"k{i}".encode(), f"v9-k{i}".encode(), (), now),
                                                   Rec(b"filler", b"early", (), now))]
    records += [Rec(f"k{i}".encode(), None, (), now) for i in range(5)]
    records += [Rec(b"filler", f"f{i}".encode() * 20, (), now) for i in range(60)]
    ConfluentClient(broker.bootstrap).produce(topic, records, flush_every=5)
    expected = {f"k{i}".encode(): f"v9-k{i}".encode() for i in range(5, 20)}

    def compacted() -> list[Rec] | None:
        stored = read_partition(broker.bootstrap, topic, 0)
        keyed = {r.key: r.value for r in stored if r.key != b"filler"}
        done = keyed == expected and len([r for r in stored if r.key != b"filler"]) == len(expected)
        return stored if done else None

    return wait_until(compacted, 30, "the cleaner to compact the topic", interval=0.3), expected


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_compacted_topic(broker: BrokerProcess, topic_name: str, client_name: str) -> None:
    """Clients read a compacted log (batches with gaps, records removed inside batches) from
    its start and see exactly the latest value of every live key, offsets unchanged."""
    stored, expected = _compacted_topic(broker, topic_name)
    offsets = [r.offset for r in stored]
    assert offsets == sorted(offsets) and offsets[-1] - offsets[0] + 1 > len(offsets)  # gaps
    assert any(h.record_count < h.last_offset_delta + 1
               for h in stored_batches(broker.data_dir, topic_name, 0)), "no partly emptied batch"
    start, _end = watermarks(broker.bootstrap, topic_name, 0)
    got = client_for(client_name, broker).consume(topic_name, {0: start}, len(stored))
    assert [(r.offset, r.key, r.value) for r in got] == [(r.offset, r.key, r.value) for r in stored]
    assert {r.key: r.value for r in got if r.key != b"filler"} == expected


def test_consumer_in_compacted_prefix_continues(broker: BrokerProcess, topic_name: str) -> None:
    """As in Kafka, compaction never moves a compact-only topic's log start offset: a
    consumer positioned in the compacted prefix (a committed offset, here 0) continues at
    the next retained record instead of getting OFFSET_OUT_OF_RANGE and, with
    auto.offset.reset=latest, skipping every surviving record."""
    stored, _expected = _compacted_topic(broker, topic_name)
    assert stored[0].offset > 0
    got = ConfluentClient(broker.bootstrap).consume(topic_name, {0: 0}, len(stored), timeout=5,
                                                    extra={"auto.offset.reset": "latest"})
    assert [r.offset for r in got] == [r.offset for r in stored]
