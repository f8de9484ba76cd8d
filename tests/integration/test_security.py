"""Listeners, TLS and SASL against one real broker process with every kind of listener,
driven by real clients as their users configure them: confluent-kafka (librdkafka),
kafka-python, aiokafka and kcat.

The broker (shared by the module) listens on PLAINTEXT, SSL, MTLS (SSL with
``ssl.client.auth=required``), SASL_PLAINTEXT, SASL_SSL and RELOAD (SSL, with a keystore
file of its own that a test replaces), all on free ports.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from streamkit.testing import BrokerProcess
from streamkit.testing_tls import CertificateAuthority, IssuedCertificate
from tests.conftest import require_service
from tests.integration.clients import AiokafkaClient, ConfluentClient, KafkaPythonClient
from tests.integration.conftest import _finish
from tests.integration.util import (
    QUIET,
    Rec,
    call,
    closed_by_peer,
    connect,
    request_frame,
    wait_until,
)

pytestmark = pytest.mark.integration

KCAT = shutil.which("kcat")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
              'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka";')
LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
             "SASL_SSL": "SASL_SSL", "RELOAD": "SSL"}


class Pki:
    def __init__(self, base: Path) -> None:
        self.ca = CertificateAuthority(base / "ca")
        self.other_ca = CertificateAuthority(base / "other-ca", "CN=another CA")
        self.broker = self.ca.issue("broker", "CN=localhost", hosts=["localhost", "127.0.0.1"])
        self.reload = base / "reload-keystore.pem"
        shutil.copy(self.broker.keystore, self.reload)
        self.alice = self.ca.issue("alice", "CN=alice,OU=eng")
        self.stranger = self.other_ca.issue("stranger", "CN=stranger")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def broker_settings(pki: Pki) -> dict[str, str]:
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in LISTENERS.items()),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker.keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca.cert_path),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.reload.ssl.keystore.location": str(pki.reload),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "connection.failed.authentication.delay.ms": "50",
        "offsets.topic.num.partitions": "2",
    }


@pytest.fixture(scope="module")
def secure(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", settings=broker_settings(pki)).start()
    try:
        yield process
    finally:
        _finish(process)


def tls(pki: Pki, client: IssuedCertificate | None = None, ca: Path | None = None) -> dict[str, str]:
    out = {"ssl.ca.location": str(ca or pki.ca.cert_path)}
    if client is not None:
        out |= {"ssl.certificate.location": str(client.cert_path), "ssl.key.location": str(client.key_path)}
    return out


def sasl(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def roundtrip(address: str, topic: str, config: dict[str, Any]) -> list[bytes | None]:
    """Produce two records and read them back with confluent-kafka over ``config``."""
    client = ConfluentClient(address)
    records = [Rec(b"k1", b"v1"), Rec(b"k2", b"v2")]
    client.produce(topic, records, extra=config)
    return [r.value for r in client.consume(topic, {0: 0}, 2, timeout=20, extra=config)]


def first_error(address: str, config: dict[str, Any], timeout: float = 15) -> Any:
    """The first error librdkafka reports for a client of ``config`` (None: none)."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": address, "error_cb": errors.append, **QUIET, **config})
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    return errors[0] if errors else None


def kcat_roundtrip(address: str, options: list[str], topic: str, line: bytes) -> bytes:
    """Produce ``line`` with kcat, then consume what the topic holds, with ``options``."""
    assert KCAT is not None
    subprocess.run([KCAT, "-b", address, *options, "-P", "-t", topic], input=line, check=True, timeout=30)
    out = subprocess.run([KCAT, "-b", address, *options, "-C", "-t", topic, "-o", "beginning", "-c", "1", "-e"],
                         capture_output=True, check=True, timeout=30)
    return out.stdout


# -- listeners ------------------------------------------------------------------------------


def test_each_listener_advertises_its_own_address(secure: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka.admin import AdminClient

    configs = {
        "PLAINTEXT": {}, "SSL": {"security.protocol": "SSL", **tls(pki)},
        "MTLS": {"security.protocol": "SSL", **tls(pki, pki.alice)},
        "SASL_PLAINTEXT": {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret")},
        "SASL_SSL": {"security.protocol": "SASL_SSL", **sasl("PLAIN", "admin", "admin-secret"), **tls(pki)},
    }
    assert set(secure.listener_ports) == set(LISTENERS)
    assert len(set(secure.listener_ports.values())) == len(LISTENERS)
    for name, config in configs.items():
        metadata = AdminClient({"bootstrap.servers": secure.address(name), **QUIET, **config}).list_topics(timeout=15)
        assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", secure.listener_ports[name])]


# -- TLS ------------------------------------------------------------------------------------


def test_ssl_roundtrip_with_confluent_kafka(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    assert roundtrip(secure.address("SSL"), topic_name, {"security.protocol": "SSL", **tls(pki)}) == [b"v1", b"v2"]


def test_ssl_with_kafka_python_and_aiokafka(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    from aiokafka.helpers import create_ssl_context

    address = secure.address("SSL")
    KafkaPythonClient(address).produce(topic_name, [Rec(b"k", b"from kafka-python")], extra={
        "security_protocol": "SSL", "ssl_cafile": str(pki.ca.cert_path)})
    context = create_ssl_context(cafile=str(pki.ca.cert_path))
    got = AiokafkaClient(address).consume(topic_name, {0: 0}, 1, timeout=20, extra={
        "security_protocol": "SSL", "ssl_context": context})
    assert [r.value for r in got] == [b"from kafka-python"]


def test_mutual_tls_with_a_client_certificate(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    config = {"security.protocol": "SSL", **tls(pki, pki.alice)}
    assert roundtrip(secure.address("MTLS"), topic_name, config) == [b"v1", b"v2"]


def test_mutual_tls_refuses_a_client_without_a_certificate(secure: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka import KafkaError

    error = first_error(secure.address("MTLS"), {"security.protocol": "SSL", **tls(pki)})
    assert error is not None and error.code() in (KafkaError._SSL, KafkaError._TRANSPORT,
                                                  KafkaError._ALL_BROKERS_DOWN), error
    wait_until(lambda: "on listener MTLS failed: [SSL: PEER_DID_NOT_RETURN_A_CERTIFICATE]" in secure.log_tail(500),
               10, "the broker's reason")


def test_mutual_tls_refuses_a_certificate_of_another_ca(secure: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka import KafkaError

    error = first_error(secure.address("MTLS"), {"security.protocol": "SSL", **tls(pki, pki.stranger)})
    assert error is not None and error.code() in (KafkaError._SSL, KafkaError._TRANSPORT,
                                                  KafkaError._ALL_BROKERS_DOWN), error
    wait_until(lambda: "on listener MTLS failed: [SSL: CERTIFICATE_VERIFY_FAILED]" in secure.log_tail(500),
               10, "the broker's reason")


def test_a_client_trusting_another_ca_refuses_the_broker(secure: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka import KafkaError

    error = first_error(secure.address("SSL"), {"security.protocol": "SSL", **tls(pki, ca=pki.other_ca.cert_path)})
    # librdkafka reports the failed verification as _SSL or _TRANSPORT, with OpenSSL's code
    assert error is not None and error.code() in (KafkaError._SSL, KafkaError._TRANSPORT), error
    assert "0A000086" in error.str()  # SSL_R_CERTIFICATE_VERIFY_FAILED


def test_kcat_over_mutual_tls(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    require_service(KCAT is not None, "the kcat CLI")
    assert KCAT is not None
    options = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca.cert_path}",
               "-X", f"ssl.certificate.location={pki.alice.cert_path}", "-X", f"ssl.key.location={pki.alice.key_path}"]
    assert kcat_roundtrip(secure.address("MTLS"), options, topic_name, b"over mtls\n") == b"over mtls\n"


def test_certificates_are_reloaded_when_their_file_changes(secure: BrokerProcess, pki: Pki,
                                                            tmp_path: Path) -> None:
    address = secure.address("RELOAD")
    assert first_error(address, {"security.protocol": "SSL", **tls(pki)}, timeout=3) is None
    new_ca = CertificateAuthority(tmp_path / "new-ca", "CN=new CA")
    renewed = new_ca.issue("renewed", "CN=localhost", hosts=["127.0.0.1"])
    tmp = pki.reload.with_suffix(".new")
    shutil.copy(renewed.keystore, tmp)
    tmp.replace(pki.reload)
    time.sleep(1.1)  # the broker looks at the files at most once a second
    # the broker now presents the new certificate: a client of the old CA refuses it ...
    error = first_error(address, {"security.protocol": "SSL", **tls(pki)})
    assert error is not None and "0A000086" in error.str(), error  # SSL_R_CERTIFICATE_VERIFY_FAILED
    # ... and one that trusts the new CA connects, with no restart
    assert first_error(address, {"security.protocol": "SSL", "ssl.ca.location": str(new_ca.cert_path)},
                       timeout=3) is None


def test_garbage_on_a_tls_port_hurts_no_one(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    with connect(secure.address("SSL")) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n" * 50)
        assert closed_by_peer(sock)
    assert roundtrip(secure.address("SSL"), topic_name, {"security.protocol": "SSL", **tls(pki)}) == [b"v1", b"v2"]


# -- SASL -----------------------------------------------------------------------------------


def test_plain_over_sasl_plaintext_and_sasl_ssl(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    config = {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret")}
    assert roundtrip(secure.address("SASL_PLAINTEXT"), topic_name, config) == [b"v1", b"v2"]
    config = {"security.protocol": "SASL_SSL", **sasl("PLAIN", "admin", "admin-secret"), **tls(pki)}
    assert roundtrip(secure.address("SASL_SSL"), topic_name, config)[-2:] == [b"v1", b"v2"]


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
def test_a_failed_plain_login_is_an_authentication_error(secure: BrokerProcess, user: str, password: str) -> None:
    from confluent_kafka import KafkaError

    config = {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", user, password)}
    error = first_error(secure.address("SASL_PLAINTEXT"), config)
    assert error is not None and error.code() == KafkaError._AUTHENTICATION, error
    assert "Invalid username or password" in error.str()


def test_plain_with_kafka_python_and_aiokafka(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    from aiokafka.helpers import create_ssl_context

    KafkaPythonClient(secure.address("SASL_PLAINTEXT")).produce(topic_name, [Rec(b"k", b"kp")], extra={
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"})
    got = AiokafkaClient(secure.address("SASL_SSL")).consume(topic_name, {0: 0}, 1, timeout=20, extra={
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_plain_username": "admin",
        "sasl_plain_password": "admin-secret", "ssl_context": create_ssl_context(cafile=str(pki.ca.cert_path))})
    assert [r.value for r in got] == [b"kp"]


def test_a_request_before_authentication_closes_the_connection(secure: BrokerProcess, topic_name: str) -> None:
    with connect(secure.address("SASL_PLAINTEXT")) as sock:
        sock.sendall(request_frame(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False)))
        assert closed_by_peer(sock)
    with connect(secure.address("SASL_PLAINTEXT")) as sock:
        response = call(sock, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert (response.error_code, response.mechanisms) == (33, ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"))
        assert closed_by_peer(sock)
    config = {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret")}
    assert roundtrip(secure.address("SASL_PLAINTEXT"), topic_name, config) == [b"v1", b"v2"]


def test_sasl_handshake_on_a_plaintext_listener_is_refused(secure: BrokerProcess) -> None:
    with connect(secure.address("PLAINTEXT")) as sock:
        response = call(sock, SaslHandshakeRequest(mechanism="PLAIN"))
        assert response.error_code == 34  # ILLEGAL_SASL_STATE


# -- SCRAM ----------------------------------------------------------------------------------


def scram_admin(secure: BrokerProcess) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": secure.address("PLAINTEXT"), **QUIET})


def set_scram(secure: BrokerProcess, user: str, password: str, mechanism: str, iterations: int = 4096) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], iterations)
    admin = scram_admin(secure)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, password.encode())])
    for future in futures.values():
        future.result(timeout=15)


def test_scram_users_log_in_with_each_client(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    set_scram(secure, "sam", "sam-secret", "SCRAM-SHA-256")
    set_scram(secure, "sam", "sam-secret-512", "SCRAM-SHA-512", iterations=8192)
    config = {"security.protocol": "SASL_SSL", **sasl("SCRAM-SHA-256", "sam", "sam-secret"), **tls(pki)}
    assert roundtrip(secure.address("SASL_SSL"), topic_name, config) == [b"v1", b"v2"]
    KafkaPythonClient(secure.address("SASL_PLAINTEXT")).produce(topic_name, [Rec(b"k", b"kp-scram")], extra={
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "sam", "sasl_plain_password": "sam-secret-512"})
    got = AiokafkaClient(secure.address("SASL_PLAINTEXT")).consume(topic_name, {0: 2}, 1, timeout=20, extra={
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "sam", "sasl_plain_password": "sam-secret"})
    assert [r.value for r in got] == [b"kp-scram"]


def test_kcat_with_scram_over_sasl_ssl(secure: BrokerProcess, pki: Pki, topic_name: str) -> None:
    require_service(KCAT is not None, "the kcat CLI")
    assert KCAT is not None
    set_scram(secure, "kc", "kc-secret", "SCRAM-SHA-512")
    options = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={pki.ca.cert_path}",
               "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=kc", "-X", "sasl.password=kc-secret"]
    assert kcat_roundtrip(secure.address("SASL_SSL"), options, topic_name, b"over scram\n") == b"over scram\n"


def test_a_wrong_scram_password_is_an_authentication_error(secure: BrokerProcess) -> None:
    from confluent_kafka import KafkaError

    set_scram(secure, "wendy", "right", "SCRAM-SHA-256")
    for user in ("wendy", "nobody"):
        config = {"security.protocol": "SASL_PLAINTEXT", **sasl("SCRAM-SHA-256", user, "wrong")}
        error = first_error(secure.address("SASL_PLAINTEXT"), config)
        assert error is not None and error.code() == KafkaError._AUTHENTICATION, error
        assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in error.str()


def test_users_cli_creates_describes_and_deletes(secure: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import KafkaError

    from tests.integration.test_cli import fails, ok

    bootstrap = ["-b", secure.address("PLAINTEXT")]
    assert ok("users", "create", "carol", "--password", "carol-secret", "--mechanism", "SCRAM-SHA-512",
              "--iterations", "5000", *bootstrap).stdout == "user carol: SCRAM-SHA-512 set\n"
    assert ok("users", "describe", "carol", *bootstrap).stdout == "carol: SCRAM-SHA-512 (iterations=5000)\n"
    assert "carol: SCRAM-SHA-512 (iterations=5000)\n" in ok("users", "describe", *bootstrap).stdout
    config = {"security.protocol": "SASL_PLAINTEXT", **sasl("SCRAM-SHA-512", "carol", "carol-secret")}
    assert roundtrip(secure.address("SASL_PLAINTEXT"), topic_name, config) == [b"v1", b"v2"]
    # the same command over a SASL listener, as the user itself
    over_sasl = ["-b", secure.address("SASL_PLAINTEXT"), "-X", "security.protocol=SASL_PLAINTEXT",
                 "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret"]
    assert ok("users", "describe", "carol", *over_sasl).stdout == "carol: SCRAM-SHA-512 (iterations=5000)\n"
    assert ok("users", "delete", "carol", *bootstrap).stdout == "user carol: SCRAM-SHA-512 deleted\n"
    error = first_error(secure.address("SASL_PLAINTEXT"), config)
    assert error is not None and error.code() == KafkaError._AUTHENTICATION, error
    assert fails("users", "describe", "carol", *bootstrap) == (
        "error: cannot describe user carol: Attempt to describe a user credential that does not exist: carol "
        "(RESOURCE_NOT_FOUND)\n")
    assert fails("users", "delete", "carol", "--mechanism", "SCRAM-SHA-256", *bootstrap) == (
        "error: cannot delete credentials of carol: Attempt to delete a user credential that does not exist "
        "(RESOURCE_NOT_FOUND)\n")
    assert fails("users", "create", "carol", "--password", "x", "--iterations", "100", *bootstrap) == (
        "error: cannot set SCRAM-SHA-256 credentials of carol: Too few iterations (at least 4096) "
        "(UNACCEPTABLE_CREDENTIAL)\n")
    assert fails("users", "create", "carol", "--password", "x", "--mechanism", "MD5", *bootstrap) == (
        "error: unknown SCRAM mechanism 'MD5' (one of SCRAM-SHA-256, SCRAM-SHA-512)\n")


def test_scram_credentials_survive_a_restart(pki: Pki, tmp_path: Path) -> None:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256", "offsets.topic.num.partitions": "1"}
    broker = BrokerProcess(tmp_path / "data", settings=settings).start()
    try:
        set_scram(broker, "dora", "dora-secret", "SCRAM-SHA-256")
        assert broker.stop() == 0
        stored = (tmp_path / "data" / ".meta" / "scram-credentials.json").read_text()
        assert "dora" in stored and "dora-secret" not in stored
        broker.start()
        config = {"security.protocol": "SASL_PLAINTEXT", **sasl("SCRAM-SHA-256", "dora", "dora-secret")}
        assert first_error(broker.address("SASL_PLAINTEXT"), config, timeout=3) is None
        assert roundtrip(broker.address("SASL_PLAINTEXT"), "after-restart", config) == [b"v1", b"v2"]
    finally:
        _finish(broker)


def test_an_oversized_frame_before_authentication_is_refused(secure: BrokerProcess, topic_name: str) -> None:
    """Before SASL authentication a frame may be at most sasl.server.max.receive.size (512 KiB):
    the broker closes the connection at the length prefix, without buffering the body."""
    with connect(secure.address("SASL_PLAINTEXT")) as sock:
        sock.sendall((600_000).to_bytes(4, "big") + b"\0" * 1000)
        assert closed_by_peer(sock)
    with connect(secure.address("SASL_PLAINTEXT")) as sock:
        sock.sendall(b"\xff\x00garbage" * 100)
        assert closed_by_peer(sock)
    config = {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret")}
    assert roundtrip(secure.address("SASL_PLAINTEXT"), topic_name, config) == [b"v1", b"v2"]
    # once authenticated, the usual socket.request.max.bytes applies: a 700 KB record goes through
    big = ConfluentClient(secure.address("SASL_PLAINTEXT"))
    big.produce(topic_name, [Rec(b"big", b"x" * 700_000)], extra={**config, "message.max.bytes": 2_000_000})


def test_advertised_listeners_per_listener(pki: Pki, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    from tests.integration.util import free_port

    port = free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:{port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:0,EXTERNAL://localhost:{port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SSL",
                "listener.name.external.ssl.keystore.location": str(pki.broker.keystore),
                "offsets.topic.num.partitions": "1"}
    broker = BrokerProcess(tmp_path / "data", settings=settings).start()
    try:
        external = AdminClient({"bootstrap.servers": f"localhost:{port}", "security.protocol": "SSL", **tls(pki),
                                **QUIET}).list_topics(timeout=15)
        assert [(b.host, b.port) for b in external.brokers.values()] == [("localhost", port)]
        internal = AdminClient({"bootstrap.servers": broker.address("PLAINTEXT"), **QUIET}).list_topics(timeout=15)
        assert [(b.host, b.port) for b in internal.brokers.values()] == [("127.0.0.1", broker.port)]
    finally:
        _finish(broker)


def test_oauthbearer_with_unsecured_tokens(secure: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import KafkaError

    config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
              "enable.sasl.oauthbearer.unsecure.jwt": True,
              "sasl.oauthbearer.config": "principal=alice scope=kafka,other"}
    assert roundtrip(secure.address("SASL_PLAINTEXT"), topic_name, config) == [b"v1", b"v2"]
    # the listener requires the scope "kafka" (unsecuredValidatorRequiredScope)
    error = first_error(secure.address("SASL_PLAINTEXT"), {**config, "sasl.oauthbearer.config": "principal=alice"})
    assert error is not None and error.code() == KafkaError._AUTHENTICATION, error
    assert "the token lacks the required scope kafka" in error.str()


def test_reauthentication_kip_368(tmp_path: Path) -> None:
    """connections.max.reauth.ms: librdkafka re-authenticates on its connection and goes on;
    a client that does not is cut off at its first request after the session's end."""
    from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest

    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                "listener.name.sasl_plaintext.connections.max.reauth.ms": "1500",
                "offsets.topic.num.partitions": "1"}
    broker = BrokerProcess(tmp_path / "data", settings=settings).start()
    try:
        from confluent_kafka import Producer

        address = broker.address("SASL_PLAINTEXT")
        config = {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret")}
        producer = Producer({"bootstrap.servers": address, **QUIET, **config})
        delivered: list[Any] = []
        for i in range(3):
            producer.produce("reauth", f"r{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
            assert producer.flush(15) == 0
            time.sleep(2)  # past the session's 1.5 s: librdkafka re-authenticates meanwhile
        assert delivered == [None, None, None]
        wait_until(lambda: "closing connection" not in broker.log_tail(500), 1, "no connection closed")

        with connect(address) as sock:
            assert call(sock, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
            answer = call(sock, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), correlation_id=2)
            assert (answer.error_code, answer.session_lifetime.total_seconds()) == (0, 1.5)
            metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False)
            assert call(sock, metadata, correlation_id=3).brokers  # within the session
            time.sleep(1.6)
            sock.sendall(request_frame(metadata, 4))
            assert closed_by_peer(sock)
        wait_until(lambda: "its SASL session expired (connections.max.reauth.ms)" in broker.log_tail(500), 10,
                   "the broker's reason")
    finally:
        _finish(broker)


def test_many_wrong_passwords_hurt_no_one(secure: BrokerProcess, topic_name: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest

    def guess(i: int) -> tuple[int, str | None, bool]:
        with connect(secure.address("SASL_PLAINTEXT")) as sock:
            assert call(sock, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
            answer = call(sock, SaslAuthenticateRequest(auth_bytes=f"\0alice\0guess-{i}".encode()), correlation_id=2)
            return int(answer.error_code), answer.error_message, closed_by_peer(sock)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(guess, range(40)))
    assert answers == [(58, "Authentication failed: Invalid username or password", True)] * 40
    config = {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret")}
    assert roundtrip(secure.address("SASL_PLAINTEXT"), topic_name, config) == [b"v1", b"v2"]


def test_sasl_handshake_v0_takes_bare_tokens(secure: BrokerProcess) -> None:
    """SaslHandshake v0 (the oldest clients): the SASL tokens follow as bare size-prefixed
    frames, without SaslAuthenticate, then requests go on as usual."""
    from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0

    from tests.integration.util import recv_frame

    with connect(secure.address("SASL_PLAINTEXT")) as sock:
        assert call(sock, SaslHandshakeRequestV0(mechanism="PLAIN")).error_code == 0
        token = b"\0alice\0alice-secret"
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert recv_frame(sock) == b""
        metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
        assert call(sock, metadata, correlation_id=2).brokers
    with connect(secure.address("SASL_PLAINTEXT")) as sock:
        assert call(sock, SaslHandshakeRequestV0(mechanism="PLAIN")).error_code == 0
        token = b"\0alice\0wrong"
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert closed_by_peer(sock)  # v0 cannot carry the error: the connection is closed


def test_a_half_done_tls_handshake_is_timed_out_and_hurts_no_one(secure: BrokerProcess, pki: Pki,
                                                                  topic_name: str) -> None:
    """A peer that starts a TLS handshake and stalls is dropped after the handshake timeout
    (10 s); meanwhile the listener serves everyone else."""
    with connect(secure.address("SSL"), timeout=20) as sock:
        sock.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, then nothing
        started = time.monotonic()
        assert roundtrip(secure.address("SSL"), topic_name, {"security.protocol": "SSL", **tls(pki)}) == [b"v1", b"v2"]
        assert closed_by_peer(sock, timeout=15)
        assert 9 <= time.monotonic() - started <= 15
