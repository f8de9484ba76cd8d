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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from streamkit.streams.codecs import StrCodec, codec_for
from streamkit.streams.event import Event
from streamkit.streams.inbox import Inbox
from streamkit.streams.topic import Topic

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

    def ack(self, stream: AgentStream, event: Event) -> None: ...

    def owns(self, event: Event) -> bool: ...

__all__ = ["SKIPPED", "Agent", "AgentStream", "current_event"]

_current: contextvars.ContextVar[Event | None] = contextvars.ContextVar("streamkit_current_event", default=None)

AgentFn = Callable[["AgentStream"], Awaitable[None]]

SKIPPED: Any = object()
"""The value of a queued stand-in for a record that could not be deserialized: the stream
acknowledges it in its turn (after the records before it) and never yields it."""


def current_event() -> Event | None:
    """The event the calling agent is processing (each agent instance runs in its own task,
    so this is per agent). Windowed tables use its timestamp; nothing else reads it."""
    return _current.get()


class AgentStream:
    """The stream an agent function iterates: values by default, ``events()`` for metadata."""

    def __init__(self, agent: Agent, source: Topic, instance: int) -> None:
        self.agent = agent
        self.source = source
        self.instance = instance
        self.inbox: Inbox[Event] = Inbox(agent.buffer)
        self.repartition: Topic | None = None
        self.key_fn: Callable[[Any], Any] | None = None
        self._held: Event | None = None
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

    async def _next_kept(self) -> Event:
        """The next event the stream's filters keep, with its maps applied."""
        while True:
            event = self._next_ready()
            if event is None:
                event = await self._next_waiting()
            if event.value is SKIPPED:
                continue  # acknowledged by the next call, in offset order
            if not self._transforms:
                return event
            value = event.value
            keep = True
            for kind, fn in self._transforms:
                if kind == "filter":
                    if not fn(value):
                        keep = False
                        break
                else:
                    value = fn(value)
            if not keep:
                continue
            if value is not event.value:
                event = Event(event.key, value, event.timestamp, event.headers, event.topic,
                              event.partition, event.offset, event.raw_key)
            return event

    def _finish_held(self) -> None:
        """Acknowledge the event the function asked past: it is processed."""
        held, self._held = self._held, None
        if held is not None and self.runtime is not None:
            self.runtime.ack(self, held)
            self.runtime.gate.leave()

    def _next_ready(self) -> Event | None:
        """The per-event fast path: the next event when one is queued and no commit is
        running, with no await; None when the caller must wait (``_next_waiting``)."""
        self._finish_held()
        self.reading.set()
        runtime = self.runtime
        if not self.inbox or (runtime is not None and not runtime.gate.try_enter()):
            return None
        event = self.inbox.take()
        self._held = event
        _current.set(event)
        return event

    async def _next_waiting(self) -> Event:
        _current.set(None)
        runtime = self.runtime
        # Wait for the event before entering the gate: an agent waiting for input must not
        # hold up a commit (the gate waits for entered agents to finish).
        while True:
            event = await self.inbox.get()
            if runtime is None:
                break
            await runtime.gate.enter()
            if runtime.owns(event):
                break
            # Its partition was revoked while this waited at the gate (a rebalance's commit
            # closed it): the new owner processes it. Processed here it met tables without
            # that partition, and under exactly-once a task without its producer.
            runtime.gate.leave()
        self._held = event
        _current.set(event)
        return event

    def release(self) -> None:
        """The function returned or failed: acknowledge what it held."""
        self._finish_held()

    def drop_partitions(self, partitions: set[tuple[str, int]]) -> int:
        """Remove queued events of revoked partitions (their new owner reprocesses them)."""
        return self.inbox.remove_if(lambda event: (event.topic, event.partition) in partitions)


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
        event = await self._stream._next_kept()
        return event.value if self._values else event


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
