"""App settings: one pydantic object, under Kafka Streams' and the Kafka clients' names.

``App(id, broker=..., data_dir=..., processing_guarantee=..., config={...})``: the ``config``
dict uses the dotted names users know from Kafka Streams (``commit.interval.ms``,
``num.standby.replicas``, ``state.dir``, ``processing.guarantee``...) and from the consumer
(``session.timeout.ms``, ``max.poll.records``, ``auto.offset.reset``...). Unknown names and bad
values raise ``SettingsError`` with one line naming the setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["AppSettings", "SettingsError"]


class SettingsError(ValueError):
    """A bad app setting; the message names it."""


class AppSettings(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    application_id: str = Field(alias="application.id", min_length=1, pattern=r"^[a-zA-Z0-9._-]+$")
    bootstrap_servers: str | None = Field(default=None, alias="bootstrap.servers")
    processing_guarantee: Literal["at_least_once", "exactly_once", "exactly_once_v2"] = Field(
        default="at_least_once", alias="processing.guarantee")
    state_dir: Path | None = Field(default=None, alias="state.dir")
    commit_interval_ms: int = Field(default=1000, alias="commit.interval.ms", ge=1)
    num_standby_replicas: int = Field(default=0, alias="num.standby.replicas", ge=0)
    session_timeout_ms: int = Field(default=10000, alias="session.timeout.ms", ge=1)
    heartbeat_interval_ms: int = Field(default=3000, alias="heartbeat.interval.ms", ge=1)
    max_poll_interval_ms: int = Field(default=300000, alias="max.poll.interval.ms", ge=1)
    max_poll_records: int = Field(default=10000, alias="max.poll.records", ge=1)
    auto_offset_reset: Literal["earliest", "latest"] = Field(default="earliest", alias="auto.offset.reset")
    num_partitions: int = Field(default=4, alias="num.partitions", ge=1)
    replication_factor: int = Field(default=1, alias="replication.factor", ge=1)
    deserialization_error: Literal["fail", "skip", "dead_letter"] = Field(
        default="fail", alias="deserialization.exception.handler")
    dead_letter_topic: str | None = Field(default=None, alias="errors.deadletterqueue.topic.name")
    late_records_topic: str | None = Field(default=None, alias="late.records.topic.name")
    window_idle_close_ms: int = Field(default=0, alias="window.idle.close.ms", ge=0)
    cache_max_bytes_buffering: int = Field(default=10 * 1024 * 1024, alias="statestore.cache.max.bytes", ge=0)
    producer_linger_ms: int = Field(default=5, alias="linger.ms", ge=0)
    producer_acks: Literal["0", "1", "all", "-1"] = Field(default="all", alias="acks")
    web_port: int | None = Field(default=None, alias="web.port")
    # No Kafka client has this one (their clients retry forever): how long a worker retries
    # an unreachable broker at start before it gives up with a one-line error.
    bootstrap_timeout_ms: int = Field(default=60000, alias="bootstrap.timeout.ms", ge=0)

    @classmethod
    def build(cls, values: dict[str, Any]) -> AppSettings:
        """Validate ``values`` (Kafka names or attribute names); one-line errors."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "settings"
            if first["type"] == "extra_forbidden":
                raise SettingsError(f"unknown app setting {where!r}") from None
            raise SettingsError(f"bad value for app setting {where!r}: {first['msg']}") from None

    @property
    def exactly_once(self) -> bool:
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
