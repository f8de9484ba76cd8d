"""The registry over TLS with HTTP basic authentication, configured with Confluent's names
(``listeners=https://...``, ``ssl.keystore.location``, ``authentication.method=BASIC``,
``authentication.realm`` naming the JAAS section of the users), and the clients streamkit
ships talking to it with Confluent's client settings: ``streamkit schemas`` (``-X``), the
serdes (``config=``), Connect's converters; and Confluent's own client."""

from __future__ import annotations

import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from pydantic import BaseModel

from streamkit.schemas.serdes import AvroSerde, SchemaRegistrationError
from streamkit.testing import BrokerProcess, SchemaRegistryProcess
from streamkit.testing_tls import CertificateAuthority, jaas_users, scram_broker

JETTY = "org.eclipse.jetty.jaas.spi.PropertyFileLoginModule"
SCHEMA = '{"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]}'


class Reading(BaseModel):
    celsius: float


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def secured(broker: BrokerProcess, ca: CertificateAuthority,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistryProcess]:
    directory = tmp_path_factory.mktemp("secured-registry")
    cert = ca.issue("registry", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    settings = {"ssl.keystore.location": str(cert.keystore), "ssl.keystore.type": "PEM",
                "authentication.method": "BASIC", "authentication.realm": "SchemaRegistry",
                "authentication.roles": "admin",
                "java.security.auth.login.config": str(jaas_users(directory, "SchemaRegistry",
                                                                  {"fred": "letmein"}, module=JETTY)),
                "kafkastore.topic": "_schemas_secured", "schema.registry.group.id": "secured-registry"}
    with SchemaRegistryProcess(broker.bootstrap, directory / "registry.log", settings) as running:
        yield running


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamkit", *args], capture_output=True, text=True, timeout=60,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_https_and_basic_auth_answer_as_confluents(secured: SchemaRegistryProcess, ca: CertificateAuthority) -> None:
    assert secured.url.startswith("https://")
    verify = ssl.create_default_context(cafile=str(ca.cert_path))
    refused = httpx.get(f"{secured.url}/subjects", verify=verify)
    assert refused.status_code == 401 and refused.json()["error_code"] == 401
    assert refused.headers["www-authenticate"].startswith('Basic realm="SchemaRegistry"')
    assert httpx.get(f"{secured.url}/subjects", verify=verify, auth=("fred", "wrong")).status_code == 401
    assert httpx.get(f"{secured.url}/subjects", verify=verify, auth=("fred", "letmein")).status_code == 200
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{secured.url}/subjects")  # the system's CAs do not know the test CA


def test_cli_with_confluents_client_settings(secured: SchemaRegistryProcess, ca: CertificateAuthority,
                                             tmp_path: Path) -> None:
    schema = tmp_path / "reading.avsc"
    schema.write_text(SCHEMA)
    registry = ["--schema-registry", secured.url]
    trust = ["-X", f"schema.registry.ssl.ca.location={ca.cert_path}"]
    registered = cli("schemas", "register", "cli-reading-value", str(schema), *registry, *trust,
                     "-X", "basic.auth.user.info=fred:letmein")
    assert registered.returncode == 0, registered.stderr
    listed = cli("schemas", "list", *registry, *trust, "-X", "basic.auth.user.info=fred:letmein")
    assert "cli-reading-value" in listed.stdout, listed.stderr
    # the same from a --command-config file, as Confluent's tools take it
    properties = tmp_path / "registry.properties"
    properties.write_text(f"basic.auth.credentials.source=USER_INFO\nbasic.auth.user.info=fred:letmein\n"
                          f"schema.registry.ssl.ca.location={ca.cert_path}\n")
    assert "cli-reading-value" in cli("schemas", "list", *registry, "--command-config", str(properties)).stdout
    # credentials in the URL (basic.auth.credentials.source=URL)
    with_user = secured.url.replace("https://", "https://fred:letmein@")
    assert "cli-reading-value" in cli("schemas", "list", "--schema-registry", with_user, *trust).stdout
    denied = cli("schemas", "list", *registry, *trust)
    assert denied.returncode == 2 and denied.stderr.startswith("error: authentication required (error 401)")
    assert denied.stderr.count("\n") == 1


def test_serdes_and_confluents_client(secured: SchemaRegistryProcess, ca: CertificateAuthority) -> None:
    config = {"basic.auth.user.info": "fred:letmein", "schema.registry.ssl.ca.location": str(ca.cert_path)}
    serde = AvroSerde(Reading, secured.url, config=config)
    serde.prepare("serde-readings", is_key=False)
    assert serde.loads(serde.dumps(Reading(celsius=21.5))) == Reading(celsius=21.5)
    with pytest.raises(SchemaRegistrationError, match="authentication required"):
        AvroSerde(Reading, secured.url, config={"schema.registry.ssl.ca.location": str(ca.cert_path)}).prepare(
            "serde-readings", is_key=False)

    with SchemaRegistryClient({"url": secured.url, "basic.auth.user.info": "fred:letmein",
                               "ssl.ca.location": str(ca.cert_path)}) as confluent:
        assert "serde-readings-value" in confluent.get_subjects()


def test_connect_converter_reaches_the_secured_registry(secured: SchemaRegistryProcess,
                                                        ca: CertificateAuthority) -> None:
    from streamkit.connect.avro_converter import AvroConverter
    from streamkit.connect.data import Schema

    converter = AvroConverter()
    converter.configure({"schema.registry.url": secured.url, "basic.auth.credentials.source": "USER_INFO",
                         "basic.auth.user.info": "fred:letmein",
                         "schema.registry.ssl.ca.location": str(ca.cert_path)}, False)
    data = converter.from_connect_data("converter-readings", Schema("float64"), 21.5)
    assert converter.to_connect_data("converter-readings", data)[1] == 21.5
    assert converter.client is not None
    converter.client.close()


def test_the_registry_keeps_its_schemas_on_a_sasl_ssl_broker(tmp_path: Path) -> None:
    """Confluent's kafkastore.* client settings: the store, and the leader election, log in."""
    with scram_broker(tmp_path, {"registry": "registry-secret"}) as secured_broker:
        settings = {"kafkastore.security.protocol": "SASL_SSL", "kafkastore.sasl.mechanism": "SCRAM-SHA-256",
                    "kafkastore.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                                   'required username="registry" password="registry-secret";',
                    "kafkastore.ssl.truststore.location": str(secured_broker.ca.cert_path)}
        with SchemaRegistryProcess(secured_broker.address, tmp_path / "registry.log", settings) as registry:
            created = httpx.post(f"{registry.url}/subjects/kafkastore-value/versions", json={"schema": SCHEMA})
            assert created.status_code == 200, created.text
            assert httpx.get(f"{registry.url}/subjects").json() == ["kafkastore-value"]
        wrong = subprocess.run([sys.executable, "-m", "streamkit", "schema-registry", "--set",
                                f"kafkastore.bootstrap.servers={secured_broker.address}",
                                "--set", "kafkastore.security.protocol=SASL_SSL"],
                               capture_output=True, text=True, timeout=60)
        assert wrong.returncode == 2 and "kafkastore.security.protocol=SASL_SSL needs sasl.username" in wrong.stderr
