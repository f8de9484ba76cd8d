"""The SASL state of one connection on a SASL listener, sans-IO (Kafka's
SaslServerAuthenticator): SaslHandshake picks a mechanism, then its tokens arrive in
SaslAuthenticate requests (handshake v1) or bare, size-prefixed (handshake v0).

Before authentication completes only ApiVersions, SaslHandshake and SaslAuthenticate are
accepted; anything else closes the connection, as in Kafka. With ``connections.max.reauth.ms``
(KIP-368) a session lasts that long: the client re-authenticates on the same connection
(same mechanism, same principal) before it ends, or its next request closes the connection. A failed exchange is answered
with SASL_AUTHENTICATION_FAILED and its message, then the connection is closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from streamkit.broker.errors import ErrorCode
from streamkit.broker.security.credentials import ScramCredentials
from streamkit.broker.security.jwks import JwksValidator
from streamkit.broker.security.oauthbearer import OAuthBearerServer
from streamkit.broker.security.plain import PlainServer
from streamkit.broker.security.scram import HASHES, AuthenticationFailed, ScramServer
from streamkit.broker.security.settings import ListenerSecurity
from streamkit.broker.security.tls import ANONYMOUS

__all__ = ["AuthenticationFailed", "SaslSession"]

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
_BEFORE_AUTH = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class _Mechanism(Protocol):
    user: str
    complete: bool

    def step(self, token: bytes) -> bytes: ...


class SaslSession:
    """``clock_ms`` is monotonic milliseconds, for the session's expiry (KIP-368)."""

    def __init__(self, sec: ListenerSecurity, credentials: ScramCredentials | None,
                 clock_ms: Callable[[], int] = _monotonic_ms, jwks: JwksValidator | None = None) -> None:
        self.sec = sec
        self._jwks = jwks
        self._credentials = credentials
        self._clock_ms = clock_ms
        self.mechanism = ""
        self.raw_tokens = False  # SaslHandshake v0: the tokens follow bare
        self.principal = ANONYMOUS
        self.authenticated = False
        self.reauthenticating = False
        self.expires_at_ms: int | None = None  # connections.max.reauth.ms after each login
        self._server: _Mechanism | None = None

    @property
    def lifetime_ms(self) -> int:
        """The session lifetime given in SaslAuthenticate (0: no re-authentication)."""
        return self.sec.max_reauth_ms

    def expired(self) -> bool:
        return self.expires_at_ms is not None and self._clock_ms() >= self.expires_at_ms

    def allows(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be handled now: before authentication only
        the SASL exchange; after its session expired, only a re-authentication."""
        if api_key in _BEFORE_AUTH:
            return True
        return self.authenticated and not self.reauthenticating and not self.expired()

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """SaslHandshake: choose the mechanism; once authenticated, again only to
        re-authenticate (KIP-368, SaslHandshake v1+) with the same mechanism."""
        if self.authenticated:
            if not self.lifetime_ms or version < 1 or mechanism != self.mechanism or self.reauthenticating:
                return ErrorCode.illegal_sasl_state
            self.reauthenticating = True
            self._server = self._new_server(mechanism)
            return ErrorCode.none
        if self._server is not None:
            return ErrorCode.illegal_sasl_state
        if mechanism not in self.sec.mechanisms:
            return ErrorCode.unsupported_sasl_mechanism
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._server = self._new_server(mechanism)
        return ErrorCode.none

    def _new_server(self, mechanism: str) -> _Mechanism:
        if mechanism == "PLAIN":
            entry = self.sec.jaas["PLAIN"]
            return PlainServer(entry.users())
        if mechanism == "OAUTHBEARER":
            oauth = self.sec.jaas.get("OAUTHBEARER")
            return OAuthBearerServer(oauth.options if oauth is not None else {}, validator=self._jwks)
        assert mechanism in HASHES
        credentials = self._credentials
        return ScramServer(mechanism, lambda user: credentials.get(user, mechanism) if credentials else None)

    def authenticate(self, token: bytes) -> bytes:
        """One token of the chosen mechanism; the answer to send back. Raises
        AuthenticationFailed (the message is the client's) when the exchange fails."""
        if self._server is None:
            raise AuthenticationFailed("SaslAuthenticate before a successful SaslHandshake")
        if self.authenticated and not self.reauthenticating:
            raise AuthenticationFailed("already authenticated")
        answer = self._server.step(token)
        if self._server.complete:
            principal = f"User:{self._server.user}"
            if self.reauthenticating and principal != self.principal:
                raise AuthenticationFailed(f"re-authentication as {principal} on a connection of {self.principal}: "
                                           "the principal may not change")
            self.authenticated = True
            self.reauthenticating = False
            self.principal = principal
            self.raw_tokens = False
            if self.lifetime_ms:
                self.expires_at_ms = self._clock_ms() + self.lifetime_ms
        return answer
