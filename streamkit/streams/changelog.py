"""Reading a changelog partition fast, for table restore.

A restore is bound by the per-record cost of the read: aiokafka's consumer builds a Python
``ConsumerRecord`` per record and tops out near 370k records/s, well below what the store
can apply. The reader below keeps aiokafka for the protocol (bootstrap, metadata, version
negotiation, connections) but sends the Fetch and ListOffsets requests itself and turns the
record bytes into plain ``(key, value, offset)`` tuples with aiokafka's C record parser:
the only per-record Python work left is building the tuple.

Only the public Kafka protocol is used, so it reads from Apache Kafka as well as from the
streamkit broker. Typical use (``start_client``/``stop_client`` close the connections even
when the restore is cancelled half-way)::

    reader = ChangelogReader(bootstrap, "app-t-changelog", 3)
    try:
        await start_client(reader)
        begin, end = await reader.offsets()
        async with contextlib.aclosing(reader.read(begin, end)) as chunks:
            async for chunk in chunks:
                store_partition.apply_changelog(chunk)
    finally:
        await stop_client(reader)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiokafka.errors as Errors
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.protocol.offset import OffsetRequest
from aiokafka.record.control_record import ABORT_MARKER, ControlRecord
from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition

from streamkit.state.partition import ChangelogRecord

__all__ = ["ChangelogReadError", "ChangelogReader"]

log = logging.getLogger(__name__)

# 16 MiB per fetch: each response then carries hundreds of thousands of small records, so the
# per-request cost vanishes, while two in flight per partition (see ``read``) stay affordable
# with several partitions restoring at once.
DEFAULT_MAX_BYTES = 16 << 20
# Records per yielded chunk: the caller applies a chunk without awaiting, so this bounds how
# long the event loop is held (a few tens of milliseconds).
DEFAULT_CHUNK_RECORDS = 20_000
DEFAULT_RETRY_TIMEOUT_MS = 30_000
DEFAULT_REQUEST_TIMEOUT_MS = 40_000

# The first fetch of a read asks for this much, each next one for twice as much up to
# ``max_bytes``: the caller starts applying as soon as a small response is in, instead of
# idling while the broker sends the whole first 16 MiB, and the pipelining (see ``read``)
# overlaps every later fetch with that work.
_FIRST_FETCH_BYTES = 256 << 10
_RETRY_BACKOFF_MS = 100
_MAX_RETRY_BACKOFF_MS = 1_000
# A read never waits for new records (it stops at an end that was already written), so the
# wait only matters if the broker has nothing for us, which is a case to retry anyway.
_FETCH_MAX_WAIT_MS = 500
_READ_UNCOMMITTED = 0
_READ_COMMITTED = 1
_EARLIEST = -2
_LATEST = -1


class ChangelogReadError(KafkaError):  # type: ignore[misc]  # aiokafka is untyped
    """A changelog partition could not be read: retries ran out, or the log lost the range."""


@dataclass(frozen=True, slots=True)
class _Fetched:
    """One fetch response: complete record batches and where the next fetch starts."""

    position: int  # the first offset wanted from ``batches`` (a fetch may start mid-batch)
    batches: list[Any]  # DefaultRecordBatch (or LegacyRecordBatch for old message formats)
    next_position: int


class _Retry:
    """Bounded retrying: a doubling backoff up to 1 s; past the deadline the error is raised
    as a ``ChangelogReadError``."""

    def __init__(self, timeout_ms: int, what: str) -> None:
        self._deadline_ms = _now_ms() + timeout_ms
        self._timeout_ms = timeout_ms
        self._backoff_ms = _RETRY_BACKOFF_MS
        self._what = what

    async def wait(self, error: BaseException) -> None:
        remaining = self._deadline_ms - _now_ms()
        if remaining <= 0:
            raise ChangelogReadError(f"{self._what}: still failing after {self._timeout_ms} ms: {error}") from error
        log.debug("%s: %s; asking again in %d ms", self._what, error, self._backoff_ms)
        await asyncio.sleep(min(self._backoff_ms, remaining) / 1000)
        self._backoff_ms = min(self._backoff_ms * 2, _MAX_RETRY_BACKOFF_MS)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ChangelogReader:
    """Reads one topic-partition between two offsets with raw Fetch requests.

    ``start()`` connects (use ``start_client``), ``offsets()`` gives the log's current
    start and end, ``read(start, end)`` yields the records of ``[start, end)`` in offset
    order, in chunks; ``stop()`` closes every connection (use ``stop_client``).

    With ``read_committed``, ``offsets()`` ends at the last stable offset and ``read`` leaves
    out what aborted transactions wrote (changelogs written under exactly-once).

    With ``parse_batch(batch, start, end)``, which turns the records of one record batch
    with ``start <= offset < end`` into items of the caller's making, ``read`` yields one
    chunk of those items per fetch instead: the Spark and Dask readers
    (``streamkit.analytics``) build columns with timestamps and headers that way.
    """

    def __init__(self, bootstrap: str | list[str], topic: str, partition: int, *,
                 client_id: str = "streamkit-changelog", max_bytes: int = DEFAULT_MAX_BYTES,
                 chunk_records: int = DEFAULT_CHUNK_RECORDS,
                 retry_timeout_ms: int = DEFAULT_RETRY_TIMEOUT_MS,
                 request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
                 parse_batch: Callable[[Any, int, int], list[Any]] | None = None,
                 read_committed: bool = False, security: Mapping[str, Any] | None = None) -> None:
        if max_bytes < 1 or chunk_records < 1:
            raise ValueError("max_bytes and chunk_records must be positive")
        self.tp = TopicPartition(topic, partition)
        self._max_bytes = max_bytes
        self._chunk_records = chunk_records
        self._parse_batch = parse_batch
        self._isolation = _READ_COMMITTED if read_committed else _READ_UNCOMMITTED
        self._retry_timeout_ms = retry_timeout_ms
        self._client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id=client_id,
                                      request_timeout_ms=request_timeout_ms,
                                      retry_backoff_ms=_RETRY_BACKOFF_MS, **(security or {}))
        # Fetches sent ahead by ``read``: stop() cancels those of an abandoned read, which
        # would otherwise retry, and so reconnect, after the client closed.
        self._fetches: set[asyncio.Task[_Fetched]] = set()
        self._stopped = False
        # Called with the headers of the first record of each batch read (fingerprints).
        self.on_headers: Callable[[Any], None] | None = None

    def __repr__(self) -> str:
        return f"ChangelogReader({self.tp.topic!r}, {self.tp.partition})"

    async def start(self) -> None:
        """Connect and load the topic's metadata (its partition leaders)."""
        await self._client.bootstrap()
        await self._client.set_topics([self.tp.topic])

    async def stop(self) -> None:
        """Close every connection; a fetch still in flight is abandoned."""
        self._stopped = True
        for task in list(self._fetches):
            await _cancel(task)
        await self._client.close()

    async def offsets(self) -> tuple[int, int]:
        """The partition's log start offset and end offset (the high watermark, or the last
        stable offset when reading committed records), as of now."""
        return await self._list_offset(_EARLIEST), await self._list_offset(_LATEST)

    async def read(self, start: int, end: int) -> AsyncGenerator[list[ChangelogRecord], None]:
        """Yield the records with ``start <= offset < end`` in offset order, in chunks of
        whole record batches, at most ``chunk_records`` records unless one batch alone has
        more; tombstones have a ``None`` value. Records deleted from the log (its start moved
        past them) are skipped; control records are never yielded.

        The next fetch is sent before the records of the current one are yielded, so the
        broker reads and sends while the caller applies. Close the generator when leaving
        early (``contextlib.aclosing``) so that fetch is dropped at once.
        """
        size = min(_FIRST_FETCH_BYTES, self._max_bytes)
        ahead = self._fetch_ahead(start, end, size) if start < end else None
        try:
            while ahead is not None:
                if self._stopped:  # stop() cancelled ``ahead`` while the caller held a chunk
                    raise ChangelogReadError(f"{self!r} was stopped in the middle of a read")
                fetched = await ahead
                ahead = None
                if fetched.next_position < end:
                    size = min(size * 2, self._max_bytes)
                    ahead = self._fetch_ahead(fetched.next_position, end, size)
                for chunk in self._chunks(fetched, end):
                    yield chunk
                    # Lets the connection read the next response (and other tasks run)
                    # between chunks that the caller applies without awaiting.
                    await asyncio.sleep(0)
        finally:
            if ahead is not None:
                await _cancel(ahead)

    # -- internals -------------------------------------------------------------------------

    def _fetch_ahead(self, position: int, end: int, max_bytes: int) -> asyncio.Task[_Fetched]:
        if self._stopped:
            raise ChangelogReadError(f"{self!r} is stopped")
        task = asyncio.ensure_future(self._fetch(position, end, max_bytes))
        self._fetches.add(task)
        task.add_done_callback(self._fetches.discard)
        return task

    def _chunks(self, fetched: _Fetched, end: int) -> Iterator[list[ChangelogRecord]]:
        """The wanted records of ``fetched`` in chunks of whole batches, at most
        ``chunk_records`` unless one batch alone has more; parsed chunk by chunk, so a large
        response never exists as tuples all at once."""
        if self._parse_batch is not None:
            yield from self._parsed_chunks(fetched, end)
            return

        chunk: list[ChangelogRecord] = []
        for batch in fetched.batches:
            records = _batch_records(batch, fetched.position, end, self.on_headers)
            if not chunk:
                chunk = records
            elif len(chunk) + len(records) <= self._chunk_records:
                chunk += records
            else:
                yield chunk
                chunk = records
        if chunk:
            yield chunk

    def _parsed_chunks(self, fetched: _Fetched, end: int) -> Iterator[list[Any]]:
        """With ``parse_batch``: one chunk per fetch, the items of all its batches."""
        assert self._parse_batch is not None
        items = [item for batch in fetched.batches for item in self._parse_batch(batch, fetched.position, end)]
        if items:
            yield items

    async def _fetch(self, position: int, end: int, max_bytes: int) -> _Fetched:
        """Fetch up to ``max_bytes`` from ``position`` (below ``end``); retries what a retry
        can fix, until the deadline."""
        retry = _Retry(self._retry_timeout_ms, f"fetching {self.tp.topic}-{self.tp.partition} at {position}")
        while True:
            try:
                node = self._leader()
                response = await self._client.send(node, self._fetch_request(position, max_bytes))
                partition = self._find_partition(response)
                error = Errors.for_code(partition[1])
                if error is Errors.NoError:
                    fetched = self._parse(position, partition[2], partition[-1])
                    if fetched is not None and self._isolation == _READ_COMMITTED:
                        fetched = _without_aborted(fetched, _aborted_list(response.API_VERSION, partition))
                    if fetched is not None:
                        return fetched
                    if max_bytes >= self._max_bytes:
                        raise ChangelogReadError(f"a record batch of {self.tp.topic}-{self.tp.partition} at "
                                                 f"{position} is larger than max_bytes ({self._max_bytes})")
                    max_bytes = self._max_bytes  # a broker without KIP-74: ask for all we may
                    continue
                if error is not Errors.OffsetOutOfRangeError:
                    raise error(f"fetching {self.tp.topic}-{self.tp.partition} at {position}")
                moved = await self._out_of_range(position)
                if moved >= end:
                    return _Fetched(moved, [], moved)  # the rest of the range was deleted
                if moved == position:  # in range again: a leader change, most likely
                    await retry.wait(error(f"fetching {self.tp.topic}-{self.tp.partition} at {position}"))
                position = moved
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if exc.invalid_metadata:
                    self._client.force_metadata_update()
                await retry.wait(exc)

    def _fetch_request(self, position: int, max_bytes: int) -> FetchRequest:
        topics = [(self.tp.topic, [(self.tp.partition, position, max_bytes)])]
        return FetchRequest(_FETCH_MAX_WAIT_MS, 1, max_bytes, self._isolation, topics)

    def _find_partition(self, response: Any) -> tuple[Any, ...]:
        """Our partition's entry in a Fetch or ListOffsets response: (partition, error_code,
        ...); for a fetch (partition, error_code, high_watermark, ..., records)."""
        top_error = Errors.for_code(getattr(response, "error_code", 0))  # Fetch v7+: whole-request errors
        if top_error is not Errors.NoError:
            raise top_error(f"reading {self.tp.topic}-{self.tp.partition}")
        for topic, partitions in response.topics:
            for partition in partitions:
                if topic == self.tp.topic and partition[0] == self.tp.partition:
                    return tuple(partition)
        raise Errors.KafkaProtocolError(f"the response has no {self.tp.topic}-{self.tp.partition}")

    def _parse(self, position: int, high_watermark: int, data: bytes | None) -> _Fetched | None:
        """The complete batches of ``data``, which must move the position forward; ``None``
        if ``data`` holds only the start of a batch larger than the fetch size (brokers
        before KIP-74, Kafka 0.10.1, cut a batch at the size instead of sending it whole)."""
        records = MemoryRecords(data or b"")
        batches = []
        while records.has_next():
            batch = records.next_batch()
            if not batch.validate_crc():
                raise ChangelogReadError(f"a record batch of {self.tp.topic}-{self.tp.partition} "
                                         f"fails its CRC check (offsets before {batch.next_offset})")
            batches.append(batch)
        next_position = batches[-1].next_offset if batches else position
        if next_position > position:
            return _Fetched(position, batches, next_position)
        if data:
            return None
        if high_watermark <= position:
            # Asked below the end the log had when the read began: the log was truncated
            # (or the topic recreated) since. The caller's store cannot be brought to ``end``.
            raise ChangelogReadError(f"{self.tp.topic}-{self.tp.partition} now ends at {high_watermark}, "
                                     f"below the offset {position} still to read: the log was truncated")
        raise Errors.KafkaProtocolError(f"an empty fetch at {position} below the high watermark {high_watermark}")

    async def _out_of_range(self, position: int) -> int:
        """Where to read from after OFFSET_OUT_OF_RANGE at ``position``."""
        begin, end = await self.offsets()
        if position < begin:
            return begin  # deleted from the log (retention, DeleteRecords): skip those records
        if position <= end:
            return position  # in range again (the leader changed meanwhile): fetch again
        raise ChangelogReadError(f"{self.tp.topic}-{self.tp.partition} ends at {end}, below the offset "
                                 f"{position} still to read: the log was truncated or recreated")

    def _leader(self) -> int:
        leader = self._client.cluster.leader_for_partition(self.tp)
        if leader is None:
            raise Errors.UnknownTopicOrPartitionError(f"no metadata for {self.tp.topic}-{self.tp.partition}")
        if leader < 0:
            raise Errors.LeaderNotAvailableError(f"{self.tp.topic}-{self.tp.partition} has no leader")
        return int(leader)

    async def _list_offset(self, timestamp: int) -> int:
        what = "earliest" if timestamp == _EARLIEST else "latest"
        retry = _Retry(self._retry_timeout_ms, f"listing the {what} offset of {self.tp.topic}-{self.tp.partition}")
        request = OffsetRequest(-1, self._isolation, [(self.tp.topic, [(self.tp.partition, timestamp)])])
        while True:
            try:
                response = await self._client.send(self._leader(), request)
                partition = self._find_partition(response)
                error = Errors.for_code(partition[1])
                if error is not Errors.NoError:
                    raise error(f"listing offsets of {self.tp.topic}-{self.tp.partition}")
                # v0 answers a list of offsets, v1+ a timestamp and an offset
                return int(partition[2][0] if response.API_VERSION == 0 else partition[-1])
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if exc.invalid_metadata:
                    self._client.force_metadata_update()
                await retry.wait(exc)


def _aborted_list(version: int, partition: tuple[Any, ...]) -> list[tuple[int, int]]:
    """(producer id, first offset) of the aborted transactions a Fetch response lists:
    (partition, error, high watermark, last stable offset, [log start offset,]
    aborted transactions, ...)."""
    if version < 4:
        return []
    aborted = partition[4] if version == 4 else partition[5]
    return sorted(((int(pid), int(first)) for pid, first in aborted or ()), key=lambda a: a[1])


def _without_aborted(fetched: _Fetched, aborted: list[tuple[int, int]]) -> _Fetched:
    """``fetched`` without the batches of aborted transactions: a producer's transactional
    batches from the first offset of an aborted transaction up to its abort marker (the
    consumer's algorithm, KIP-98)."""
    if not aborted:
        return fetched
    pending = list(aborted)
    aborting: set[int] = set()
    kept = []
    for batch in fetched.batches:
        pid = batch.producer_id
        while pending and pending[0][1] <= batch.base_offset:
            aborting.add(pending.pop(0)[0])
        if batch.is_control_batch:
            if pid in aborting and _is_abort_marker(batch):
                aborting.discard(pid)
            kept.append(batch)  # control batches yield nothing; kept for the positions
        elif not (batch.is_transactional and pid in aborting):
            kept.append(batch)
    return _Fetched(fetched.position, kept, fetched.next_position)


def _is_abort_marker(batch: Any) -> bool:
    record = next(iter(batch), None)
    return record is not None and record.key is not None and ControlRecord.parse(record.key) == ABORT_MARKER


async def _cancel(task: asyncio.Task[_Fetched]) -> None:
    """Cancel a fetch and wait until it is over."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # the caller is being cancelled as well, not only the fetch
    except Exception:
        pass  # it failed before the cancel arrived; nobody wants its outcome any more


def _batch_records(batch: Any, position: int, end: int,
                   on_headers: Callable[[Any], None] | None = None) -> list[ChangelogRecord]:
    """The records of ``batch`` with ``position <= offset < end``; none of a control batch.
    ``on_headers`` sees the headers of the first of them (one per batch: a writer puts the
    same headers on every record, so one tells who wrote the batch)."""
    if batch.is_control_batch:
        return []
    # The common case, every batch but the first and the last of a read: take it whole.
    if isinstance(batch, DefaultRecordBatch) and batch.base_offset >= position and batch.next_offset <= end:
        records = list(batch)
    else:
        records = [r for r in batch if position <= r.offset < end]
    if on_headers is not None and records:
        on_headers(records[0].headers)
    return [(r.key, r.value, r.offset) for r in records]
