"""The changelog reader: exactly the records of [start, end), from whole or cut batches,
compressed or not, and no connection left behind however a read ends."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.structs import TopicPartition

from streamkit.state.partition import ChangelogRecord
from streamkit.streams.changelog import ChangelogReader, ChangelogReadError
from streamkit.streams.clients import start_client, stop_client
from streamkit.testing import BrokerProcess
from tests.streams.conftest import Probe, unique


@contextlib.asynccontextmanager
async def started(bootstrap: str, topic: str, partition: int = 0, **kwargs: Any) -> AsyncIterator[ChangelogReader]:
    reader = ChangelogReader(bootstrap, topic, partition, **kwargs)
    try:
        await start_client(reader)
        yield reader
    finally:
        await stop_client(reader)


async def read_all(reader: ChangelogReader, start: int, end: int) -> list[ChangelogRecord]:
    out: list[ChangelogRecord] = []
    async with contextlib.aclosing(reader.read(start, end)) as chunks:
        async for chunk in chunks:
            out += chunk
    return out


async def new_topic(probe: Probe, name: str) -> str:
    topic = unique(name)
    await probe.create_topic(topic, 1, {"cleanup.policy": "compact"})
    return topic


async def send_one_batch(producer: AIOKafkaProducer, topic: str,
                         records: list[tuple[bytes, bytes | None]]) -> None:
    """``records`` as one record batch (one produce of one batch, whatever the linger)."""
    batch = producer.create_batch()
    for key, value in records:
        assert batch.append(key=key, value=value, timestamp=None) is not None
    await (await producer.send_batch(batch, topic, partition=0))


def _open_connections() -> int:
    """Kafka connections of this process still open: each runs a reader task until closed."""
    return sum(1 for task in asyncio.all_tasks()
               if getattr(task.get_coro(), "__qualname__", "") == "AIOKafkaConnection._read")


def _fetches_left() -> int:
    return sum(1 for task in asyncio.all_tasks()
               if getattr(task.get_coro(), "__qualname__", "") == "ChangelogReader._fetch")


def _unclosed_after_collect() -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


async def test_reads_exactly_the_range_in_order_with_tombstones(broker: BrokerProcess, probe: Probe) -> None:
    topic = await new_topic(probe, "range")
    expected: list[ChangelogRecord] = []
    for part in range(3):  # three produces: several batches
        records = [(f"k{i % 7}".encode(), None if i % 5 == 0 else f"v{i}".encode())
                   for i in range(part * 20, part * 20 + 20)]
        await probe.produce_many(topic, ((k, v, None) for k, v in records))
        expected += [(k, v, len(expected) + n) for n, (k, v) in enumerate(records)]
    async with started(broker.bootstrap, topic, chunk_records=7) as reader:
        assert await reader.offsets() == (0, 60)
        assert await read_all(reader, 0, 60) == expected
        assert await read_all(reader, 13, 41) == expected[13:41]
        chunks = []
        async with contextlib.aclosing(reader.read(0, 60)) as it:
            async for chunk in it:
                chunks.append(chunk)
        assert len(chunks) > 1 and [r for c in chunks for r in c] == expected
    assert any(v is None for _k, v, _o in expected)


async def test_starts_and_ends_in_the_middle_of_a_batch(broker: BrokerProcess, probe: Probe) -> None:
    """A fetch returns whole batches from the one holding the offset asked for."""
    topic = await new_topic(probe, "mid-batch")
    records = [(b"k%d" % i, b"v%d" % i) for i in range(10)]
    await send_one_batch(probe.producer, topic, records)
    async with started(broker.bootstrap, topic) as reader:
        assert await read_all(reader, 3, 7) == [(k, v, i) for i, (k, v) in enumerate(records)][3:7]
        assert await read_all(reader, 9, 10) == [(b"k9", b"v9", 9)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_reads_compressed_batches(broker: BrokerProcess, probe: Probe, codec: str) -> None:
    topic = await new_topic(probe, f"compressed-{codec}")
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, acks="all")
    await producer.start()
    try:
        records = [(b"key-%d" % i, None if i == 17 else b"value %d " % i * 20) for i in range(40)]
        await send_one_batch(producer, topic, records[:25])
        await send_one_batch(producer, topic, records[25:])
    finally:
        await producer.stop()
    expected = [(k, v, i) for i, (k, v) in enumerate(records)]
    async with started(broker.bootstrap, topic) as reader:
        assert await reader.offsets() == (0, 40)
        assert await read_all(reader, 0, 40) == expected
        assert await read_all(reader, 11, 30) == expected[11:30]


async def test_an_empty_range_reads_nothing(broker: BrokerProcess, probe: Probe) -> None:
    empty = await new_topic(probe, "empty")
    async with started(broker.bootstrap, empty) as reader:
        assert await reader.offsets() == (0, 0)
        assert await read_all(reader, 0, 0) == []
    topic = await new_topic(probe, "non-empty")
    await probe.produce_many(topic, ((b"k", b"v", None) for _ in range(5)))
    async with started(broker.bootstrap, topic) as reader:
        assert await read_all(reader, 3, 3) == []
        assert await read_all(reader, 5, 5) == []


async def test_records_deleted_from_the_log_are_skipped(broker: BrokerProcess, probe: Probe) -> None:
    """The log start moved past the range's start (retention, DeleteRecords): the fetch
    fails with OFFSET_OUT_OF_RANGE and the read goes on from the new log start."""
    topic = await new_topic(probe, "deleted")
    await probe.produce_many(topic, ((b"k%d" % i, b"v%d" % i, None) for i in range(10)))
    await probe.admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(4)})
    async with started(broker.bootstrap, topic) as reader:
        assert await reader.offsets() == (4, 10)
        assert await read_all(reader, 0, 10) == [(b"k%d" % i, b"v%d" % i, i) for i in range(4, 10)]
        assert await read_all(reader, 0, 3) == []


async def test_a_range_past_the_log_end_fails_clearly(broker: BrokerProcess, probe: Probe) -> None:
    """The log ends below the range's end (it was truncated, or recreated, since the end
    was taken): an error, not a read waiting forever for records that will not come."""
    topic = await new_topic(probe, "short")
    await probe.produce_many(topic, ((b"k", b"v%d" % i, None) for i in range(5)))
    async with started(broker.bootstrap, topic) as reader:
        with pytest.raises(ChangelogReadError, match="truncated"):
            await asyncio.wait_for(read_all(reader, 0, 8), 10)
        with pytest.raises(ChangelogReadError, match="truncated"):
            await asyncio.wait_for(read_all(reader, 7, 9), 10)


async def test_an_unknown_partition_fails_after_the_retry_timeout(broker: BrokerProcess, probe: Probe) -> None:
    topic = await new_topic(probe, "unknown-partition")
    async with started(broker.bootstrap, topic, partition=3, retry_timeout_ms=300) as reader:
        began = time.monotonic()
        with pytest.raises(ChangelogReadError, match="UnknownTopicOrPartition"):
            await asyncio.wait_for(reader.offsets(), 10)
        with pytest.raises(ChangelogReadError, match="UnknownTopicOrPartition"):
            await asyncio.wait_for(read_all(reader, 0, 5), 10)
        assert time.monotonic() - began < 5


async def test_a_broker_gone_fails_after_the_retry_timeout(tmp_path: Path) -> None:
    own = BrokerProcess(tmp_path / "broker").start()
    try:
        probe = Probe(own.bootstrap)
        await probe.start()
        try:
            await probe.create_topic("gone", 1)
            await probe.produce_many("gone", ((b"k", b"v", None) for _ in range(3)))
        finally:
            await probe.close()
        async with started(own.bootstrap, "gone", retry_timeout_ms=500, request_timeout_ms=2000) as reader:
            assert await reader.offsets() == (0, 3)
            own.stop()
            with pytest.raises(ChangelogReadError, match="still failing after 500 ms"):
                await asyncio.wait_for(read_all(reader, 0, 3), 20)
    finally:
        if own.process is not None and own.process.poll() is None:
            own.stop()


async def test_a_read_cancelled_at_any_point_leaves_no_connection(broker: BrokerProcess, probe: Probe) -> None:
    """The pattern of a table restore, cancelled at every step in turn: while connecting,
    listing offsets, waiting for a fetch, between chunks. The fetch sent ahead must go
    with the read: left running it would reconnect after the reader closed."""
    topic = await new_topic(probe, "cancelled")
    await probe.produce_many(topic, ((b"k%d" % i, b"x" * 200, None) for i in range(20_000)))

    async def restore_slowly() -> None:
        async with started(broker.bootstrap, topic, chunk_records=500) as reader:
            begin, end = await reader.offsets()
            async with contextlib.aclosing(reader.read(begin, end)) as chunks:
                async for _chunk in chunks:
                    await asyncio.sleep(0.002)

    _unclosed_after_collect()  # what earlier tests left is not this test's business
    before = _open_connections()
    for step in range(40):  # cancel after 0, 1.5, 3, ... 58.5 ms
        task = asyncio.create_task(restore_slowly())
        await asyncio.sleep(step * 0.0015)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        del task
    await asyncio.sleep(0.2)  # a fetch left running would have reconnected by now
    assert _fetches_left() == 0
    assert _open_connections() == before
    assert _unclosed_after_collect() == []


async def _transactional(bootstrap: str, txn_id: str) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=0)
    await producer.start()
    return producer


async def test_read_committed_leaves_out_aborted_and_open_transactions(broker: BrokerProcess, probe: Probe) -> None:
    """Interleaved: a committed transaction, an aborted one of another producer, plain records
    and a still open transaction. read_committed reads the committed and plain records, and
    ends at the last stable offset (before the open transaction); read_uncommitted reads all."""
    topic = await new_topic(probe, "read-committed")
    good, bad, hung = [await _transactional(broker.bootstrap, unique(n)) for n in ("good", "bad", "hung")]
    try:
        await good.begin_transaction()
        await bad.begin_transaction()
        await good.send_and_wait(topic, b"1", key=b"a", partition=0)
        await bad.send_and_wait(topic, b"x", key=b"a", partition=0)
        await good.send_and_wait(topic, b"2", key=b"b", partition=0)
        await bad.send_and_wait(topic, b"y", key=b"c", partition=0)
        await good.commit_transaction()
        await bad.abort_transaction()
        await probe.produce(topic, b"3", key=b"d", partition=0)
        await hung.begin_transaction()
        await hung.send_and_wait(topic, b"open", key=b"e", partition=0)
        await probe.produce(topic, b"4", key=b"f", partition=0)  # behind the open transaction

        async with started(broker.bootstrap, topic, read_committed=True) as reader:
            begin, lso = await reader.offsets()
            committed = [(k, v) for k, v, _o in await read_all(reader, begin, lso)]
        assert committed == [(b"a", b"1"), (b"b", b"2"), (b"d", b"3")]
        async with started(broker.bootstrap, topic) as reader:
            begin, high = await reader.offsets()
            everything = [v for _k, v, _o in await read_all(reader, begin, high)]
        assert high > lso
        assert everything == [b"1", b"x", b"2", b"y", b"3", b"open", b"4"]
    finally:
        for producer in (good, bad, hung):
            await producer.stop()
