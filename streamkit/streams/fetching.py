"""Fetched records without aiokafka's per-record ``ConsumerRecord``.

aiokafka's consumer parses each fetched record batch with its C record parser (CRC check,
decompression, aborted transactions and control batches under read_committed), then wraps
every record in a ``ConsumerRecord`` dataclass of eleven fields: on the agent path that
wrapper costs more worker CPU than the parsing. ``yield_parsed_records`` keeps all of the
consumer's batch handling and has its ``getmany`` return the parser's own record objects
(offset, timestamp, key, value, headers; no topic and partition, which the caller knows
from the batch's ``TopicPartition``).

The hook sits in the consumer's buffer of fetch results (a private attribute): where a
version of aiokafka lays that out differently, it does nothing and ``getmany`` returns
``ConsumerRecord``s, which have the same fields.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["FetchedRecord", "yield_parsed_records"]


class FetchedRecord(Protocol):
    """What the worker reads of a fetched record: aiokafka's parsed record (its C
    ``DefaultRecord``, or ``LegacyRecord`` for old message formats) or a ``ConsumerRecord``."""

    @property
    def offset(self) -> int: ...

    @property
    def timestamp(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def headers(self) -> Sequence[tuple[str, Any]]: ...  # values are bytes, or None


def _as_parsed(_tp: Any, record: Any) -> Any:
    """``PartitionRecords._consumer_record`` without the wrapper (and without the consumer's
    deserializers, which the worker does not set)."""
    return record


class _ParsedResults(collections.OrderedDict[Any, Any]):
    """The fetcher's ``tp -> FetchResult`` buffer: each result put in yields parsed records."""

    def __setitem__(self, tp: Any, result: Any) -> None:
        partition_records = getattr(result, "_partition_records", None)
        if partition_records is not None and hasattr(partition_records, "_consumer_record"):
            partition_records._consumer_record = _as_parsed
        super().__setitem__(tp, result)


def yield_parsed_records(consumer: Any) -> bool:
    """Have a started ``AIOKafkaConsumer`` (no key or value deserializer) return parsed
    records from ``getmany``; False if this aiokafka has no place for the hook."""
    fetcher = getattr(consumer, "_fetcher", None)
    results = getattr(fetcher, "_records", None)
    if type(results) is not collections.OrderedDict:
        return False
    parsed = _ParsedResults()
    for tp, result in results.items():
        parsed[tp] = result
    fetcher._records = parsed  # type: ignore[union-attr]
    return True
