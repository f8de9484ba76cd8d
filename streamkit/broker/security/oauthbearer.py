"""SASL/OAUTHBEARER (RFC 7628): signed JWTs checked against a JWKS endpoint when the listener
has one (streamkit.broker.security.jwks), else Kafka's default, unsecured token validation
(OAuthBearerUnsecuredValidatorCallbackHandler): for development, as Kafka ships it.

The client's message is ``n,[a=authzid],<0x01>auth=Bearer <token><0x01>[key=value<0x01>]<0x01>``.
The token is an unsigned JWS (``alg: none``): base64url(header).base64url(claims). — with
an ``exp`` in the future (within the allowed clock skew) and a principal claim (``sub``
unless ``unsecuredValidatorPrincipalClaimName`` says otherwise). A refused token is answered,
as Kafka does, with a JSON error challenge; the client acknowledges it with ``0x01`` and the
exchange then fails with that message.

Options (the listener's OAuthBearerLoginModule JAAS line): ``unsecuredValidatorPrincipalClaimName``,
``unsecuredValidatorScopeClaimName``, ``unsecuredValidatorRequiredScope`` and
``unsecuredValidatorAllowableClockSkewMs``.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from streamkit.broker.security.jwks import InvalidToken, JwksValidator
from streamkit.broker.security.scram import AuthenticationFailed

__all__ = ["OAuthBearerServer"]

_SEP = "\x01"


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, options: Mapping[str, str], clock_ms: Callable[[], int] = _wall_ms,
                 validator: JwksValidator | None = None) -> None:
        self._validator = validator
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self._required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        try:
            self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
        except ValueError:
            self._skew_ms = 0
        self._clock_ms = clock_ms
        self._error: str | None = None
        self._authzid = ""
        self.user = ""
        self.complete = False

    def step(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == _SEP.encode():
                raise AuthenticationFailed(self._error)
            raise AuthenticationFailed("unexpected OAUTHBEARER message after an error challenge")
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("invalid OAUTHBEARER message: not UTF-8") from None
        try:
            self.user = self._validate(self._bearer(text))
            if self._authzid and self._authzid != self.user:
                raise _Invalid("the authorization id differs from the token's principal")
        except _Invalid as exc:
            self._error = json.dumps({"status": "invalid_token", "detail": str(exc)})
            return self._error.encode()
        self.complete = True
        return b""

    def _bearer(self, text: str) -> str:
        gs2, sep, rest = text.partition(_SEP)
        if not sep or not gs2.startswith("n,") or not rest.endswith(_SEP + _SEP):
            raise AuthenticationFailed("invalid OAUTHBEARER client message (RFC 7628)")
        self._authzid = gs2[len("n,a="):-1] if gs2.startswith("n,a=") else ""
        pairs = dict(kv.partition("=")[::2] for kv in rest.split(_SEP) if kv)
        auth = pairs.get("auth", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise AuthenticationFailed("invalid OAUTHBEARER client message: no 'auth=Bearer <token>'")
        return value.strip()

    def _validate(self, token: str) -> str:
        if self._validator is not None:
            try:
                return self._validator.validate(token)[0]
            except InvalidToken as exc:
                raise _Invalid(str(exc)) from None
        parts = token.split(".")
        if len(parts) != 3:
            raise _Invalid("the token is not a JWS (header.claims.signature)")
        try:
            header = json.loads(_b64url(parts[0]))
            claims: dict[str, Any] = json.loads(_b64url(parts[1]))
        except (ValueError, binascii.Error):
            raise _Invalid("the token's header or claims are not base64url JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise _Invalid("the token's header and claims must be JSON objects")
        if header.get("alg") != "none" or parts[2]:
            raise _Invalid("only unsecured tokens (alg: none, no signature) are validated here")
        now = self._clock_ms()
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise _Invalid("the token has no numeric 'exp' claim")
        if exp * 1000 + self._skew_ms <= now:
            raise _Invalid("the token has expired")
        iat = claims.get("iat")
        if isinstance(iat, (int, float)) and iat * 1000 - self._skew_ms > now:
            raise _Invalid("the token is issued in the future ('iat')")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal:
            raise _Invalid(f"the token has no '{self._principal_claim}' claim")
        if self._required_scope:
            scope = claims.get(self._scope_claim, [])
            granted = scope.split() if isinstance(scope, str) else list(scope) if isinstance(scope, list) else []
            missing = [s for s in self._required_scope if s not in granted]
            if missing:
                raise _Invalid(f"the token lacks the required scope {' '.join(missing)}")
        return principal


class _Invalid(Exception):
    pass
