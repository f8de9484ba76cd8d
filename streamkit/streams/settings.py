"""App settings: one pydantic object, under Kafka Streams' and the Kafka clients' names.

``App(id, broker=..., data_dir=..., processing_guarantee=..., config={...})``: the ``config``
dict uses the dotted names users know from Kafka Streams (``commit.interval.ms``,
``num.standby.replicas``, ``state.dir``, ``processing.guarantee``...) and from the consumer
(``session.timeout.ms``, ``max.poll.records``, ``auto.offset.reset``...). Unknown names and bad
values raise ``SettingsError`` with one line naming the setting.

Every setting can also be overridden from outside the app's code, by its Kafka name with a
text value (``streamkit worker --set commit.interval.ms=500``): ``AppSettings.override`` and
``App.configure`` take such a mapping.

Inputs are read ``isolation.level=read_uncommitted`` under at-least-once, as in Kafka
Streams: records of transactions that are still open or were aborted are processed too.
``read_committed`` reads only committed ones. Exactly-once always reads ``read_committed``
(and refuses ``read_uncommitted``).

Bad records (``deserialization.exception.handler``, Kafka Streams' name): ``dead_letter``
(the default) sends a record that cannot be deserialized to the dead-letter topic
(``errors.deadletterqueue.topic.name``, Kafka Connect's name, also taken under Kafka Streams'
``errors.dead.letter.queue.topic.name``; default ``{application.id}-dead-letter``) with its
key, value, timestamp and headers, plus error-context headers, logs it and goes on: a bad
record never stops the app, and is never lost. ``fail`` stops the worker on it (the log
line gives the command that skips it), ``skip`` logs and drops it. Kafka Streams' handler
class names are accepted: ``LogAndFailExceptionHandler`` is ``fail``,
``LogAndContinueExceptionHandler`` is ``skip``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from streamkit.hints import did_you_mean

if TYPE_CHECKING:
    from streamkit.http import HttpSecurity

__all__ = ["AppSettings", "SettingsError", "setting_names"]

# Kafka Streams' deserialization handlers by class name (with or without the package).
EXACTLY_ONCE_COMMIT_INTERVAL_MS = 100

_HANDLER_CLASSES = {"LogAndFailExceptionHandler": "fail", "LogAndContinueExceptionHandler": "skip"}


class SettingsError(ValueError):
    """A bad app setting; the message names it."""


class AppSettings(BaseModel):
    """An app's settings, validated, under Kafka Streams' and the Kafka clients' names
    (see the module docstring; ``App(config=...)`` builds one)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    application_id: str = Field(alias="application.id", min_length=1, pattern=r"^[a-zA-Z0-9._-]+$",
        description="The app's id: its consumer group, the prefix of its internal topics and its state directory.")
    bootstrap_servers: str | None = Field(default=None, alias="bootstrap.servers",
        description="host:port of the brokers (several separated by commas); default: the App's broker argument.")
    processing_guarantee: Literal["at_least_once", "exactly_once", "exactly_once_v2"] = Field(
        default="at_least_once", alias="processing.guarantee",
        description='at_least_once, or exactly_once (= exactly_once_v2): transactions cover outputs, changelogs and offsets.')
    state_dir: Path | None = Field(default=None, alias="state.dir",
        description='Where local stores live (default {data_dir}/state).')
    commit_interval_ms: int = Field(default=1000, alias="commit.interval.ms", ge=1,
        description='How often state, changelogs and offsets are committed (100 under exactly-once unless set).')
    num_standby_replicas: int = Field(default=0, alias="num.standby.replicas", ge=0,
        description='Keep each table partition warm on up to N other workers, which follow its changelog.')
    session_timeout_ms: int = Field(default=10000, alias="session.timeout.ms", ge=1,
        description="The consumer group's session timeout.")
    heartbeat_interval_ms: int = Field(default=3000, alias="heartbeat.interval.ms", ge=1,
        description='How often the worker heartbeats to the group coordinator.')
    max_poll_interval_ms: int = Field(default=300000, alias="max.poll.interval.ms", ge=1,
        description='The longest time between two polls before the group removes the worker.')
    max_poll_records: int = Field(default=10000, alias="max.poll.records", ge=1,
        description='Records per fetched batch.')
    auto_offset_reset: Literal["earliest", "latest"] = Field(default="earliest", alias="auto.offset.reset",
        description='Where a new app starts reading: earliest or latest.')
    isolation_level: Literal["read_uncommitted", "read_committed"] = Field(
        default="read_uncommitted", alias="isolation.level",
        description='read_uncommitted (processes records of open and aborted transactions, as Kafka Streams under at-least-once) or read_committed; exactly-once always reads read_committed.')
    num_partitions: int = Field(default=4, alias="num.partitions", ge=1,
        description='Partitions of the topics and tables the app creates.')
    replication_factor: int = Field(default=1, alias="replication.factor", ge=1,
        description='Replication factor of the topics the app creates.')
    deserialization_error: Literal["fail", "skip", "dead_letter"] = Field(
        default="dead_letter", alias="deserialization.exception.handler",
        description="dead_letter (copy a bad record to the dead-letter topic, log, go on), skip (log and drop) or fail (stop); Kafka Streams' handler class names are accepted.")
    dead_letter_topic: str | None = Field(
        default=None, alias="errors.deadletterqueue.topic.name",
        validation_alias=AliasChoices("errors.deadletterqueue.topic.name", "errors.dead.letter.queue.topic.name",
                                      "dead_letter_topic"),
        description='Where dead_letter sends bad records (default {application.id}-dead-letter); errors.dead.letter.queue.topic.name is accepted too.')
    late_records_topic: str | None = Field(default=None, alias="late.records.topic.name",
        description='Where records dropped as late go, besides the metric (created at start).')
    window_idle_close_ms: int = Field(default=0, alias="window.idle.close.ms", ge=0,
        description="Leave inputs silent this long (wall clock) out of stream time's minimum; when all are, stream time follows the wall clock (0: off).")
    dsl_columnar: bool = Field(default=True, alias="dsl.columnar.enable",
        description="Run DSL chains that allow it a fetch batch at a time on Arrow columns (stream.explain() shows which); false: every step on the row path.")
    max_task_idle_ms: int = Field(default=0, alias="max.task.idle.ms", ge=-1,
        description='Pause DSL input partitions that run ahead of the slowest one with records left, for at most this long (0: off).')
    repartition_purge_interval_ms: int = Field(default=30000, alias="repartition.purge.interval.ms", ge=0,
        description='Delete from repartition topics what the worker has committed, at most this often.')
    cache_max_bytes_buffering: int = Field(default=10 * 1024 * 1024, alias="statestore.cache.max.bytes", ge=0,
        description="Commit early when the tables' write caches hold more bytes than this (0: after every batch that changed a table).")
    transaction_timeout_ms: int = Field(default=10_000, alias="transaction.timeout.ms", ge=1,
        description="Exactly-once: how long the broker keeps a transaction of a crashed worker open before it aborts it, unless the task's next owner fences it first (Kafka Streams' default, 10 s; read_committed readers of the outputs wait for it).")
    producer_linger_ms: int = Field(default=5, alias="linger.ms", ge=0,
        description="The app's producer's linger.ms.")
    producer_acks: Literal["0", "1", "all", "-1"] = Field(default="all", alias="acks",
        description="The app's producer's acks.")
    web_port: int | None = Field(default=None, alias="web.port",
        description="The worker's HTTP port (interactive queries, /metrics); default: none.")
    # The web endpoints over TLS with basic authentication: the names Kafka Connect's REST API
    # and Confluent's registry use, under web. (streamkit.http serves them alike).
    web_ssl_keystore_location: str | None = Field(default=None, alias="web.ssl.keystore.location",
        description="Serve the web endpoints over https with this PEM file (private key and certificate chain).")
    web_ssl_keystore_type: Literal["PEM"] = Field(default="PEM", alias="web.ssl.keystore.type",
        description="PEM (the only type read) for web.ssl.keystore.location.")
    web_ssl_key_password: str | None = Field(default=None, alias="web.ssl.key.password", repr=False,
        description="Password of the private key in web.ssl.keystore.location, when it is encrypted.")
    web_ssl_truststore_location: str | None = Field(default=None, alias="web.ssl.truststore.location",
        description="PEM file of the CAs of the other workers' certificates, for the key lookups a worker forwards to the owner over https.")
    web_authentication_method: Literal["NONE", "BASIC"] = Field(default="NONE", alias="web.authentication.method",
        description="BASIC: every request needs HTTP basic authentication with a user of the web.authentication.realm section of java.security.auth.login.config.")
    web_authentication_realm: str = Field(default="StreamkitWorker", alias="web.authentication.realm",
        description="The JAAS section whose PropertyFileLoginModule file holds the users (\"user: password\" lines).")
    java_security_auth_login_config: str | None = Field(default=None, alias="java.security.auth.login.config",
        description='The JAAS file of the web endpoints\' users: StreamkitWorker { org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required file="/etc/streamkit/users.properties"; };')
    # No Kafka client has this one (their clients retry forever): how long a worker retries
    # an unreachable broker at start before it gives up with a one-line error.
    bootstrap_timeout_ms: int = Field(default=60000, alias="bootstrap.timeout.ms", ge=0,
        description='How long a worker retries an unreachable broker at start before ending with a one-line error.')

    # Kafka's client security settings (librdkafka's names), for every client the worker
    # creates; streamkit.clients.security turns them into aiokafka's arguments.
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", alias="security.protocol",
        description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL: how every client of the worker reaches the brokers.")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        default="PLAIN", alias="sasl.mechanism", description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.")
    sasl_username: str | None = Field(default=None, alias="sasl.username", description="The SASL user.")
    sasl_password: str | None = Field(default=None, alias="sasl.password", repr=False,
        description="The SASL user's password.")
    sasl_jaas_config: str | None = Field(default=None, alias="sasl.jaas.config", repr=False,
        description='Instead of sasl.username and sasl.password: a PlainLoginModule or ScramLoginModule line with username="..." password="...".')
    ssl_ca_location: str | None = Field(default=None, alias="ssl.ca.location",
        validation_alias=AliasChoices("ssl.ca.location", "ssl.truststore.location", "ssl_ca_location"),
        description="PEM file of the CAs that signed the brokers' certificates (ssl.truststore.location is accepted too).")
    ssl_certificate_location: str | None = Field(default=None, alias="ssl.certificate.location",
        description="PEM client certificate, for mutual TLS.")
    ssl_key_location: str | None = Field(default=None, alias="ssl.key.location",
        description="PEM private key of ssl.certificate.location.")

    @model_validator(mode="after")
    def _exactly_once_commit_interval(self) -> AppSettings:
        """Kafka Streams' default commit.interval.ms is 100 under exactly-once: outputs are
        visible to read_committed readers only once committed, so the interval is their
        latency. Left unset (an override of processing.guarantee changes it again)."""
        if self.exactly_once and "commit_interval_ms" not in self.model_fields_set:
            object.__setattr__(self, "commit_interval_ms", EXACTLY_ONCE_COMMIT_INTERVAL_MS)
        return self

    @model_validator(mode="after")
    def _exactly_once_reads_committed(self) -> AppSettings:
        """Exactly-once reads its inputs read_committed, as Kafka Streams does: processing
        what a producer may still abort would put it in the app's committed results."""
        if not self.exactly_once:
            return self
        if "isolation_level" in self.model_fields_set and self.isolation_level != "read_committed":
            raise ValueError(f"isolation.level={self.isolation_level} cannot be used with processing.guarantee="
                             f"{self.processing_guarantee}, which reads its inputs read_committed: leave "
                             "isolation.level unset (or set it to read_committed)")
        object.__setattr__(self, "isolation_level", "read_committed")
        return self

    @field_validator("deserialization_error", mode="before")
    @classmethod
    def _handler_class(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _HANDLER_CLASSES.get(value.rsplit(".", 1)[-1], value)
        return value

    @classmethod
    def build(cls, values: Mapping[str, Any]) -> AppSettings:
        """Validate ``values`` (Kafka names or attribute names); one-line errors."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            if not first["loc"] and first["type"] == "value_error":
                raise SettingsError(str(first["ctx"]["error"])) from None  # settings that contradict each other
            where = ".".join(str(p) for p in first["loc"]) or "settings"
            if first["type"] == "extra_forbidden":
                hint = did_you_mean(where, setting_names())
                raise SettingsError(f"unknown app setting {where!r}{hint}") from None
            raise SettingsError(f"bad value for app setting {where!r}: {first['msg']}") from None

    def override(self, overrides: Mapping[str, Any]) -> AppSettings:
        """These settings with ``overrides`` applied: Kafka names (or attribute names) to
        values, text accepted (``{"commit.interval.ms": "500"}``); validated like ``build``."""
        values: dict[str, Any] = self.model_dump(by_alias=True, exclude_unset=True)
        names = _canonical_names()
        values.update({names.get(k, k): v for k, v in overrides.items()})
        return AppSettings.build(values)

    def web_security(self) -> HttpSecurity:
        """The web endpoints' TLS and basic authentication; a missing or bad file raises
        ``SettingsError`` naming it."""
        from streamkit.http import HttpSecurityError, server_security

        values = self.model_dump(by_alias=True)
        scheme = "https" if self.web_ssl_keystore_location else "http"
        try:
            return server_security({k: v for k, v in values.items() if v is not None}, f"{scheme}://",
                                   tls_prefixes=("web.",), basic_auth=self.web_authentication_method == "BASIC",
                                   jaas_section=self.web_authentication_realm, realm=self.web_authentication_realm)
        except HttpSecurityError as exc:
            raise SettingsError(str(exc)) from None

    def client_security(self) -> dict[str, Any]:
        """aiokafka's security arguments for these settings ({} for PLAINTEXT); a bad
        combination (SASL without a user, a missing PEM file) raises ``SettingsError``."""
        from streamkit.clients.errors import ClientError
        from streamkit.clients.security import SECURITY_SETTINGS, aiokafka_security

        values = self.model_dump(by_alias=True)
        try:
            return aiokafka_security({k: v for k, v in values.items() if k in SECURITY_SETTINGS})
        except ClientError as exc:
            raise SettingsError(str(exc)) from None

    @property
    def exactly_once(self) -> bool:
        """Whether ``processing.guarantee`` is exactly-once (either spelling)."""
        return self.processing_guarantee != "at_least_once"

    @property
    def dead_letter_topic_name(self) -> str | None:
        """Where bad records go, when the deserialization handler is ``dead_letter``."""
        if self.deserialization_error != "dead_letter":
            return None
        return self.dead_letter_topic or self.internal_topic("dead-letter")

    def internal_topic(self, suffix: str) -> str:
        """Internal topics are prefixed with the application id, as in Kafka Streams."""
        return f"{self.application_id}-{suffix}"


def setting_names() -> list[str]:
    """The Kafka names of every app setting."""
    return sorted(str(f.alias) for f in AppSettings.model_fields.values() if f.alias)


def _canonical_names() -> dict[str, str]:
    """Every accepted name of a setting (attribute name, other aliases) -> its Kafka name."""
    out: dict[str, str] = {}
    for attr, field in AppSettings.model_fields.items():
        if not field.alias:
            continue
        out[attr] = field.alias
        if isinstance(field.validation_alias, AliasChoices):
            for choice in field.validation_alias.choices:
                if isinstance(choice, str):
                    out[choice] = field.alias
    return out
