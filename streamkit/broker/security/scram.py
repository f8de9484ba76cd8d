"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, sans-IO.

Credentials are what Kafka stores: salt, StoredKey = H(HMAC(SaltedPassword, "Client Key")),
ServerKey = HMAC(SaltedPassword, "Server Key") and the iteration count; never the password.
The exchange::

    client-first  n,,n=alice,r=<cnonce>
    server-first  r=<cnonce><snonce>,s=<salt b64>,i=<iterations>
    client-final  c=biws,r=<cnonce><snonce>,p=<proof b64>
    server-final  v=<server signature b64>
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["HASHES", "MAX_ITERATIONS", "MECHANISM_IDS", "MIN_ITERATIONS", "AuthenticationFailed", "ScramCredential",
           "ScramServer", "credential_from_password", "credential_from_salted"]

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# The mechanism ids of AlterUserScramCredentials / DescribeUserScramCredentials.
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class AuthenticationFailed(Exception):
    """The peer failed to authenticate; the message goes back to it."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    h = HASHES[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", h)
    return ScramCredential(salt, hashlib.new(h, client_key).digest(),
                           hmac.digest(salted_password, b"Server Key", h), iterations)


def credential_from_password(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salt, salted, iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise AuthenticationFailed(f"invalid SCRAM message attribute {part[:20]!r}")
        out[key] = value
    return out


def _saslname(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationFailed("invalid SCRAM user name encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange: ``step`` takes each client message and returns the answer;
    ``AuthenticationFailed`` ends it. ``lookup(user)`` gives the user's credential or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._stage = 0
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self.user = ""
        self.complete = False

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM messages are UTF-8") from None
        if self._stage == 0:
            return self._first(text)
        if self._stage == 1:
            return self._final(text)
        raise AuthenticationFailed("unexpected SCRAM message after the exchange completed")

    def _first(self, text: str) -> bytes:
        gs2, _, rest = text.partition(",")
        authzid, sep, bare = rest.partition(",")
        if gs2 not in ("n", "y") or not sep:
            raise AuthenticationFailed("invalid SCRAM client-first message (channel binding is not supported)")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs:
            raise AuthenticationFailed("invalid SCRAM client-first message: no user name or nonce")
        self.user = _saslname(attrs["n"])
        if authzid and authzid != f"a={attrs['n']}":
            raise AuthenticationFailed("an authorization id different from the user name is not supported")
        self._credential = self._lookup(self.user)
        if self._credential is None:
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism}")
        self._client_first_bare = bare
        self._nonce = attrs["r"] + secrets.token_urlsafe(24)
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        self._stage = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_part = text.rpartition(",p=")
        attrs = _attributes(without_proof) if sep else {}
        # Kafka checks that the nonce ends with the server's (the librdkafka of kcat 1.7 sends the
        # client's part twice; its proof is computed over what it sent, so it still verifies).
        if not sep or not attrs.get("r", "").endswith(self._nonce):
            raise AuthenticationFailed("invalid SCRAM client-final message: the nonce does not match")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise AuthenticationFailed("invalid SCRAM client proof") from None
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        if len(proof) != len(signature):
            raise AuthenticationFailed("invalid SCRAM client proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism}")
        self._stage = 2
        self.complete = True
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        return b"v=" + base64.b64encode(server_signature)
