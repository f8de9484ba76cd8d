"""RecordInbox: the bounded FIFO between the runtime and one agent instance.

One producer (the runtime's consume loop) and one consumer (the agent's task). It exists
instead of ``asyncio.Queue`` because it is on the per-record path: ``offer`` and ``take``
are plain calls when there is room or something to take, and only a full or an empty inbox
costs an ``await``. A bounded inbox is the back-pressure: when an agent falls behind, the
consume loop waits in ``put`` instead of buffering the topic in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING

from streamkit.streams.records import DecodedRecords

if TYPE_CHECKING:
    from streamkit.streams.event import Event
    from streamkit.streams.records import Cursor

__all__ = ["RecordInbox"]


class _View:
    """Records ``pos`` to ``end`` of a ``DecodedRecords`` waiting in an inbox."""

    __slots__ = ("end", "pos", "records")

    def __init__(self, records: DecodedRecords, pos: int, end: int) -> None:
        self.records = records
        self.pos = pos
        self.end = end


class RecordInbox:
    """An agent stream's inbox (bounded, one producer and one consumer, ``len`` counting
    records) over whole decoded batches, so the runtime queues
    a fetch batch in one call and the agent reads it record by record through its
    ``Cursor`` (``advance``) without an ``Event`` per record."""

    __slots__ = ("_count", "_maxsize", "_readable", "_views", "_writable")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"an inbox holds at least one item, not {maxsize}")
        self._views: deque[_View] = deque()
        self._count = 0
        self._maxsize = maxsize
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()

    def __len__(self) -> int:
        return self._count

    def offer_records(self, records: DecodedRecords, start: int, end: int) -> int:
        """Append records ``start`` to ``end`` of ``records``, as many as there is room
        for, in order; how many."""
        n = min(self._maxsize - self._count, end - start)
        if n <= 0:
            return 0
        self._views.append(_View(records, start, start + n))
        self._count += n
        if not self._readable.is_set():
            self._readable.set()
        return n

    async def put_records(self, records: DecodedRecords) -> None:
        """Append every record of ``records``, waiting for room while the inbox is full."""
        start, end = 0, len(records)
        while True:
            start += self.offer_records(records, start, end)
            if start >= end:
                return
            self._writable.clear()
            await self._writable.wait()

    def offer(self, event: Event) -> bool:
        """Append one event if there is room; False (nothing appended) when full."""
        return self.offer_records(DecodedRecords.of_events(event.topic, event.partition, [event]), 0, 1) == 1

    def head(self) -> DecodedRecords:
        """The records the next record is of; the inbox must not be empty."""
        return self._views[0].records

    def advance(self, cursor: Cursor) -> None:
        """Move ``cursor`` onto the oldest record and take it; the inbox must not be empty."""
        view = self._views[0]
        records, i = view.records, view.pos
        cursor.index = i
        if cursor.records is not records:
            cursor.records = records
            cursor.topic = records.topic
            cursor.partition = records.partition
        events = records.events
        if events is None:
            cursor.offset = records.offsets[i]
            cursor.timestamp = records.timestamps[i]
            cursor.raw_key = records.raw_keys[i]
            cursor.value = records.values[i]
            cursor._event = None
        else:
            event = cursor._event = events[i]
            cursor.offset = event.offset
            cursor.timestamp = event.timestamp
            cursor.raw_key = event.raw_key
            cursor.value = event.value
        i += 1
        if i == view.end:
            self._views.popleft()
        else:
            view.pos = i
        self._count -= 1
        if not self._writable.is_set():
            self._writable.set()

    def take(self) -> Event:
        """The oldest record's event; the inbox must not be empty (check ``len`` first)."""
        view = self._views[0]
        event = view.records.event(view.pos)
        view.pos += 1
        if view.pos == view.end:
            self._views.popleft()
        self._count -= 1
        if not self._writable.is_set():
            self._writable.set()
        return event

    def take_many(self, n: int) -> list[Event]:
        """The events of up to ``n`` of the oldest records (fewer if the inbox holds fewer)."""
        out: list[Event] = []
        views = self._views
        while views and len(out) < n:
            view = views[0]
            stop = min(view.end, view.pos + n - len(out))
            event = view.records.event
            out.extend(event(i) for i in range(view.pos, stop))
            if stop == view.end:
                views.popleft()
            else:
                view.pos = stop
        self._count -= len(out)
        if out and not self._writable.is_set():
            self._writable.set()
        return out

    async def wait_readable(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a record; whether there is one."""
        if not self._count:
            self._readable.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._readable.wait(), timeout)
        return bool(self._count)

    async def wait(self) -> None:
        """Wait while the inbox is empty."""
        while not self._count:
            self._readable.clear()
            await self._readable.wait()

    async def get(self) -> Event:
        """The oldest record's event, waiting while the inbox is empty."""
        await self.wait()
        return self.take()

    def remove_partitions(self, partitions: set[tuple[str, int]]) -> int:
        """Drop the queued records of ``partitions`` (order of the rest kept); how many went."""
        kept = deque(v for v in self._views if (v.records.topic, v.records.partition) not in partitions)
        count = sum(v.end - v.pos for v in kept)
        removed, self._views, self._count = self._count - count, kept, count
        if removed and not self._writable.is_set():
            self._writable.set()
        return removed
