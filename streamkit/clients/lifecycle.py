"""Start and stop aiokafka clients: the one path by which the CLI, stream workers and
Connect open their connections to a broker.

A broker that cannot be reached is one ``BrokerUnreachable`` error, ``cannot reach a broker
at 127.0.0.1:9092 (connection refused)``: aiokafka only says "Unable to bootstrap from"
its list of addresses, and logs the reason apart, so ``start_client`` finds the reason by
connecting to the first address once, and keeps aiokafka's own line about it out of the log.

A client whose start or stop is cancelled half-way leaves connections open: aiokafka's
bootstrap strands its connection when cancelled in the middle of the metadata request, and a
stop cancelled before it reaches the network client never closes it. Both happen when a
worker stops, or loses a partition, while a table restore is starting or ending; the restore
may then be cancelled more than once (by the revoke, by the stop, by a loop shutting down).
These helpers let a start or stop that has begun finish, whatever cancels arrive meanwhile,
before the cancel is honoured.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiokafka.errors import KafkaConnectionError

from streamkit.clients.errors import BrokerUnreachable, ClientError, connect_failure

__all__ = ["bootstrap_addresses", "reporting_unreachable", "start_client", "stop_client", "unreachable"]

log = logging.getLogger(__name__)

# How long a cancelled start or stop may take to finish before it is abandoned (an
# unreachable broker makes aiokafka retry for its request timeout).
_CANCELLED_WAIT_S = 10.0

# How long the connection that finds out why a broker is unreachable may take.
_PROBE_TIMEOUT_S = 5.0

# True while a client starts under ``reporting_unreachable`` (in that task and the tasks it
# spawns): the caller reports a failure to connect, and aiokafka's own line about it (the
# bootstrap's, whose address is quoted) is dropped.
_starting: contextvars.ContextVar[bool] = contextvars.ContextVar("streamkit_client_starting", default=False)


class _BootstrapErrorFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_starting.get() and str(record.msg).startswith('Unable connect to "'))


logging.getLogger("aiokafka").addFilter(_BootstrapErrorFilter())


@contextlib.contextmanager
def reporting_unreachable() -> Iterator[None]:
    """Around a client's start whose caller reports an unreachable broker itself (with
    ``unreachable``): aiokafka's log line about the failed bootstrap is left out."""
    token = _starting.set(True)
    try:
        yield
    finally:
        _starting.reset(token)


def _stopper(client: Any) -> Callable[[], Awaitable[None]]:
    # Consumers and producers stop; the admin client closes.
    stop = getattr(client, "stop", None) or client.close
    return stop  # type: ignore[no-any-return]


async def _run_to_end(task: asyncio.Future[None]) -> bool:
    """Wait until ``task`` is done, through any number of cancels of the caller; a task
    still running ``_CANCELLED_WAIT_S`` after the first cancel is cancelled itself (and then
    awaited). Returns whether the caller was cancelled meanwhile: the caller re-raises."""
    loop = asyncio.get_running_loop()
    cancelled = False
    deadline: float | None = None
    while not task.done():
        timeout = None if deadline is None else deadline - loop.time()
        if timeout is not None and timeout <= 0:
            task.cancel()
            timeout = deadline = None
        try:
            await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:
            if not cancelled:
                deadline = loop.time() + _CANCELLED_WAIT_S
            cancelled = True
    return cancelled


async def start_client(client: Any) -> None:
    """``await client.start()``; if it fails, or the caller is cancelled meanwhile, the
    client is stopped before the error (or the cancel) goes on. A broker that cannot be
    reached raises ``BrokerUnreachable``."""
    with reporting_unreachable():
        task = asyncio.ensure_future(client.start())  # the task copies the context now
    cancelled = await _run_to_end(task)
    if cancelled or task.cancelled() or task.exception() is not None:
        await stop_client(client)
    if cancelled:
        raise asyncio.CancelledError
    error = task.exception()
    bootstrap = _bootstrap_of(client)
    if isinstance(error, KafkaConnectionError) and not isinstance(error, BrokerUnreachable) and bootstrap:
        await _raise_if_login_refused(client, bootstrap)
        raise await unreachable(bootstrap) from None
    task.result()


async def _raise_if_login_refused(client: Any, bootstrap: str) -> None:
    """A client of a TLS or SASL listener that could not bootstrap: a refused login or TLS
    handshake is a ``ClientError`` with the broker's reason (aiokafka only logs it)."""
    from streamkit.clients.security import login_refused

    network: Any = getattr(client, "client", None) or getattr(client, "_client", None)
    protocol = getattr(network, "_security_protocol", "PLAINTEXT")
    if network is None or protocol == "PLAINTEXT":
        return
    security = {"security_protocol": protocol, "ssl_context": network._ssl_context,
                "sasl_mechanism": network._sasl_mechanism, "sasl_plain_username": network._sasl_plain_username,
                "sasl_plain_password": network._sasl_plain_password}
    refused = await login_refused(bootstrap, security)
    if refused is not None:
        who = f" as {network._sasl_plain_username} ({network._sasl_mechanism})" if protocol.startswith("SASL_") else ""
        raise ClientError(f"cannot connect to {bootstrap} over {protocol}{who}: {refused}") from None


def _bootstrap_of(client: Any) -> str | None:
    """The bootstrap servers an aiokafka producer, consumer or admin client was given (kept
    by its network client: ``client`` of a producer, ``_client`` of the others)."""
    network = getattr(client, "client", None) or getattr(client, "_client", None)
    servers = getattr(network, "_bootstrap_servers", None)
    if isinstance(servers, str):
        return servers
    if isinstance(servers, (list, tuple)) and all(isinstance(s, str) for s in servers):
        return ",".join(servers)
    return None


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """(host, port) of each of ``host:port,host:port`` (``[v6]:port``; 9092 when left out)."""
    out = []
    for item in bootstrap.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not port.isdigit():
            host, port = item.strip(), "9092"
        out.append((host.strip("[]") or "localhost", int(port)))
    return out


async def unreachable(bootstrap: str, timeout_s: float = _PROBE_TIMEOUT_S) -> BrokerUnreachable:
    """The error for a ``bootstrap`` no client could start on, with the reason a TCP
    connection to its first address gives."""
    host, port = bootstrap_addresses(bootstrap)[0]
    return BrokerUnreachable(bootstrap, await _connect_once(host, port, timeout_s))


async def _connect_once(host: str, port: int, timeout_s: float) -> str:
    """Why a broker at (host, port) did not answer, from one TCP connection per address the
    host resolves to (asyncio merges the errors of several into one without an errno)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout_s)
    except (OSError, TimeoutError) as exc:
        return connect_failure(exc, timeout_s)
    failure = "no address"
    for *_, address in infos:
        try:
            _reader, writer = await asyncio.wait_for(asyncio.open_connection(str(address[0]), port), timeout_s)
        except (OSError, TimeoutError) as exc:
            failure = connect_failure(exc, timeout_s)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return "it accepts connections but does not answer as a Kafka broker"
    return failure


_background_stops: set[asyncio.Future[None]] = set()


def _stopped_in_background(task: asyncio.Future[None]) -> None:
    _background_stops.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: a failed stop nobody waits for is of no consequence


async def stop_client(client: Any, wait_s: float | None = None) -> None:
    """Stop (or close) ``client`` to the end even if cancelled meanwhile; a failure is
    logged, not raised: nothing more can be done with the client. With ``wait_s``, wait at
    most that long: the stop goes on in the background (a consumer leaving its group waits
    for a join under way, which may last a whole rebalance)."""
    task = asyncio.ensure_future(_stopper(client)())
    if wait_s is not None:
        _background_stops.add(task)
        task.add_done_callback(_stopped_in_background)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(task), wait_s)
        return
    cancelled = await _run_to_end(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("closing a Kafka client failed; it is left as closed as it got",
                    exc_info=task.exception())
    if cancelled:
        raise asyncio.CancelledError
