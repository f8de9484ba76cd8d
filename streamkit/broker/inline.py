"""Plain connections answered from the event loop's read callback, without a task per read.

A connection served through ``asyncio.start_server`` is a task blocked in
``StreamReader.read``: each request that arrives wakes the task (a future resolved, a
callback scheduled, a turn of the loop) before a byte of it is decoded. An
:class:`InlineConnection` is an ``asyncio.Protocol`` instead: ``data_received`` feeds the
sans-IO :class:`~streamkit.broker.framing.Connection` and answers the complete requests right
there, running each answer coroutine *eagerly* (:func:`run_eagerly`, what Python 3.12's eager
tasks do): a request whose handler never waits (Produce with acks 0/1, Metadata, ListOffsets,
Heartbeat...) is answered before the callback returns; one that does wait (a long-polling
Fetch, a quota's mute) becomes a task from its first suspension on, and the requests behind
it wait for it, in order, as on the task path. Responses answered in one callback leave in one
socket write (:class:`Output`).

Back-pressure is the task path's: reads pause while the request memory budget
(``queued.max.request.bytes``) has no room for this connection, and while the socket's write
buffer is above its high-water mark; a client pipelining many requests yields the loop every
``yield_every`` requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol, cast

from streamkit.broker.codec import FrameError, Request
from streamkit.broker.framing import Connection
from streamkit.broker.memory import RequestMemory

__all__ = ["InlineConnection", "Output", "Sink", "run_eagerly"]

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where an Output's bytes go: a StreamWriter, or an InlineConnection's transport."""

    def write(self, data: bytes) -> None: ...

    def drain(self) -> Awaitable[None]: ...


class Output:
    """A connection's writes, coalesced: responses answered in one turn of the connection's
    loop leave in one socket write (``flush``), not one each. Without coalescing every write
    goes straight to the sink."""

    __slots__ = ("coalesce", "parts", "sink")

    def __init__(self, sink: Sink, coalesce: bool) -> None:
        self.sink = sink
        self.coalesce = coalesce
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        if self.coalesce:
            self.parts.append(data)
        else:
            self.sink.write(data)

    def flush(self) -> None:
        parts = self.parts
        if parts:
            self.sink.write(parts[0] if len(parts) == 1 else b"".join(parts))
            parts.clear()

    async def drain(self) -> None:
        self.flush()
        await self.sink.drain()


class _Yield:
    """Yields a suspended coroutine's future (or bare ``None``) to the task that resumes it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self.value)


async def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    """The rest of ``coro``, which suspended on ``yielded``, driven as its own task would."""
    while True:
        try:
            sent = await _Yield(yielded)
        except BaseException as exc:  # cancellation included: the coroutine sees it
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            yielded = coro.send(sent)
        except StopIteration as stop:
            return stop.value


def run_eagerly(coro: Coroutine[Any, Any, Any],
                then: Callable[[Coroutine[Any, Any, Any]], Coroutine[Any, Any, Any]] | None = None,
                ) -> tuple[bool, Any]:
    """Run ``coro`` until it first suspends: (True, its result) if it finished, else
    (False, a task that runs the rest, wrapped in ``then`` if given: what must follow the
    answer runs in the same task step, not in a done callback one turn of the loop later).
    Exceptions propagate as from a plain call."""
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    rest = _resume(coro, yielded)
    return False, asyncio.get_running_loop().create_task(rest if then is None else then(rest))


Answer = Callable[[Connection, Request, Output, Any], Coroutine[Any, Any, bool]]


class InlineConnection(asyncio.Protocol):
    """One PLAINTEXT client connection (no TLS, no SASL), answered inline (module doc)."""

    def __init__(self, answer: Answer, make_peer: Callable[[str], Any], memory: RequestMemory,
                 max_request_size: int, connections: set[InlineConnection], yield_every: int) -> None:
        self._answer = answer
        self._make_peer = make_peer
        self._memory = memory
        self._connections = connections
        self._yield_every = yield_every
        self.conn = Connection(max_request_size, fast_path=True)
        self.transport: asyncio.Transport | None = None
        self.peer: Any = None
        self.host = ""
        self.out = Output(self, coalesce=True)
        self._task: asyncio.Task[Any] | None = None  # the answer that suspended
        self._write_paused = False
        self._memory_wait: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._closed = False
        self._scheduled = False
        self._reserved = False  # charged for the next read (RequestMemory.try_reserve)

    @property
    def task(self) -> asyncio.Task[Any] | None:
        """The answer in progress that suspended, if any."""
        return self._task

    # Sink ---------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self._closed:
            self.transport.write(data)

    async def drain(self) -> None:
        if self._write_paused and not self._closed:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    # asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not an asyncio.Transport subclass on uvloop.
        self.transport = cast(asyncio.Transport, transport)
        address = transport.get_extra_info("peername")
        self.host = str(address[0]) if address else ""
        self.peer = self._make_peer(self.host)
        self._connections.add(self)
        self._update_reading()  # the first read too waits for room in the request memory

    def data_received(self, data: bytes) -> None:
        self.conn.receive_data(data)
        self._hold(completed=False)
        self._pump()

    def eof_received(self) -> bool | None:
        return None  # close the transport, as the task path does at EOF

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
        if self._memory_wait is not None:
            self._memory_wait.cancel()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._memory.release(self)
        self._connections.discard(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._update_reading()
        self._pump()

    # the work -----------------------------------------------------------------------------

    def close(self) -> None:
        """Flush what was answered, then close (broker shutdown, protocol violation)."""
        if self._closed or self.transport is None:
            return
        self.out.flush()
        self._closed = True
        self.transport.close()

    def _pump(self) -> None:
        """Answer the complete requests, in order, until one suspends."""
        self._scheduled = False
        if self._task is not None or self._write_paused or self._closed:
            return
        handled = 0
        try:
            while (request := self.conn.next_request()) is not None:
                done, result = run_eagerly(self._answer(self.conn, request, self.out, self.peer), self._resumed)
                if not done:
                    self._task = result
                    break
                if not result:
                    self.close()
                    return
                handled += 1
                if handled >= self._yield_every:
                    # A client pipelining many small requests must not starve the others.
                    self._scheduled = True
                    asyncio.get_running_loop().call_soon(self._pump)
                    break
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.host, exc)
            self.close()
            return
        self.out.flush()
        self._hold(completed=handled > 0)

    async def _resumed(self, rest: Coroutine[Any, Any, bool]) -> None:
        """The rest of an answer that suspended (a long-polling Fetch woken by an append),
        then its response written and the requests behind it answered, in the same step of
        the task: a done callback would cost one more turn of the loop per wake-up."""
        try:
            keep = await rest
        except asyncio.CancelledError:
            self._task = None
            self.close()  # the connection was lost, or the broker stops
            raise
        except Exception as exc:
            self._task = None
            log.error("closing connection from %s: %r", self.host, exc)
            self.close()
            return
        self._task = None
        if self._closed:
            return
        if not keep:
            self.close()
            return
        self.out.flush()
        self._hold(completed=True)
        if not self._scheduled:
            self._pump()

    def _hold(self, completed: bool) -> None:
        """Charge the connection for what it holds (its next read is reserved again)."""
        self._memory.hold(self, self.conn.buffered, completed=completed)
        self._reserved = False
        self._update_reading()

    def _update_reading(self) -> None:
        """Read while the socket drains and the request memory has room for one more read."""
        if self.transport is None or self._closed:
            return
        if not self._reserved and self._memory_wait is None:
            self._reserved = self._memory.try_reserve(self) > 0
            if not self._reserved:
                self._memory_wait = asyncio.get_running_loop().create_task(self._wait_memory())
        pause = self._write_paused or not self._reserved
        if pause and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not pause and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False

    async def _wait_memory(self) -> None:
        await self._memory.reserve(self)
        self._memory_wait = None
        self._reserved = True
        self._update_reading()
