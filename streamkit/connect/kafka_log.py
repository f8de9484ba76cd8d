"""A compacted topic read from the beginning and followed, plus a producer to write it
(Kafka Connect's KafkaBasedLog): the distributed worker keeps configs, offsets
(``KafkaOffsetStore``) and statuses this way. ``read_to_end`` returns once every record written before the call has been
handed to ``on_record`` (read-your-writes for the REST API, catch-up before a task starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from aiokafka.structs import TopicPartition

from streamkit.connect.offsets import MemoryOffsetStore, Offset, offset_key, offset_value
from streamkit.connect.runner import start_client, stop_client

__all__ = ["KafkaLog", "KafkaOffsetStore"]

log = logging.getLogger(__name__)

OnRecord = Callable[[bytes | None, bytes | None], None]


class KafkaLog:
    def __init__(self, bootstrap: str, topic: str, partitions: int, replication: int, on_record: OnRecord,
                 client_id: str, security: Mapping[str, Any], isolation_level: str = "read_uncommitted") -> None:
        self.bootstrap = bootstrap
        self.security = dict(security)  # aiokafka's security arguments, for every client
        self.topic = topic
        self.partitions = partitions
        self.replication = replication
        self.on_record = on_record
        self.client_id = client_id
        self.isolation_level = isolation_level
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._advanced = asyncio.Condition()
        self._tps: list[TopicPartition] = []
        self._failure: BaseException | None = None

    async def _ensure_topic(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=self.client_id, **self.security)
        await start_client(admin)
        try:
            with contextlib.suppress(TopicAlreadyExistsError):
                response = await admin.create_topics([NewTopic(
                    self.topic, self.partitions, self.replication, topic_configs={"cleanup.policy": "compact"})])
                for error in getattr(response, "topic_errors", ()):
                    if error[1] not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
                        log.warning("creating topic %s: error code %s", self.topic, error[1])
        finally:
            await stop_client(admin)

    async def start(self) -> None:
        await self._ensure_topic()
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", client_id=self.client_id,
                                    **self.security)
        await start_client(producer)
        self._producer = producer
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", client_id=self.client_id,
                                    isolation_level=self.isolation_level, **self.security)
        await start_client(consumer)
        self._consumer = consumer
        partitions = None
        for _ in range(100):
            partitions = consumer.partitions_for_topic(self.topic)
            if partitions:
                break
            await consumer._client.force_metadata_update()
            await asyncio.sleep(0.05)
        if not partitions:
            raise RuntimeError(f"topic {self.topic} has no partitions")
        self._tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer.assign(self._tps)
        await consumer.seek_to_beginning(*self._tps)
        self._reader = asyncio.create_task(self._read(), name=f"kafka-log-{self.topic}")
        await self.read_to_end()

    async def _read(self) -> None:
        assert self._consumer is not None
        try:
            while True:
                try:
                    batch = await self._consumer.getmany(timeout_ms=200)
                except KafkaError as exc:
                    # the broker may be restarting: keep following once it is back
                    log.warning("reading %s failed, retrying: %s", self.topic, exc)
                    await asyncio.sleep(1)
                    continue
                for records in batch.values():
                    for record in records:
                        try:
                            self.on_record(record.key, record.value)
                        except Exception:
                            log.exception("cannot apply a record of %s", self.topic)
                async with self._advanced:
                    self._advanced.notify_all()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._failure = exc
            async with self._advanced:
                self._advanced.notify_all()
            raise

    async def read_to_end(self, timeout_s: float = 30) -> None:
        assert self._consumer is not None
        ends = await self._consumer.end_offsets(self._tps)
        async with asyncio.timeout(timeout_s):
            while True:
                if self._failure is not None:
                    raise RuntimeError(f"reading {self.topic} failed") from self._failure
                positions = {tp: await self._position(tp) for tp in ends}
                if all(positions[tp] >= end for tp, end in ends.items()):
                    return
                async with self._advanced:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._advanced.wait(), 0.5)

    async def _position(self, tp: TopicPartition) -> int:
        assert self._consumer is not None
        # the reader hands records over as soon as a batch arrives, so the position is
        # how far on_record has seen
        return int(await self._consumer.position(tp))

    async def send(self, key: bytes, value: bytes | None) -> None:
        assert self._producer is not None
        await self._producer.send_and_wait(self.topic, value, key=key)

    async def send_many(self, items: list[tuple[bytes, bytes | None]]) -> None:
        assert self._producer is not None
        futures = [await self._producer.send(self.topic, value, key=key) for key, value in items]
        for future in futures:
            await future

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._consumer is not None:
            await stop_client(self._consumer)
        if self._producer is not None:
            await stop_client(self._producer)


class KafkaOffsetStore(MemoryOffsetStore):
    """Source offsets in ``offset.storage.topic``: key ``[connector, partition]``, value
    the offset (null: removed), as Kafka Connect lays them out. Its log is read with
    read_committed: offsets an exactly-once source task wrote in an aborted transaction
    (or in one a zombie left open) are never seen."""

    def __init__(self) -> None:
        super().__init__()
        self.log: KafkaLog | None = None
        self._unsent: list[tuple[bytes, bytes | None]] = []

    def on_record(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            name, partition = orjson.loads(key)
            offset = orjson.loads(value) if value is not None else None
        except (orjson.JSONDecodeError, ValueError, TypeError):
            log.warning("ignoring a malformed offset record: %r", key)
            return
        MemoryOffsetStore.put(self, name, {offset_key(name, partition): (partition, offset)})

    def put(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Offset | None]]) -> None:
        super().put(connector, offsets)
        with self._lock:
            self._unsent.extend((key.encode(), offset_value(off)) for key, (_p, off) in offsets.items())

    async def flush(self) -> None:
        with self._lock:
            unsent, self._unsent = self._unsent, []
        if unsent and self.log is not None:
            await self.log.send_many(unsent)

    async def sync(self) -> None:
        if self.log is not None:
            await self.log.read_to_end()
