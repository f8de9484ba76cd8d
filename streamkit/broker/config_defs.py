"""The broker settings streamkit acts on, under Kafka's names, with Kafka's defaults.

``BROKER_CONFIGS`` is the table; ``streamkit.broker.config.BrokerConfig`` has one typed field
per entry. The cluster settings (Kafka's ZooKeeper mode: ``zookeeper.connect``, replication,
the controller) are read by the cluster code only when ``zookeeper.connect`` is set;
``CLUSTER_ONLY`` names them, so that a single broker reports them as having no effect. Their
documentation is Kafka's own (ReplicationConfigs, ServerConfigs, ZkConfigs, ...).
"""

from __future__ import annotations

import re
from typing import Any

from streamkit.broker.endpoints import DEFAULT_PROTOCOL_MAP, SECURITY_PROTOCOLS
from streamkit.broker.security.authorizer import AUTHORIZER_CLASSES
from streamkit.log.config import LONG_MAX, ConfigDef

__all__ = ["BROKER_CONFIGS", "CLUSTER_ONLY", "names"]


def names(value: str) -> list[str]:
    """A comma-separated list setting, in the order given."""
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _at_least(lo: float) -> Any:
    return lambda v: v >= lo


def _short(lo: int) -> Any:
    """Kafka's SHORT settings (replication factors): lo..32767."""
    return lambda v: lo <= v <= 32767


_SINGLE_BROKER: tuple[ConfigDef, ...] = (
    ConfigDef("node.id", "node_id", "int", 0, None,
              "The broker id for this server. broker.id (ZooKeeper mode) is its synonym: when both "
              "are set they must agree", _at_least(0)),
    ConfigDef("listeners", "listeners", "string", "", None,
              "Comma-separated NAME://host:port listeners (an empty host: every interface; port 0: "
              "any free port); the first broker listener is bound, --host/--port win"),
    ConfigDef("advertised.listeners", "advertised_listeners", "string", "", None,
              "The listener addresses the broker advertises to clients and other brokers "
              "(default: listeners; never 0.0.0.0)"),
    ConfigDef("listener.security.protocol.map", "listener_security_protocol_map", "string",
              DEFAULT_PROTOCOL_MAP, None,
              "Map between listener names and security protocols: NAME:PROTOCOL pairs, e.g. "
              "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT (only PLAINTEXT is served yet)"),
    ConfigDef("log.dirs", "log_dirs", "string", "", None,
              "the data directory (one; --data-dir wins; default data/broker)"),
    ConfigDef("advertised.host.name", "advertised_host", "string", "", None,
              "host name clients are told to connect to (default: the bind host)"),
    ConfigDef("advertised.port", "advertised_port", "int", 0, None,
              "port clients are told to connect to (default: the bound port)", _at_least(0)),
    ConfigDef("num.partitions", "num_partitions", "int", 1, None,
              "partitions of an auto-created topic", _at_least(1)),
    ConfigDef("default.replication.factor", "default_replication_factor", "int", 1, None,
              "The replication factor for automatically created topics, and for topics created "
              "with -1 as the replication factor", _at_least(1)),
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
              lambda v: bool(names(v)) and all(a in ("uniform", "range") for a in names(v))),
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

_RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

# Kafka's ZooKeeper-mode cluster settings. Docs are Kafka's (3.9 for the ZooKeeper-mode ones).
_CLUSTER: tuple[ConfigDef, ...] = (
    ConfigDef("zookeeper.connect", "zookeeper_connect", "string", "", None,
              "Specifies the ZooKeeper connection string in the form hostname:port where host and "
              "port are the host and port of a ZooKeeper server. To allow connecting through other "
              "ZooKeeper nodes when that ZooKeeper machine is down you can also specify multiple "
              "hosts in the form hostname1:port1,hostname2:port2,hostname3:port3. The server can "
              "also have a ZooKeeper chroot path as part of its ZooKeeper connection string which "
              "puts its data under some path in the global ZooKeeper namespace. For example to "
              "give a chroot path of /chroot/path you would give the connection string as "
              "hostname1:port1,hostname2:port2,hostname3:port3/chroot/path. (streamkit: unset or "
              "empty runs a single broker without ZooKeeper)"),
    ConfigDef("zookeeper.session.timeout.ms", "zookeeper_session_timeout_ms", "int", 18000, None,
              "Zookeeper session timeout", _at_least(1)),
    ConfigDef("zookeeper.connection.timeout.ms", "zookeeper_connection_timeout_ms", "int", None, None,
              "The max time that the client waits to establish a connection to ZooKeeper. If not "
              "set, the value in zookeeper.session.timeout.ms is used", _at_least(1)),
    ConfigDef("inter.broker.listener.name", "inter_broker_listener_name", "string", "", None,
              "Name of listener used for communication between brokers. If this is unset, the "
              "listener name is defined by security.inter.broker.protocol. It is an error to set "
              "this and security.inter.broker.protocol properties at the same time."),
    ConfigDef("security.inter.broker.protocol", "security_inter_broker_protocol", "string",
              "PLAINTEXT", None,
              "Security protocol used to communicate between brokers. It is an error to set this "
              "and inter.broker.listener.name properties at the same time.",
              allowed=SECURITY_PROTOCOLS),
    ConfigDef("broker.rack", "broker_rack", "string", "", None,
              "Rack of the broker. This will be used in rack aware replication assignment for "
              "fault tolerance. Examples: RACK1, us-east-1d"),
    ConfigDef("offsets.topic.replication.factor", "offsets_topic_replication_factor", "int", 3, None,
              "The replication factor for the offsets topic (set higher to ensure availability). "
              "Internal topic creation will fail until the cluster size meets this replication "
              "factor requirement. (streamkit: a single broker keeps 1 replica)", _short(1)),
    ConfigDef("metrics.listener", "metrics_listener", "string", "", None,
              "[streamkit; Kafka exposes its metrics through JMX] http://host:port to serve "
              "Prometheus metrics on, at /metrics (empty: none)"),
    ConfigDef("schema.registry.listeners", "schema_registry_listeners", "string", "", None,
              "[streamkit; as Redpanda's built-in registry] http://host:port to serve a Confluent-compatible "
              "Schema Registry on, inside the broker process, its schemas in _schemas (empty: none)"),
    ConfigDef("console.listeners", "console_listeners", "string", "", None,
              "[streamkit; as Redpanda Console, inside the broker process] http://host:port to serve the web "
              "console on (topics, messages, consumer groups; the schemas too with schema.registry.listeners); "
              "it reaches this broker over its first listener, as any client would (empty: none)",
              lambda v: v == "" or re.fullmatch(r"(?:https?://)?\[?[^\]/]*\]?:\d+/?", v.strip()) is not None),
    ConfigDef("offsets.topic.min.isr", "offsets_topic_min_isr", "int", None, None,
              "[streamkit; Kafka has no such setting] the min.insync.replicas of the offsets topic "
              "(unset: the broker's min.insync.replicas, which Kafka's offsets topic takes)",
              _at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", "offsets_commit_timeout_ms", "int", 5000, None,
              "Offset commit will be delayed until all replicas for the offsets topic receive the "
              "commit or this timeout is reached. This is similar to the producer request timeout. "
              "(streamkit: also the share-group state writes)", _at_least(1)),
    ConfigDef("request.timeout.ms", "request_timeout_ms", "int", 30000, None,
              "The configuration controls the maximum amount of time the client will wait for the "
              "response of a request. (streamkit: how long a transaction state write waits for its "
              "replication, and a WriteTxnMarkers request for its answer)", _at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", "transaction_state_log_replication_factor",
              "int", 3, None,
              "The replication factor for the transaction topic (set higher to ensure "
              "availability). Internal topic creation will fail until the cluster size meets this "
              "replication factor requirement. (streamkit: a single broker keeps 1 replica)",
              _short(1)),
    ConfigDef("transaction.state.log.min.isr", "transaction_state_log_min_isr", "int", 2, None,
              "The minimum number of replicas that must acknowledge a write to transaction topic "
              "in order to be considered successful.", _at_least(1)),
    ConfigDef("share.coordinator.state.topic.replication.factor",
              "share_coordinator_state_topic_replication_factor", "int", 3, None,
              "Replication factor for the share-group state topic. Topic creation will fail until "
              "the cluster size meets this replication factor requirement. (streamkit: a single "
              "broker keeps 1 replica)", _short(1)),
    ConfigDef("share.coordinator.state.topic.min.isr", "share_coordinator_state_topic_min_isr", "int",
              2, None, "Overridden min.insync.replicas for the share-group state topic.", _short(1)),
    ConfigDef("replica.lag.time.max.ms", "replica_lag_time_max_ms", "long", 30000, None,
              "If a follower hasn't sent any fetch requests or hasn't consumed up to the leader's "
              "log end offset for at least this time, the leader will remove the follower from ISR",
              _at_least(1)),
    ConfigDef("replica.socket.timeout.ms", "replica_socket_timeout_ms", "int", 30000, None,
              "The socket timeout for network requests. Its value should be at least "
              "replica.fetch.wait.max.ms", _at_least(1)),
    ConfigDef("replica.fetch.max.bytes", "replica_fetch_max_bytes", "int", 1048576, None,
              "The number of bytes of messages to attempt to fetch for each partition. This is not "
              "an absolute maximum, if the first record batch in the first non-empty partition of "
              "the fetch is larger than this value, the record batch will still be returned to "
              "ensure that progress can be made. The maximum record batch size accepted by the "
              "broker is defined via message.max.bytes (broker config) or max.message.bytes "
              "(topic config).", _at_least(0)),
    ConfigDef("replica.fetch.wait.max.ms", "replica_fetch_wait_max_ms", "int", 500, None,
              "The maximum wait time for each fetcher request issued by follower replicas. This "
              "value should always be less than the replica.lag.time.max.ms at all times to "
              "prevent frequent shrinking of ISR for low throughput topics", _at_least(0)),
    ConfigDef("replica.fetch.min.bytes", "replica_fetch_min_bytes", "int", 1, None,
              "Minimum bytes expected for each fetch response. If not enough bytes, wait up to "
              "replica.fetch.wait.max.ms (broker config).", _at_least(0)),
    ConfigDef("replica.fetch.backoff.ms", "replica_fetch_backoff_ms", "int", 1000, None,
              "The amount of time to sleep when fetch partition error occurs.", _at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", "replica_fetch_response_max_bytes", "int", 10485760,
              None,
              "Maximum bytes expected for the entire fetch response. Records are fetched in "
              "batches, and if the first record batch in the first non-empty partition of the "
              "fetch is larger than this value, the record batch will still be returned to ensure "
              "that progress can be made. As such, this is not an absolute maximum. The maximum "
              "record batch size accepted by the broker is defined via message.max.bytes (broker "
              "config) or max.message.bytes (topic config).", _at_least(0)),
    ConfigDef("num.replica.fetchers", "num_replica_fetchers", "int", 1, None,
              "Number of fetcher threads used to replicate records from each source broker. The "
              "total number of fetchers on each broker is bound by num.replica.fetchers multiplied "
              "by the number of brokers in the cluster. Increasing this value can increase the "
              "degree of I/O parallelism in the follower and leader broker at the cost of higher "
              "CPU and memory utilization.", _at_least(1)),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms",
              "replica_high_watermark_checkpoint_interval_ms", "long", 5000, None,
              "The frequency with which the high watermark is saved out to disk", _at_least(1)),
    ConfigDef("replica.selector.class", "replica_selector_class", "string", "", None,
              "The fully qualified class name that implements ReplicaSelector. This is used by the "
              "broker to find the preferred read replica. By default, we use an implementation "
              "that returns the leader. (streamkit: empty, or Kafka's "
              "org.apache.kafka.common.replica.RackAwareReplicaSelector for KIP-392)",
              allowed=("", _RACK_AWARE_SELECTOR)),
    ConfigDef("controlled.shutdown.enable", "controlled_shutdown_enable", "boolean", True, None,
              "Enable controlled shutdown of the server."),
    ConfigDef("controlled.shutdown.max.retries", "controlled_shutdown_max_retries", "int", 3, None,
              "Controlled shutdown can fail for multiple reasons. This determines the number of "
              "retries when such failure happens", _at_least(0)),
    ConfigDef("controlled.shutdown.retry.backoff.ms", "controlled_shutdown_retry_backoff_ms", "long",
              5000, None,
              "Before each retry, the system needs time to recover from the state that caused the "
              "previous failure (Controller fail over, replica lag etc). This config determines "
              "the amount of time to wait before retrying.", _at_least(0)),
    ConfigDef("auto.leader.rebalance.enable", "auto_leader_rebalance_enable", "boolean", True, None,
              "Enables auto leader balancing. A background thread checks the distribution of "
              "partition leaders at regular intervals, configurable by "
              "leader.imbalance.check.interval.seconds. If the leader imbalance exceeds "
              "leader.imbalance.per.broker.percentage, leader rebalance to the preferred leader "
              "for partitions is triggered."),
    ConfigDef("leader.imbalance.check.interval.seconds", "leader_imbalance_check_interval_seconds",
              "long", 300, None,
              "The frequency with which the partition rebalance check is triggered by the "
              "controller", _at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", "leader_imbalance_per_broker_percentage",
              "int", 10, None,
              "The ratio of leader imbalance allowed per broker. The controller would trigger a "
              "leader balance if it goes above this value per broker. The value is specified in "
              "percentage.", _at_least(0)),
    ConfigDef("leader.replication.throttled.rate", "leader_replication_throttled_rate", "long",
              LONG_MAX, None,
              "A long representing the upper bound (bytes/sec) on replication traffic for leaders "
              "enumerated in the property leader.replication.throttled.replicas (for each topic). "
              "It is suggested that the limit be kept above 1MB/s for accurate behaviour. "
              "(streamkit: set at start; Kafka sets it dynamically)", _at_least(0)),
    ConfigDef("follower.replication.throttled.rate", "follower_replication_throttled_rate", "long",
              LONG_MAX, None,
              "A long representing the upper bound (bytes/sec) on replication traffic for "
              "followers enumerated in the property follower.replication.throttled.replicas (for "
              "each topic). It is suggested that the limit be kept above 1MB/s for accurate "
              "behaviour. (streamkit: set at start; Kafka sets it dynamically)", _at_least(0)),
)

# The authorizer's settings (Kafka's StandardAuthorizer/AclAuthorizer) and the client
# quotas' sample windows (streamkit.broker.security).
_AUTHORIZATION: tuple[ConfigDef, ...] = (
    ConfigDef("authorizer.class.name", "authorizer_class_name", "string", "", None,
              "The fully qualified name of a class that implements the Authorizer interface, which "
              "is used by the broker for authorization. (streamkit: empty, or Kafka's "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
              "kafka.security.authorizer.AclAuthorizer, which turn on the ACL authorizer)",
              allowed=("", *AUTHORIZER_CLASSES)),
    ConfigDef("super.users", "super_users", "string", "", None,
              "Semicolon-separated principals (User:admin;User:ops) that every ACL check allows"),
    ConfigDef("allow.everyone.if.no.acl.found", "allow_everyone_if_no_acl_found", "boolean", False, None,
              "Allow a request on a resource that no ACL covers (default: deny it)"),
    ConfigDef("quota.window.num", "quota_window_num", "int", 11, None,
              "The number of samples to retain in memory for client quotas", _at_least(1)),
    ConfigDef("quota.window.size.seconds", "quota_window_size_seconds", "int", 1, None,
              "The time span of each sample for client quotas", _at_least(1)),
)

BROKER_CONFIGS: tuple[ConfigDef, ...] = _SINGLE_BROKER + _CLUSTER + _AUTHORIZATION

# Settings that only a cluster (zookeeper.connect) acts on: a single broker lists them among
# the settings with no effect. Its replication factors are 1 whatever these say.
CLUSTER_ONLY: frozenset[str] = frozenset(
    {d.name for d in _CLUSTER} | {"min.insync.replicas", "unclean.leader.election.enable"})
