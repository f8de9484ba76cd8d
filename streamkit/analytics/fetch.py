"""Reading one offset range into Arrow record batches, over the Kafka protocol.

librdkafka (confluent-kafka) fetches and decompresses in C on its own threads; the Python
loop only moves each record's fields into column lists, and Arrow builds the columns from
those lists in one call each. The read ends at the range's end offset or at the end of the
log (a compacted or aborted tail never arrives), whichever comes first.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streamkit.analytics.planning import OffsetRange, consumer_config
from streamkit.analytics.schema import HEADERS_TYPE, record_arrow_schema

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


def read_range(client_config: Mapping[str, str], r: OffsetRange, *, include_headers: bool = False,
               batch_records: int = DEFAULT_BATCH_RECORDS,
               stall_timeout_s: float = _STALL_TIMEOUT_S) -> Iterator[pa.RecordBatch]:
    """The records of ``r`` as record batches of at most ``batch_records`` rows, with the
    columns of ``record_arrow_schema(include_headers)``."""
    if r.size <= 0:
        return
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
