"""RecordCollector's ordering: sends from synchronous code (``send_soon``, ``cast``, table
and late-record writes) reach the producer in the order they were made."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from streamkit.streams.collector import Produced, RecordCollector
from streamkit.streams.settings import AppSettings
from tests.streams.conftest import Probe, unique


class _SlowFirstProducer:
    """aiokafka's ``send`` may suspend (waiting for the topic's metadata, or for buffer
    space) and resume after later calls that did not have to: the first call here waits
    until released, the others do not."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.appended: list[bytes | None] = []
        self.calls = 0

    async def send(self, topic: str, value: bytes | None, **kwargs: Any) -> asyncio.Future[Any]:
        self.calls += 1
        if self.calls == 1:
            await self.release.wait()
        self.appended.append(value)
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def flush(self) -> None:
        return None


async def test_sends_from_synchronous_code_keep_their_order(tmp_path: Path) -> None:
    collector = RecordCollector("unused:9092", AppSettings.build({"application.id": "t"}), state_dir=tmp_path)
    producer = _SlowFirstProducer()
    collector._producer = producer
    collector.produce("out", b"k", b"1")
    for _ in range(5):
        await asyncio.sleep(0)  # the first send is suspended in the producer
    collector.produce("out", b"k", b"2")
    collector.produce("out", b"k", b"3")
    for _ in range(5):
        await asyncio.sleep(0)
    producer.release.set()
    await collector.check_deliveries()
    assert producer.appended == [b"1", b"2", b"3"]


async def test_enqueue_many_places_records_as_the_producer_would(probe: Probe, tmp_path: Path) -> None:
    """A DSL batch's outputs in one call: each keyed record lands in the partition aiokafka's
    own ``send`` picks for its key (murmur2 over the topic's partitions), explicit partitions
    and null keys as given, in order, with their timestamps and headers."""
    topic, reference = unique("many"), unique("many-ref")
    await probe.create_topic(topic, 5)
    await probe.create_topic(reference, 5)
    settings = AppSettings.build({"application.id": unique("many-app"), "linger.ms": 1})
    collector = RecordCollector(probe.bootstrap, settings, state_dir=tmp_path)
    await collector.start()
    try:
        keys = [f"key-{i % 37}".encode() for i in range(200)]
        records: list[Produced] = [(topic, k, b"%d" % i, 1_000 + i, [("h", b"%d" % i)] if i % 3 == 0 else None,
                                    None, None) for i, k in enumerate(keys)]
        records.append((topic, b"pinned", b"pinned", 5_000, None, 4, None))
        records.append((topic, None, b"no-key", 5_001, None, 2, None))
        await collector.enqueue_many(records)
        await collector.check_deliveries()
    finally:
        await collector.stop()
    for i, k in enumerate(keys):
        await probe.producer.send(reference, b"%d" % i, key=k)
    await probe.producer.flush()
    expected = {r.key: r.partition for r in await probe.read(reference)}
    got = await probe.read(topic)
    assert len(got) == 202
    for r in got:
        if r.value == b"pinned":
            assert (r.partition, r.timestamp) == (4, 5_000)
        elif r.value == b"no-key":
            assert (r.partition, r.key, r.timestamp) == (2, None, 5_001)
        else:
            i = int(r.value)
            assert (r.key, r.partition, r.timestamp) == (keys[i], expected[keys[i]], 1_000 + i)
            assert list(r.headers) == ([("h", b"%d" % i)] if i % 3 == 0 else [])
    for p in range(5):
        values = [int(r.value) for r in got if r.partition == p and r.value.isdigit()]
        assert values == sorted(values)  # one partition's records in the order given


async def test_transaction_timeout_ms_is_the_timeout_the_broker_keeps(probe: Probe, tmp_path: Path) -> None:
    """``transaction.timeout.ms`` reaches the broker with each task producer's
    InitProducerId: the broker aborts a crashed worker's transaction after it (Kafka
    Streams' default, 10 s, when unset)."""
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    from tests.integration.util import call, connect

    timeouts: dict[str, int] = {}
    for config, transactional_id in (({}, unique("txn-default")), ({"transaction.timeout.ms": 45_000}, unique("txn"))):
        settings = AppSettings.build({"application.id": "t", "processing.guarantee": "exactly_once", **config})
        producer = RecordCollector(probe.bootstrap, settings, state_dir=tmp_path)._new_producer(transactional_id, "c")
        await producer.start()
        try:
            with connect(probe.bootstrap) as sock:
                described = call(sock, DescribeTransactionsRequest(transactional_ids=(transactional_id,)))
        finally:
            await producer.stop()
        (state,) = described.transaction_states
        timeouts[str(config)] = int(state.transaction_timeout.total_seconds() * 1000)
    assert timeouts == {"{}": 10_000, "{'transaction.timeout.ms': 45000}": 45_000}
