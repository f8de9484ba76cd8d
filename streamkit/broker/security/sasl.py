"""The SASL state of one connection on a SASL listener, sans-IO (Kafka's
SaslServerAuthenticator): SaslHandshake picks a mechanism, then its tokens arrive in
SaslAuthenticate requests (handshake v1) or bare, size-prefixed (handshake v0).

Before authentication completes only ApiVersions, SaslHandshake and SaslAuthenticate are
accepted; anything else closes the connection, as in Kafka. A failed exchange is answered
with SASL_AUTHENTICATION_FAILED and its message, then the connection is closed.
"""

from __future__ import annotations

from typing import Protocol

from streamkit.broker.errors import ErrorCode
from streamkit.broker.security.credentials import ScramCredentials
from streamkit.broker.security.oauthbearer import OAuthBearerServer
from streamkit.broker.security.plain import PlainServer
from streamkit.broker.security.scram import HASHES, AuthenticationFailed, ScramServer
from streamkit.broker.security.settings import ListenerSecurity
from streamkit.broker.security.tls import ANONYMOUS

__all__ = ["AuthenticationFailed", "SaslSession"]

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
_BEFORE_AUTH = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class _Mechanism(Protocol):
    user: str
    complete: bool

    def step(self, token: bytes) -> bytes: ...


class SaslSession:
    def __init__(self, sec: ListenerSecurity, credentials: ScramCredentials | None) -> None:
        self.sec = sec
        self._credentials = credentials
        self.mechanism = ""
        self.raw_tokens = False  # SaslHandshake v0: the tokens follow bare
        self.principal = ANONYMOUS
        self.authenticated = False
        self._server: _Mechanism | None = None

    def allows(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be handled now."""
        return self.authenticated or api_key in _BEFORE_AUTH

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """SaslHandshake: choose the mechanism (once per connection)."""
        if self._server is not None or self.authenticated:
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
            return OAuthBearerServer(oauth.options if oauth is not None else {})
        assert mechanism in HASHES
        credentials = self._credentials
        return ScramServer(mechanism, lambda user: credentials.get(user, mechanism) if credentials else None)

    def authenticate(self, token: bytes) -> bytes:
        """One token of the chosen mechanism; the answer to send back. Raises
        AuthenticationFailed (the message is the client's) when the exchange fails."""
        if self._server is None:
            raise AuthenticationFailed("SaslAuthenticate before a successful SaslHandshake")
        if self.authenticated:
            raise AuthenticationFailed("already authenticated")
        answer = self._server.step(token)
        if self._server.complete:
            self.authenticated = True
            self.principal = f"User:{self._server.user}"
            self.raw_tokens = False
        return answer
