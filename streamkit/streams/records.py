"""A fetch batch's decoded records of one partition, and the cursor an agent reads them by.

An agent iterating values (``async for value in stream``) needs of each record its value,
and for tables and acknowledgements its topic, partition, offset, timestamp and raw key.
``DecodedRecords`` keeps those as the batch's columns and ``Cursor`` points at one record of
them, so no ``Event`` is built per record: ``Cursor.event()`` builds the record's ``Event``
when something asks for it (``current_event()``, ``stream.events()``, ``take()``, a map, a
late record) and keeps it for the rest of that record.
"""

from __future__ import annotations

from typing import Any, Protocol

from streamkit.streams.event import Event

__all__ = ["CurrentRecord", "Cursor", "DecodedRecords", "Placed"]


class Placed(Protocol):
    """Where records come from: an ``Event``, a ``Cursor``, ``DecodedRecords``."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


class CurrentRecord(Placed, Protocol):
    """What tables, acknowledgements and ownership read of the record being processed: an
    ``Event`` or a ``Cursor``."""

    @property
    def offset(self) -> int: ...

    @property
    def timestamp(self) -> int: ...

    @property
    def raw_key(self) -> bytes | None: ...


class DecodedRecords:
    """Consecutive records of one partition, decoded: as columns (``keys`` .. ``headers``,
    the headers as the fetch gave them), or as the ``events`` already built for them (a
    topic with a timestamp extractor, a batch with a bad record, a topic other readers
    share). Shared by every agent reading the topic: read-only."""

    __slots__ = ("events", "headers", "keys", "offsets", "partition", "raw_keys", "timestamps", "topic", "values")

    def __init__(self, topic: str, partition: int, keys: list[Any], values: list[Any], timestamps: list[int],
                 offsets: list[int], raw_keys: list[bytes | None], headers: list[Any],
                 events: list[Event] | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.keys = keys
        self.values = values
        self.timestamps = timestamps
        self.offsets = offsets
        self.raw_keys = raw_keys
        self.headers = headers
        self.events = events

    @classmethod
    def of_events(cls, topic: str, partition: int, events: list[Event]) -> DecodedRecords:
        """Records whose events are built already."""
        return cls(topic, partition, [], [], [], [], [], [], events)

    def __len__(self) -> int:
        return len(self.values) if self.events is None else len(self.events)

    def event(self, i: int) -> Event:
        """The event of record ``i``: the one given, or built from the columns, equal to
        what ``Topic.events`` builds."""
        if self.events is not None:
            return self.events[i]
        h = self.headers[i]
        return Event(self.keys[i], self.values[i], self.timestamps[i], list(h) if h else [], self.topic,
                     self.partition, self.offsets[i], self.raw_keys[i])


class Cursor:
    """The record an agent is processing, read in place from its ``DecodedRecords``: one
    per agent stream, moved on to each record (``RecordInbox.advance``). It is never handed
    to the agent's function (``current_event()`` gives ``event()``), since it changes with
    the next record."""

    __slots__ = ("_event", "index", "offset", "partition", "raw_key", "records", "timestamp", "topic", "value")

    def __init__(self) -> None:
        self.records: DecodedRecords | None = None
        self.index = -1
        self.topic = ""
        self.partition = -1
        self.offset = -1
        self.timestamp = 0
        self.raw_key: bytes | None = None
        self.value: Any = None
        self._event: Event | None = None

    @property
    def key(self) -> Any:
        return self.event().key

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        return self.event().headers

    def event(self) -> Event:
        """The current record's ``Event``, built on the first call for this record."""
        event = self._event
        if event is None:
            assert self.records is not None, "the cursor is on no record"
            event = self._event = self.records.event(self.index)
        return event

    def __repr__(self) -> str:
        return f"Cursor({self.topic}-{self.partition}@{self.offset})"
