"""Lifecycle helpers for the aiokafka clients the runtime owns.

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
import logging
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["start_client", "stop_client"]

log = logging.getLogger(__name__)

# How long a cancelled start or stop may take to finish before it is abandoned (an
# unreachable broker makes aiokafka retry for its request timeout).
_CANCELLED_WAIT_S = 10.0


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
    client is stopped before the error (or the cancel) goes on."""
    task = asyncio.ensure_future(client.start())
    cancelled = await _run_to_end(task)
    if cancelled or task.cancelled() or task.exception() is not None:
        await stop_client(client)
    if cancelled:
        raise asyncio.CancelledError
    task.result()


async def stop_client(client: Any) -> None:
    """Stop (or close) ``client`` to the end even if cancelled meanwhile; a failure is
    logged, not raised: nothing more can be done with the client."""
    task = asyncio.ensure_future(_stopper(client)())
    cancelled = await _run_to_end(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("closing a Kafka client failed; it is left as closed as it got",
                    exc_info=task.exception())
    if cancelled:
        raise asyncio.CancelledError
