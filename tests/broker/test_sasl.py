"""SASL mechanisms, sans-IO: SCRAM (RFC 5802 / 7677) against an independent client
computation, PLAIN, the session's rules, and random tokens (only AuthenticationFailed)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.broker.errors import ErrorCode
from streamkit.broker.security.credentials import ScramCredentials
from streamkit.broker.security.jaas import parse_jaas
from streamkit.broker.security.oauthbearer import OAuthBearerServer
from streamkit.broker.security.sasl import SaslSession
from streamkit.broker.security.scram import (
    AuthenticationFailed,
    ScramServer,
    credential_from_password,
)
from streamkit.broker.security.settings import listener_security

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="a;b \\"c\\"";')


def _client_final(mechanism: str, password: str, client_first_bare: str, server_first: str) -> tuple[str, bytes]:
    """RFC 5802's client side, written from the RFC: the final message and the expected
    server signature."""
    h = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored_key = hashlib.new(h, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, h).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_key = hmac.new(salted, b"Server Key", h).digest()
    return (f"{without_proof},p={base64.b64encode(proof).decode()}",
            hmac.new(server_key, auth_message, h).digest())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange(mechanism: str) -> None:
    credential = credential_from_password(mechanism, "s3cret")
    server = ScramServer(mechanism, {"al,i=ce": credential}.get)
    bare = "n=al=2Ci=3Dce,r=clientnonce"
    server_first = server.step(f"n,,{bare}".encode()).decode()
    assert server_first.startswith("r=clientnonce") and ",i=4096" in server_first
    final, expected = _client_final(mechanism, "s3cret", bare, server_first)
    assert server.step(final.encode()) == b"v=" + base64.b64encode(expected)
    assert server.complete and server.user == "al,i=ce"


def test_scram_refuses_a_wrong_password_and_an_unknown_user() -> None:
    credential = credential_from_password("SCRAM-SHA-256", "s3cret")
    server = ScramServer("SCRAM-SHA-256", {"alice": credential}.get)
    server_first = server.step(b"n,,n=alice,r=abc").decode()
    final, _ = _client_final("SCRAM-SHA-256", "wrong", "n=alice,r=abc", server_first)
    with pytest.raises(AuthenticationFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        server.step(final.encode())
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        ScramServer("SCRAM-SHA-256", {"alice": credential}.get).step(b"n,,n=bob,r=abc")


def test_jaas_lines_as_kafka_admins_write_them() -> None:
    entry = parse_jaas(JAAS, "x")
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.users() == {"admin": "admin-secret", "alice": 'a;b "c"'}
    assert parse_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required;", "x").options == {}


def _session(tmp_path: Path) -> SaslSession:
    sec = listener_security("SASL_PLAINTEXT", "SASL_PLAINTEXT", {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    return SaslSession(sec, ScramCredentials(tmp_path))


def test_session_rules(tmp_path: Path) -> None:
    session = _session(tmp_path)
    assert session.allows(18) and session.allows(17) and not session.allows(3)
    assert session.handshake("SCRAM-SHA-256", 1) is ErrorCode.unsupported_sasl_mechanism
    assert session.handshake("PLAIN", 0) is ErrorCode.none and session.raw_tokens
    assert session.handshake("PLAIN", 1) is ErrorCode.illegal_sasl_state
    with pytest.raises(AuthenticationFailed, match="Invalid username or password"):
        session.authenticate(b"\0admin\0wrong")
    assert session.authenticate(b"\0admin\0admin-secret") == b""
    assert session.authenticated and session.principal == "User:admin" and session.allows(3)


def test_scram_credentials_are_durable_and_never_in_clear(tmp_path: Path) -> None:
    store = ScramCredentials(tmp_path)
    store.apply([("alice", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "alice-secret", 8192))], [])
    assert "alice-secret" not in store.path.read_text()
    again = ScramCredentials(tmp_path)
    again.load()
    assert again.mechanisms("alice") == {"SCRAM-SHA-512": 8192}
    again.apply([], [("alice", "SCRAM-SHA-512")])
    third = ScramCredentials(tmp_path)
    third.load()
    assert third.users() == []


@settings(max_examples=200, deadline=None)
@given(mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-512"]), tokens=st.lists(st.binary(max_size=200), max_size=3))
def test_random_tokens_only_fail_authentication(tmp_path_factory: pytest.TempPathFactory, mechanism: str,
                                                tokens: list[bytes]) -> None:
    session = _session(tmp_path_factory.getbasetemp())
    assert session.handshake(mechanism, 1) is ErrorCode.none
    for token in tokens:
        try:
            session.authenticate(token)
        except AuthenticationFailed:
            return
    assert not session.authenticated or mechanism == "PLAIN"


def _token(header: dict[str, object], claims: dict[str, object], signature: str = "") -> bytes:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"n,,\x01auth=Bearer {part(header)}.{part(claims)}.{signature}\x01\x01".encode()


NOW_MS = 1_800_000_000_000


@pytest.mark.parametrize(("header", "claims", "signature", "detail"), [
    ({"alg": "none"}, {"sub": "alice", "exp": NOW_MS / 1000 - 1}, "", "the token has expired"),
    ({"alg": "HS256"}, {"sub": "alice", "exp": NOW_MS / 1000 + 60}, "c2ln", "only unsecured tokens"),
    ({"alg": "none"}, {"exp": NOW_MS / 1000 + 60}, "", "the token has no 'sub' claim"),
    ({"alg": "none"}, {"sub": "alice"}, "", "no numeric 'exp' claim"),
    ({"alg": "none"}, {"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 30}, "",
     "issued in the future"),
])
def test_oauthbearer_refuses_bad_tokens_with_kafkas_challenge(header: dict[str, object], claims: dict[str, object],
                                                              signature: str, detail: str) -> None:
    server = OAuthBearerServer({}, lambda: NOW_MS)
    challenge = json.loads(server.step(_token(header, claims, signature)))
    assert challenge["status"] == "invalid_token" and detail in challenge["detail"]
    with pytest.raises(AuthenticationFailed, match="invalid_token"):
        server.step(b"\x01")
    assert not server.complete


def test_oauthbearer_accepts_an_unsecured_token() -> None:
    server = OAuthBearerServer({"unsecuredValidatorPrincipalClaimName": "upn",
                                "unsecuredValidatorAllowableClockSkewMs": "5000"}, lambda: NOW_MS)
    assert server.step(_token({"alg": "none"}, {"upn": "bob", "exp": NOW_MS / 1000 - 2})) == b""
    assert server.complete and server.user == "bob"
    with pytest.raises(AuthenticationFailed, match="RFC 7628"):
        OAuthBearerServer({}).step(b"n,,auth=Bearer x")


def test_reauthentication_kip_368(tmp_path: Path) -> None:
    now = [1000]
    sec = listener_security("S", "SASL_PLAINTEXT", {
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.s.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": "500"})
    session = SaslSession(sec, ScramCredentials(tmp_path), lambda: now[0])
    assert session.handshake("PLAIN", 1) is ErrorCode.none
    session.authenticate(b"\0admin\0admin-secret")
    assert session.lifetime_ms == 500 and session.allows(3)
    now[0] += 500
    assert not session.allows(3)  # expired: only a re-authentication is accepted
    assert session.handshake("SCRAM-SHA-512", 1) is ErrorCode.illegal_sasl_state  # same mechanism only
    assert session.handshake("PLAIN", 1) is ErrorCode.none
    assert not session.allows(3)
    session.authenticate(b"\0admin\0admin-secret")
    assert session.allows(3) and session.expires_at_ms == 2000
    assert session.handshake("PLAIN", 1) is ErrorCode.none
    with pytest.raises(AuthenticationFailed, match="the principal may not change"):
        session.authenticate(b"\0alice\0a;b \"c\"")


def test_no_reauthentication_without_a_session_lifetime(tmp_path: Path) -> None:
    session = _session(tmp_path)
    assert session.handshake("PLAIN", 1) is ErrorCode.none
    session.authenticate(b"\0admin\0admin-secret")
    assert session.handshake("PLAIN", 1) is ErrorCode.illegal_sasl_state
    assert session.allows(3) and session.expires_at_ms is None
