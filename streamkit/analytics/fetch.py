"""Reading one offset range into Arrow record batches, over the Kafka protocol.

Two paths, chosen by the client settings:

* ``read_uncommitted`` with no security settings (the default): raw Fetch requests through
  aiokafka with its C record-batch parser (``streams.changelog.ChangelogReader``, which
  table restores use), the only per-record Python work being one tuple. It reads about four
  times faster than librdkafka's per-message objects.
* anything else (``isolation.level=read_committed``, SSL, SASL...): librdkafka
  (confluent-kafka), which filters aborted transactions and speaks every security
  protocol; its ``kafka.*`` settings pass through unchanged.

Either way Arrow builds each column from a list in one call, and a read ends at the range's
end offset or at the end of the log (a compacted or aborted tail never arrives).
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import itertools
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streamkit.analytics.planning import OffsetRange, consumer_config
from streamkit.analytics.schema import HEADERS_TYPE, record_arrow_schema
from streamkit.gcpause import gc_paused
from streamkit.streams.changelog import ChangelogReader
from streamkit.streams.clients import start_client, stop_client

__all__ = ["DEFAULT_BATCH_RECORDS", "FetchError", "read_range"]

DEFAULT_BATCH_RECORDS = 100_000
_POLL_RECORDS = 10_000
_STALL_TIMEOUT_S = 60.0
# Bigger fetches than librdkafka's defaults: a range is read start to end, as fast as possible.
_FETCH_CONFIG = {
    "max.partition.fetch.bytes": 16 << 20,
    "fetch.max.bytes": 64 << 20,
    "queued.min.messages": 200_000,
    "fetch.wait.max.ms": 100,
}
_BINARY = pa.binary()
_TIMESTAMP = pa.timestamp("us", tz="UTC")


class FetchError(RuntimeError):
    """A range could not be read (the broker failed, or nothing arrived for too long)."""


# Settings the raw path understands; any other needs librdkafka.
_RAW_SETTINGS = {"bootstrap.servers", "client.id", "isolation.level"}


def read_range(client_config: Mapping[str, str], r: OffsetRange, *, include_headers: bool = False,
               batch_records: int = DEFAULT_BATCH_RECORDS,
               stall_timeout_s: float = _STALL_TIMEOUT_S) -> Iterator[pa.RecordBatch]:
    """The records of ``r`` as record batches with the columns of
    ``record_arrow_schema(include_headers)``: one per fetch response on the raw path (at
    most 16 MiB of records), of at most ``batch_records`` rows through librdkafka."""
    if r.size <= 0:
        return
    raw = (set(client_config) <= _RAW_SETTINGS
           and client_config.get("isolation.level", "read_uncommitted") == "read_uncommitted")
    if raw:
        yield from _read_raw(client_config, r, include_headers)
    else:
        yield from _read_librdkafka(client_config, r, include_headers, batch_records, stall_timeout_s)


class _Block(NamedTuple):
    """The records of one record batch, by column."""

    keys: list[bytes | None]
    values: list[bytes | None]
    offsets: list[int]
    timestamps: list[int]
    kind: int  # the batch's timestamp type: 0 CreateTime, 1 LogAppendTime
    headers: list[Any] | None


def _parse_batch(include_headers: bool, batch: Any, start: int, end: int) -> list[_Block]:
    """The records of one batch with ``start <= offset < end`` as one ``_Block`` (the
    reader's chunks, one per fetch, are then lists of blocks); nothing of a control batch."""
    if batch.is_control_batch:
        return []
    records = list(batch)
    if batch.base_offset < start or batch.next_offset > end:
        records = [r for r in records if start <= r.offset < end]
    if not records:
        return []
    # One pass per column over the parsed records: no tuple per record to build and take
    # apart again, and attribute reads of aiokafka's C records are cheap.
    return [_Block([r.key for r in records], [r.value for r in records], [r.offset for r in records],
                   [r.timestamp for r in records], batch.timestamp_type,
                   [r.headers for r in records] if include_headers else None)]


def _read_raw(client_config: Mapping[str, str], r: OffsetRange, include_headers: bool) -> Iterator[pa.RecordBatch]:
    """The raw path, driving the asyncio reader from this (synchronous) generator on a
    loop of its own, closed with everything it opened even when the caller stops early."""
    schema = record_arrow_schema(include_headers)
    loop = asyncio.new_event_loop()

    async def connect() -> ChangelogReader:  # aiokafka clients are made inside their loop
        reader = ChangelogReader(client_config["bootstrap.servers"].split(","), r.topic, r.partition,
                                 client_id=client_config.get("client.id", "streamkit-reader"),
                                 parse_batch=functools.partial(_parse_batch, include_headers))
        await start_client(reader)
        return reader

    try:
        reader = loop.run_until_complete(connect())
        try:
            chunks = reader.read(r.start, r.end)
            try:
                while True:
                    with gc_paused():
                        try:
                            chunk = loop.run_until_complete(anext(chunks))
                        except StopAsyncIteration:
                            break
                        blocks = cast(list[_Block], chunk)  # what _parse_batch made of each batch
                        batch = _blocks_batch(blocks, r, schema, include_headers) if blocks else None
                    del chunk, blocks
                    if batch is not None:
                        yield batch
            finally:
                loop.run_until_complete(chunks.aclose())
        finally:
            loop.run_until_complete(stop_client(reader))
    finally:
        loop.close()


def _blocks_batch(blocks: list[_Block], r: OffsetRange, schema: pa.Schema,
                  include_headers: bool) -> pa.RecordBatch:
    chain = itertools.chain.from_iterable
    n = sum(len(b.offsets) for b in blocks)
    kinds = np.concatenate([np.full(len(b.offsets), b.kind, dtype=np.int32) for b in blocks])
    arrays = [
        pa.array(list(chain(b.keys for b in blocks)), _BINARY),
        pa.array(list(chain(b.values for b in blocks)), _BINARY),
        pa.repeat(pa.scalar(r.topic, pa.string()), n),
        pa.array(np.full(n, r.partition, dtype=np.int32)),
        pa.array(np.fromiter(chain(b.offsets for b in blocks), dtype=np.int64, count=n)),
        pa.array(np.fromiter(chain(b.timestamps for b in blocks), dtype=np.int64, count=n) * 1000, _TIMESTAMP),
        pa.array(kinds),
    ]
    if include_headers:
        headers = chain(b.headers or () for b in blocks)
        arrays.append(pa.array([_headers(h or None) for h in headers], HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _read_librdkafka(client_config: Mapping[str, str], r: OffsetRange, include_headers: bool,
                     batch_records: int, stall_timeout_s: float) -> Iterator[pa.RecordBatch]:
    consumer = Consumer(consumer_config(client_config, **_FETCH_CONFIG))
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        columns = _Columns(r, include_headers)
        for done in _consume(consumer, r, columns, batch_records, stall_timeout_s):
            if columns.count:
                yield columns.flush()
            if done:
                break
    finally:
        consumer.close()


def _consume(consumer: Any, r: OffsetRange, columns: _Columns, batch_records: int,
             stall_timeout_s: float) -> Iterator[bool]:
    """Fill ``columns``; yields when a batch is full (False) and at the end (True)."""
    end = r.end
    deadline = time.monotonic() + stall_timeout_s
    while True:
        messages = consumer.consume(num_messages=_POLL_RECORDS, timeout=0.5)
        if not messages:
            if time.monotonic() > deadline:
                raise FetchError(f"{r.topic}-{r.partition}: nothing arrived for {stall_timeout_s:.0f} s "
                                 f"at offset {columns.next_offset} (reading up to {end})")
            continue
        deadline = time.monotonic() + stall_timeout_s
        done = False
        # Errors are events in the message list; the end of the partition is the usual one.
        failed = next((i for i, m in enumerate(messages) if m.error() is not None), None)
        if failed is not None:
            error = messages[failed].error()
            if error.code() != KafkaError._PARTITION_EOF:
                raise FetchError(f"reading {r.topic}-{r.partition}: {error.str()}") from KafkaException(error)
            messages = messages[:failed]
            done = True
        offsets = [m.offset() for m in messages]
        if offsets and offsets[-1] >= end - 1:
            cut = bisect.bisect_left(offsets, end)
            messages, offsets = messages[:cut], offsets[:cut]
            done = True
        columns.extend(messages, offsets)
        if done:
            yield True
            return
        if columns.count >= batch_records:
            yield False


class _Columns:
    """Column lists for one batch."""

    def __init__(self, r: OffsetRange, include_headers: bool) -> None:
        self.schema = record_arrow_schema(include_headers)
        self.topic = r.topic
        self.partition = r.partition
        self.include_headers = include_headers
        self.next_offset = r.start
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.stamps: list[tuple[int, int]] = []
        self.headers: list[Any] = []

    @property
    def count(self) -> int:
        return len(self.offsets)

    def extend(self, messages: list[Any], offsets: list[int]) -> None:
        # Comprehensions, one per field: about twice as fast as a loop appending to each.
        self.keys += [m.key() for m in messages]
        self.values += [m.value() for m in messages]
        self.offsets += offsets
        self.stamps += [m.timestamp() for m in messages]
        if self.include_headers:
            self.headers += [_headers(m.headers()) for m in messages]

    def flush(self) -> pa.RecordBatch:
        n = len(self.offsets)
        stamps = np.array(self.stamps, dtype=np.int64).reshape(n, 2)
        # librdkafka's timestamp types are 0 none, 1 CreateTime, 2 LogAppendTime; Kafka's
        # (and Spark's column) are -1, 0 and 1.
        kinds = (stamps[:, 0] - 1).astype(np.int32)
        arrays = [
            pa.array(self.keys, _BINARY),
            pa.array(self.values, _BINARY),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.array(np.full(n, self.partition, dtype=np.int32)),
            pa.array(np.array(self.offsets, dtype=np.int64)),
            pa.array(stamps[:, 1] * 1000, _TIMESTAMP),
            pa.array(kinds),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, HEADERS_TYPE))
        self.next_offset = self.offsets[-1] + 1
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._reset()
        return batch


def _headers(headers: list[tuple[str, bytes]] | None) -> list[dict[str, Any]] | None:
    return None if headers is None else [{"key": k, "value": v} for k, v in headers]
