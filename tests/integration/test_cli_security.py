"""The ``streamkit`` command against a SASL_SSL listener, configured as Kafka's tools are:
``--command-config FILE`` (a client properties file), or ``-X key=value``.

The broker process has a PLAINTEXT listener for the test's setup (the SCRAM user) and a
SASL_SSL listener with SCRAM-SHA-256 that the commands use; ACLs are on, with ``admin`` a
super user, so ``acls`` has an authorizer to talk to.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamkit.clients.users import create_user
from streamkit.testing import BrokerProcess
from streamkit.testing_tls import CertificateAuthority, authorizer_settings, scram_listener_settings
from tests.integration.conftest import _finish
from tests.integration.test_cli import fails, ok

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def secured(ca: CertificateAuthority, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    cert = ca.issue("broker", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    process = BrokerProcess(tmp_path_factory.mktemp("secured") / "data", settings={
        **scram_listener_settings(cert),
        **authorizer_settings(),
    }).start()
    try:
        create_user(process.address("PLAINTEXT"), "admin", "admin-secret")
        yield process
    finally:
        _finish(process)


def command_config(path: Path, ca: CertificateAuthority, password: str = "admin-secret") -> Path:
    """A client properties file as Kafka admins write them for kafka-topics.sh."""
    path.write_text(
        "# SASL_SSL with SCRAM\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca.cert_path}\n")
    return path


def test_topics_produce_consume_cluster_acls_and_users_over_sasl_ssl(
        secured: BrokerProcess, ca: CertificateAuthority, tmp_path: Path) -> None:
    b = ("-b", secured.address("SASL_SSL"), "--command-config", str(command_config(tmp_path / "client.properties", ca)))
    topic = f"secure-{uuid.uuid4().hex[:6]}"
    ok("topics", "create", topic, "--partitions", "2", *b)
    assert topic in ok("topics", "list", *b).stdout.split()
    ok("produce", topic, *b, stdin="one\ntwo\n")
    assert sorted(ok("consume", topic, "--from-beginning", "--max-messages", "2", *b).stdout.split()) == ["one", "two"]
    assert str(secured.listener_ports["SASL_SSL"]) in ok("cluster", *b).stdout
    ok("acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic, *b)
    assert "User:alice" in ok("acls", "list", "--topic", topic, *b).stdout
    assert "admin: SCRAM-SHA-256" in ok("users", "describe", "admin", *b).stdout


def test_x_options_work_alike_and_win_over_the_file(secured: BrokerProcess, ca: CertificateAuthority,
                                                    tmp_path: Path) -> None:
    wrong = command_config(tmp_path / "wrong.properties", ca, password="wrong")
    listed = ok("topics", "list", "-b", secured.address("SASL_SSL"), "--command-config", str(wrong),
                "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret")
    assert listed.returncode == 0


def test_a_wrong_password_is_one_line(secured: BrokerProcess, ca: CertificateAuthority, tmp_path: Path) -> None:
    wrong = command_config(tmp_path / "wrong.properties", ca, password="wrong")
    address = secured.address("SASL_SSL")
    message = fails("topics", "list", "-b", address, "--command-config", str(wrong))
    assert message.startswith(f"error: cannot connect to {address} over SASL_SSL as admin (SCRAM-SHA-256): "), message
    assert message.count("\n") == 1


def test_a_missing_command_config_file_is_one_line(secured: BrokerProcess, tmp_path: Path) -> None:
    message = fails("topics", "list", "-b", secured.address("SASL_SSL"), "--command-config", str(tmp_path / "none"))
    assert "cannot read config file" in message and message.count("\n") == 1
