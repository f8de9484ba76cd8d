"""The message browser and the producer form: read a page of records from a position (the
beginning, the end, an offset or a timestamp) without reading the rest of the topic, and
show keys, values and headers decoded (JSON pretty-printed, other text as is, bytes as hex).

A page reads at most ``max_scan`` records per request, so a filter that matches nothing in a
large topic answers quickly with how far it got; the next page starts there."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord, TopicPartition

from streamkit.clients.lifecycle import start_client
from streamkit.clients.security import command_security
from streamkit.console.broker import kafka_errors
from streamkit.console.errors import BadInput, NotFound
from streamkit.console.registry import SchemaDecoder

__all__ = [
    "TAIL_MAX_PER_SECOND", "Browse", "Decoded", "Idle", "Message", "Page", "Skipped", "browse", "decode", "message_json",
    "parse_timestamp", "produce", "tail",
]

MAX_LIMIT = 500
TAIL_MAX_PER_SECOND = 200  # records a live tail shows a second; a page cannot show more
_IDLE_S = 10.0  # a quiet tail writes a comment this often, to notice a page that left
_MAX_LONG = (1 << 63) - 1  # Kafka's int64 offsets and timestamps
_POLL_MS = 200
_READ_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Decoded:
    """How a key, value or header shows: ``kind`` is null, json, text or hex, or avro,
    json-schema or protobuf for a record in the registry's wire format (``schema_id`` its schema)."""

    kind: str
    text: str
    schema_id: int | None = None


def decode(data: bytes | None, schemas: SchemaDecoder | None = None) -> Decoded:
    """``schemas`` decodes records in the registry's wire format whose schema it holds."""
    if data is None:
        return Decoded("null", "")
    if schemas is not None:
        found = schemas.decode(data)
        if found is not None:
            return Decoded(*found)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Decoded("hex", data.hex(" "))
    stripped = text.strip()
    if stripped[:1] in ("{", "[") or stripped in ("true", "false", "null"):
        shown = _pretty_json(data, text)
        if shown is not None:
            return Decoded("json", shown)
    if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return Decoded("hex", data.hex(" "))
    return Decoded("text", text)


def _pretty_json(data: bytes, text: str) -> str | None:
    """JSON indented by two, as ``json.dumps(indent=2)``; orjson first (a page of 50 values in
    a fraction of the time), the json module for what orjson refuses (integers past 64 bits)."""
    try:
        return orjson.dumps(orjson.loads(data), option=orjson.OPT_INDENT_2).decode()
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        pass
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Message:
    partition: int
    offset: int
    timestamp: int
    key: Decoded
    value: Decoded
    headers: list[tuple[str, Decoded]]


@dataclass(frozen=True, slots=True)
class Browse:
    """Where to read: ``start`` is beginning, end, offset or timestamp (with ``offset`` or
    ``timestamp`` set); ``partition`` None reads every partition. ``key`` keeps records whose
    key (as text) equals it, ``contains`` those whose value holds the substring."""

    start: str = "beginning"
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None
    limit: int = 50
    key: str | None = None
    contains: str | None = None


@dataclass(slots=True)
class Page:
    partitions: int = 0  # how many the topic has
    messages: list[Message] = field(default_factory=list)
    scanned: int = 0
    next_offsets: dict[int, int] = field(default_factory=dict)  # where the next page starts
    ends: dict[int, int] = field(default_factory=dict)


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds, or an ISO 8601 date-time (UTC unless it names a zone)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        ms = int(text)
    else:
        try:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise BadInput(f"timestamp {text!r} is neither epoch milliseconds nor an ISO 8601 date-time "
                           "(2026-01-31T12:00:00Z)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        ms = int(when.timestamp() * 1000)
    if not 0 <= ms <= _MAX_LONG:
        raise BadInput(f"timestamp {text!r} is outside 0 .. {_MAX_LONG} epoch milliseconds")
    return ms


def _matches(record_key: bytes | None, value: bytes | None, want: Browse) -> bool:
    if want.key is not None and (record_key is None or record_key != want.key.encode()):
        return False
    return want.contains is None or (value is not None and want.contains.encode() in value)


async def _message(partition: int, r: ConsumerRecord[bytes, bytes], schemas: SchemaDecoder | None) -> Message:
    if schemas is not None:
        await schemas.prepare([r.key, r.value])
    return Message(partition, r.offset, r.timestamp, decode(r.key, schemas), decode(r.value, schemas),
                   [(k, decode(v)) for k, v in r.headers])


async def browse(bootstrap: str, topic: str, want: Browse, max_scan: int = 10_000,
                 schemas: SchemaDecoder | None = None, partitions: set[int] | None = None) -> Page:
    """One page of ``topic`` as ``want`` says; ``NotFound`` if there is no such topic.
    ``schemas``: decode records in the registry's wire format; ``partitions``: the topic's,
    when the caller knows them."""
    if not 1 <= want.limit <= MAX_LIMIT:
        raise BadInput(f"limit must be between 1 and {MAX_LIMIT}, not {want.limit}")
    if want.offset is not None and want.offset < 0:
        raise BadInput(f"offset must not be negative, not {want.offset}")
    page = Page()
    with kafka_errors():
        # retry_backoff_ms: the first offset lookup waits for the topic's metadata, which
        # aiokafka fetches after one backoff (100 ms by default) for a topic not yet tracked.
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    max_partition_fetch_bytes=1 << 20, fetch_max_wait_ms=100,
                                    retry_backoff_ms=10, **command_security())
        await start_client(consumer)
        try:
            found = partitions or await _partitions(consumer, topic)
            if not found:
                raise NotFound(f"topic {topic} not found")
            page.partitions = len(found)
            if want.partition is not None and want.partition not in found:
                raise BadInput(f"topic {topic} has no partition {want.partition} (it has {len(found)})")
            chosen = [want.partition] if want.partition is not None else sorted(found)
            tps = [TopicPartition(topic, p) for p in chosen]
            # Both ListOffsets at once: one round trip of waiting, not two.
            first, last = await asyncio.gather(consumer.beginning_offsets(tps), consumer.end_offsets(tps))
            starts, ends = dict(first), dict(last)
            positions = await _positions(consumer, tps, starts, ends, want)
            page.ends = {tp.partition: ends[tp] for tp in tps}
            # Assign and seek with no await between: the fetcher never starts a fetch (and
            # its long poll) at a position of its own choosing.
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, positions[tp])
            found_records = await _read(consumer, positions, ends, want, max_scan, page)
        finally:
            await consumer.stop()
    if schemas is not None:
        await schemas.prepare(d for _p, r in found_records for d in (r.key, r.value))
    page.messages = [await _message(p, r, schemas) for p, r in found_records]
    page.messages.sort(key=lambda m: (m.timestamp, m.partition, m.offset))
    page.next_offsets = {tp.partition: positions[tp] for tp in tps}
    return page


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int] | None:
    """The topic's partitions, known before an assignment could have the broker auto-create
    a missing topic: from the every-topic metadata the consumer fetched at its start, else
    from a fresh one (a topic created since). aiokafka has no public call for a topic's
    partitions that does not start tracking the topic."""
    found = consumer._client.cluster.partitions_for_topic(topic)
    if not found:
        found = (await consumer._client.fetch_all_metadata()).partitions_for_topic(topic)
    return set(found) if found else None


async def _positions(consumer: AIOKafkaConsumer, tps: list[TopicPartition], starts: dict[TopicPartition, int],
                     ends: dict[TopicPartition, int], want: Browse) -> dict[TopicPartition, int]:
    if want.start == "beginning":
        return dict(starts)
    if want.start == "end":
        # The last ``limit`` records of each partition.
        return {tp: max(starts[tp], ends[tp] - want.limit) for tp in tps}
    if want.start == "offset":
        if want.offset is None:
            raise BadInput("start at an offset needs the offset")
        return {tp: min(max(want.offset, starts[tp]), ends[tp]) for tp in tps}
    if want.start == "timestamp":
        if want.timestamp is None:
            raise BadInput("start at a timestamp needs the timestamp")
        found = await consumer.offsets_for_times(dict.fromkeys(tps, want.timestamp))
        return {tp: found[tp].offset if found.get(tp) is not None else ends[tp] for tp in tps}
    raise BadInput(f"start must be beginning, end, offset or timestamp, not {want.start!r}")


async def _read(consumer: AIOKafkaConsumer, positions: dict[TopicPartition, int], ends: dict[TopicPartition, int],
                want: Browse, max_scan: int, page: Page) -> list[tuple[int, ConsumerRecord[bytes, bytes]]]:
    """Fetch until every partition reached the end it had when the page began, the page is
    full, ``max_scan`` records were looked at, or the time is up; the records ``want`` keeps."""
    found: list[tuple[int, ConsumerRecord[bytes, bytes]]] = []
    open_tps = {tp for tp, pos in positions.items() if pos < ends[tp]}
    deadline = asyncio.get_running_loop().time() + _READ_TIMEOUT_S
    while open_tps and len(found) < want.limit and page.scanned < max_scan:
        if asyncio.get_running_loop().time() > deadline:
            break
        batches = await consumer.getmany(*open_tps, timeout_ms=_POLL_MS, max_records=want.limit)
        for tp, records in batches.items():
            for r in records:
                if r.offset >= ends[tp]:
                    positions[tp] = ends[tp]
                    break
                if len(found) >= want.limit:
                    break
                page.scanned += 1
                positions[tp] = r.offset + 1
                if _matches(r.key, r.value, want):
                    found.append((tp.partition, r))
        for tp in list(open_tps):
            if not batches.get(tp):
                # Only a transaction marker or a compacted gap was left: the consumer moved past it.
                positions[tp] = max(positions[tp], await consumer.position(tp))
            if positions[tp] >= ends[tp]:
                open_tps.discard(tp)
    return found


async def produce(bootstrap: str, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes]]) -> tuple[int, int]:
    """Write one record; its (partition, offset)."""
    with kafka_errors():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10000,
                                    **command_security())
        await start_client(producer)
        try:
            meta = await producer.send_and_wait(topic, value, key=key, partition=partition, headers=headers)
        finally:
            await producer.stop()
    return int(meta.partition), int(meta.offset)


def message_json(m: Message) -> dict[str, object]:
    return {"partition": m.partition, "offset": m.offset, "timestamp": m.timestamp,
            "key": _decoded_json(m.key), "value": _decoded_json(m.value),
            "headers": [[k, _decoded_json(v)] for k, v in m.headers]}


def _decoded_json(d: Decoded) -> dict[str, object]:
    shown: dict[str, object] = {"kind": d.kind, "text": d.text}
    if d.schema_id is not None:
        shown["schema_id"] = d.schema_id
    return shown


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing new for a while: the page gets a comment line, so that a page that left is
    noticed (the write fails) even when the topic is quiet."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A live tail that fell behind moved to the end of ``partition``, past ``records``."""

    partition: int
    records: int


async def tail(bootstrap: str, topic: str, want: Browse, stopped: Callable[[], Awaitable[bool]],
               max_seconds: float = 600, schemas: SchemaDecoder | None = None,
               max_per_second: int = TAIL_MAX_PER_SECOND) -> AsyncIterator[Message | Skipped | Idle | None]:
    """Records written to ``topic`` from now on (those ``want`` keeps), until ``stopped()``
    says the reader left or ``max_seconds`` passed; first None, once the consumer stands at
    the end (what is written after that is seen).

    A page shows at most ``max_per_second`` records a second: when more are written the tail
    jumps to the newest and says how many it skipped (``Skipped``), rather than read every
    record of a busy topic. So a tail costs the broker a few fetches a second whatever the
    topic's rate, and a slow page holds back nobody else."""
    with kafka_errors():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=500,
                                    max_partition_fetch_bytes=256 * 1024, retry_backoff_ms=10,
                                    **command_security())  # as in browse
        await start_client(consumer)
    try:
        with kafka_errors():
            found = await _partitions(consumer, topic)
            if not found:
                raise NotFound(f"topic {topic} not found")
            if want.partition is not None and want.partition not in found:
                raise BadInput(f"topic {topic} has no partition {want.partition} (it has {len(found)})")
            tps = [TopicPartition(topic, p) for p in ([want.partition] if want.partition is not None else sorted(found))]
            ends = dict(await consumer.end_offsets(tps))
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, ends[tp])
        yield None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_seconds
        second, shown, heard = loop.time(), 0, loop.time()
        while loop.time() < deadline and not await stopped():
            if shown >= max_per_second:  # this second's share is shown: wait for the next
                await asyncio.sleep(max(second + 1 - loop.time(), 0))
            if loop.time() >= second + 1:
                second, shown = loop.time(), 0
            batches = await consumer.getmany(timeout_ms=1000, max_records=max(max_per_second - shown, 1))
            if batches:
                heard = loop.time()
            elif loop.time() - heard > _IDLE_S:
                heard = loop.time()
                yield Idle()
            for tp, records in batches.items():
                for r in records:
                    shown += 1
                    if _matches(r.key, r.value, want):
                        yield await _message(tp.partition, r, schemas)
            for tp in tps:
                # The high watermark of the last fetch: no request. Behind by more than a
                # second's worth: jump to the newest records.
                end = consumer.highwater(tp)
                position = await consumer.position(tp)
                if end is not None and end - position > max_per_second:
                    consumer.seek(tp, end)
                    yield Skipped(tp.partition, end - position)
    finally:
        await consumer.stop()
