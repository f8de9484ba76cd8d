"""SASL/PLAIN (RFC 4616), the server side: ``[authzid] NUL user NUL password``, checked
against the ``user_NAME="password"`` options of the listener's PlainLoginModule line."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from streamkit.broker.security.scram import AuthenticationFailed

__all__ = ["PlainServer"]


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.user = ""
        self.complete = False

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3 or not parts[1]:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                       f"{len(parts)}")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.user = user
        self.complete = True
        return b""
