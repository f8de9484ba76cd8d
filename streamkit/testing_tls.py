"""A small certificate authority for tests: PEM files for brokers and clients, made with
``cryptography`` (EC P-256 keys, SHA-256 signatures).

    ca = CertificateAuthority(tmp_path / "ca")
    broker = ca.issue("broker", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    alice = ca.issue("alice", "CN=alice,OU=eng")
    # broker.keystore: key + chain in one file (ssl.keystore.location)
    # ca.cert_path: the truststore (ssl.truststore.location / ssl.ca.location)
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

__all__ = ["CertificateAuthority", "IssuedCertificate", "authorizer_settings", "scram_listener_settings"]

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


def authorizer_settings(super_users: str = "User:admin") -> dict[str, str]:
    """Broker settings for ACLs (Kafka's StandardAuthorizer): ``super_users`` may do
    anything, and so may everyone on a resource no ACL names."""
    return {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true", "super.users": super_users}
