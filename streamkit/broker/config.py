"""Broker settings under Kafka's names (server.properties), with Kafka's defaults.

Sources, later wins: defaults, a ``server.properties``-style file (``key=value`` lines, ``#``
comments), then ``--set key=value`` overrides. Broker-wide topic defaults use Kafka's
``log.*`` synonyms (``log.retention.ms``, ``log.segment.bytes``, ``log.flush.interval.messages``,
``message.max.bytes``, ``min.insync.replicas``...) and become the ``LogConfig`` every topic
starts from; the ``.hours``/``.minutes`` variants Kafka accepts are converted to milliseconds.

Every name is one of three kinds, so that any Kafka ``server.properties`` (ZooKeeper mode or
KRaft, Kafka 3.x or 4) starts the broker and no typo goes unnoticed:

- acted on: ``BROKER_CONFIGS`` (streamkit.broker.config_defs) and the topic defaults, parsed
  and checked into typed ``BrokerConfig`` fields;
- Kafka's, with no effect here: every other name of Kafka's (streamkit.broker.kafka_names,
  generated from Kafka's sources, and Kafka's dynamic names: ``listener.name.NAME.*``,
  ``config.providers.NAME.*``, the tiered-storage plugin prefixes). They are kept in
  ``BrokerConfig.no_effect`` and named once at start, with their values (passwords hidden):
  ``settings with no effect here: a=1, b=2``. Without ``zookeeper.connect`` (a single
  broker) the cluster settings (``config_defs.CLUSTER_ONLY``) are checked, kept and listed too;
- anything else: an error naming the closest Kafka name, since it is most likely a typo.

``listeners`` may list several listeners (``listener.security.protocol.map`` names their
protocols); the broker binds each. Their TLS and SASL settings (``ssl.*``, ``sasl.*``, and
``listener.name.NAME.*`` overriding them) are kept in ``security_settings`` and resolved per
listener by streamkit.broker.security.settings.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamkit.broker.config_defs import BROKER_CONFIGS, CLUSTER_ONLY, names
from streamkit.broker.endpoints import (
    DEFAULT_PROTOCOL_MAP,
    Listener,
    parse_listeners,
    parse_protocol_map,
    parse_zookeeper_connect,
)
from streamkit.broker.kafka_names import KAFKA_BROKER_CONFIGS
from streamkit.broker.security.settings import (
    ListenerSecurity,
    is_security_setting,
    listener_security,
)
from streamkit.hints import nearest
from streamkit.log.config import (
    BROKER_SYNONYMS,
    LONG_MAX,
    LogConfig,
    parse_value,
    render_value,
)
from streamkit.log.errors import ConfigError

__all__ = ["BROKER_CONFIGS", "BrokerConfig", "Listener", "kafka_type", "read_properties"]

log = logging.getLogger(__name__)

_BY_NAME = {d.name: d for d in BROKER_CONFIGS}
_BROKER_ALIASES = {"broker.id": "node.id", "log.dir": "log.dirs"}
_TIME_UNITS = {".hours": 3_600_000, ".minutes": 60_000}
# Kafka's dynamic names: per-listener overrides (``listener.name.internal.ssl.keystore.location``,
# with a SASL mechanism: ``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``), config
# providers, and the settings passed through to tiered-storage plugins under their prefixes.
_PER_LISTENER = re.compile(r"^listener\.name\.[A-Za-z0-9_-]+\.(.+)$")
_PER_MECHANISM = re.compile(r"^[A-Za-z0-9-]+\.(sasl\..+)$")
_CONFIG_PROVIDER = re.compile(r"^config\.providers\.[^.]+\.(class|param\..+)$")
_PLUGIN_PREFIXES = {"remote.log.storage.manager.impl.prefix": "rsm.config.",
                    "remote.log.metadata.manager.impl.prefix": "rlmm.config."}
_HIDDEN = "[hidden]"


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


def kafka_type(name: str, settings: Mapping[str, Any] | None = None) -> str | None:
    """Kafka's type of a broker setting name ("int", "password", ...), "" for a name Kafka
    passes to a plugin (type unknown), None for a name Kafka does not have. ``settings``
    gives the plugin prefixes when they are not Kafka's defaults."""
    kind = KAFKA_BROKER_CONFIGS.get(name)
    if kind is not None:
        return kind
    if m := _PER_LISTENER.match(name):
        rest = m.group(1)
        mechanism = _PER_MECHANISM.match(rest)
        return KAFKA_BROKER_CONFIGS.get(mechanism.group(1) if mechanism else rest)
    if _CONFIG_PROVIDER.match(name):
        return ""
    for setting, default in _PLUGIN_PREFIXES.items():
        prefix = str((settings or {}).get(setting, default))
        if prefix and name.startswith(prefix) and len(name) > len(prefix):
            return ""
    return None


def _shown(name: str, raw: Any, settings: Mapping[str, Any]) -> str:
    """A value fit for the log: passwords and plugin settings (which may be secrets) hidden."""
    return _HIDDEN if kafka_type(name, settings) in ("password", "") else str(raw)


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


def _unknown(name: str) -> ConfigError:
    known = [*_BY_NAME, *BROKER_SYNONYMS, *_BROKER_ALIASES, *KAFKA_BROKER_CONFIGS]
    prefix = ""
    if m := _PER_LISTENER.match(name):  # a per-listener name: the closest name after the prefix
        prefix, name = name[: m.start(1)], m.group(1)
    close = nearest(name, known)
    hint = f" (did you mean {prefix + close!r}?)" if close else ""
    return ConfigError(f"unknown broker config {prefix + name!r}{hint}")


def _check_ids(settings: Mapping[str, Any]) -> None:
    """broker.id (ZooKeeper mode) and node.id (KRaft) are one setting: both given must agree."""
    if "broker.id" not in settings or "node.id" not in settings:
        return
    d = _BY_NAME["node.id"]
    broker_id = parse_value(dataclasses.replace(d, name="broker.id"), settings["broker.id"])
    node_id = parse_value(d, settings["node.id"])
    if broker_id != node_id:
        raise ConfigError(f"broker.id={broker_id} and node.id={node_id} disagree: they are the same setting "
                          "(broker.id in ZooKeeper mode, node.id in KRaft); set one, or both to the same id")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Every setting streamkit acts on, typed; ``from_kafka`` builds and checks one."""

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
    listener_security_protocol_map: str = DEFAULT_PROTOCOL_MAP
    log_dirs: str = ""
    # cluster (Kafka's ZooKeeper mode); read only when zookeeper.connect is set
    zookeeper_connect: str = ""
    zookeeper_session_timeout_ms: int = 18000
    zookeeper_connection_timeout_ms: int | None = None
    inter_broker_listener_name: str = ""
    security_inter_broker_protocol: str = "PLAINTEXT"
    broker_rack: str = ""
    offsets_topic_replication_factor: int = 3
    offsets_topic_min_isr: int | None = None
    metrics_listener: str = ""
    schema_registry_listeners: str = ""
    console_listeners: str = ""
    offsets_commit_timeout_ms: int = 5000
    request_timeout_ms: int = 30000
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    replica_lag_time_max_ms: int = 30000
    replica_socket_timeout_ms: int = 30000
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_ms: int = 1000
    replica_fetch_response_max_bytes: int = 10485760
    num_replica_fetchers: int = 1
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    replica_selector_class: str = ""
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    leader_replication_throttled_rate: int = LONG_MAX
    follower_replication_throttled_rate: int = LONG_MAX
    # authorization and client quotas (streamkit.broker.security)
    authorizer_class_name: str = ""
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    # Resolved by from_kafka. The listener to bind ("" / -1: not configured; the command
    # line's --host/--port win), and the parsed broker listeners (controller ones left out).
    listener_host: str = ""
    listener_port: int = -1
    listener_endpoints: tuple[Listener, ...] = ()
    advertised_endpoints: tuple[Listener, ...] = ()
    # The TLS / SASL settings given (ssl.*, sasl.*, listener.name.NAME.*), as given; and each
    # bound listener's security resolved from them (one PLAINTEXT listener when none is set).
    security_settings: tuple[tuple[str, str], ...] = ()
    listener_securities: tuple[ListenerSecurity, ...] = ()
    # Kafka settings given that have no effect here, (name, value) in the order given.
    no_effect: tuple[tuple[str, str], ...] = ()
    topic_defaults: LogConfig = field(default_factory=LogConfig)

    @property
    def data_dir(self) -> Path | None:
        """The data directory from log.dirs / log.dir, if one was configured."""
        return Path(self.log_dirs.strip()) if self.log_dirs.strip() else None

    @property
    def broker_id(self) -> int:
        """broker.id, Kafka's ZooKeeper-mode name of node.id."""
        return self.node_id

    @property
    def cluster_mode(self) -> bool:
        """A cluster member (zookeeper.connect set); otherwise the single broker."""
        return bool(self.zookeeper_connect.strip())

    @property
    def zookeeper_servers(self) -> tuple[tuple[str, int], ...]:
        """(host, port) of each server in zookeeper.connect."""
        return parse_zookeeper_connect(self.zookeeper_connect)[0] if self.cluster_mode else ()

    @property
    def zookeeper_chroot(self) -> str:
        """The chroot path of zookeeper.connect ("/kafka"), "" for none."""
        return parse_zookeeper_connect(self.zookeeper_connect)[1] if self.cluster_mode else ""

    @property
    def zookeeper_connection_timeout(self) -> int:
        """zookeeper.connection.timeout.ms, or the session timeout when unset (Kafka's rule)."""
        if self.zookeeper_connection_timeout_ms is None:
            return self.zookeeper_session_timeout_ms
        return self.zookeeper_connection_timeout_ms

    @property
    def security_protocols(self) -> dict[str, str]:
        """listener.security.protocol.map parsed: listener name -> security protocol."""
        return parse_protocol_map(self.listener_security_protocol_map)

    @property
    def inter_broker_name(self) -> str:
        """The inter-broker listener's name: inter.broker.listener.name, else the listener
        named after security.inter.broker.protocol (Kafka's rule)."""
        return (self.inter_broker_listener_name or self.security_inter_broker_protocol).upper()

    @property
    def inter_broker_listener(self) -> Listener | None:
        """The advertised address of the inter-broker listener; None when no listeners are
        configured (then it is the bound address, as for clients)."""
        return next((x for x in self.advertised_endpoints if x.name == self.inter_broker_name), None)

    @property
    def min_insync_replicas(self) -> int:
        """The broker-wide min.insync.replicas (the default of the topic config)."""
        return self.topic_defaults.min_insync_replicas

    @property
    def unclean_leader_election_enable(self) -> bool:
        """The broker-wide unclean.leader.election.enable (the default of the topic config)."""
        return self.topic_defaults.unclean_leader_election_enable

    @property
    def offsets_topic_min_insync_replicas(self) -> int:
        """offsets.topic.min.isr, else min.insync.replicas (what Kafka's offsets topic takes)."""
        return self.min_insync_replicas if self.offsets_topic_min_isr is None else self.offsets_topic_min_isr

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any]) -> BrokerConfig:
        """Build from Kafka-named broker settings: the ones acted on are parsed and checked,
        Kafka's others kept and named in one log line, any other name raises ConfigError."""
        settings = {name.strip(): raw for name, raw in settings.items()}
        _check_ids(settings)
        cluster = bool(str(settings.get("zookeeper.connect", "")).strip())
        broker: dict[str, Any] = {}
        log_settings: dict[str, Any] = {}
        no_effect: list[tuple[str, str]] = []
        security: list[tuple[str, str]] = []
        for original, raw in settings.items():
            if original == "log.dir" and "log.dirs" in settings:
                continue  # Kafka: log.dirs wins over log.dir
            name, value = _normalise(original, raw)
            d = _BY_NAME.get(name)
            if name in BROKER_SYNONYMS:
                log_settings[name] = value
            elif d is not None:
                broker[d.attr] = parse_value(d, value)
            elif is_security_setting(original):
                security.append((original, str(raw)))
                continue
            elif kafka_type(original, settings) is not None:
                no_effect.append((original, str(raw)))
                continue
            else:
                raise _unknown(original)
            if not cluster and original in CLUSTER_ONLY:
                no_effect.append((original, str(raw)))
        config = dataclasses.replace(cls(), **broker, no_effect=tuple(no_effect), security_settings=tuple(security))
        config._check()
        config = config._with_listeners(settings)
        config = dataclasses.replace(config, topic_defaults=LogConfig.from_kafka(log_settings))
        if no_effect:
            log.warning("settings with no effect here: %s",
                        ", ".join(f"{n}={_shown(n, v, settings)}" for n, v in no_effect))
        return config

    def _check(self) -> None:
        """Kafka's checks across settings (KafkaConfig.validateValues) that streamkit needs."""
        if "," in self.log_dirs:
            raise ConfigError(f"log.dirs lists several directories ({self.log_dirs}); streamkit uses one")
        if self.cluster_mode:
            parse_zookeeper_connect(self.zookeeper_connect)
        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise ConfigError("replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms "
                              "to prevent unnecessary socket timeouts")
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise ConfigError("replica.fetch.wait.max.ms should always be less than or equal to "
                              "replica.lag.time.max.ms to prevent frequent changes in ISR")

    def _with_listeners(self, settings: Mapping[str, Any]) -> BrokerConfig:
        """Parse listeners / advertised.listeners, choose the bound listener and check the
        inter-broker one (advertised.host.name and advertised.port, Kafka's older names, win
        where given)."""
        protocols = self.security_protocols
        controllers = {n.upper() for n in names(settings.get("controller.listener.names", "CONTROLLER"))}
        bound: tuple[Listener, ...] = ()
        if self.listeners.strip():
            bound = parse_listeners(self.listeners, "listeners", protocols, controllers)
            if not bound:
                raise ConfigError(f"listeners has no broker listener, only controller ones: {self.listeners!r}")
        advertised = bound
        if self.advertised_listeners.strip():
            advertised = parse_listeners(self.advertised_listeners, "advertised.listeners", protocols,
                                         controllers, distinct_ports=False)
        known = [x.name for x in bound] or ["PLAINTEXT"]  # no listeners: Kafka's PLAINTEXT://:9092
        for x in advertised:
            if x.name not in known:
                raise ConfigError(f"advertised.listeners names {x.name}, which listeners does not have "
                                  f"({', '.join(known)})")
            if x.host == "0.0.0.0":
                raise ConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0; "
                                  "use a routable IP address or host name")
        out = dataclasses.replace(self, listener_endpoints=bound, advertised_endpoints=advertised)
        if bound:
            out = dataclasses.replace(out, listener_host=bound[0].host or "0.0.0.0", listener_port=bound[0].port)
        raw = dict(self.security_settings)
        served = [(x.name, protocols[x.name]) for x in bound] or [("PLAINTEXT", "PLAINTEXT")]
        out = dataclasses.replace(out, listener_securities=tuple(listener_security(n, p, raw) for n, p in served))
        if self.advertised_listeners.strip():
            out = out._advertise(known[0], advertised, settings)
        out._check_inter_broker(settings, [x.name for x in advertised] or known)
        return out

    def _advertise(self, served: str, advertised: tuple[Listener, ...], settings: Mapping[str, Any]) -> BrokerConfig:
        """advertised_host/port: the advertised address of the served listener."""
        pick = next((x for x in advertised if x.name == served), None)
        if pick is None:
            raise ConfigError(f"advertised.listeners must include {served}, the listener streamkit serves; "
                              f"got {self.advertised_listeners!r}")
        if not pick.host and "advertised.host.name" not in settings:
            raise ConfigError(f"advertised.listeners needs a host name, got {self.advertised_listeners!r}")
        out = self
        if "advertised.host.name" not in settings:
            out = dataclasses.replace(out, advertised_host=pick.host)
        if "advertised.port" not in settings:
            out = dataclasses.replace(out, advertised_port=pick.port)
        return out

    def _check_inter_broker(self, settings: Mapping[str, Any], available: list[str]) -> None:
        """Kafka's rules for the inter-broker listener, checked in a cluster or when set (a
        single broker needs none: ``listeners=CLIENT://...`` alone is fine there)."""
        given = [n for n in ("inter.broker.listener.name", "security.inter.broker.protocol")
                 if str(settings.get(n, "")).strip()]
        if len(given) == 2:
            raise ConfigError("only one of inter.broker.listener.name and security.inter.broker.protocol "
                              "should be set")
        source = "inter.broker.listener.name" if self.inter_broker_listener_name else "security.inter.broker.protocol"
        if (given or self.cluster_mode) and self.inter_broker_name not in available:
            raise ConfigError(f"{source} gives the inter-broker listener {self.inter_broker_name}, which is not "
                              f"an advertised listener (listeners here: {', '.join(available)})")
        protocol = self.security_protocols.get(self.inter_broker_name, "PLAINTEXT")
        if self.cluster_mode and protocol != "PLAINTEXT":
            raise ConfigError(f"{source}: the inter-broker listener {self.inter_broker_name} uses {protocol}; "
                              "brokers replicate over a PLAINTEXT listener only (add one for the brokers)")

    def listener(self, name: str) -> ListenerSecurity:
        """The security of bound listener ``name``."""
        return next(x for x in self.listener_securities if x.name == name)

    def advertised_for(self, name: str) -> Listener | None:
        """Listener ``name``'s entry in advertised.listeners (None: not advertised apart)."""
        return next((x for x in self.advertised_endpoints if x.name == name), None)

    def to_kafka(self) -> dict[str, str]:
        """Every broker setting by Kafka name (topic defaults under their log.* synonyms); one
        unset with no default (Kafka's null) is empty."""
        out = {d.name: render_value(d, getattr(self, d.attr)) for d in BROKER_CONFIGS}
        topic = self.topic_defaults.to_kafka()
        for synonym, topic_name in BROKER_SYNONYMS.items():
            out[synonym] = topic[topic_name]
        return out
