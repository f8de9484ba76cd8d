"""Dask reads a topic of a SASL_SSL listener given the Java clients' settings
(``sasl.jaas.config``, ``ssl.truststore.location``), as Spark's ``kafka.*`` options take them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import streamkit.dask
from streamkit.clients.users import create_user
from streamkit.testing import BrokerProcess
from streamkit.testing_tls import CertificateAuthority, scram_listener_settings
from tests.analytics.util import T0, Rec, create_topics, produce
from tests.integration.conftest import _finish

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, CertificateAuthority]]:
    ca = CertificateAuthority(tmp_path_factory.mktemp("ca"))
    cert = ca.issue("broker", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    process = BrokerProcess(tmp_path_factory.mktemp("secured") / "data",
                            settings=scram_listener_settings(cert, "SCRAM-SHA-512")).start()
    try:
        create_user(process.address("PLAINTEXT"), "reader", "reader-secret", "SCRAM-SHA-512")
        yield process, ca
    finally:
        _finish(process)


def test_read_topic_over_sasl_ssl_with_java_client_settings(
        secured: tuple[BrokerProcess, CertificateAuthority]) -> None:
    broker, ca = secured
    plain = broker.address("PLAINTEXT")
    create_topics(plain, {"payments": 2})
    produce(plain, "payments", [Rec(f"k{i}".encode(), f"v{i}".encode(), i % 2, T0 + i) for i in range(10)])
    config = {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="reader" password="reader-secret";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.cert_path),
    }
    got = streamkit.dask.read_topic(broker.address("SASL_SSL"), "payments", config=config).compute()
    assert sorted(got.value) == sorted(f"v{i}".encode() for i in range(10))
