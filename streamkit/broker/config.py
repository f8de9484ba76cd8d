"""Broker settings under Kafka's names (server.properties), with Kafka's defaults.

Sources, later wins: defaults, a ``server.properties``-style file (``key=value`` lines, ``#``
comments), then ``--set key=value`` overrides. Broker-wide topic defaults use Kafka's
``log.*`` synonyms (``log.retention.ms``, ``log.segment.bytes``, ``log.flush.interval.messages``,
``message.max.bytes``...) and become the ``LogConfig`` every topic starts from; the
``.hours``/``.minutes`` variants Kafka accepts are converted to milliseconds.

So that a Kafka ``server.properties`` (ZooKeeper or KRaft) can be reused as it is:

- ``listeners`` (its one PLAINTEXT client listener) gives the bind host and port,
  ``advertised.listeners`` the host and port put in metadata, ``log.dirs`` (or ``log.dir``)
  the data directory; ``--host``, ``--port`` and ``--data-dir`` on the command line win.
- Kafka broker settings with no meaning for a single-node, plaintext broker (threads,
  ZooKeeper, KRaft controller, replication, TLS/SASL, ...: ``KAFKA_IGNORED``) are logged
  in one warning line and ignored.
- Any other name is an error: most likely a typo, which silently ignoring would hide.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamkit.hints import did_you_mean
from streamkit.log.config import BROKER_SYNONYMS, ConfigDef, LogConfig, parse_value, render_value
from streamkit.log.errors import ConfigError


def _names(value: str) -> list[str]:
    """A comma-separated list setting, in the order given."""
    return [v.strip() for v in str(value).split(",") if v.strip()]

__all__ = ["BROKER_CONFIGS", "KAFKA_IGNORED", "KAFKA_IGNORED_PREFIXES", "BrokerConfig", "read_properties"]

log = logging.getLogger(__name__)


def _at_least(lo: float) -> Any:
    return lambda v: v >= lo


BROKER_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef("node.id", "node_id", "int", 0, None, "this broker's id in metadata", _at_least(0)),
    ConfigDef("listeners", "listeners", "string", "", None,
              "NAME://host:port to bind (one PLAINTEXT listener; --host/--port win)"),
    ConfigDef("advertised.listeners", "advertised_listeners", "string", "", None,
              "NAME://host:port clients are told to connect to (default: the bound address)"),
    ConfigDef("log.dirs", "log_dirs", "string", "", None,
              "the data directory (one; --data-dir wins; default data/broker)"),
    ConfigDef("advertised.host.name", "advertised_host", "string", "", None,
              "host name clients are told to connect to (default: the bind host)"),
    ConfigDef("advertised.port", "advertised_port", "int", 0, None,
              "port clients are told to connect to (default: the bound port)", _at_least(0)),
    ConfigDef("num.partitions", "num_partitions", "int", 1, None,
              "partitions of an auto-created topic", _at_least(1)),
    ConfigDef("default.replication.factor", "default_replication_factor", "int", 1, None,
              "replication factor of an auto-created topic (only 1 is supported)", _at_least(1)),
    ConfigDef("auto.create.topics.enable", "auto_create_topics_enable", "boolean", True, None,
              "create a topic when a client asks for its metadata"),
    ConfigDef("delete.topic.enable", "delete_topic_enable", "boolean", True, None,
              "allow DeleteTopics"),
    ConfigDef("socket.request.max.bytes", "socket_request_max_bytes", "int", 104857600, None,
              "the largest request frame; larger ones close the connection", _at_least(64)),
    ConfigDef("queued.max.request.bytes", "queued_max_request_bytes", "long", 524288000, None,
              "bytes all connections together may hold in requests not yet answered; when "
              "reached the broker stops reading sockets until memory frees (-1: unbounded)",
              lambda v: v == -1 or v >= 1),
    ConfigDef("fetch.max.bytes", "fetch_max_bytes", "int", 57671680, None,
              "upper bound on the bytes one Fetch response returns", _at_least(1024)),
    ConfigDef("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms", "int", 3000,
              None, "how long the first rebalance of an empty group waits for more members",
              _at_least(0)),
    ConfigDef("group.min.session.timeout.ms", "group_min_session_timeout_ms", "int", 6000, None,
              "smallest session.timeout.ms a consumer may ask for", _at_least(1)),
    ConfigDef("group.max.session.timeout.ms", "group_max_session_timeout_ms", "int", 1800000,
              None, "largest session.timeout.ms a consumer may ask for", _at_least(1)),
    ConfigDef("group.max.size", "group_max_size", "int", 2147483647, None,
              "most members one consumer group may have", _at_least(1)),
    # KIP-848 / KIP-932 / KIP-1071 group defaults and the bounds a group config
    # (IncrementalAlterConfigs on a GROUP resource) must stay within; Kafka 4's values.
    ConfigDef("group.consumer.session.timeout.ms", "group_consumer_session_timeout_ms", "int", 45000,
              None, "session timeout of consumer-protocol group members", _at_least(1)),
    ConfigDef("group.consumer.min.session.timeout.ms", "group_consumer_min_session_timeout_ms", "int",
              45000, None, "smallest consumer.session.timeout.ms", _at_least(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", "group_consumer_max_session_timeout_ms", "int",
              60000, None, "largest consumer.session.timeout.ms", _at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", "group_consumer_heartbeat_interval_ms", "int",
              5000, None, "heartbeat interval of consumer-protocol group members", _at_least(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", "group_consumer_min_heartbeat_interval_ms",
              "int", 5000, None, "smallest consumer.heartbeat.interval.ms", _at_least(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", "group_consumer_max_heartbeat_interval_ms",
              "int", 15000, None, "largest consumer.heartbeat.interval.ms", _at_least(1)),
    ConfigDef("group.share.session.timeout.ms", "group_share_session_timeout_ms", "int", 45000,
              None, "session timeout of share group members", _at_least(1)),
    ConfigDef("group.share.min.session.timeout.ms", "group_share_min_session_timeout_ms", "int",
              45000, None, "smallest share.session.timeout.ms", _at_least(1)),
    ConfigDef("group.share.max.session.timeout.ms", "group_share_max_session_timeout_ms", "int",
              60000, None, "largest share.session.timeout.ms", _at_least(1)),
    ConfigDef("group.share.heartbeat.interval.ms", "group_share_heartbeat_interval_ms", "int", 5000,
              None, "heartbeat interval of share group members", _at_least(1)),
    ConfigDef("group.share.min.heartbeat.interval.ms", "group_share_min_heartbeat_interval_ms", "int",
              5000, None, "smallest share.heartbeat.interval.ms", _at_least(1)),
    ConfigDef("group.share.max.heartbeat.interval.ms", "group_share_max_heartbeat_interval_ms", "int",
              15000, None, "largest share.heartbeat.interval.ms", _at_least(1)),
    ConfigDef("group.share.record.lock.duration.ms", "group_share_record_lock_duration_ms", "int",
              30000, None, "how long a share consumer holds an acquired record", _at_least(1000)),
    ConfigDef("group.share.min.record.lock.duration.ms", "group_share_min_record_lock_duration_ms",
              "int", 15000, None, "smallest share.record.lock.duration.ms", _at_least(1000)),
    ConfigDef("group.share.max.record.lock.duration.ms", "group_share_max_record_lock_duration_ms",
              "int", 60000, None, "largest share.record.lock.duration.ms", _at_least(1000)),
    ConfigDef("group.streams.session.timeout.ms", "group_streams_session_timeout_ms", "int", 45000,
              None, "session timeout of streams group members", _at_least(1)),
    ConfigDef("group.streams.min.session.timeout.ms", "group_streams_min_session_timeout_ms", "int",
              45000, None, "smallest streams.session.timeout.ms", _at_least(1)),
    ConfigDef("group.streams.max.session.timeout.ms", "group_streams_max_session_timeout_ms", "int",
              60000, None, "largest streams.session.timeout.ms", _at_least(1)),
    ConfigDef("group.streams.heartbeat.interval.ms", "group_streams_heartbeat_interval_ms", "int",
              5000, None, "heartbeat interval of streams group members", _at_least(1)),
    ConfigDef("group.streams.min.heartbeat.interval.ms", "group_streams_min_heartbeat_interval_ms",
              "int", 5000, None, "smallest streams.heartbeat.interval.ms", _at_least(1)),
    ConfigDef("group.streams.max.heartbeat.interval.ms", "group_streams_max_heartbeat_interval_ms",
              "int", 15000, None, "largest streams.heartbeat.interval.ms", _at_least(1)),
    ConfigDef("group.streams.num.standby.replicas", "group_streams_num_standby_replicas", "int", 0,
              None, "standby replicas of a streams group's tasks", _at_least(0)),
    ConfigDef("group.streams.max.standby.replicas", "group_streams_max_standby_replicas", "int", 2,
              None, "largest streams.num.standby.replicas", _at_least(0)),
    # A string, not a "list": list values are kept sorted, and here the first is the default.
    ConfigDef("group.consumer.assignors", "group_consumer_assignors", "string", "uniform,range",
              None, "server-side assignors of consumer groups (KIP-848); the first is the default",
              lambda v: bool(_names(v)) and all(a in ("uniform", "range") for a in _names(v))),
    ConfigDef("group.consumer.max.size", "group_consumer_max_size", "int", 2147483647, None,
              "most members one consumer group (KIP-848) may have", _at_least(1)),
    ConfigDef("group.consumer.migration.policy", "group_consumer_migration_policy", "string",
              "bidirectional", None,
              "online conversions between classic and consumer groups: upgrade (a consumer-protocol "
              "member joins a classic group), downgrade (the last one leaves a group of classic "
              "members), bidirectional or disabled",
              allowed=("disabled", "upgrade", "downgrade", "bidirectional")),
    ConfigDef("offsets.topic.num.partitions", "offsets_topic_num_partitions", "int", 50, None,
              "partitions of __consumer_offsets (fixed once created)", _at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", "offsets_topic_segment_bytes", "int", 104857600,
              None, "segment size of __consumer_offsets", _at_least(1024)),
    ConfigDef("offset.metadata.max.bytes", "offset_metadata_max_bytes", "int", 4096, None,
              "largest metadata string of a committed offset", _at_least(0)),
    ConfigDef("log.retention.check.interval.ms", "log_retention_check_interval_ms", "long",
              300000, None, "how often retention runs", _at_least(1)),
    ConfigDef("log.flush.scheduler.interval.ms", "log_flush_scheduler_interval_ms", "long", 1000,
              None, "how often flush.ms deadlines are checked", _at_least(1)),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "log_flush_offset_checkpoint_interval_ms",
              "int", 60000, None, "how often recovery points are written", _at_least(0)),
    ConfigDef("log.cleaner.enable", "log_cleaner_enable", "boolean", True, None,
              "run the compaction cleaner"),
    ConfigDef("log.cleaner.backoff.ms", "log_cleaner_backoff_ms", "long", 15000, None,
              "pause between compaction passes", _at_least(0)),
    ConfigDef("producer.id.expiration.ms", "producer_id_expiration_ms", "int", 86400000, None,
              "how long a partition keeps an idempotent producer's state after its last batch",
              _at_least(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", "producer_id_expiration_check_interval_ms",
              "int", 600000, None, "how often expired producer state is removed", _at_least(1)),
    ConfigDef("transaction.state.log.num.partitions", "transaction_state_log_num_partitions", "int",
              50, None, "partitions of __transaction_state (fixed once created)", _at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", "transaction_state_log_segment_bytes", "int",
              104857600, None, "segment size of __transaction_state", _at_least(1024)),
    ConfigDef("transaction.max.timeout.ms", "transaction_max_timeout_ms", "int", 900000, None,
              "largest transaction.timeout.ms a transactional producer may ask for", _at_least(1)),
    ConfigDef("transactional.id.expiration.ms", "transactional_id_expiration_ms", "int", 604800000,
              None, "how long the coordinator keeps an idle transactional.id (no open "
              "transaction) before forgetting it", _at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms",
              "transaction_abort_timed_out_transaction_cleanup_interval_ms", "int", 10000, None,
              "how often transactions past their transaction.timeout.ms are aborted", _at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms",
              "transaction_remove_expired_transaction_cleanup_interval_ms", "int", 3600000, None,
              "how often expired transactional.ids are removed", _at_least(1)),
    ConfigDef("group.share.delivery.count.limit", "group_share_delivery_count_limit", "int", 5,
              None, "deliveries of one record before a share group archives it", _at_least(2)),
    ConfigDef("group.share.partition.max.record.locks", "group_share_partition_max_record_locks",
              "int", 2000, None, "most records in one share-partition's in-flight window",
              _at_least(100)),
    ConfigDef("share.coordinator.state.topic.num.partitions",
              "share_coordinator_state_topic_num_partitions", "int", 50, None,
              "partitions of __share_group_state (fixed once created)", _at_least(1)),
)

# Kafka broker settings that have no meaning here: a single node (no replication, no
# ZooKeeper or KRaft quorum), plaintext only, asyncio instead of thread pools, no quotas or
# ACLs, and topic defaults streamkit does not implement. A server.properties carrying them
# still starts the broker; each is named in one warning.
KAFKA_IGNORED: frozenset[str] = frozenset({
    # threads and sockets
    "num.network.threads", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "num.replica.alter.log.dirs.threads", "background.threads", "queued.max.requests",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "socket.listen.backlog.size",
    "connections.max.idle.ms", "connections.max.reauth.ms", "max.connections",
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connection.creation.rate",
    "request.timeout.ms", "connection.failed.authentication.delay.ms",
    # KRaft / ZooKeeper roles and listeners
    "process.roles", "inter.broker.listener.name", "listener.security.protocol.map",
    "early.start.listeners", "initial.broker.registration.timeout.ms", "broker.heartbeat.interval.ms",
    "broker.session.timeout.ms", "broker.id.generation.enable", "reserved.broker.max.id", "broker.rack",
    "inter.broker.protocol.version", "eligible.leader.replicas.enable",
    "auto.leader.rebalance.enable",
    "node.id.generation.enable",
    # internal topics' replication and the transaction / share coordinators
    "offsets.topic.replication.factor", "offsets.topic.compression.codec", "offsets.commit.required.acks",
    "offsets.commit.timeout.ms", "offsets.load.buffer.size", "offsets.retention.minutes",
    "offsets.retention.check.interval.ms", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "transaction.state.log.load.buffer.size",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
    "group.coordinator.rebalance.protocols", "group.coordinator.threads",
    # purgatories, fetch sessions, topic defaults not implemented here
    "fetch.purgatory.purge.interval.requests", "producer.purgatory.purge.interval.requests",
    "delete.records.purgatory.purge.interval.requests", "max.incremental.fetch.session.cache.slots",
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second", "log.dir.failure.timeout.ms",
    "log.flush.start.offset.checkpoint.interval.ms",
    # security, quotas, metrics, plugins
    "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
    "principal.builder.class", "security.inter.broker.protocol", "client.quota.callback.class",
    "create.topic.policy.class.name", "alter.config.policy.class.name", "config.providers",
    "metric.reporters", "auto.include.jmx.reporter",
})
KAFKA_IGNORED_PREFIXES: tuple[str, ...] = (
    "zookeeper.", "controller.", "metadata.", "replica.", "remote.log.", "ssl.", "sasl.",
    "listener.name.", "controlled.shutdown.", "leader.imbalance.", "quota.", "delegation.token.",
    "password.encoder.", "metrics.", "kafka.metrics.", "share.", "group.share.", "group.consumer.",
    "transaction.", "unstable.",
)
_BY_NAME = {d.name: d for d in BROKER_CONFIGS}
_BROKER_ALIASES = {"broker.id": "node.id", "log.dir": "log.dirs"}
_PLAINTEXT = "PLAINTEXT"
_TIME_UNITS = {".hours": 3_600_000, ".minutes": 60_000}


def read_properties(path: Path) -> dict[str, str]:
    """Parse a server.properties file: ``key=value`` (or ``key: value``) lines, # comments."""
    out: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}:{number}: expected key=value, got {line!r}")
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def _normalise(name: str, raw: Any) -> tuple[str, Any]:
    """Map log.retention.hours style names onto their .ms twin."""
    for suffix, factor in _TIME_UNITS.items():
        if name.endswith(suffix):
            ms_name = name[: -len(suffix)] + ".ms"
            if ms_name in BROKER_SYNONYMS:
                try:
                    return ms_name, int(raw) * factor
                except ValueError:
                    raise ConfigError(f"invalid value {raw!r} for {name}: expected long") from None
    if name == "log.roll.hours":
        return "log.roll.ms", int(raw) * 3_600_000
    return _BROKER_ALIASES.get(name, name), raw


def _is_ignored(name: str) -> bool:
    return name in KAFKA_IGNORED or name.startswith(KAFKA_IGNORED_PREFIXES)


def _unknown(name: str) -> ConfigError:
    known = [*_BY_NAME, *BROKER_SYNONYMS, *_BROKER_ALIASES]
    return ConfigError(f"unknown broker config {name!r}{did_you_mean(name, known)}")


def _parse_listeners(text: str, setting: str, protocols: Mapping[str, str],
                     controllers: set[str]) -> dict[str, tuple[str, int]]:
    """The client listeners of a Kafka ``listeners`` value, by name: ``NAME://host:port``,
    an empty host meaning every interface. Controller listeners are left out (a KRaft
    combined node lists one); a client listener that is not PLAINTEXT is refused."""
    out: dict[str, tuple[str, int]] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not sep or not colon or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise ConfigError(f"invalid {setting} entry {item!r}: expected NAME://host:port")
        name = name.upper()
        if name in controllers:
            continue
        protocol = protocols.get(name, name)
        if protocol != _PLAINTEXT:
            raise ConfigError(f"{setting}: listener {item!r} uses {protocol}; streamkit serves PLAINTEXT only")
        out[name] = (host.strip("[]"), int(port_text))
    return out


def _protocol_map(settings: Mapping[str, Any]) -> dict[str, str]:
    raw = str(settings.get("listener.security.protocol.map", ""))
    pairs = (p.split(":", 1) for p in raw.split(",") if ":" in p)
    return {k.strip().upper(): v.strip().upper() for k, v in pairs}


def _controller_names(settings: Mapping[str, Any]) -> set[str]:
    raw = str(settings.get("controller.listener.names", "CONTROLLER"))
    return {n.strip().upper() for n in raw.split(",") if n.strip()}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int = 0
    advertised_host: str = ""
    advertised_port: int = 0
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104857600
    queued_max_request_bytes: int = 524288000
    fetch_max_bytes: int = 57671680
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2147483647
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_share_session_timeout_ms: int = 45000
    group_share_min_session_timeout_ms: int = 45000
    group_share_max_session_timeout_ms: int = 60000
    group_share_heartbeat_interval_ms: int = 5000
    group_share_min_heartbeat_interval_ms: int = 5000
    group_share_max_heartbeat_interval_ms: int = 15000
    group_share_record_lock_duration_ms: int = 30000
    group_share_min_record_lock_duration_ms: int = 15000
    group_share_max_record_lock_duration_ms: int = 60000
    group_streams_session_timeout_ms: int = 45000
    group_streams_min_session_timeout_ms: int = 45000
    group_streams_max_session_timeout_ms: int = 60000
    group_streams_heartbeat_interval_ms: int = 5000
    group_streams_min_heartbeat_interval_ms: int = 5000
    group_streams_max_heartbeat_interval_ms: int = 15000
    group_streams_num_standby_replicas: int = 0
    group_streams_max_standby_replicas: int = 2
    group_consumer_assignors: str = "uniform,range"
    group_consumer_max_size: int = 2147483647
    group_consumer_migration_policy: str = "bidirectional"
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104857600
    offset_metadata_max_bytes: int = 4096
    log_retention_check_interval_ms: int = 300000
    log_flush_scheduler_interval_ms: int = 1000
    log_flush_offset_checkpoint_interval_ms: int = 60000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_interval_ms: int = 600000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_segment_bytes: int = 104857600
    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2000
    share_coordinator_state_topic_num_partitions: int = 50
    listeners: str = ""
    advertised_listeners: str = ""
    log_dirs: str = ""
    # Resolved from ``listeners`` by from_kafka: where to bind ("" / -1: not configured).
    listener_host: str = ""
    listener_port: int = -1
    topic_defaults: LogConfig = field(default_factory=LogConfig)

    @property
    def data_dir(self) -> Path | None:
        """The data directory from log.dirs / log.dir, if one was configured."""
        return Path(self.log_dirs.strip()) if self.log_dirs.strip() else None

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any]) -> BrokerConfig:
        """Build from Kafka-named broker settings. Kafka settings that do not apply here are
        logged and ignored; any other unknown name raises ConfigError."""
        settings = {name.strip(): raw for name, raw in settings.items()}
        broker: dict[str, Any] = {}
        log_settings: dict[str, Any] = {}
        ignored: list[str] = []
        for original, raw in settings.items():
            if original == "log.dir" and "log.dirs" in settings:
                continue  # Kafka: log.dirs wins over log.dir
            name, raw = _normalise(original, raw)
            if name in BROKER_SYNONYMS:
                log_settings[name] = raw
                continue
            d = _BY_NAME.get(name)
            if d is None:
                if not _is_ignored(name):
                    raise _unknown(name)
                ignored.append(name)
                continue
            broker[d.attr] = parse_value(d, raw)
        if ignored:
            log.warning("ignoring Kafka settings that do not apply to streamkit: %s", ", ".join(ignored))
        config = dataclasses.replace(cls(), **broker)
        if config.default_replication_factor != 1:
            raise ConfigError("default.replication.factor must be 1: replication is not supported yet")
        if "," in config.log_dirs:
            raise ConfigError(f"log.dirs lists several directories ({config.log_dirs}); streamkit uses one")
        config = config._with_listeners(_protocol_map(settings), _controller_names(settings), set(settings))
        return dataclasses.replace(config, topic_defaults=LogConfig.from_kafka(log_settings))

    def _with_listeners(self, protocols: Mapping[str, str], controllers: set[str],
                        given: set[str]) -> BrokerConfig:
        """Resolve listeners / advertised.listeners (advertised.host.name and
        advertised.port, Kafka's older names, win where given)."""
        out = self
        bound: dict[str, tuple[str, int]] = {}
        if self.listeners:
            bound = _parse_listeners(self.listeners, "listeners", protocols, controllers)
            if len(bound) != 1:
                raise ConfigError(f"listeners must have exactly one PLAINTEXT client listener, got {self.listeners!r}")
            host, port = next(iter(bound.values()))
            out = dataclasses.replace(out, listener_host=host or "0.0.0.0", listener_port=port)
        if self.advertised_listeners:
            told = _parse_listeners(self.advertised_listeners, "advertised.listeners", protocols, controllers)
            pick = told.get(next(iter(bound))) if bound else None
            if pick is None:
                if len(told) != 1:
                    raise ConfigError("advertised.listeners must name the PLAINTEXT client listener, got "
                                      f"{self.advertised_listeners!r}")
                pick = next(iter(told.values()))
            host, port = pick
            if not host and "advertised.host.name" not in given:
                raise ConfigError(f"advertised.listeners needs a host name, got {self.advertised_listeners!r}")
            if "advertised.host.name" not in given:
                out = dataclasses.replace(out, advertised_host=host)
            if "advertised.port" not in given:
                out = dataclasses.replace(out, advertised_port=port)
        return out

    def to_kafka(self) -> dict[str, str]:
        """Every broker setting by Kafka name (topic defaults under their log.* synonyms)."""
        out = {d.name: render_value(d, getattr(self, d.attr)) for d in BROKER_CONFIGS}
        topic = self.topic_defaults.to_kafka()
        for synonym, topic_name in BROKER_SYNONYMS.items():
            out[synonym] = topic[topic_name]
        return out
