"""Topic (log) configuration under Kafka's names, with Kafka's defaults and meanings.

One table, ``TOPIC_CONFIGS``, defines every setting: its Kafka name, type, default, valid
range, the broker-level synonym that sets the default for all topics, and a line of doc.
The broker's CreateTopics / DescribeConfigs / AlterConfigs handlers work from this table.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamkit.log.errors import ConfigError

__all__ = ["BROKER_SYNONYMS", "TOPIC_CONFIGS", "ConfigDef", "LogConfig", "parse_value", "render_value"]

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    attr: str
    kind: str  # "int" | "long" | "double" | "boolean" | "string" | "list"
    default: Any
    synonym: str | None
    doc: str
    check: Callable[[Any], bool] | None = None
    allowed: tuple[str, ...] = ()


def _at_least(lo: float) -> Callable[[Any], bool]:
    return lambda v: v >= lo


def _between(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: lo <= v <= hi


def _minus_one_or_at_least(lo: int) -> Callable[[Any], bool]:
    return lambda v: v == -1 or v >= lo


TOPIC_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef("cleanup.policy", "cleanup_policy", "list", ("delete",), "log.cleanup.policy",
              "delete old segments, compact to the latest value per key, or both",
              allowed=("delete", "compact")),
    ConfigDef("segment.bytes", "segment_bytes", "int", 1073741824, "log.segment.bytes",
              "roll a new segment when the active one would exceed this size", _at_least(14)),
    ConfigDef("segment.ms", "segment_ms", "long", 604800000, "log.roll.ms",
              "roll a new segment when the active one is older than this", _at_least(1)),
    ConfigDef("index.interval.bytes", "index_interval_bytes", "int", 4096,
              "log.index.interval.bytes", "bytes of log between two sparse index entries",
              _at_least(0)),
    ConfigDef("retention.ms", "retention_ms", "long", 604800000, "log.retention.ms",
              "delete segments whose newest record is older than this (-1: never)",
              _minus_one_or_at_least(0)),
    ConfigDef("retention.bytes", "retention_bytes", "long", -1, "log.retention.bytes",
              "delete the oldest segments while the partition is larger than this (-1: never)",
              _minus_one_or_at_least(0)),
    ConfigDef("delete.retention.ms", "delete_retention_ms", "long", 86400000,
              "log.cleaner.delete.retention.ms",
              "how long compaction keeps tombstones after they are written", _at_least(0)),
    ConfigDef("min.compaction.lag.ms", "min_compaction_lag_ms", "long", 0,
              "log.cleaner.min.compaction.lag.ms",
              "records younger than this are never compacted", _at_least(0)),
    ConfigDef("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "double", 0.5,
              "log.cleaner.min.cleanable.ratio",
              "compact when this share of the cleanable log is uncleaned", _between(0.0, 1.0)),
    ConfigDef("flush.messages", "flush_messages", "long", LONG_MAX,
              "log.flush.interval.messages",
              "fsync after this many messages (offsets, not batches) since the last fsync "
              "(1: fsync before every acknowledgement)",
              _at_least(1)),
    ConfigDef("flush.ms", "flush_ms", "long", LONG_MAX, "log.flush.interval.ms",
              "fsync when this long has passed since the last fsync", _at_least(0)),
    ConfigDef("message.timestamp.type", "message_timestamp_type", "string", "CreateTime",
              "log.message.timestamp.type",
              "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's",
              allowed=("CreateTime", "LogAppendTime")),
    ConfigDef("max.message.bytes", "max_message_bytes", "int", 1048588, "message.max.bytes",
              "the largest record batch the log accepts", _at_least(0)),
)

_BY_NAME = {d.name: d for d in TOPIC_CONFIGS}
BROKER_SYNONYMS: dict[str, str] = {d.synonym: d.name for d in TOPIC_CONFIGS if d.synonym}


def parse_value(d: ConfigDef, raw: Any) -> Any:
    """Parse and check one raw setting against its definition; ConfigError if invalid."""
    try:
        if d.kind in ("int", "long"):
            value: Any = int(raw)
            if d.kind == "int" and not -INT_MAX - 1 <= value <= INT_MAX:
                raise ValueError
        elif d.kind == "boolean":
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError
            value = text == "true"
        elif d.kind == "double":
            value = float(raw)
        elif d.kind == "list":
            items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
            value = tuple(sorted({str(i).strip() for i in items if str(i).strip()}))
            if not value or any(v not in d.allowed for v in value):
                raise ValueError
        else:
            value = str(raw)
            if d.allowed and value not in d.allowed:
                raise ValueError
    except (TypeError, ValueError):
        allowed = f" (one of {', '.join(d.allowed)})" if d.allowed else ""
        raise ConfigError(f"invalid value {raw!r} for {d.name}: expected {d.kind}{allowed}") from None
    if d.check is not None and not d.check(value):
        raise ConfigError(f"value {raw!r} for {d.name} is out of range")
    return value


def render_value(d: ConfigDef, value: Any) -> str:
    if d.kind == "list":
        return ",".join(value)
    if d.kind == "boolean":
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The settings one partition log runs with; attribute names mirror Kafka's dotted names."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    max_message_bytes: int = 1048588

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka-named settings (topic names, or broker ``log.*`` synonyms)."""
        changes: dict[str, Any] = {}
        for name, raw in settings.items():
            topic_name = BROKER_SYNONYMS.get(name, name)
            d = _BY_NAME.get(topic_name)
            if d is None:
                close = difflib.get_close_matches(name, [c.name for c in TOPIC_CONFIGS], n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"unknown topic config {name!r}{hint}")
            changes[d.attr] = parse_value(d, raw)
        return dataclasses.replace(base or cls(), **changes)

    def to_kafka(self) -> dict[str, str]:
        return {d.name: render_value(d, getattr(self, d.attr)) for d in TOPIC_CONFIGS}

    def overrides(self, base: LogConfig) -> dict[str, str]:
        """The Kafka-named settings in which this config differs from ``base``."""
        return {
            d.name: render_value(d, getattr(self, d.attr))
            for d in TOPIC_CONFIGS
            if getattr(self, d.attr) != getattr(base, d.attr)
        }

    @staticmethod
    def definition(name: str) -> ConfigDef | None:
        return _BY_NAME.get(name)
