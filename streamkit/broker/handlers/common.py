"""What every handler module shares: the handler signature and small helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = ["LEADER_EPOCH", "NO_OPERATIONS", "Handler", "Reply", "field"]

# A handler returns the response as plain data (see streamkit.broker.build), or None for
# a request that gets no response (Produce with acks=0).
Reply = Mapping[str, Any] | None
Handler = Callable[[BrokerState, Request, ClientInfo], Awaitable[Reply]]

LEADER_EPOCH = 0  # one broker, never re-elected: the leader epoch stays 0
NO_OPERATIONS = -2147483648  # authorized_operations when the client did not ask for them


def field(body: Any, name: str, default: Any = None) -> Any:
    """A request field that only some versions have."""
    return getattr(body, name, default)


def ok() -> ErrorCode:
    return ErrorCode.none
