"""OAUTHBEARER with signed JWTs, validated by the broker against a JWKS endpoint that the
test serves on loopback; librdkafka (confluent-kafka) fetches its token from ``oauth_cb``,
as an application with a real identity provider does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from streamkit.testing import BrokerProcess
from tests.integration.conftest import _finish
from tests.integration.test_security import first_error, roundtrip

pytestmark = pytest.mark.integration

ISSUER, AUDIENCE = "https://idp.test", "streamkit"


class Idp:
    """An identity provider's signing key and its JWKS document on loopback."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        body = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, sub: str = "alice", audience: str = AUDIENCE, key: Any = None, kid: str = "k1",
              lifetime_s: int = 300) -> str:
        now = int(time.time())
        claims = {"sub": sub, "iss": ISSUER, "aud": audience, "iat": now, "exp": now + lifetime_s, "scope": "kafka"}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture(scope="module")
def idp() -> Iterator[Idp]:
    provider = Idp()
    yield provider
    provider.server.shutdown()


@pytest.fixture(scope="module")
def broker(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("jwks") / "data", settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": idp.url,
        "sasl.oauthbearer.expected.audience": f"other,{AUDIENCE}",
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "connection.failed.authentication.delay.ms": "10",
        "offsets.topic.num.partitions": "1",
    }).start()
    try:
        yield process
    finally:
        _finish(process)


def oauth(token: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 300)}


def test_a_signed_token_logs_in(broker: BrokerProcess, idp: Idp, tmp_path: Path) -> None:
    assert roundtrip(broker.address("SASL_PLAINTEXT"), "jwks-ok", oauth(idp.token())) == [b"v1", b"v2"]


@pytest.mark.parametrize(("what", "detail"), [
    ("audience", "Audience doesn't match"),
    ("key", "Signature verification failed"),
    ("expired", "Signature has expired"),
    ("kid", "no key 'k9' in the JWKS"),
])
def test_a_bad_token_is_refused(broker: BrokerProcess, idp: Idp, what: str, detail: str) -> None:
    from confluent_kafka import KafkaError

    token = {"audience": lambda: idp.token(audience="someone-else"),
             "key": lambda: idp.token(key=rsa.generate_private_key(public_exponent=65537, key_size=2048)),
             "expired": lambda: idp.token(lifetime_s=-120),
             "kid": lambda: idp.token(kid="k9")}[what]()
    error = first_error(broker.address("SASL_PLAINTEXT"), oauth(token))
    assert error is not None and error.code() == KafkaError._AUTHENTICATION, error
    assert detail in error.str()
