"""Group configs: the settings an admin sets per group on Kafka 4's GROUP config resource
(IncrementalAlterConfigs / DescribeConfigs, resource type 32), under Kafka's names.

Each value must stay within the broker's ``group.<kind>.min/max.*`` bounds, and a session
timeout must exceed its heartbeat interval (Kafka's GroupConfig.validate). A group without
an override gets the broker's ``group.<kind>.*`` default. Configs belong to a group id, not to
a live group: they may be set before the group exists and outlive its members, as in Kafka.

Stored durably in ``{data_dir}/.meta/group_configs.json`` (written atomically, fsynced).
The coordinators read them through ``GroupConfigStore.get(group_id)``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamkit.broker.config import BrokerConfig
from streamkit.hints import did_you_mean
from streamkit.log.checkpoint import write_atomically
from streamkit.log.errors import ConfigError

__all__ = ["GROUP_CONFIG_DEFS", "GroupConfig", "GroupConfigDef", "GroupConfigStore", "validate_group_configs"]


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    attr: str
    kind: str  # "int" | "string"
    broker_default: str | None  # the broker setting that gives the default (its synonym)
    bounds: tuple[str | None, str | None] | None  # broker settings: inclusive min and max
    default: int | str
    doc: str
    allowed: tuple[str, ...] = ()


GROUP_CONFIG_DEFS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef("consumer.session.timeout.ms", "consumer_session_timeout_ms", "int",
                   "group.consumer.session.timeout.ms",
                   ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
                   45000, "how long a consumer-protocol member may go without a heartbeat"),
    GroupConfigDef("consumer.heartbeat.interval.ms", "consumer_heartbeat_interval_ms", "int",
                   "group.consumer.heartbeat.interval.ms",
                   ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
                   5000, "how often a consumer-protocol member heartbeats"),
    GroupConfigDef("share.session.timeout.ms", "share_session_timeout_ms", "int",
                   "group.share.session.timeout.ms",
                   ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
                   45000, "how long a share group member may go without a heartbeat"),
    GroupConfigDef("share.heartbeat.interval.ms", "share_heartbeat_interval_ms", "int",
                   "group.share.heartbeat.interval.ms",
                   ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
                   5000, "how often a share group member heartbeats"),
    GroupConfigDef("share.record.lock.duration.ms", "share_record_lock_duration_ms", "int",
                   "group.share.record.lock.duration.ms",
                   ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
                   30000, "how long a share consumer holds a record it acquired"),
    GroupConfigDef("share.auto.offset.reset", "share_auto_offset_reset", "string", None, None,
                   "latest", "where a share group starts on a partition with no state: earliest, "
                   "latest, or by_duration:<ISO-8601 duration>"),
    GroupConfigDef("share.isolation.level", "share_isolation_level", "string", None, None,
                   "read_uncommitted", "whether a share group reads uncommitted transactional records",
                   allowed=("read_committed", "read_uncommitted")),
    GroupConfigDef("streams.session.timeout.ms", "streams_session_timeout_ms", "int",
                   "group.streams.session.timeout.ms",
                   ("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
                   45000, "how long a streams group member may go without a heartbeat"),
    GroupConfigDef("streams.heartbeat.interval.ms", "streams_heartbeat_interval_ms", "int",
                   "group.streams.heartbeat.interval.ms",
                   ("group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
                   5000, "how often a streams group member heartbeats"),
    GroupConfigDef("streams.num.standby.replicas", "streams_num_standby_replicas", "int",
                   "group.streams.num.standby.replicas", (None, "group.streams.max.standby.replicas"),
                   0, "standby replicas of each task of a streams group"),
)
_BY_NAME = {d.name: d for d in GROUP_CONFIG_DEFS}
_DURATION = re.compile(r"^P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?$")
# a session timeout must exceed its heartbeat interval (Kafka's GroupConfig.validate)
_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
          ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
          ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The effective configs of one group (overrides over the broker's defaults)."""

    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_record_lock_duration_ms: int = 30000
    share_auto_offset_reset: str = "latest"
    share_isolation_level: str = "read_uncommitted"
    streams_session_timeout_ms: int = 45000
    streams_heartbeat_interval_ms: int = 5000
    streams_num_standby_replicas: int = 0

    def to_kafka(self) -> dict[str, str]:
        return {d.name: str(getattr(self, d.attr)) for d in GROUP_CONFIG_DEFS}


def broker_defaults(broker: BrokerConfig) -> GroupConfig:
    """Every group's config before overrides: the broker's group.<kind>.* settings."""
    values = broker.to_kafka()
    defaults: dict[str, Any] = {d.attr: int(values[d.broker_default]) for d in GROUP_CONFIG_DEFS
                                if d.broker_default is not None}
    return GroupConfig(**defaults)


def _parse(d: GroupConfigDef, raw: str, broker: dict[str, str]) -> int | str:
    if d.kind == "int":
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"invalid value {raw!r} for {d.name}: expected int") from None
        lo_name, hi_name = d.bounds or (None, None)
        lo = int(broker[lo_name]) if lo_name else 0
        if value < lo:
            raise ConfigError(f"{d.name} must be greater than or equal to {lo_name or 0} ({lo})")
        if hi_name and value > int(broker[hi_name]):
            raise ConfigError(f"{d.name} must be less than or equal to {hi_name} ({broker[hi_name]})")
        return value
    text = str(raw).strip()
    if d.allowed and text not in d.allowed:
        raise ConfigError(f"invalid value {raw!r} for {d.name}: one of {', '.join(d.allowed)}")
    if d.name == "share.auto.offset.reset":
        kind, _, duration = text.partition(":")
        if not (text in ("earliest", "latest") or (kind == "by_duration" and _DURATION.match(duration)
                                                      and duration != "P")):
            raise ConfigError(f"invalid value {raw!r} for {d.name}: earliest, latest or "
                              "by_duration:<ISO-8601 duration, e.g. PT1H>")
    return text


def validate_group_configs(overrides: dict[str, str], broker: BrokerConfig) -> GroupConfig:
    """The effective GroupConfig for ``overrides``; ConfigError names the first problem."""
    values = broker.to_kafka()
    changes: dict[str, Any] = {}
    for name, raw in overrides.items():
        d = _BY_NAME.get(name)
        if d is None:
            raise ConfigError(f"unknown group config {name!r}{did_you_mean(name, _BY_NAME)}")
        changes[d.attr] = _parse(d, raw, values)
    config = dataclasses.replace(broker_defaults(broker), **changes)
    for session, heartbeat in _PAIRS:
        if getattr(config, _BY_NAME[session].attr) <= getattr(config, _BY_NAME[heartbeat].attr):
            raise ConfigError(f"{session} must be greater than {heartbeat}")
    return config


class GroupConfigStore:
    """Per-group config overrides, durable under the data directory."""

    def __init__(self, meta_dir: Path, broker: BrokerConfig) -> None:
        self.path = meta_dir / "group_configs.json"
        self.broker = broker
        self._defaults = broker_defaults(broker)
        self._overrides: dict[str, dict[str, str]] = {}
        self._effective: dict[str, GroupConfig] = {}

    def load(self) -> None:
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        for group_id, overrides in data.get("groups", {}).items():
            try:
                self._effective[group_id] = validate_group_configs(overrides, self.broker)
            except ConfigError:
                # the broker's bounds changed since: keep the stored values, as Kafka does
                stored: dict[str, Any] = {
                    _BY_NAME[k].attr: (int(v) if _BY_NAME[k].kind == "int" else v)
                    for k, v in overrides.items() if k in _BY_NAME}
                self._effective[group_id] = dataclasses.replace(self._defaults, **stored)
            self._overrides[group_id] = dict(overrides)

    def get(self, group_id: str) -> GroupConfig:
        """The effective configs of ``group_id`` (the broker's defaults when none were set)."""
        return self._effective.get(group_id, self._defaults)

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._overrides.get(group_id, {}))

    @property
    def defaults(self) -> GroupConfig:
        return self._defaults

    def set_overrides(self, group_id: str, overrides: dict[str, str], validate_only: bool = False) -> None:
        """Replace ``group_id``'s overrides; ConfigError if any is invalid (nothing changes)."""
        if not group_id:
            raise ConfigError("a group config needs a group id")
        config = validate_group_configs(overrides, self.broker)
        if validate_only:
            return
        if overrides:
            self._overrides[group_id] = dict(overrides)
            self._effective[group_id] = config
        else:
            self._overrides.pop(group_id, None)
            self._effective.pop(group_id, None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps({"groups": self._overrides}, sort_keys=True).encode())
