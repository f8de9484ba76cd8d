"""The worker's consumer returns aiokafka's parsed records instead of ``ConsumerRecord``s
(``streams.fetching``): the same records with the same fields, for what librdkafka
produces (every compression codec, headers, null keys and values) and for transactions with
aborts under read_committed, on a real broker; and agents see them as before."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import confluent_kafka
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import ConsumerRecord, TopicPartition

from streamkit.streams.agent import AgentStream
from streamkit.streams.event import Event
from streamkit.streams.fetching import yield_parsed_records
from streamkit.testing import BrokerProcess

from .conftest import Probe, eventually, running, unique

pytestmark = pytest.mark.timeout(180)

T0 = (time.time_ns() // 1_000_000 // 60_000 - 60) * 60_000  # recent: far from any retention
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def produce_with_librdkafka(bootstrap: str, topic: str) -> list[tuple[Any, ...]]:
    """Records of every codec (one producer each, so batches of each), with headers and
    null keys and values; then a transactional producer's committed, aborted and committed
    again transactions. Returns what a read_committed reader must see, in offset order:
    (key, value, timestamp, headers)."""
    expected: list[tuple[Any, ...]] = []
    n = 0
    for codec in CODECS:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                             "linger.ms": 50, "enable.idempotence": codec == "zstd"})
        for i in range(40):
            key = None if i % 7 == 0 else f"{codec}-k{i}".encode()
            value = None if i % 11 == 5 else f'{{"codec": "{codec}", "i": {i}}}'.encode()
            headers = [("codec", codec.encode()), ("i", str(i).encode())] if i % 3 else []
            producer.produce(topic, value=value, key=key, partition=0, timestamp=T0 + n, headers=headers)
            expected.append((key, value, T0 + n, [(k, v) for k, v in headers]))
            n += 1
        assert producer.flush(30) == 0
    txn = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("fetching-txn"),
                                    "compression.type": "lz4", "linger.ms": 20})
    txn.init_transactions(30)
    for round_, commit in enumerate((True, False, True, False, True)):
        txn.begin_transaction()
        for i in range(25):
            value = f'{{"round": {round_}, "i": {i}}}'.encode()
            txn.produce(topic, value=value, key=b"t%d" % i, partition=0, timestamp=T0 + n,
                        headers=[("round", str(round_).encode())])
            if commit:
                expected.append((b"t%d" % i, value, T0 + n, [("round", str(round_).encode())]))
            n += 1
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    return expected


async def read_all(bootstrap: str, topic: str, *, parsed: bool) -> list[Any]:
    """Every record of ``topic``-0 that a read_committed consumer returns from getmany."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                isolation_level="read_committed", auto_offset_reset="earliest")
    await consumer.start()
    try:
        if parsed:
            assert yield_parsed_records(consumer)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while await consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read {len(out)} records, position {await consumer.position(tp)} < {end}"
            batch = await consumer.getmany(timeout_ms=200)
            out.extend(batch.get(tp, []))
        return out
    finally:
        await consumer.stop()


def fields(record: Any) -> tuple[Any, ...]:
    return record.offset, record.timestamp, record.key, record.value, [tuple(h) for h in record.headers]


async def test_parsed_records_equal_consumer_records(broker: BrokerProcess, probe: Probe) -> None:
    """A read_committed consumer with the hook returns parsed records (not ConsumerRecords)
    with exactly the offsets, timestamps, keys, values and headers a plain one returns:
    every codec, null keys and values, headers, and no record of an aborted transaction."""
    topic = unique("fetching-codecs")
    await probe.create_topic(topic, 1)
    expected = await asyncio.to_thread(produce_with_librdkafka, broker.bootstrap, topic)
    plain = await read_all(broker.bootstrap, topic, parsed=False)
    parsed = await read_all(broker.bootstrap, topic, parsed=True)
    assert all(isinstance(r, ConsumerRecord) for r in plain)
    assert not any(isinstance(r, ConsumerRecord) for r in parsed)
    assert [fields(r) for r in parsed] == [fields(r) for r in plain]
    assert [(r.key, r.value, r.timestamp, [tuple(h) for h in r.headers]) for r in parsed] == expected
    # The aborted transactions and the markers take offsets that no record has.
    offsets = [r.offset for r in parsed]
    assert offsets == sorted(offsets) and offsets[-1] > len(offsets) - 1


async def test_agents_read_what_librdkafka_writes_in_transactions(make_app: Any, probe: Probe,
                                                                  broker: BrokerProcess) -> None:
    """An agent under read_committed sees every committed record of every codec with its
    metadata, none of the aborted ones, and commits the input to its end (past the markers)."""
    app = make_app(config={"isolation.level": "read_committed"})
    topic = app.topic(unique("fetching-agent"), partitions=1, value_type=bytes)
    seen: list[Event] = []

    @app.agent(topic)
    async def collect(stream: AgentStream) -> None:
        async for event in stream.events():
            seen.append(event)

    await probe.create_topic(topic.name, 1)
    expected = await asyncio.to_thread(produce_with_librdkafka, broker.bootstrap, topic.name)
    end = (await probe.end_offsets([TopicPartition(topic.name, 0)]))[TopicPartition(topic.name, 0)]
    async with running(app) as runtime:
        await probe.settle(runtime)  # committed to the end: past the last marker too
        await eventually(lambda: len(seen) >= len(expected), "every committed record")
    assert [(e.raw_key, e.value, e.timestamp, e.headers) for e in seen] == expected
    assert all(e.topic == topic.name and e.partition == 0 for e in seen)
    assert (await probe.committed(app.id))[TopicPartition(topic.name, 0)] == end
