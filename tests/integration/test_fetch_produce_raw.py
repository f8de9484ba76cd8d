"""Fetch long-polling and multi-partition Produce on raw sockets (kio requests, no client
library in between), so the timing and the per-partition fields are the broker's alone."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from streamkit.log import Record, build_batch
from streamkit.log.batch import iter_batch_spans
from streamkit.testing import BrokerProcess
from tests.integration.util import call, connect, create_topic, watermarks

pytestmark = pytest.mark.integration

MESSAGE_MAX_BYTES = 20_000
BROKER_SETTINGS = {"message.max.bytes": MESSAGE_MAX_BYTES}
TS = 1_700_000_000_000


def batch(n: int = 3, size: int = 100, tag: str = "") -> bytes:
    return build_batch([Record(f"k{i}".encode(), f"{tag}{i}".encode().ljust(size, b"v"), TS + i) for i in range(n)])


def ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def produce_request(parts: dict[str, list[tuple[int, bytes]]], acks: int = -1) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=ms(10_000),
        topic_data=tuple(TopicProduceData(name=TopicName(t), partition_data=tuple(
            PartitionProduceData(index=i32(p), records=r) for p, r in items)) for t, items in parts.items()),
    )


def produce(bootstrap: str, topic: str, partition: int, records: bytes) -> Any:
    with connect(bootstrap) as sock:
        [t] = call(sock, produce_request({topic: [(partition, records)]})).responses
        [p] = t.partition_responses
        assert p.error_code == ErrorCode.none, p
        return p


def fetch_request(wanted: dict[str, list[tuple[int, int]]], max_wait_ms: int, min_bytes: int = 1,
                  max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(
        cluster_id=None, max_wait=ms(max_wait_ms), min_bytes=i32(min_bytes), max_bytes=i32(max_bytes),
        isolation_level=i8(0),
        topics=tuple(FetchTopic(topic=TopicName(t), partitions=tuple(
            FetchPartition(partition=i32(p), fetch_offset=i64(o), partition_max_bytes=i32(partition_max_bytes))
            for p, o in items)) for t, items in wanted.items()),
        forgotten_topics_data=(),
    )


def timed_fetch(bootstrap: str, request: FetchRequest) -> tuple[float, dict[tuple[str, int], Any]]:
    """(seconds the broker took, partition responses by (topic, partition))."""
    with connect(bootstrap, timeout=60) as sock:
        start = time.monotonic()
        response = call(sock, request)
        elapsed = time.monotonic() - start
    assert response.error_code == ErrorCode.none
    return elapsed, {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def batch_count(records: bytes | None) -> int:
    return sum(1 for _ in iter_batch_spans(records or b""))


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2) as executor:
        yield executor


# -- errors answer at once ------------------------------------------------------------------


def test_fetch_with_a_partition_error_answers_at_once(broker: BrokerProcess, topic_name: str) -> None:
    """Kafka answers a fetch at once when any partition has an error; the waiting is for
    data, and an error will not change by waiting."""
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 0, batch())
    cases = {
        "out of range": {topic_name: [(0, 1000), (1, 0)]},
        "unknown partition": {topic_name: [(1, 0), (9, 0)]},
        "unknown topic": {f"{topic_name}-missing": [(0, 0)], topic_name: [(1, 0)]},
    }
    expected = {"out of range": ((topic_name, 0), ErrorCode.offset_out_of_range),
                "unknown partition": ((topic_name, 9), ErrorCode.unknown_topic_or_partition),
                "unknown topic": ((f"{topic_name}-missing", 0), ErrorCode.unknown_topic_or_partition)}
    for case, wanted in cases.items():
        elapsed, parts = timed_fetch(broker.bootstrap, fetch_request(wanted, max_wait_ms=5000, min_bytes=1 << 20))
        where, code = expected[case]
        assert parts[where].error_code == code, case
        assert elapsed < 2.5, f"{case}: the fetch waited {elapsed:.1f}s despite the error"
    out_of_range = timed_fetch(broker.bootstrap, fetch_request({topic_name: [(0, 1000)]}, 5000))[1]
    p = out_of_range[topic_name, 0]
    assert (p.high_watermark, p.log_start_offset) == (3, 0)


# -- long poll ------------------------------------------------------------------------------


def test_max_wait_runs_out_on_an_empty_partition(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    elapsed, parts = timed_fetch(broker.bootstrap, fetch_request({topic_name: [(0, 0)]}, max_wait_ms=800))
    p = parts[topic_name, 0]
    assert (p.error_code, p.records or b"", p.high_watermark) == (ErrorCode.none, b"", 0)
    assert elapsed >= 0.8
    assert elapsed < 5


def test_min_bytes_accumulates_across_appends(broker: BrokerProcess, topic_name: str,
                                              pool: ThreadPoolExecutor) -> None:
    """A fetch with min_bytes of just over two batches answers only after the third append,
    with all three, long before its max_wait."""
    create_topic(broker.bootstrap, topic_name, 1)
    one = batch(tag="a")
    request = fetch_request({topic_name: [(0, 0)]}, max_wait_ms=20_000, min_bytes=2 * len(one) + 1)
    pending: Future[tuple[float, dict[tuple[str, int], Any]]] = pool.submit(timed_fetch, broker.bootstrap, request)
    time.sleep(0.5)  # the fetch is parked
    for i in range(2):
        produce(broker.bootstrap, topic_name, 0, batch(tag=f"b{i}"))
        time.sleep(0.4)
        assert not pending.done(), f"answered after {i + 1} batch(es), below min_bytes"
    produce(broker.bootstrap, topic_name, 0, batch(tag="c"))
    elapsed, parts = pending.result(15)
    p = parts[topic_name, 0]
    assert p.error_code == ErrorCode.none
    assert batch_count(p.records) == 3 and p.high_watermark == 9
    assert elapsed < 10


def test_min_bytes_not_reached_answers_at_max_wait_with_what_there_is(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, 0, batch())
    elapsed, parts = timed_fetch(broker.bootstrap, fetch_request({topic_name: [(0, 0)]}, max_wait_ms=1000,
                                                                  min_bytes=1 << 20))
    assert batch_count(parts[topic_name, 0].records) == 1
    assert 1.0 <= elapsed < 5


def test_max_bytes_and_partition_max_bytes_across_partitions(broker: BrokerProcess, topic_name: str) -> None:
    partitions = 6
    create_topic(broker.bootstrap, topic_name, partitions)
    one = batch(n=5, size=180)
    for p in range(partitions):
        produce(broker.bootstrap, topic_name, p, one)
        produce(broker.bootstrap, topic_name, p, one)
    wanted = {topic_name: [(p, 0) for p in range(partitions)]}
    # partition_max_bytes fits one batch of each partition and max_bytes three of them: the
    # first three partitions give one batch each, the rest nothing (not a partial batch)
    request = fetch_request(wanted, 100, partition_max_bytes=len(one) + len(one) // 2,
                            max_bytes=3 * len(one) + len(one) // 2)
    _elapsed, parts = timed_fetch(broker.bootstrap, request)
    assert [batch_count(parts[topic_name, p].records) for p in range(partitions)] == [1, 1, 1, 0, 0, 0]
    assert all(parts[topic_name, p].high_watermark == 10 for p in range(partitions))
    # enough room for everything
    _elapsed, parts = timed_fetch(broker.bootstrap, fetch_request(wanted, 100))
    assert [batch_count(parts[topic_name, p].records) for p in range(partitions)] == [2] * partitions


def test_first_batch_is_returned_even_when_larger_than_the_limits(broker: BrokerProcess, topic_name: str) -> None:
    """KIP-74: the first batch of the response comes whole even when it is larger than
    partition_max_bytes and max_bytes; later partitions then get nothing."""
    create_topic(broker.bootstrap, topic_name, 2)
    big = batch(n=10, size=1000)
    produce(broker.bootstrap, topic_name, 0, big)
    produce(broker.bootstrap, topic_name, 1, batch())
    request = fetch_request({topic_name: [(0, 0), (1, 0)]}, 100, partition_max_bytes=1000, max_bytes=1000)
    _elapsed, parts = timed_fetch(broker.bootstrap, request)
    assert len(parts[topic_name, 0].records) == len(big)
    assert batch_count(parts[topic_name, 1].records) == 0
    assert parts[topic_name, 1].error_code == ErrorCode.none


def test_watermarks_after_delete_records(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    for i in range(3):
        produce(broker.bootstrap, topic_name, 0, batch(tag=str(i)))
    with connect(broker.bootstrap) as sock:
        deleted = call(sock, DeleteRecordsRequest(topics=(DeleteRecordsTopic(
            name=TopicName(topic_name), partitions=(DeleteRecordsPartition(partition_index=i32(0), offset=i64(4)),)),),
            timeout=ms(5000)))
    assert deleted.topics[0].partitions[0].low_watermark == 4
    _elapsed, parts = timed_fetch(broker.bootstrap, fetch_request({topic_name: [(0, 4)]}, 100))
    p = parts[topic_name, 0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (ErrorCode.none, 9, 9, 4)
    # the batch holding offset 4 starts at 3: it is returned whole, the consumer skips 3
    assert batch_count(p.records) == 2
    elapsed, parts = timed_fetch(broker.bootstrap, fetch_request({topic_name: [(0, 2)]}, 5000))
    p = parts[topic_name, 0]
    assert (p.error_code, p.high_watermark, p.log_start_offset) == (ErrorCode.offset_out_of_range, 9, 4)
    assert elapsed < 2.5


# -- multi-partition produce ------------------------------------------------------------------


def test_produce_to_many_partitions_with_some_failing(broker: BrokerProcess, topic_name: str) -> None:
    """One request, five partitions of three topics: the good ones are stored, each bad one
    gets its own error code, and nothing of a refused batch is stored."""
    other = f"{topic_name}-b"
    create_topic(broker.bootstrap, topic_name, 2)
    create_topic(broker.bootstrap, other, 1)
    corrupt = bytearray(batch())
    corrupt[-2] ^= 0xFF
    too_large = batch(n=2, size=MESSAGE_MAX_BYTES)
    request = produce_request({
        topic_name: [(0, batch()), (1, bytes(corrupt)), (7, batch())],
        other: [(0, too_large)],
        f"{topic_name}-missing": [(0, batch())],
    })
    with connect(broker.bootstrap) as sock:
        response = call(sock, request)
    got = {(t.name, p.index): (p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses}
    assert got == {
        (topic_name, 0): (ErrorCode.none, 0),
        (topic_name, 1): (ErrorCode.corrupt_message, -1),
        (topic_name, 7): (ErrorCode.unknown_topic_or_partition, -1),
        (other, 0): (ErrorCode.message_too_large, -1),
        (f"{topic_name}-missing", 0): (ErrorCode.unknown_topic_or_partition, -1),
    }
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 3)
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 0)
    assert watermarks(broker.bootstrap, other, 0) == (0, 0)


# -- idempotent producers -------------------------------------------------------------------


def init_producer_id(bootstrap: str) -> tuple[int, int]:
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.types import ProducerId

    with connect(bootstrap) as sock:
        response = call(sock, InitProducerIdRequest(
            transactional_id=None, transaction_timeout=ms(60_000), producer_id=ProducerId(-1), producer_epoch=i16(-1)))
    assert response.error_code == ErrorCode.none
    return int(response.producer_id), int(response.producer_epoch)


def test_resent_idempotent_batch_gets_its_original_offset(broker_factory: Any, topic_name: str) -> None:
    """The retry of an acknowledged batch (same producer id, epoch and sequences) is answered
    with the offset it was stored at and not stored again, also after a SIGKILL and restart;
    producer ids stay unique across the restart."""
    broker: BrokerProcess = broker_factory({"log.flush.interval.messages": 1})
    create_topic(broker.bootstrap, topic_name, 1)
    pid, epoch = init_producer_id(broker.bootstrap)
    first = build_batch([Record(b"k", b"a", TS), Record(b"k", b"b", TS)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=0)
    second = build_batch([Record(b"k", b"c", TS)], producer_id=pid, producer_epoch=epoch, base_sequence=2)
    assert produce(broker.bootstrap, topic_name, 0, first).base_offset == 0
    assert produce(broker.bootstrap, topic_name, 0, second).base_offset == 2
    for _ in range(2):
        assert produce(broker.bootstrap, topic_name, 0, first).base_offset == 0
        assert produce(broker.bootstrap, topic_name, 0, second).base_offset == 2
        assert watermarks(broker.bootstrap, topic_name, 0) == (0, 3)
        broker.kill()
        broker.start()
    gap = build_batch([Record(b"k", b"d", TS)], producer_id=pid, producer_epoch=epoch, base_sequence=5)
    with connect(broker.bootstrap) as sock:
        [t] = call(sock, produce_request({topic_name: [(0, gap)]})).responses
    assert t.partition_responses[0].error_code == ErrorCode.out_of_order_sequence_number
    assert init_producer_id(broker.bootstrap)[0] > pid
