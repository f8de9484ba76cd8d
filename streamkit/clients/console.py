"""Console producer and consumer: lines from stdin to a topic, records of a topic to stdout."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from streamkit.clients.admin import ClientError, describe_topic

__all__ = ["consume_lines", "produce_lines"]


async def produce_lines(bootstrap: str, topic: str, lines: Iterable[str], key_separator: str | None,
                        partition: int | None, acks: str, compression: str | None) -> int:
    """Send each line as one record (key before ``key_separator`` when given)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=int(acks) if acks != "all" else "all",
                                compression_type=compression, linger_ms=5)
    try:
        await producer.start()
    except KafkaError as exc:
        await producer.stop()
        raise ClientError(f"cannot reach a broker at {bootstrap}: {exc}") from exc
    sent = 0
    try:
        futures = []
        for raw in lines:
            line = raw.rstrip("\n")
            key: bytes | None = None
            if key_separator is not None:
                k, sep, v = line.partition(key_separator)
                if not sep:
                    raise ClientError(f"line {sent + 1} has no key separator {key_separator!r}")
                key, line = k.encode(), v
            futures.append(await producer.send(topic, line.encode(), key=key, partition=partition))
            sent += 1
        for future in futures:
            await future
    except KafkaError as exc:
        raise ClientError(f"cannot produce to {topic}: {exc}") from exc
    finally:
        await producer.stop()
    return sent


async def consume_lines(bootstrap: str, topic: str, group: str | None, from_beginning: bool,
                        partition: int | None, offset: int | None, max_messages: int | None,
                        timeout_ms: int | None, emit: Callable[[str], None], print_key: bool,
                        key_separator: str) -> int:
    """Print records until ``max_messages`` or ``timeout_ms`` of silence (None: forever)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group,
        auto_offset_reset="earliest" if from_beginning else "latest",
        enable_auto_commit=group is not None,
    )
    try:
        await consumer.start()
    except KafkaError as exc:
        await consumer.stop()
        raise ClientError(f"cannot reach a broker at {bootstrap}: {exc}") from exc
    count = 0
    try:
        if partition is not None:
            tp = TopicPartition(topic, partition)
            description = await describe_topic(bootstrap, topic)
            if not 0 <= partition < description.partitions:
                raise ClientError(f"topic {topic} has no partition {partition} "
                                  f"(it has {description.partitions})")
            consumer.assign([tp])
            if offset is not None:
                consumer.seek(tp, offset)
            elif from_beginning:
                await consumer.seek_to_beginning(tp)
        else:
            consumer.subscribe([topic])
        while max_messages is None or count < max_messages:
            batch = await consumer.getmany(timeout_ms=timeout_ms if timeout_ms is not None else 1000,
                                           max_records=None if max_messages is None else max_messages - count)
            if not batch and timeout_ms is not None:
                break
            for records in batch.values():
                for record in records:
                    value = record.value.decode("utf-8", "replace") if record.value is not None else "null"
                    if print_key:
                        key = record.key.decode("utf-8", "replace") if record.key is not None else "null"
                        value = f"{key}{key_separator}{value}"
                    emit(value)
                    count += 1
        if group is not None:
            await consumer.commit()
    except KafkaError as exc:
        raise ClientError(f"cannot consume from {topic}: {exc}") from exc
    finally:
        await consumer.stop()
    return count


def stdin_lines() -> Iterable[str]:
    yield from sys.stdin
