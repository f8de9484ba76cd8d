"""The worker's settings, under Kafka Connect's worker names (connect-standalone.properties,
connect-distributed.properties), read from JSON or a ``.properties`` file.

Keys kept for the connectors: ``key.converter``/``value.converter`` and their prefixed
settings (``value.converter.schemas.enable``) are the defaults of connectors that name no
converter. ``plugin.path`` is accepted and ignored: plugins are Python packages found by
entry point (``streamkit.connectors``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic import Field as PField

from streamkit.connect.errors import ConfigError
from streamkit.connect.transforms import config_problems
from streamkit.http import HttpSecurity, HttpSecurityError, server_security

__all__ = ["BASIC_AUTH_EXTENSION", "WorkerConfig", "load_worker_config", "read_config_file"]

BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"


class WorkerConfig(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True)

    bootstrap_servers: str = PField("localhost:9092", alias="bootstrap.servers",
        description='The brokers the worker connects to.')
    listeners: str | None = PField(None, description="The REST API's listeners (http://host:port or https://host:port; the first one is served); wins over rest.host.name/rest.port.")
    rest_host_name: str | None = PField(None, alias="rest.host.name",
        description="The REST API's host (default: every interface).")
    rest_port: int = PField(8083, alias="rest.port", ge=0, le=65535,
        description="The REST API's port.")
    offset_storage_file_filename: str | None = PField(None, alias="offset.storage.file.filename",
        description='Standalone mode: the file source offsets are kept in.')
    offset_flush_interval_ms: int = PField(60000, alias="offset.flush.interval.ms", ge=1,
        description='How often source offsets are committed.')
    task_shutdown_graceful_timeout_ms: int = PField(5000, alias="task.shutdown.graceful.timeout.ms", ge=0,
        description='How long tasks get to stop before they are abandoned.')
    key_converter: str = PField("org.apache.kafka.connect.json.JsonConverter", alias="key.converter",
        description="The converter of record keys (Kafka Connect's class names).")
    value_converter: str = PField("org.apache.kafka.connect.json.JsonConverter", alias="value.converter",
        description="The converter of record values (Kafka Connect's class names).")
    plugin_path: str | None = PField(None, alias="plugin.path",
        description='Directories searched for third-party connector modules.')
    group_id: str | None = PField(None, alias="group.id",
        description="Distributed mode: the Connect cluster's group (workers with the same group.id share connectors).")
    config_storage_topic: str | None = PField(None, alias="config.storage.topic",
        description='Distributed mode: the compacted topic connector configs are kept in.')
    offset_storage_topic: str | None = PField(None, alias="offset.storage.topic",
        description='Distributed mode: the compacted topic source offsets are kept in.')
    status_storage_topic: str | None = PField(None, alias="status.storage.topic",
        description='Distributed mode: the compacted topic connector and task statuses are kept in.')
    config_storage_replication_factor: int = PField(1, alias="config.storage.replication.factor",
        description='Replication factor of config.storage.topic.')
    offset_storage_replication_factor: int = PField(1, alias="offset.storage.replication.factor",
        description='Replication factor of offset.storage.topic.')
    status_storage_replication_factor: int = PField(1, alias="status.storage.replication.factor",
        description='Replication factor of status.storage.topic.')
    offset_storage_partitions: int = PField(25, alias="offset.storage.partitions", ge=1,
        description='Partitions of offset.storage.topic.')
    status_storage_partitions: int = PField(5, alias="status.storage.partitions", ge=1,
        description='Partitions of status.storage.topic.')
    session_timeout_ms: int = PField(10000, alias="session.timeout.ms", ge=1,
        description="Distributed mode: the worker group's session timeout.")
    heartbeat_interval_ms: int = PField(3000, alias="heartbeat.interval.ms", ge=1,
        description='Distributed mode: how often a worker heartbeats.')
    # Kafka's client security settings (librdkafka's names; a Java worker's sasl.jaas.config and
    # ssl.truststore.location too): those of the worker's own clients, and the base of its
    # connectors' (client_config.py).
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] | None = PField(
        None, alias="security.protocol",
        description="How every client of the worker reaches the brokers: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL; producer./consumer./admin. prefixed settings and connectors' *.override.* ones override it.")
    sasl_mechanism: str | None = PField(None, alias="sasl.mechanism",
        description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default PLAIN).")
    sasl_username: str | None = PField(None, alias="sasl.username", description="The SASL user.")
    sasl_password: str | None = PField(None, alias="sasl.password", description="The SASL user's password.")
    sasl_jaas_config: str | None = PField(None, alias="sasl.jaas.config",
        description='A Java worker\'s login line instead of sasl.username/sasl.password: ...ScramLoginModule required username="u" password="p";')
    ssl_ca_location: str | None = PField(None, alias="ssl.ca.location",
        description="PEM file of the CAs that signed the brokers' certificates.")
    ssl_truststore_location: str | None = PField(None, alias="ssl.truststore.location",
        description="Kafka's name of ssl.ca.location (with ssl.truststore.type=PEM).")
    ssl_truststore_type: str | None = PField(None, alias="ssl.truststore.type",
        description="PEM (the only type read).")
    ssl_certificate_location: str | None = PField(None, alias="ssl.certificate.location",
        description="PEM client certificate, for mutual TLS with the brokers.")
    ssl_key_location: str | None = PField(None, alias="ssl.key.location",
        description="PEM private key of ssl.certificate.location.")
    # The REST API over TLS, with basic authentication (Kafka Connect's settings).
    ssl_keystore_location: str | None = PField(None, alias="ssl.keystore.location",
        description="With an https:// listener: PEM file with the REST API's private key and certificate chain (listeners.https.ssl.keystore.location wins).")
    ssl_keystore_type: str | None = PField(None, alias="ssl.keystore.type",
        description="PEM (the only type read) for ssl.keystore.location.")
    ssl_key_password: str | None = PField(None, alias="ssl.key.password",
        description="Password of the private key in ssl.keystore.location, when it is encrypted.")
    rest_extension_classes: str | None = PField(None, alias="rest.extension.classes",
        description="org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension turns on HTTP basic authentication of the REST API, with the users of java.security.auth.login.config.")
    java_security_auth_login_config: str | None = PField(None, alias="java.security.auth.login.config",
        description='A JAAS file (as Java workers take it with -D): its KafkaConnect section, KafkaConnect { org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required file="/etc/connect/users.properties"; };, names the file of "user: password" lines.')
    # KIP-618: "enabled" has source tasks write records and offsets in one transaction
    # (distributed mode only); "preparing" is the rolling-upgrade step, at-least-once still.
    exactly_once_source_support: Literal["disabled", "preparing", "enabled"] = PField(
        "disabled", alias="exactly.once.source.support",
        description='KIP-618: enabled makes source tasks write records and offsets in one transaction (distributed mode); preparing is the rolling-upgrade step.')

    def rest_address(self) -> tuple[str, int]:
        """Where the REST API listens: ``listeners`` (first one) wins over rest.host.name/rest.port."""
        if self.listeners:
            first = self.listeners.split(",")[0].strip()
            parts = urlsplit(first if "://" in first else f"http://{first}")
            return parts.hostname or "0.0.0.0", parts.port if parts.port is not None else 8083
        return self.rest_host_name or "0.0.0.0", self.rest_port

    def http_security(self) -> HttpSecurity:
        """The REST API's TLS and basic authentication: an https:// listener serves the
        PEM keystore of listeners.https.ssl.keystore.location (or ssl.keystore.location);
        BasicAuthSecurityRestExtension in rest.extension.classes asks for users' passwords."""
        listener = (self.listeners or "http://").split(",")[0].strip()
        extensions = [c.strip() for c in (self.rest_extension_classes or "").split(",") if c.strip()]
        unknown = [c for c in extensions if c != BASIC_AUTH_EXTENSION]
        if unknown:
            raise ConfigError({"rest.extension.classes": [
                f"unknown REST extension {unknown[0]}; streamkit provides {BASIC_AUTH_EXTENSION}"]})
        try:
            return server_security(self.raw(), listener if "://" in listener else f"http://{listener}",
                                   tls_prefixes=("listeners.https.", ""), basic_auth=bool(extensions),
                                   jaas_section="KafkaConnect", realm="KafkaConnect")
        except HttpSecurityError as exc:
            raise ConfigError({"listeners" if "keystore" in str(exc) else "rest.extension.classes": [str(exc)]}) from None

    def client_security(self) -> dict[str, Any]:
        """aiokafka's security arguments of the worker's own clients ({} for PLAINTEXT)."""
        from streamkit.connect.client_config import worker_security

        return worker_security(self.raw())

    def client_kwargs(self, kind: str) -> dict[str, Any]:
        """aiokafka arguments of a ``kind`` client the worker makes for itself under its
        ``{kind}.*`` settings (a sink's group offsets, fencing)."""
        from streamkit.connect.client_config import client_kwargs

        return client_kwargs(kind, self.raw(), {})

    def raw(self) -> dict[str, Any]:
        """Every setting by its Kafka name, the unknown (prefixed converter settings) too."""
        out = self.model_dump(by_alias=True)
        out.update(self.model_extra or {})
        return {k: v for k, v in out.items() if v is not None}


def read_config_file(path: Path) -> dict[str, Any]:
    """A JSON object, or Java properties (``key=value`` lines) when the file ends in .properties."""
    text = path.read_text()
    if path.suffix == ".properties":
        out: dict[str, Any] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if sep < 0:
                out[line] = ""
            else:
                out[line[:sep].strip()] = line[sep + 1:].strip()
        return out
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigError({str(path): [f"not valid JSON: {exc}"]}) from None
    if not isinstance(data, dict):
        raise ConfigError({str(path): ["must hold a JSON object"]})
    return data


def load_worker_config(settings: dict[str, Any]) -> WorkerConfig:
    from streamkit.connect.client_config import KINDS, client_kwargs, worker_security

    problems: dict[str, list[str]] = {}
    try:
        worker_security(settings)
    except ConfigError as exc:
        problems.update(exc.problems)
    for kind in KINDS:
        try:
            client_kwargs(kind, settings, {})
        except ConfigError as exc:
            for key, messages in exc.problems.items():
                problems.setdefault(key, [m for m in messages if m not in problems.get(key, [])] or messages)
    if problems:
        raise ConfigError(problems)
    try:
        worker = WorkerConfig.model_validate({k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                                              else v for k, v in settings.items()})
    except ValidationError as exc:
        names = {n: (f.alias or n) for n, f in WorkerConfig.model_fields.items()}
        raise ConfigError({names.get(k, k): v for k, v in config_problems(exc).items()}) from None
    worker.http_security()  # a missing keystore or users file is a config error now
    return worker
