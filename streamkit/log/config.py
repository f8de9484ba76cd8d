"""Topic (log) configuration under Kafka's names, with Kafka's defaults and meanings.

One table, ``TOPIC_CONFIGS``, defines every setting: its Kafka name, type, default, valid
range, the broker-level synonym that sets the default for all topics, and a line of doc.
The broker's CreateTopics / DescribeConfigs / AlterConfigs handlers work from this table.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamkit.hints import did_you_mean
from streamkit.log.errors import ConfigError

__all__ = ["BROKER_SYNONYMS", "BROKER_UNIT_SYNONYMS", "TOPIC_CONFIGS", "ConfigDef", "LogConfig", "parse_value", "render_value"]

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
    # Further broker-level names that set the default, after ``synonym`` (Kafka's order),
    # with the factor that turns their value into this setting's unit.
    more_synonyms: tuple[tuple[str, int], ...] = ()
    # What streamkit does with it when that is not Kafka's full meaning, e.g. "stored;
    # takes effect with replication"; empty when it acts as Kafka does.
    effect: str = ""
    # The broker synonym and value (in its own unit) Kafka reports as DEFAULT_CONFIG when
    # it differs from ``synonym`` (retention.ms <- log.retention.hours=168).
    default_synonym: tuple[str, int] | None = None


def _at_least(lo: float) -> Callable[[Any], bool]:
    return lambda v: v >= lo


def _between(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: lo <= v <= hi


def _minus_one_or_at_least(lo: int) -> Callable[[Any], bool]:
    return lambda v: v == -1 or v >= lo


def _throttled_replicas(value: tuple[str, ...]) -> bool:
    """Kafka's ThrottledReplicaListValidator: ``*`` alone, or ``partition:broker`` pairs."""
    if value == ("*",):
        return True
    for item in value:
        partition, sep, broker = item.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            return False
    return True


def _throttles(replicas: tuple[str, ...], partition: int, broker: int) -> bool:
    """Whether a valid throttled-replicas list names (partition, broker), or is ``*``."""
    if replicas == ("*",):
        return True
    pairs = (item.split(":") for item in replicas)
    return any(int(p) == partition and int(b) == broker for p, b in pairs)


_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?(-IV\d+)?$")
# Acted on by a cluster; a single broker keeps one replica of each partition.
_REPLICATION = "acted on in a cluster (zookeeper.connect); no effect on a single broker"
_TIERED = "stored; takes effect with tiered storage"


TOPIC_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef("cleanup.policy", "cleanup_policy", "list", ("delete",), "log.cleanup.policy",
              "delete old segments, compact to the latest value per key, both, or (empty) "
              "neither: the log is kept whole",
              allowed=("delete", "compact")),
    ConfigDef("segment.bytes", "segment_bytes", "int", 1073741824, "log.segment.bytes",
              "roll a new segment when the active one would exceed this size", _at_least(14)),
    ConfigDef("segment.ms", "segment_ms", "long", 604800000, "log.roll.ms",
              "roll a new segment when the active one is older than this", _at_least(1),
              more_synonyms=(("log.roll.hours", 3_600_000),),
              default_synonym=("log.roll.hours", 168)),
    ConfigDef("index.interval.bytes", "index_interval_bytes", "int", 4096,
              "log.index.interval.bytes", "bytes of log between two sparse index entries",
              _at_least(0)),
    ConfigDef("retention.ms", "retention_ms", "long", 604800000, "log.retention.ms",
              "delete segments whose newest record is older than this (-1: never)",
              _minus_one_or_at_least(0),
              more_synonyms=(("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
              default_synonym=("log.retention.hours", 168)),
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
    ConfigDef("compression.type", "compression_type", "string", "producer", "compression.type",
              "the final codec of the topic's batches: producer keeps what the producer sent; "
              "any other value makes the broker recompress batches on append",
              allowed=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", "compression_gzip_level", "int", -1, "compression.gzip.level",
              "the gzip level recompression uses when compression.type is gzip (-1: 6)",
              lambda v: v == -1 or 1 <= v <= 9),
    ConfigDef("compression.lz4.level", "compression_lz4_level", "int", 9, "compression.lz4.level",
              "the lz4 level recompression uses when compression.type is lz4", _between(1, 17)),
    ConfigDef("compression.zstd.level", "compression_zstd_level", "int", 3, "compression.zstd.level",
              "the zstd level recompression uses when compression.type is zstd",
              _between(-131072, 22)),
    ConfigDef("max.compaction.lag.ms", "max_compaction_lag_ms", "long", LONG_MAX,
              "log.cleaner.max.compaction.lag.ms",
              "a segment whose oldest uncleaned record is older than this is compacted "
              "whatever the dirty ratio", _at_least(1)),
    ConfigDef("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", "long", LONG_MAX,
              "log.message.timestamp.before.max.ms",
              "a CreateTime batch whose timestamps lie further than this in the past is refused "
              "(INVALID_TIMESTAMP)", _at_least(0)),
    ConfigDef("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", "long", LONG_MAX,
              "log.message.timestamp.after.max.ms",
              "a CreateTime batch whose timestamps lie further than this in the future is refused "
              "(INVALID_TIMESTAMP)", _at_least(0)),
    ConfigDef("message.timestamp.difference.max.ms", "message_timestamp_difference_max_ms", "long",
              LONG_MAX, "log.message.timestamp.difference.max.ms",
              "[deprecated in Kafka] the bound on both sides of the broker's time when "
              "message.timestamp.before.max.ms / after.max.ms are left at their default",
              _at_least(0)),
    ConfigDef("segment.index.bytes", "segment_index_bytes", "int", 10485760,
              "log.index.size.max.bytes", "the largest size of a segment's offset index",
              _at_least(4), effect="stored; streamkit's sparse indexes grow as needed"),
    ConfigDef("segment.jitter.ms", "segment_jitter_ms", "long", 0, "log.roll.jitter.ms",
              "the largest random jitter subtracted from segment.ms", _at_least(0),
              more_synonyms=(("log.roll.jitter.hours", 3_600_000),),
              default_synonym=("log.roll.jitter.hours", 0)),
    ConfigDef("file.delete.delay.ms", "file_delete_delay_ms", "long", 60000,
              "log.segment.delete.delay.ms", "how long to wait before deleting a file",
              _at_least(0),
              effect="stored; streamkit deletes segment files at once, readers keep open ones"),
    ConfigDef("preallocate", "preallocate", "boolean", False, "log.preallocate",
              "preallocate segment files on disk", effect="stored; segments grow as written"),
    ConfigDef("min.insync.replicas", "min_insync_replicas", "int", 1, "min.insync.replicas",
              "the fewest in-sync replicas an acks=all write needs", _at_least(1),
              effect=_REPLICATION),
    ConfigDef("unclean.leader.election.enable", "unclean_leader_election_enable", "boolean", False,
              "unclean.leader.election.enable",
              "whether a replica not in the ISR may become leader", effect=_REPLICATION),
    # Topic-only in Kafka (no broker synonym); the rates are the broker settings
    # leader/follower.replication.throttled.rate.
    ConfigDef("leader.replication.throttled.replicas", "leader_replication_throttled_replicas",
              "list", (), None,
              "replicas throttled on the leader side: partition:broker pairs, or *",
              _throttled_replicas, effect=_REPLICATION),
    ConfigDef("follower.replication.throttled.replicas", "follower_replication_throttled_replicas",
              "list", (), None,
              "replicas throttled on the follower side: partition:broker pairs, or *",
              _throttled_replicas, effect=_REPLICATION),
    ConfigDef("remote.storage.enable", "remote_storage_enable", "boolean", False, None,
              "enable tiered storage for the topic", effect=_TIERED),
    ConfigDef("local.retention.ms", "local_retention_ms", "long", -2, "log.local.retention.ms",
              "how long local segments are kept when tiered storage is on (-2: retention.ms)",
              _at_least(-2), effect=_TIERED),
    ConfigDef("local.retention.bytes", "local_retention_bytes", "long", -2,
              "log.local.retention.bytes",
              "how many bytes of local segments are kept when tiered storage is on "
              "(-2: retention.bytes)", _at_least(-2), effect=_TIERED),
    ConfigDef("remote.log.copy.disable", "remote_log_copy_disable", "boolean", False, None,
              "stop copying segments to tiered storage, keeping what is there", effect=_TIERED),
    ConfigDef("remote.log.delete.on.disable", "remote_log_delete_on_disable", "boolean", False,
              None, "delete tiered data when tiered storage is turned off", effect=_TIERED),
    ConfigDef("message.downconversion.enable", "message_downconversion_enable", "boolean", True,
              "log.message.downconversion.enable",
              "[removed in Kafka 4] down-convert batches for old fetch versions",
              effect="stored; accepted for tools that send it, batches are never down-converted"),
    ConfigDef("message.format.version", "message_format_version", "string", "3.0-IV1",
              "log.message.format.version",
              "[deprecated in Kafka] the on-disk message format; always v2 (3.0+)",
              lambda v: bool(_VERSION.match(v)),
              effect="stored; the log always writes record batch v2"),
)

_BY_NAME = {d.name: d for d in TOPIC_CONFIGS}
# compression.type values -> Kafka's codec ids (streamkit.log.batch.Compression)
_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BROKER_SYNONYMS: dict[str, str] = {d.synonym: d.name for d in TOPIC_CONFIGS if d.synonym}
# Broker names in another unit (log.retention.hours...): name -> (topic name, factor to ms).
BROKER_UNIT_SYNONYMS: dict[str, tuple[str, int]] = {
    name: (d.name, factor) for d in TOPIC_CONFIGS for name, factor in d.more_synonyms}


def parse_value(d: ConfigDef, raw: Any) -> Any:
    """Parse and check one raw setting against its definition; ConfigError if invalid. A
    setting whose default is Kafka's null takes an empty value as unset (None)."""
    if d.default is None and str(raw).strip() == "":
        return None
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
            # Kafka keeps a list's order; a repeated item counts once.
            items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
            value = tuple(dict.fromkeys(s for s in (str(i).strip() for i in items) if s))
            if d.allowed and any(v not in d.allowed for v in value):
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
    if value is None:  # Kafka's null: unset, no default
        return ""
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
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    max_compaction_lag_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX
    segment_index_bytes: int = 10485760
    segment_jitter_ms: int = 0
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def timestamp_before_max_ms(self) -> int:
        """message.timestamp.before.max.ms, or the deprecated difference.max.ms when it is
        left at its default (Kafka's transition rule)."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """message.timestamp.after.max.ms, or difference.max.ms as for the before side."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def target_codec(self) -> int | None:
        """The codec the broker recompresses batches to; None for ``producer`` (verbatim)."""
        return _CODECS.get(self.compression_type)

    @property
    def compression_level(self) -> int | None:
        """The level for ``target_codec`` (None: the codec's own default)."""
        level = {"gzip": self.compression_gzip_level, "lz4": self.compression_lz4_level,
                 "zstd": self.compression_zstd_level}.get(self.compression_type)
        return None if level is None or level == -1 else level

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def leader_throttled(self, partition: int, broker: int) -> bool:
        """Whether leader.replication.throttled.replicas throttles replica ``broker`` of
        ``partition`` on the leader side (under leader.replication.throttled.rate)."""
        return _throttles(self.leader_replication_throttled_replicas, partition, broker)

    def follower_throttled(self, partition: int, broker: int) -> bool:
        """Whether follower.replication.throttled.replicas throttles replica ``broker`` of
        ``partition`` on the follower side (under follower.replication.throttled.rate)."""
        return _throttles(self.follower_replication_throttled_replicas, partition, broker)

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka-named settings (topic names, or broker ``log.*`` synonyms)."""
        changes: dict[str, Any] = {}
        for name, raw in settings.items():
            topic_name = BROKER_SYNONYMS.get(name, name)
            if name in BROKER_UNIT_SYNONYMS:
                topic_name, factor = BROKER_UNIT_SYNONYMS[name]
                try:
                    raw = int(raw) * factor
                except (TypeError, ValueError):
                    raise ConfigError(f"invalid value {raw!r} for {name}: expected long") from None
            d = _BY_NAME.get(topic_name)
            if d is None:
                hint = did_you_mean(name, (c.name for c in TOPIC_CONFIGS))
                raise ConfigError(f"unknown topic config {name!r}{hint}")
            changes[d.attr] = parse_value(d, raw)
        config = dataclasses.replace(base or cls(), **changes)
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms:  # Kafka's validateValues
            raise ConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({config.min_compaction_lag_ms}) "
                f"> max.compaction.lag.ms ({config.max_compaction_lag_ms})")
        return config

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
