"""The registry's settings under Confluent's names (schema-registry.properties)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from streamkit.clients.errors import ClientError
from streamkit.clients.security import aiokafka_security
from streamkit.http import HttpSecurity, HttpSecurityError, server_security
from streamkit.schemas.compatibility import LEVELS

__all__ = ["SETTINGS", "SETTINGS_DOC", "RegistryConfig", "RegistryConfigError"]

SETTINGS = {
    "listeners": "http://127.0.0.1:8081",
    "kafkastore.bootstrap.servers": "127.0.0.1:9092",
    "kafkastore.topic": "_schemas",
    "kafkastore.topic.replication.factor": "1",
    "schema.compatibility.level": "BACKWARD",
    "schema.registry.group.id": "schema-registry",
    "leader.eligibility": "true",
    "host.name": "",
    "ssl.keystore.location": "",
    "ssl.keystore.type": "PEM",
    "ssl.key.password": "",
    "ssl.truststore.location": "",
    "authentication.method": "NONE",
    "authentication.realm": "SchemaRegistry",
    "authentication.roles": "",
    "java.security.auth.login.config": "",
    "kafkastore.security.protocol": "PLAINTEXT",
    "kafkastore.sasl.mechanism": "PLAIN",
    "kafkastore.sasl.jaas.config": "",
    "kafkastore.ssl.truststore.location": "",
    "kafkastore.ssl.truststore.type": "PEM",
    "kafkastore.ssl.certificate.location": "",
    "kafkastore.ssl.key.location": "",
}


# What each setting does, for the reference (keys: exactly SETTINGS', a test checks).
SETTINGS_DOC = {
    "listeners": "The HTTP listener of the REST API, http://HOST:PORT (the first one is served).",
    "kafkastore.bootstrap.servers": "The brokers whose topic holds the schemas.",
    "kafkastore.topic": "The compacted single-partition topic the schemas live in.",
    "kafkastore.topic.replication.factor": "Replication factor of kafkastore.topic when the registry creates it.",
    "schema.compatibility.level": "The global compatibility level: NONE, BACKWARD, FORWARD, FULL or their _TRANSITIVE forms.",
    "schema.registry.group.id": "The group the registries of one cluster join to elect the leader that writes.",
    "leader.eligibility": "Whether this registry may become the leader (false: it forwards writes).",
    "host.name": "The host name this registry advertises to the others for forwarded writes.",
    "ssl.keystore.location": "With an https:// listener: PEM file with the private key and the certificate chain.",
    "ssl.keystore.type": "PEM (the only type read).",
    "ssl.key.password": "Password of the private key in ssl.keystore.location, when it is encrypted.",
    "ssl.truststore.location": "PEM file of the CAs of the other registries' certificates, for the writes a follower forwards to the leader over https.",
    "authentication.method": "NONE, or BASIC: every request needs HTTP basic authentication with a user of the authentication.realm section of java.security.auth.login.config.",
    "authentication.realm": "The JAAS section whose PropertyFileLoginModule file holds the users (\"user: password[,role...]\" lines).",
    "authentication.roles": "Accepted for Confluent's files; every user of the realm may call every endpoint.",
    "kafkastore.security.protocol": "How the registry's clients reach the brokers: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    "kafkastore.sasl.mechanism": "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.",
    "kafkastore.sasl.jaas.config": 'The login: ...PlainLoginModule (or ScramLoginModule) required username="u" password="p";',
    "kafkastore.ssl.truststore.location": "PEM file of the CAs that signed the brokers' certificates.",
    "kafkastore.ssl.truststore.type": "PEM (the only type read).",
    "kafkastore.ssl.certificate.location": "PEM client certificate, for mutual TLS with the brokers.",
    "kafkastore.ssl.key.location": "PEM private key of kafkastore.ssl.certificate.location.",
    "java.security.auth.login.config": 'The JAAS file (Confluent takes it with -D): SchemaRegistry { org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required file="/etc/schema-registry/users.properties"; };',
}


class RegistryConfigError(ValueError):
    """A setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class RegistryConfig:
    host: str
    port: int
    bootstrap: str
    topic: str
    replication: int
    compatibility_level: str
    group_id: str
    leader_eligible: bool
    advertised_host: str
    security: HttpSecurity = field(default_factory=HttpSecurity)
    truststore: str | None = None  # the CA file that forwarded writes verify the leader with
    kafkastore_security: Mapping[str, Any] = field(default_factory=dict)  # aiokafka's security arguments

    @staticmethod
    def from_settings(settings: Mapping[str, str]) -> RegistryConfig:
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise RegistryConfigError(f"unknown setting {unknown[0]} (known: {', '.join(sorted(SETTINGS))})")
        values = {**SETTINGS, **settings}
        listener = values["listeners"].split(",")[0].strip()
        parts = urlsplit(listener)
        if parts.scheme not in ("http", "https") or parts.hostname is None or parts.port is None:
            raise RegistryConfigError(f"listeners: expected http://HOST:PORT or https://HOST:PORT, got {listener!r}")
        method = values["authentication.method"].upper()
        if method not in ("NONE", "BASIC"):
            raise RegistryConfigError(f"authentication.method: NONE or BASIC, got {method!r}")
        try:
            security = server_security(values, listener, tls_prefixes=("",), basic_auth=method == "BASIC",
                                       jaas_section=values["authentication.realm"], realm=values["authentication.realm"])
        except HttpSecurityError as exc:
            raise RegistryConfigError(str(exc)) from None
        try:
            kafkastore_security = aiokafka_security({k[len("kafkastore."):]: v for k, v in values.items()
                                                     if k.startswith("kafkastore.") and v})
        except ClientError as exc:
            raise RegistryConfigError(f"kafkastore.{exc}") from None
        level = values["schema.compatibility.level"].upper()
        if level not in LEVELS:
            raise RegistryConfigError(f"schema.compatibility.level: one of {', '.join(LEVELS)}, got {level!r}")
        try:
            replication = int(values["kafkastore.topic.replication.factor"])
        except ValueError:
            raise RegistryConfigError("kafkastore.topic.replication.factor: expected an integer") from None
        eligible = values["leader.eligibility"].lower()
        if eligible not in ("true", "false"):
            raise RegistryConfigError("leader.eligibility: expected true or false")
        if not values["kafkastore.topic"]:
            raise RegistryConfigError("kafkastore.topic: must not be empty")
        return RegistryConfig(host=parts.hostname, port=parts.port, bootstrap=values["kafkastore.bootstrap.servers"],
                              topic=values["kafkastore.topic"], replication=replication, compatibility_level=level,
                              group_id=values["schema.registry.group.id"], leader_eligible=eligible == "true",
                              advertised_host=values["host.name"], security=security,
                              truststore=values["ssl.truststore.location"] or None,
                              kafkastore_security=kafkastore_security)
