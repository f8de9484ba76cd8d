"""Topic: a named Kafka topic with its key and value codecs, as an app declares it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from streamkit.streams.codecs import Codec, CodecError, StrCodec, codec_for, raw_loads
from streamkit.streams.event import Event, TimestampExtractor, extract_timestamp
from streamkit.streams.partitioners import canonical_partitioner, murmur2_partition
from streamkit.streams.records import DecodedRecords


class Sender(Protocol):
    """What a topic needs of a running worker: sending."""

    async def send(self, topic: Topic, key: Any, value: Any, *, headers: Any = None, timestamp: int | None = None,
                   partition: int | None = None) -> tuple[int, int]: ...

    def send_soon(self, topic: Topic, key: Any, value: Any, *, headers: Any = None, timestamp: int | None = None,
                  partition: int | None = None) -> None: ...


class Owner(Protocol):
    """What a topic needs of its app: the worker running it."""

    def require_runtime(self) -> Sender: ...


__all__ = ["Topic", "partition_for_key"]

partition_for_key = murmur2_partition
"""Kafka's default partitioner for keyed records (murmur2, as the Java client and streamkit's
own producer); other clients differ (see ``streams.partitioners``)."""


class Topic:
    """A topic the app reads or writes. ``partitions=None`` means "whatever it has" for
    existing topics and the app's ``num.partitions`` when the worker creates it.

    ``timestamp``: a timestamp extractor, ``fn(event) -> int`` epoch milliseconds, giving
    the event time of each record read from the topic (agents, the DSL, windowed tables
    and joins all see it as ``event.timestamp``; repartition topics carry it on). Without
    one, event time is the record timestamp. A record it fails on (an exception, or not an
    int) is handled like one that cannot be deserialized
    (``deserialization.exception.handler``).

    ``partitioner``: how the producers of this topic place keyed records (``"murmur2"``, the
    Java client's and streamkit's; ``"consistent_random"``, librdkafka's default, so
    confluent-kafka's and kcat's; ``"fnv1a"``). Processing never needs it (a record's state
    goes to its own partition's task); key lookups do (which worker serves
    ``GET /tables/{table}/{key}``, whether a table key an agent uses belongs to the record's
    task). Without it the worker detects it from the keys it reads."""

    def __init__(self, app: Owner, name: str, *, key_type: Any = str, value_type: Any = None,
                 partitions: int | None = None, config: dict[str, str] | None = None,
                 internal: bool = False, key_codec: Codec | None = None,
                 value_codec: Codec | None = None, timestamp: TimestampExtractor | None = None,
                 partitioner: str | None = None) -> None:
        if timestamp is not None and not callable(timestamp):
            raise TypeError(f"topic {name!r}: timestamp must be a function fn(event) -> int milliseconds")
        self.app = app
        self.name = name
        self.key_codec = key_codec or codec_for(key_type, StrCodec())
        self.value_codec = value_codec or codec_for(value_type)
        self.partitions = partitions
        self.declared_partitions = partitions
        # Internal topics are written by the worker's own producer, whose partitioner is murmur2.
        try:
            self.partitioner = canonical_partitioner(partitioner) if partitioner else ("murmur2" if internal else None)
        except ValueError as exc:
            raise ValueError(f"topic {name!r}: {exc}") from None
        self.config = dict(config or {})
        self.internal = internal
        self.timestamp_extractor = timestamp

    def __repr__(self) -> str:
        return f"Topic({self.name!r})"

    def encode(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        """``(key, value)`` as bytes with the topic's codecs (None stays None)."""
        return (
            None if key is None else self.key_codec.dumps(key),
            None if value is None else self.value_codec.dumps(value),
        )

    def decode(self, key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
        """``(key, value)`` from bytes with the topic's codecs (None stays None)."""
        return (
            None if key is None else self.key_codec.loads(key),
            None if value is None else self.value_codec.loads(value),
        )

    def event(self, key: bytes | None, value: bytes | None, timestamp: int, headers: list[tuple[str, bytes]],
              partition: int, offset: int) -> Event:
        """The event of a consumed record: decoded, with its event time. Raises
        ``CodecError`` for a record that cannot be decoded or timestamped."""
        event = Event(*self.decode(key, value), timestamp, headers, self.name, partition, offset, key)
        if self.timestamp_extractor is not None:
            try:
                event.timestamp = extract_timestamp(self.timestamp_extractor, event)
            except Exception as exc:
                raise CodecError(f"timestamp extractor failed: {exc}") from exc
        return event

    def events(self, records: Sequence[Any], partition: int, start: int = 0) -> list[Event]:
        """The events of records consumed from ``partition`` (aiokafka's parsed records or
        ``ConsumerRecord``s) from ``start`` on, in one loop with the codecs looked up once: the
        per-record path of every reader. It stops before the first record it cannot decode
        (or timestamp), so ``len(result) < len(records) - start`` says that record needs
        ``event`` (and the error policy)."""
        out: list[Event] = []
        if self.timestamp_extractor is not None:
            for i in range(start, len(records)):
                r = records[i]
                try:
                    out.append(self.event(r.key, r.value, r.timestamp, list(r.headers or ()), partition, r.offset))
                except CodecError:
                    break
            return out
        key_loads, value_loads, name, append = raw_loads(self.key_codec), raw_loads(self.value_codec), self.name, out.append
        loads_many = getattr(self.value_codec, "loads_many", None)
        if loads_many is not None and len(records) - start > 1:
            # A model: the batch's values validated in one call; with a bad value (or a
            # tombstone) among them, record by record below, stopping before the bad one.
            values = [records[i].value for i in range(start, len(records))]
            if None not in values:
                try:
                    decoded = loads_many(values)
                except Exception:
                    decoded = None
                if decoded is not None:
                    try:
                        for i, v in zip(range(start, len(records)), decoded, strict=True):
                            r = records[i]
                            k, h = r.key, r.headers
                            append(Event(None if k is None else key_loads(k), v, r.timestamp, list(h) if h else [],
                                         name, partition, r.offset, k))
                    except Exception:  # a bad key: the caller decodes that record with the error policy
                        pass
                    return out
        try:
            for i in range(start, len(records)):
                r = records[i]
                k, v, h = r.key, r.value, r.headers
                append(Event(None if k is None else key_loads(k), None if v is None else value_loads(v), r.timestamp,
                             list(h) if h else [], name, partition, r.offset, k))
        except Exception:  # the caller decodes this record again, with the error policy
            pass
        return out

    def decoded(self, records: Sequence[Any], partition: int) -> DecodedRecords | None:
        """Records consumed from ``partition`` decoded into columns, with no ``Event`` per
        record (``DecodedRecords.event`` builds the one ``events`` would); None when a
        record cannot be decoded, or the topic has a timestamp extractor (which reads
        events): then ``events`` and the error policy."""
        if self.timestamp_extractor is not None:
            return None
        key_loads, value_loads = raw_loads(self.key_codec), raw_loads(self.value_codec)
        raw_keys = [r.key for r in records]
        raw_values = [r.value for r in records]
        try:
            keys = (list(map(key_loads, raw_keys)) if None not in raw_keys
                    else [None if k is None else key_loads(k) for k in raw_keys])
            loads_many = getattr(self.value_codec, "loads_many", None)
            if None in raw_values:
                values = [None if v is None else value_loads(v) for v in raw_values]
            elif loads_many is not None and len(raw_values) > 1:
                values = list(loads_many(raw_values))
                if len(values) != len(raw_values):
                    return None
            else:
                values = list(map(value_loads, raw_values))
        except Exception:  # the caller decodes the batch record by record, with the error policy
            return None
        return DecodedRecords(self.name, partition, keys, values, [r.timestamp for r in records],
                              [r.offset for r in records], raw_keys, [r.headers for r in records])

    async def send(self, value: Any = None, *, key: Any = None,
                   headers: Sequence[tuple[str, bytes]] | None = None,
                   timestamp: int | None = None, partition: int | None = None) -> tuple[int, int]:
        """Produce one record and wait for the broker's acknowledgement; returns
        (partition, offset). The app must be running (``streamkit worker`` or ``app.start()``)."""
        runtime = self.app.require_runtime()
        return await runtime.send(self, key, value, headers=headers, timestamp=timestamp,
                                  partition=partition)

    def send_soon(self, value: Any = None, *, key: Any = None,
                  headers: Sequence[tuple[str, bytes]] | None = None,
                  timestamp: int | None = None, partition: int | None = None) -> None:
        """Produce without waiting (delivery is confirmed before the next commit)."""
        runtime = self.app.require_runtime()
        runtime.send_soon(self, key, value, headers=headers, timestamp=timestamp, partition=partition)
