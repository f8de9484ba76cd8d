"""A small certificate authority for tests: PEM files for brokers and clients, made with
``cryptography`` (EC P-256 keys, SHA-256 signatures).

    ca = CertificateAuthority(tmp_path / "ca")
    broker = ca.issue("broker", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    alice = ca.issue("alice", "CN=alice,OU=eng")
    # broker.keystore: key + chain in one file (ssl.keystore.location)
    # ca.cert_path: the truststore (ssl.truststore.location / ssl.ca.location)

``scram_broker`` starts a broker process whose clients log in with SCRAM over SASL_SSL (and
a PLAINTEXT listener for the test's own setup), with its SCRAM users made and ACLs on when
asked: the secured broker of the CLI's, stream apps' and Connect's security tests.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

if TYPE_CHECKING:
    from streamkit.testing import BrokerProcess

__all__ = ["CertificateAuthority", "IssuedCertificate", "SecuredBroker", "authorizer_settings", "jaas_users", "scram_broker",
           "scram_listener_settings"]

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class IssuedCertificate:
    key_path: Path  # the private key alone (PKCS#8 PEM; ssl.key.location)
    cert_path: Path  # the certificate alone (ssl.certificate.location)
    keystore: Path  # key + certificate in one file (ssl.keystore.location, KIP-651)

    @property
    def key_pem(self) -> str:
        return self.key_path.read_text()

    @property
    def cert_pem(self) -> str:
        return self.cert_path.read_text()


def _name(subject: str) -> x509.Name:
    return x509.Name.from_rfc4514_string(subject)


class CertificateAuthority:
    """A self-signed CA in ``directory`` (``ca.pem``, ``ca-key.pem``) that issues PEM
    certificates; a second instance is an unrelated CA (for "wrong CA" tests)."""

    def __init__(self, directory: Path | str, subject: str = "CN=streamkit test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._name = _name(subject)
        self.cert = (x509.CertificateBuilder().subject_name(self._name).issuer_name(self._name)
                     .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - _DAY).not_valid_after(now + 30 * _DAY)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self._key, hashes.SHA256()))
        self.cert_path = self.directory / "ca.pem"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, subject: str, hosts: Sequence[str] = (), days: int = 30) -> IssuedCertificate:
        """A key and certificate for ``subject`` (RFC 4514, e.g. ``CN=alice,OU=eng``), valid
        for ``hosts`` (DNS names or IP addresses) when given; files named after ``name``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(self._name)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - _DAY).not_valid_after(now + days * _DAY)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]),
                                            critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        out = IssuedCertificate(self.directory / f"{name}-key.pem", self.directory / f"{name}.pem",
                                self.directory / f"{name}-keystore.pem")
        out.key_path.write_bytes(key_pem)
        out.cert_path.write_bytes(cert_pem)
        # Written to a temporary name and renamed: a broker reloading it never reads half a file.
        tmp = out.keystore.with_suffix(".tmp")
        tmp.write_bytes(key_pem + cert_pem)
        tmp.replace(out.keystore)
        return out


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def scram_listener_settings(broker: IssuedCertificate, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    """Broker settings for a PLAINTEXT listener (a test's own setup: creating SCRAM users)
    beside a SASL_SSL listener with ``mechanism``, both on free ports
    (``BrokerProcess.address("SASL_SSL")``)."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(broker.keystore),
        "sasl.enabled.mechanisms": mechanism,
        f"listener.name.sasl_ssl.{mechanism.lower()}.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "connection.failed.authentication.delay.ms": "10",
    }


def jaas_users(directory: Path, section: str | Sequence[str], users: Mapping[str, str],
               module: str = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule") -> Path:
    """A JAAS file whose ``section`` (or each of several) names a PropertyFileLoginModule
    file of ``users`` (``user: password`` lines), as Kafka Connect's basic auth (section
    ``KafkaConnect``) and Confluent's registry (``SchemaRegistry``, Jetty's module) read
    them: the value of ``java.security.auth.login.config``."""
    names = [section] if isinstance(section, str) else list(section)
    directory.mkdir(parents=True, exist_ok=True)
    credentials = directory / f"{names[0].lower()}-users.properties"
    credentials.write_text("".join(f"{user}: {password}\n" for user, password in users.items()))
    jaas = directory / f"{names[0].lower()}-jaas.conf"
    jaas.write_text("".join(f'{name} {{\n  {module} required\n  file="{credentials}";\n}};\n' for name in names))
    return jaas


@dataclass(frozen=True, slots=True)
class SecuredBroker:
    process: BrokerProcess
    ca: CertificateAuthority
    mechanism: str

    @property
    def address(self) -> str:
        """The SASL_SSL listener (``host:port``)."""
        return self.process.address("SASL_SSL")

    @property
    def plaintext(self) -> str:
        """The PLAINTEXT listener, for a test's own setup and checks."""
        return self.process.address("PLAINTEXT")

    def client_settings(self, user: str, password: str) -> dict[str, str]:
        """Kafka's client settings (librdkafka's names) that log ``user`` in over SASL_SSL."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": self.mechanism, "sasl.username": user,
                "sasl.password": password, "ssl.ca.location": str(self.ca.cert_path)}


@contextlib.contextmanager
def scram_broker(directory: Path, users: Mapping[str, str], *, acls: bool = False, super_users: Sequence[str] = (),
                 mechanism: str = "SCRAM-SHA-256", settings: Mapping[str, str] | None = None) -> Iterator[SecuredBroker]:
    """A broker process with a SASL_SSL listener (``mechanism``) and a PLAINTEXT one, its
    certificate signed by a CA made in ``directory``, and the SCRAM ``users`` (name to
    password). With ``acls`` the StandardAuthorizer is on: ``super_users`` may do anything,
    the others what their ACLs allow (``allow.everyone.if.no.acl.found`` stays false).
    The broker must still be alive, and exit 0 when stopped, at the end."""
    from streamkit.clients.users import create_user
    from streamkit.testing import BrokerProcess

    ca = CertificateAuthority(directory / "ca")
    cert = ca.issue("broker", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    extra: dict[str, str] = {**scram_listener_settings(cert, mechanism), "group.initial.rebalance.delay.ms": "0"}
    if acls:
        extra |= {"authorizer.class.name": STANDARD_AUTHORIZER,
                  "super.users": ";".join(f"User:{name}" for name in super_users)}
    process = BrokerProcess(directory / "data", settings={**extra, **(settings or {})}).start()
    try:
        for name, password in users.items():
            create_user(process.address("PLAINTEXT"), name, password, mechanism=mechanism)
        yield SecuredBroker(process, ca, mechanism)
    finally:
        died = process.process is not None and process.process.poll() is not None
        code = process.stop(timeout_s=30)
        if died or code != 0:
            raise AssertionError(f"the secured broker {'died' if died else f'exited {code}'}:\n{process.log_tail()}")


def authorizer_settings(super_users: str = "User:admin") -> dict[str, str]:
    """Broker settings for ACLs (Kafka's StandardAuthorizer): ``super_users`` may do
    anything, and so may everyone on a resource no ACL names."""
    return {"authorizer.class.name": STANDARD_AUTHORIZER,
            "allow.everyone.if.no.acl.found": "true", "super.users": super_users}
