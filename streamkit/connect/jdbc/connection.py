"""Connecting to the database as Confluent's connectors do, and driver errors as one line.

``connect`` tries ``connection.attempts`` times, ``connection.backoff.ms`` apart, then fails
with a ``ConnectError`` (the task fails: a database that stays unreachable is reported, not
retried forever). A failure once connected (a query on a connection that dropped) is the
caller's to handle; its next ``connect`` starts a fresh round of attempts.

``is_transient`` tells a failure worth retrying (a lost connection, a busy database) from one
that retrying cannot mend (a bad query, a missing table). ``driver_message`` is what a user
needs of a driver error: the driver's own first line,
without SQLAlchemy's wrapping (the exception class, ``[SQL: ...]``, the "Background on this
error" link).
"""

from __future__ import annotations

import logging
import re
import threading

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from streamkit.connect.errors import ConnectError

__all__ = ["connect", "driver_message", "is_transient"]

log = logging.getLogger(__name__)

_FOOTER = re.compile(r"\s*\(Background on this error at: [^)]*\)")
# SQLite reports a bad query as an OperationalError too: only these of its codes are transient.
_SQLITE_TRANSIENT = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_PROTOCOL"})


def is_transient(exc: sa.exc.SQLAlchemyError) -> bool:
    """Whether retrying may succeed: a connection lost or refused, a database busy."""
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    if not isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError):
        return False
    sqlite_code = getattr(exc.orig, "sqlite_errorname", None)
    return sqlite_code is None or sqlite_code in _SQLITE_TRANSIENT


def driver_message(exc: BaseException) -> str:
    """The first line of the driver's message for a SQLAlchemy error (of ``str(exc)``
    for any other), without library footers."""
    text = str(exc)
    orig = getattr(exc, "orig", None) if isinstance(exc, sa.exc.DBAPIError) else None
    if orig is not None:
        args: tuple[object, ...] = getattr(orig, "args", ())
        # PyMySQL's errors are (code, message) pairs
        text = str(args[1]) if len(args) == 2 and isinstance(args[0], int) else str(orig)
    text = _FOOTER.sub("", text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def connect(engine: Engine, attempts: int, backoff_ms: int,
            stopping: threading.Event | None = None) -> Connection:
    """A connection from ``engine``: up to ``attempts`` tries, ``backoff_ms`` apart (a wait
    that ``stopping`` cuts short). ConnectError once they are used up or stopping is set."""
    stopping = stopping or threading.Event()
    where = engine.url.render_as_string(hide_password=True)
    attempt = 1
    while True:
        try:
            return engine.connect()
        except sa.exc.DBAPIError as exc:
            reason = driver_message(exc)
            if attempt >= attempts or stopping.is_set():
                raise ConnectError(f"cannot connect to {where} after {attempt} attempt(s) "
                                   f"(connection.attempts={attempts}): {reason}") from exc
            log.warning("cannot connect to %s (attempt %d of %d), retrying in %d ms: %s",
                        where, attempt, attempts, backoff_ms, reason)
        stopping.wait(backoff_ms / 1000)
        attempt += 1
