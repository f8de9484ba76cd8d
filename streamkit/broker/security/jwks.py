"""OAUTHBEARER with signed JWTs validated against a JWKS endpoint, as Kafka's
OAuthBearerValidatorCallbackHandler does (KIP-768):

- ``sasl.oauthbearer.jwks.endpoint.url``: the keys, fetched at start and every
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (and soon after a token names an unknown
  ``kid``, at most once a ``_MIN_REFETCH_MS``);
- ``sasl.oauthbearer.expected.audience`` (any of a list) and ``sasl.oauthbearer.expected.issuer``;
- ``sasl.oauthbearer.sub.claim.name`` (``sub``), ``sasl.oauthbearer.scope.claim.name``
  (``scope``), ``sasl.oauthbearer.clock.skew.seconds`` (30).

Only asymmetric signatures are accepted (RS*, PS*, ES*); ``exp`` is required.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt

from streamkit.broker.security.settings import ListenerSecurity, int_setting

__all__ = ["InvalidToken", "JwksValidator"]

log = logging.getLogger(__name__)

_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
_MIN_REFETCH_MS = 10_000
_FETCH_TIMEOUT_S = 10.0


class InvalidToken(Exception):
    """A token refused; the message says why (it goes back to the client)."""


class JwksValidator:
    def __init__(self, sec: ListenerSecurity, clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000
                 ) -> None:
        self.url = sec.oauth["sasl.oauthbearer.jwks.endpoint.url"]
        self.refresh_ms = int_setting(sec.oauth, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000)
        self.audience = [a.strip() for a in sec.oauth.get("sasl.oauthbearer.expected.audience", "").split(",")
                         if a.strip()]
        self.issuer = sec.oauth.get("sasl.oauthbearer.expected.issuer", "")
        self.sub_claim = sec.oauth.get("sasl.oauthbearer.sub.claim.name", "sub")
        self.skew_s = int_setting(sec.oauth, "sasl.oauthbearer.clock.skew.seconds", 30)
        self._clock_ms = clock_ms
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_ms = -_MIN_REFETCH_MS
        self.want_refresh = False  # an unknown kid was seen: the broker fetches soon

    @property
    def due_ms(self) -> int:
        """When the keys should be fetched next."""
        if self.want_refresh:
            return self._fetched_ms + _MIN_REFETCH_MS
        return self._fetched_ms + self.refresh_ms

    def fetch(self) -> None:
        """Fetch the JWKS (blocking: the broker runs it in a thread)."""
        self._fetched_ms = self._clock_ms()
        self.want_refresh = False
        try:
            response = httpx.get(self.url, timeout=_FETCH_TIMEOUT_S)
            response.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(response.json()).keys
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            log.warning("could not fetch the JWKS at %s (keeping %d known keys): %s", self.url, len(self._keys), exc)
            return
        self._keys = {k.key_id or "": k for k in keys}
        log.info("fetched %d key(s) from the JWKS at %s", len(self._keys), self.url)

    def validate(self, token: str) -> tuple[str, dict[str, Any]]:
        """(principal, claims) of a valid token; InvalidToken otherwise."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the token is not a JWT: {exc}") from None
        kid = header.get("kid") or ""
        key = self._keys.get(kid) or (self._keys.get("") if len(self._keys) == 1 else None)
        if key is None:
            self.want_refresh = True
            raise InvalidToken(f"no key {kid!r} in the JWKS at {self.url}")
        options: Any = {"require": ["exp"], "verify_aud": bool(self.audience)}  # PyJWT's Options TypedDict
        try:
            claims = jwt.decode(token, key.key, algorithms=_ALGORITHMS, audience=self.audience or None,
                                issuer=self.issuer or None, leeway=self.skew_s, options=options)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the token is not valid: {exc}") from None
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal:
            raise InvalidToken(f"the token has no {self.sub_claim!r} claim")
        return principal, claims

    def __repr__(self) -> str:
        return json.dumps({"jwks": self.url, "audience": self.audience, "issuer": self.issuer})
