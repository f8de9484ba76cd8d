"""One small adapter per Python Kafka client, so a test can run the same scenario through
confluent-kafka (librdkafka), aiokafka and kafka-python and compare what comes back.

Every adapter produces a list of ``Rec`` (key, value, headers, explicit timestamp) and
returns the (partition, offset) each delivery report gave, reads partitions from an
offset, and asks ListOffsets by timestamp (``offsets_for_times``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from tests.integration.util import QUIET, Rec

NO_OFFSET = -1


class Client(Protocol):
    name: ClassVar[str]

    def produce(self, topic: str, records: Sequence[Rec], *, compression: str = "none",
                acks: str = "all", partition: int | None = None, flush_every: int = 0,
                extra: dict[str, Any] | None = None) -> list[tuple[int, int]]: ...

    def consume(self, topic: str, starts: dict[int, int], count: int, timeout: float = 30,
                extra: dict[str, Any] | None = None) -> list[Rec]: ...

    def offsets_for_times(self, topic: str, partition: int, timestamps: Sequence[int]) -> list[int | None]: ...


def _chunks(records: Sequence[Rec], size: int) -> list[Sequence[Rec]]:
    if size <= 0:
        return [records]
    return [records[i : i + size] for i in range(0, len(records), size)]


# -- confluent-kafka ------------------------------------------------------------------------


class ConfluentClient:
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, records: Sequence[Rec], *, compression: str = "none",
                acks: str = "all", partition: int | None = None, flush_every: int = 0,
                extra: dict[str, Any] | None = None) -> list[tuple[int, int]]:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "compression.type": compression,
                             "acks": acks, "linger.ms": 20, "enable.idempotence": False,
                             **QUIET, **(extra or {})})
        reports: list[tuple[int, int] | None] = [None] * len(records)
        errors: list[Any] = []

        def delivered(index: int) -> Any:
            def callback(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(err)
                else:
                    offset = msg.offset()  # None (acks=0) or a negative sentinel: unknown
                    known = offset is not None and offset >= 0
                    reports[index] = (msg.partition(), offset if known else NO_OFFSET)
            return callback

        index = 0
        for chunk in _chunks(records, flush_every):
            for rec in chunk:
                kwargs: dict[str, Any] = {"key": rec.key, "value": rec.value, "timestamp": rec.timestamp,
                                          "headers": list(rec.headers), "on_delivery": delivered(index)}
                if partition is not None:
                    kwargs["partition"] = partition
                producer.produce(topic, **kwargs)
                index += 1
            assert producer.flush(30) == 0, "confluent-kafka could not deliver within 30s"
        assert not errors, errors
        assert all(r is not None for r in reports)
        return [r for r in reports if r is not None]

    def consume(self, topic: str, starts: dict[int, int], count: int, timeout: float = 30,
                extra: dict[str, Any] | None = None) -> list[Rec]:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "adapter-reader",
                             "enable.auto.commit": False, **QUIET, **(extra or {})})
        out: list[Rec] = []
        try:
            consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    raise KafkaException(msg.error())
                out.append(Rec(msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1],
                               msg.partition(), msg.offset()))
        finally:
            consumer.close()
        return out

    def offsets_for_times(self, topic: str, partition: int, timestamps: Sequence[int]) -> list[int | None]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "adapter-times", **QUIET})
        out: list[int | None] = []
        try:
            for timestamp in timestamps:
                [tp] = consumer.offsets_for_times([TopicPartition(topic, partition, timestamp)], timeout=10)
                assert tp.error is None, tp.error
                out.append(None if tp.offset < 0 else int(tp.offset))
        finally:
            consumer.close()
        return out


# -- aiokafka -------------------------------------------------------------------------------


class AiokafkaClient:
    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, records: Sequence[Rec], *, compression: str = "none",
                acks: str = "all", partition: int | None = None, flush_every: int = 0,
                extra: dict[str, Any] | None = None) -> list[tuple[int, int]]:
        return asyncio.run(self._produce(topic, records, compression, acks, partition, flush_every, extra))

    async def _produce(self, topic: str, records: Sequence[Rec], compression: str, acks: str,
                       partition: int | None, flush_every: int, extra: dict[str, Any] | None) -> list[tuple[int, int]]:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap,
                                    compression_type=None if compression == "none" else compression,
                                    acks=acks if acks == "all" else int(acks), linger_ms=20, **(extra or {}))
        await producer.start()
        reports = []
        try:
            for chunk in _chunks(records, flush_every):
                futures = [await producer.send(topic, rec.value, key=rec.key, partition=partition,
                                               timestamp_ms=rec.timestamp, headers=list(rec.headers))
                           for rec in chunk]
                for meta in await asyncio.wait_for(asyncio.gather(*futures), 30):
                    if meta is None:  # acks=0: aiokafka resolves the future with None
                        reports.append((-1 if partition is None else partition, NO_OFFSET))
                    else:
                        reports.append((meta.partition, meta.offset if meta.offset >= 0 else NO_OFFSET))
        finally:
            await producer.stop()
        return reports

    def consume(self, topic: str, starts: dict[int, int], count: int, timeout: float = 30,
                extra: dict[str, Any] | None = None) -> list[Rec]:
        return asyncio.run(self._consume(topic, starts, count, timeout, extra))

    async def _consume(self, topic: str, starts: dict[int, int], count: int, timeout: float,
                       extra: dict[str, Any] | None) -> list[Rec]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest", **(extra or {}))
        await consumer.start()
        out: list[Rec] = []
        try:
            consumer.assign([TopicPartition(topic, p) for p in starts])
            for p, offset in starts.items():
                consumer.seek(TopicPartition(topic, p), offset)
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    out.extend(Rec(r.key, r.value, tuple(r.headers), r.timestamp, r.partition, r.offset)
                               for r in records)
        finally:
            await consumer.stop()
        return out

    def offsets_for_times(self, topic: str, partition: int, timestamps: Sequence[int]) -> list[int | None]:
        return asyncio.run(self._offsets_for_times(topic, partition, timestamps))

    async def _offsets_for_times(self, topic: str, partition: int, timestamps: Sequence[int]) -> list[int | None]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        out: list[int | None] = []
        try:
            tp = TopicPartition(topic, partition)
            for timestamp in timestamps:
                found = (await consumer.offsets_for_times({tp: timestamp}))[tp]
                out.append(None if found is None else int(found.offset))
        finally:
            await consumer.stop()
        return out


# -- kafka-python ---------------------------------------------------------------------------


def kafka_python_codecs() -> tuple[str, ...]:
    """The codecs kafka-python can use in this environment (it has its own codec modules:
    python-snappy (on cramjam), lz4 and zstandard)."""
    from kafka import codec

    available = {"none": True, "gzip": codec.has_gzip(), "snappy": codec.has_snappy(),
                 "lz4": codec.has_lz4(), "zstd": codec.has_zstd()}
    return tuple(name for name, ok in available.items() if ok)


class KafkaPythonClient:
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, records: Sequence[Rec], *, compression: str = "none",
                acks: str = "all", partition: int | None = None, flush_every: int = 0,
                extra: dict[str, Any] | None = None) -> list[tuple[int, int]]:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap,
                                 compression_type=None if compression == "none" else compression,
                                 acks=acks if acks == "all" else int(acks), linger_ms=20, **(extra or {}))
        reports = []
        try:
            for chunk in _chunks(records, flush_every):
                futures = [producer.send(topic, value=rec.value, key=rec.key, partition=partition,
                                         timestamp_ms=rec.timestamp, headers=list(rec.headers))
                           for rec in chunk]
                producer.flush(30)
                for future in futures:
                    meta = future.get(timeout=30)
                    reports.append((meta.partition, meta.offset if meta.offset >= 0 else NO_OFFSET))
        finally:
            producer.close(timeout=10)
        return reports

    def _consumer(self, extra: dict[str, Any] | None = None) -> Any:
        from kafka import KafkaConsumer

        return KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", group_id=None, **(extra or {}))

    def consume(self, topic: str, starts: dict[int, int], count: int, timeout: float = 30,
                extra: dict[str, Any] | None = None) -> list[Rec]:
        from kafka import TopicPartition

        consumer = self._consumer(extra)
        out: list[Rec] = []
        try:
            consumer.assign([TopicPartition(topic, p) for p in starts])
            for p, offset in starts.items():
                consumer.seek(TopicPartition(topic, p), offset)
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    out.extend(Rec(r.key, r.value, tuple(r.headers), r.timestamp, r.partition, r.offset)
                               for r in records)
        finally:
            consumer.close()
        return out

    def offsets_for_times(self, topic: str, partition: int, timestamps: Sequence[int]) -> list[int | None]:
        from kafka import TopicPartition

        consumer = self._consumer()
        out: list[int | None] = []
        try:
            tp = TopicPartition(topic, partition)
            for timestamp in timestamps:
                found = consumer.offsets_for_times({tp: timestamp}, timeout_ms=10000)[tp]
                out.append(None if found is None else int(found.offset))
        finally:
            consumer.close()
        return out


CLIENTS: dict[str, type[ConfluentClient] | type[AiokafkaClient] | type[KafkaPythonClient]] = {
    "confluent": ConfluentClient,
    "aiokafka": AiokafkaClient,
    "kafka-python": KafkaPythonClient,
}
