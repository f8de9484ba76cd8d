"""The registry's store: the compacted, single-partition ``kafkastore.topic`` read from
the beginning and followed, each record handed to the state, plus a producer to write it
(Confluent's ``KafkaStore``). ``read_to_end`` returns once every record written before
the call has been applied, which gives a leader read-your-writes and a fresh leader the
ids its predecessor handed out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from aiokafka.structs import TopicPartition

from streamkit.clients.lifecycle import start_client, stop_client

__all__ = ["KafkaStore"]

log = logging.getLogger(__name__)


class KafkaStore:
    def __init__(self, bootstrap: str, topic: str, replication: int,
                 on_record: Callable[[bytes | None, bytes | None], None], client_id: str,
                 security: Mapping[str, Any]) -> None:
        self.bootstrap = bootstrap
        self.security = dict(security)  # aiokafka's security arguments (kafkastore.security.protocol...)
        self.topic = topic
        self.replication = replication
        self.on_record = on_record
        self.client_id = client_id
        self._tp = TopicPartition(topic, 0)
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        # asks for the end offset on a connection of its own: on the reader's, a request
        # waits behind the long-polling fetch (a broker answers a connection in order)
        self._offsets: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._advanced = asyncio.Condition()

    async def _ensure_topic(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=self.client_id, **self.security)
        await start_client(admin)
        try:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(self.topic, 1, self.replication,
                                                    topic_configs={"cleanup.policy": "compact"})])
        finally:
            await stop_client(admin)

    async def start(self, timeout_s: float = 60) -> None:
        await self._ensure_topic()
        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", client_id=self.client_id,
                                          enable_idempotence=True, **self.security)
        await start_client(self._producer)
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                          auto_offset_reset="earliest", client_id=self.client_id, **self.security)
        await start_client(self._consumer)
        self._offsets = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                         client_id=self.client_id, **self.security)
        await start_client(self._offsets)
        self._consumer.assign([self._tp])
        await self._consumer.seek_to_beginning(self._tp)
        self._reader = asyncio.create_task(self._read(), name=f"schemas-store-{self.topic}")
        await self.read_to_end(timeout_s)

    async def _read(self) -> None:
        assert self._consumer is not None
        while True:
            try:
                batch = await self._consumer.getmany(self._tp, timeout_ms=200)
            except KafkaError as exc:
                # the broker may be restarting: go on once it is back
                log.warning("reading %s failed, retrying: %s", self.topic, exc)
                await asyncio.sleep(0.5)
                continue
            for record in batch.get(self._tp, ()):
                self.on_record(record.key, record.value)
            async with self._advanced:
                self._advanced.notify_all()

    async def read_to_end(self, timeout_s: float = 30) -> None:
        """Wait until every record written before this call has been applied."""
        assert self._consumer is not None and self._offsets is not None
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    end = (await self._offsets.end_offsets([self._tp]))[self._tp]
                    break
                except KafkaError as exc:
                    log.warning("asking %s for its end failed, retrying: %s", self.topic, exc)
                    await asyncio.sleep(0.5)
            while True:
                # the position moves as getmany hands records over, and the reader applies a
                # batch without awaiting in between: past the end means applied (also over
                # offsets compaction left without records)
                if await self._consumer.position(self._tp) >= end:
                    return
                async with self._advanced:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._advanced.wait(), 0.5)

    async def send(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Write ``records`` (acks=all) and wait until this store has applied them."""
        assert self._producer is not None
        futures = [await self._producer.send(self.topic, value, key=key, partition=0) for key, value in records]
        for future in futures:
            await future
        await self.read_to_end()

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        for consumer in (self._consumer, self._offsets):
            if consumer is not None:
                await stop_client(consumer)
        if self._producer is not None:
            await stop_client(self._producer)
