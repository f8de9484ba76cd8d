"""Console producer and consumer: lines from stdin to a topic, records of a topic to stdout."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from streamkit.clients.admin import ClientError, describe_topic, topic_name
from streamkit.clients.lifecycle import start_client
from streamkit.clients.security import command_security

__all__ = ["LineFormat", "PartialProduceError", "consume_lines", "parse_line", "produce_lines"]

# How long a group consumer waits for its first assignment before saying why it waits.
_JOIN_NOTICE_S = 1.0


class PartialProduceError(ClientError):
    """Some lines were written before one failed; the message says how many and which."""


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How a line becomes a record: ``[TIMESTAMP<ts sep>][KEY<key sep>]VALUE``; ``timestamp``
    is every record's timestamp when lines carry none (None: the producer's clock)."""

    key_separator: str | None = None
    timestamp_separator: str | None = None
    timestamp: int | None = None


def parse_line(line: str, fmt: LineFormat) -> tuple[int | None, bytes | None, bytes]:
    """(timestamp ms, key, value) of one line; ``ValueError`` saying what is missing."""
    timestamp = fmt.timestamp
    if fmt.timestamp_separator is not None:
        text, sep, line = line.partition(fmt.timestamp_separator)
        if not sep:
            raise ValueError(f"no timestamp separator {fmt.timestamp_separator!r}")
        try:
            timestamp = int(text)
        except ValueError:
            raise ValueError(f"timestamp {text!r} is not epoch milliseconds") from None
    key: bytes | None = None
    if fmt.key_separator is not None:
        k, sep, line = line.partition(fmt.key_separator)
        if not sep:
            raise ValueError(f"no key separator {fmt.key_separator!r}")
        key = k.encode()
    if timestamp is not None and timestamp < 0:
        raise ValueError(f"timestamp {timestamp} is negative")
    return timestamp, key, line.encode()


async def produce_lines(bootstrap: str, topic: str, lines: Iterable[str], fmt: LineFormat,
                        partition: int | None, acks: str, compression: str | None,
                        encode_value: Callable[[bytes], bytes] | None = None) -> int:
    """Send each line as one record. A bad line stops the input: the lines before it are
    still delivered, and the error says how many were written. ``encode_value`` turns a
    line's value into the record's (a ValueError makes it a bad line)."""
    topic_name(topic)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **command_security(), acks=int(acks) if acks != "all" else "all",
                                compression_type=compression, linger_ms=5)
    await start_client(producer)
    futures: list[asyncio.Future[object]] = []
    bad: str | None = None
    delivered = 0
    try:
        if partition is not None:
            # (the client asserts instead of raising for an unknown partition)
            known = await producer.partitions_for(topic)
            if partition not in known:
                raise ClientError(f"topic {topic} has no partition {partition} (it has {len(known)}); "
                                  "no line was written")
        for number, raw in enumerate(lines, start=1):
            try:
                timestamp, key, value = parse_line(raw.rstrip("\n"), fmt)
                if encode_value is not None:
                    value = encode_value(value)
            except ValueError as exc:
                bad = f"line {number}: {exc}"
                break
            futures.append(await producer.send(topic, value, key=key, partition=partition,
                                               timestamp_ms=timestamp))
        for future in futures:
            await future
            delivered += 1
    except KafkaError as exc:
        written = sum(1 for f in futures if f.done() and not f.cancelled() and f.exception() is None)
        raise PartialProduceError(f"cannot produce to {topic}: {exc} ({_written(written)})") from exc
    finally:
        await producer.stop()
    if bad is not None:
        raise PartialProduceError(f"{bad}; stopped there: {_written(delivered)} to {topic}")
    return delivered


def _written(count: int) -> str:
    if count == 0:
        return "no line was written"
    return "line 1 was written" if count == 1 else f"lines 1 to {count} were written"


async def consume_lines(bootstrap: str, topic: str, group: str | None, from_beginning: bool,
                        partition: int | None, offset: int | None, max_messages: int | None,
                        timeout_ms: int | None, emit: Callable[[str], None], print_key: bool,
                        key_separator: str, notice: Callable[[str], None] = print,
                        print_timestamp: bool = False, decode_value: Callable[[bytes], str] | None = None) -> int:
    """Print records until ``max_messages`` or ``timeout_ms`` of silence (None: forever).
    A missing topic is an error (never created by reading it); ``notice`` gets status lines
    meant for a person (the wait for a group's first assignment)."""
    topic_name(topic)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, **command_security(),
        auto_offset_reset="earliest" if from_beginning else "latest",
        enable_auto_commit=group is not None,
    )
    await start_client(consumer)
    count = 0
    waiting: asyncio.Task[None] | None = None
    try:
        # All-topics metadata creates nothing, unlike the per-topic request a subscribe sends.
        if topic not in await consumer.topics():
            raise ClientError(f"topic {topic} does not exist (create it with: streamkit topics create {topic})")
        if partition is not None:
            tp = TopicPartition(topic, partition)
            description = await describe_topic(bootstrap, topic)
            if not 0 <= partition < description.partitions:
                raise ClientError(f"topic {topic} has no partition {partition} "
                                  f"(it has {description.partitions})")
            consumer.assign([tp])
            if offset is not None:
                earliest = (await consumer.beginning_offsets([tp]))[tp]
                latest = (await consumer.end_offsets([tp]))[tp]
                if not earliest <= offset <= latest:
                    raise ClientError(f"offset {offset} is outside {topic}-{partition}, which holds offsets "
                                      f"{earliest} to {latest} (its end)")
                consumer.seek(tp, offset)
            elif from_beginning:
                await consumer.seek_to_beginning(tp)
        else:
            consumer.subscribe([topic])
            if group is not None:
                waiting = asyncio.create_task(_join_notice(consumer, group, notice))
        while max_messages is None or count < max_messages:
            batch = await consumer.getmany(timeout_ms=timeout_ms if timeout_ms is not None else 1000,
                                           max_records=None if max_messages is None else max_messages - count)
            if not batch and timeout_ms is not None:
                break
            for records in batch.values():
                for record in records:
                    if record.value is None:
                        value = "null"
                    elif decode_value is not None:
                        try:
                            value = decode_value(record.value)
                        except ValueError as exc:
                            raise ClientError(f"cannot decode {topic}-{record.partition} offset {record.offset}: "
                                              f"{exc}") from None
                    else:
                        value = record.value.decode("utf-8", "replace")
                    if print_key:
                        key = record.key.decode("utf-8", "replace") if record.key is not None else "null"
                        value = f"{key}{key_separator}{value}"
                    if print_timestamp:  # kafka-console-consumer's print.timestamp format
                        kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
                        value = f"{kind}:{record.timestamp}{key_separator}{value}"
                    emit(value)
                    count += 1
        if group is not None:
            await consumer.commit()
    except KafkaError as exc:
        raise ClientError(f"cannot consume from {topic}: {exc}") from exc
    finally:
        if waiting is not None:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
        await consumer.stop()
    return count


async def _join_notice(consumer: AIOKafkaConsumer, group: str, notice: Callable[[str], None]) -> None:
    """Say once why nothing comes yet: a new group's first rebalance is held back by the
    broker's group.initial.rebalance.delay.ms (Kafka's default: 3 s) for more members."""
    await asyncio.sleep(_JOIN_NOTICE_S)
    if consumer.assignment():
        return
    notice(f"waiting to join consumer group {group} (the broker holds a new group's first "
           "rebalance for group.initial.rebalance.delay.ms, 3 s by default)...")
    while not consumer.assignment():
        await asyncio.sleep(0.1)
    parts = ", ".join(str(tp.partition) for tp in sorted(consumer.assignment()))
    notice(f"joined consumer group {group}: partitions {parts}")


def stdin_lines() -> Iterable[str]:
    yield from sys.stdin
