"""The errors the client tools report in one line, and how they say a broker is unreachable."""

from __future__ import annotations

import os
import socket

from aiokafka.errors import KafkaConnectionError

__all__ = ["BrokerUnreachable", "ClientError", "connect_failure"]


class ClientError(Exception):
    """A failure worth one line to the user (unreachable broker, Kafka error code)."""


class BrokerUnreachable(ClientError, KafkaConnectionError):  # type: ignore[misc]  # aiokafka is untyped
    """No broker at ``bootstrap`` answered: ``cannot reach a broker at HOST:PORT (REASON)``.

    Also a ``KafkaConnectionError``, the error aiokafka raises for it, so that code which
    retries or reports that error goes on doing so with the clearer message."""

    def __init__(self, bootstrap: str, reason: str) -> None:
        super().__init__(f"cannot reach a broker at {bootstrap} ({reason})")
        self.bootstrap = bootstrap
        self.reason = reason

    def __str__(self) -> str:
        # KafkaError's __str__ would put the class name in front
        return str(self.args[0])


def connect_failure(exc: BaseException, timeout_s: float) -> str:
    """A failed TCP connection in a few words: ``connection refused``, ``unknown host``..."""
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno).lower()
    return " ".join(str(exc).split()) or type(exc).__name__
