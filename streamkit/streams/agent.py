"""Agents: ``@app.agent(topic)`` async stream functions, Faust-style.

An agent function receives an ``AgentStream`` and iterates it::

    @app.agent(views)
    async def count(stream):
        async for view in stream.group_by(lambda v: v.page, name="by_page"):
            per_page[view.page] += 1

Delivery and acknowledgement: the runtime puts each record into the stream's inbox; when the
function asks for the next value, the previous event counts as processed (acked) and its
offset becomes committable. ``group_by`` re-keys through an internal repartition topic
``{app}-{name}-repartition`` so that records with the same new key reach the same
partition (and so the same table partition).

The processing gate lets the runtime stop every agent between two events, so a commit sees
exactly the effects of the acknowledged events (see ``runtime.ProcessingGate``).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from streamkit.streams.codecs import StrCodec, codec_for
from streamkit.streams.event import Event
from streamkit.streams.inbox import RecordInbox
from streamkit.streams.records import CurrentRecord, Cursor, Placed
from streamkit.streams.topic import Topic
from streamkit.streams.windows import seconds_ms

if TYPE_CHECKING:
    from streamkit.streams.gate import ProcessingGate


class App(Protocol):
    """What an agent needs of its app: the repartition topic of a ``group_by``."""

    def internal_topic(self, *args: Any, **kwargs: Any) -> Topic: ...

    def repartition_topic(self, name: str, *args: Any, **kwargs: Any) -> Topic: ...


class Runtime(Protocol):
    """What an agent's stream needs of the worker: the processing gate, acknowledging, and
    whether an event's partition is still this worker's."""

    @property
    def gate(self) -> ProcessingGate: ...

    def ack(self, stream: AgentStream, event: CurrentRecord, count: int = 1) -> None: ...

    def ack_many(self, stream: AgentStream, events: list[Event]) -> None: ...

    def owns(self, event: Placed) -> bool: ...

    def batch_clock(self) -> float:
        """Seconds on the clock that ``take()``'s ``within`` is measured by (monotonic)."""
        ...

    async def batch_wait(self, inbox: RecordInbox, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds of ``batch_clock`` for an event in ``inbox``;
        whether there is one."""
        ...


async def _wait_readable(inbox: RecordInbox, timeout: float) -> bool:
    return await inbox.wait_readable(timeout)


__all__ = ["SKIPPED", "Agent", "AgentStream", "Batch", "current_event"]

# The current record: an ``Event`` (``take()`` batches, tests), or the stream's ``Cursor``
# while it iterates, which ``current_event`` turns into the record's ``Event``.
_current: contextvars.ContextVar[Event | Cursor | None] = contextvars.ContextVar("streamkit_current_event",
                                                                                default=None)


AgentFn = Callable[["AgentStream"], Awaitable[None]]

_DROPPED: Any = object()  # what ``_mapped`` returns for a value a filter drops


def _with_value(event: Event, value: Any) -> Event:
    """``event`` as a stream's maps leave it: the same record with ``value``."""
    return Event(event.key, value, event.timestamp, event.headers, event.topic, event.partition, event.offset,
                 event.raw_key)


SKIPPED: Any = object()
"""The value of a queued stand-in for a record that could not be deserialized: the stream
acknowledges it in its turn (after the records before it) and never yields it."""


def current_event() -> Event | None:
    """The event the calling agent is processing (each agent instance runs in its own task,
    so this is per agent). Windowed tables use its timestamp; nothing else reads it.

    A task the agent's function starts (``asyncio.create_task``) shares the stream's cursor:
    there, this (and a table's current record) is the record the stream is on now, not the
    one the task was started on; hand such a task the event it needs."""
    current = _current.get()
    return current.event() if isinstance(current, Cursor) else current


# The current record as the context variable holds it (an ``Event`` or the stream's
# ``Cursor``: read its fields at once, never keep it), by the variable's own getter: the
# per-record table update calls it without a Python frame.
read_current_event: Callable[[], CurrentRecord | None] = _current.get


class Batch(list[Any]):
    """A list of values from ``stream.take()``; ``events`` are their events, in order.

    Iterating it (``for value in batch``) makes each value's event the current one, as
    ``async for`` does one value at a time: tables use its partition, windowed tables its
    timestamp. Outside that loop there is no current event."""

    __slots__ = ("events",)

    def __init__(self, values: list[Any], events: list[Event]) -> None:
        super().__init__(values)
        self.events = events

    def __iter__(self) -> Iterator[Any]:
        try:
            for event, value in zip(self.events, list.__iter__(self), strict=True):
                _current.set(event)
                yield value
        finally:
            _current.set(None)


class AgentStream:
    """The stream an agent function iterates: values by default, ``events()`` for metadata."""

    def __init__(self, agent: Agent, source: Topic, instance: int) -> None:
        self.agent = agent
        self.source = source
        self.instance = instance
        self.inbox = RecordInbox(agent.buffer)
        self._cursor = Cursor()
        self.repartition: Topic | None = None
        self.key_fn: Callable[[Any], Any] | None = None
        # The record being processed, inside the gate: the stream's cursor on it.
        self._held: Cursor | None = None
        # Events processed since the last acknowledgement: inside the gate, moving on to the
        # next event of the same partition leaves the held one to be acknowledged with a
        # later one (its offset covers it). No commit reads the acknowledgements before
        # this stream leaves the gate, and it acknowledges its held event then.
        self._unacked = 0
        self._held_batch: list[Event] | None = None
        self._transforms: list[tuple[str, Callable[[Any], Any]]] = []
        self.reading = asyncio.Event()  # set once the function first waits for a record
        self.runtime: Runtime | None = None

    # -- declaration (before the first record) ---------------------------------------------

    def group_by(self, key: Callable[[Any], Any], *, name: str | None = None,
                 key_type: Any = str) -> AgentStream:
        """Re-key every value with ``key(value)`` through a repartition topic. The new key is
        written with ``key_type``'s codec (str by default, as table keys), so the function
        sees ``event.key == key(value)`` rather than its raw bytes."""
        if self.reading.is_set():
            raise RuntimeError("group_by must be called before iterating the stream")
        if self.repartition is not None:
            raise RuntimeError("a stream can be grouped once")
        # An explicit key codec: internal topics default to bytes keys, which handed the
        # function b"ann" for a key "ann" and refused int keys (CodecError) when producing.
        self.repartition = self.agent.app.repartition_topic(
            name or self.agent.name, value_codec=self.source.value_codec, key_codec=codec_for(key_type, StrCodec()))
        self.key_fn = key
        return self

    def filter(self, predicate: Callable[[Any], bool]) -> AgentStream:
        """Only the values for which ``predicate(value)`` is true reach the ``async for``."""
        self._transforms.append(("filter", predicate))
        return self

    def map(self, fn: Callable[[Any], Any]) -> AgentStream:
        """The ``async for`` gets ``fn(value)`` instead of each value."""
        self._transforms.append(("map", fn))
        return self

    @property
    def reads_from(self) -> Topic:
        """The topic whose records this stream's function actually processes."""
        return self.repartition or self.source

    # -- iteration -------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Any]:
        return _Iteration(self, values=True)

    def events(self) -> AsyncIterator[Event]:
        """The events themselves (key, value, timestamp, headers, partition, offset)."""
        return _Iteration(self, values=False)

    def take(self, max_: int, within: float | timedelta) -> AsyncIterator[Batch]:
        """Batches of up to ``max_`` values, as Faust's ``stream.take``: a batch is handed
        over when it holds ``max_`` values, or ``within`` seconds (a float or a timedelta)
        after its first value arrived, whichever comes first; never empty.

        The batch's records count as processed when the function asks for the next batch
        (or returns): a commit covers whole batches. Windowed tables write each changed
        window once per commit, batch or no batch."""
        if isinstance(max_, bool) or not isinstance(max_, int) or max_ < 1:
            raise ValueError(f"take: max_ must be a positive int, not {max_!r}")
        try:
            within_ms = seconds_ms(within, "take within")
        except ValueError:
            within_ms = 0
        if within_ms <= 0:
            raise ValueError(f"take: within must be a positive number of seconds (or a timedelta), not {within!r}")
        return _Batches(self, max_, within_ms)

    def _mapped(self, value: Any) -> Any:
        """``value`` through the stream's filters and maps, or ``_DROPPED``."""
        for kind, fn in self._transforms:
            if kind == "filter":
                if not fn(value):
                    return _DROPPED
            else:
                value = fn(value)
        return value

    def _kept(self, event: Event) -> Event | None:
        """``event`` with the stream's maps applied, or None if a filter drops it (or it
        is a SKIPPED stand-in)."""
        if event.value is SKIPPED:
            return None
        if not self._transforms:
            return event
        value = self._mapped(event.value)
        if value is _DROPPED:
            return None
        return event if value is event.value else _with_value(event, value)

    async def _next_kept(self, cursor: Cursor | None) -> Cursor | Event:
        """The next record the stream's filters keep, from ``cursor`` (what
        ``_next_ready`` returned; None: the stream must wait for one): the cursor on it,
        or its event with the stream's maps applied."""
        while True:
            if cursor is None:
                cursor = await self._next_waiting()
            if cursor.value is not SKIPPED:
                if not self._transforms:
                    return cursor
                value = self._mapped(cursor.value)
                if value is not _DROPPED:
                    return cursor if value is cursor.value else _with_value(cursor.event(), value)
            # a dropped or skipped record: acknowledged by the next call, in offset order
            cursor = self._next_ready()

    async def _next_batch(self, max_: int, within_ms: int) -> Batch:
        """The next ``take()`` batch (see there)."""
        self._finish_held()
        self.reading.set()
        _current.set(None)
        runtime, inbox = self.runtime, self.inbox
        # ``within`` runs on the runtime's clock: the wall clock on a worker, the virtual one
        # in the test driver (where advance_time hands a partial batch over).
        clock, wait = (runtime.batch_clock, runtime.batch_wait) if runtime is not None else (time.monotonic,
                                                                                            _wait_readable)
        while True:
            # Collect before entering the gate: a commit must not wait for the batch to fill.
            taken = [await inbox.get()]
            deadline = clock() + within_ms / 1000
            while len(taken) < max_:
                if inbox:
                    taken.extend(inbox.take_many(max_ - len(taken)))
                    continue
                remaining = deadline - clock()
                if remaining <= 0 or not await wait(inbox, remaining):
                    break
            if runtime is not None:
                await runtime.gate.enter()
                # Events of partitions revoked meanwhile are the new owner's to process.
                taken = [event for event in taken if runtime.owns(event)]
            self._held_batch = taken
            events = [kept for kept in map(self._kept, taken) if kept is not None]
            if events:
                return Batch([event.value for event in events], events)
            self._finish_held()  # all filtered out (or skipped, or revoked): acknowledged

    def _finish_held(self) -> None:
        """Acknowledge the record (or ``take()`` batch) the function asked past: it is processed."""
        held, self._held = self._held, None
        runtime = self.runtime
        if held is not None and runtime is not None:
            runtime.ack(self, held, self._unacked + 1)
            self._unacked = 0
            runtime.gate.leave()
        batch, self._held_batch = self._held_batch, None
        if batch is not None and runtime is not None:
            runtime.ack_many(self, batch)
            runtime.gate.leave()

    def _next_ready(self) -> Cursor | None:
        """The per-record fast path: the cursor on the next record when one is queued and
        no commit is running, with no await; None when the caller must wait
        (``_next_waiting``)."""
        runtime, inbox, held = self.runtime, self.inbox, self._held
        if held is not None and runtime is not None:
            self._held = None
            gate = runtime.gate
            if inbox and gate.is_open():
                # Straight on to the next record, still inside the gate: no commit waits for it.
                head = inbox.head()
                if head is held.records or (head.partition == held.partition and head.topic == held.topic):
                    self._unacked += 1  # acknowledged with a later record of its partition
                else:
                    runtime.ack(self, held, self._unacked + 1)
                    self._unacked = 0
                inbox.advance(held)
                self._held = held
                _current.set(held)
                return held
            runtime.ack(self, held, self._unacked + 1)
            self._unacked = 0
            gate.leave()
        else:
            self._finish_held()
            self.reading.set()
        if not inbox or (runtime is not None and not runtime.gate.try_enter()):
            return None
        cursor = self._held = self._cursor
        inbox.advance(cursor)
        _current.set(cursor)
        return cursor

    async def _next_waiting(self) -> Cursor:
        _current.set(None)
        runtime, inbox = self.runtime, self.inbox
        # Wait for a record before entering the gate: an agent waiting for input must not
        # hold up a commit (the gate waits for entered agents to finish).
        while True:
            await inbox.wait()
            if runtime is None:
                break
            await runtime.gate.enter()
            if inbox:
                head = inbox.head()
                if runtime.owns(head):
                    break
                # Its partition was revoked while this waited at the gate (a rebalance's
                # commit closed it): the new owner processes it. Processed here it met
                # tables without that partition, and under exactly-once a task without its
                # producer.
                inbox.remove_partitions({(head.topic, head.partition)})
            runtime.gate.leave()
        cursor = self._held = self._cursor
        inbox.advance(cursor)
        _current.set(cursor)
        return cursor

    def release(self) -> None:
        """The function returned or failed: acknowledge what it held."""
        self._finish_held()

    def drop_partitions(self, partitions: set[tuple[str, int]]) -> int:
        """Remove queued records of revoked partitions (their new owner reprocesses them)."""
        return self.inbox.remove_partitions(partitions)


class _Iteration:
    """``async for`` over an AgentStream: one object rather than a chain of async
    generators, because each generator layer costs a resumption per event."""

    __slots__ = ("_stream", "_values")

    def __init__(self, stream: AgentStream, *, values: bool) -> None:
        self._stream = stream
        self._values = values

    def __aiter__(self) -> _Iteration:
        return self

    async def __anext__(self) -> Any:
        stream = self._stream
        # ``_next_kept``'s common case inline (a record at hand, no filter or map, not
        # skipped): one coroutine frame per record fewer.
        cursor = stream._next_ready()
        if cursor is None or stream._transforms or cursor.value is SKIPPED:
            kept = await stream._next_kept(cursor)
            if type(kept) is not Cursor:
                return kept.value if self._values else kept
            cursor = kept
        return cursor.value if self._values else cursor.event()


class _Batches:
    """``async for batch in stream.take(max_, within)``."""

    __slots__ = ("_max", "_stream", "_within_ms")

    def __init__(self, stream: AgentStream, max_: int, within_ms: int) -> None:
        self._stream = stream
        self._max = max_
        self._within_ms = within_ms

    def __aiter__(self) -> _Batches:
        return self

    async def __anext__(self) -> Batch:
        return await self._stream._next_batch(self._max, self._within_ms)


class Agent:
    """A stream function registered with ``@app.agent(topic)``."""

    def __init__(self, app: App, fn: AgentFn, topic: Topic, *, name: str, concurrency: int = 1,
                 buffer: int = 10000) -> None:
        if concurrency < 1:
            raise ValueError("agent concurrency must be at least 1")
        self.app = app
        self.fn = fn
        self.topic = topic
        self.name = name
        self.concurrency = concurrency
        self.buffer = buffer
        self.streams: list[AgentStream] = []

    def __repr__(self) -> str:
        return f"Agent({self.name!r} on {self.topic.name!r})"

    def new_streams(self) -> list[AgentStream]:
        """One stream per concurrent instance of the agent (``concurrency``), made anew when
        the worker (re)starts the agent."""
        self.streams = [AgentStream(self, self.topic, i) for i in range(self.concurrency)]
        return self.streams

    def stream_for(self, partition: int) -> AgentStream:
        """Per-partition order: partition p always goes to the same instance."""
        return self.streams[partition % len(self.streams)]

    async def send(self, value: Any = None, *, key: Any = None, headers: list[tuple[str, bytes]] | None = None,
                   timestamp: int | None = None) -> tuple[int, int]:
        """Send a value to this agent's topic and wait for the acknowledgement."""
        return await self.topic.send(value, key=key, headers=headers, timestamp=timestamp)

    def cast(self, value: Any = None, *, key: Any = None, headers: list[tuple[str, bytes]] | None = None,
             timestamp: int | None = None) -> None:
        """Send without waiting (confirmed before the next commit)."""
        self.topic.send_soon(value, key=key, headers=headers, timestamp=timestamp)

    async def __call__(self, stream: AgentStream) -> None:
        """Run the agent's function over ``stream``."""
        await self.fn(stream)
