"""Broker settings: Kafka's server.properties names, including the ones a real Kafka file
carries (listeners, log.dirs, threads, ZooKeeper/KRaft), and typos."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from streamkit.broker.config import (
    BROKER_CONFIGS,
    BrokerConfig,
    Listener,
    kafka_type,
    read_properties,
)
from streamkit.broker.config_defs import CLUSTER_ONLY
from streamkit.broker.kafka_names import (
    KAFKA3_BROKER_CONFIGS,
    KAFKA4_BROKER_CONFIGS,
    KAFKA_BROKER_CONFIGS,
)
from streamkit.broker.run import DEFAULT_DATA_DIR, DEFAULT_HOST, DEFAULT_PORT, placement
from streamkit.broker.security.settings import ACTED_ON as SECURITY_ACTED_ON
from streamkit.log.config import BROKER_SYNONYMS, BROKER_UNIT_SYNONYMS, LONG_MAX
from streamkit.log.errors import ConfigError


def test_listeners_give_the_bind_address() -> None:
    config = BrokerConfig.from_kafka({"listeners": "PLAINTEXT://127.0.0.2:19092"})
    assert (config.listener_host, config.listener_port) == ("127.0.0.2", 19092)
    assert placement(config, None, None, None) == (DEFAULT_DATA_DIR, "127.0.0.2", 19092)


def test_empty_listener_host_binds_every_interface_as_kafka_does() -> None:
    config = BrokerConfig.from_kafka({"listeners": "PLAINTEXT://:9092"})
    assert (config.listener_host, config.listener_port) == ("0.0.0.0", 9092)


def test_kraft_combined_listeners_skip_the_controller_listener() -> None:
    config = BrokerConfig.from_kafka({
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names": "CONTROLLER",
        "advertised.listeners": "PLAINTEXT://localhost:9092",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
    })
    assert (config.listener_host, config.listener_port) == ("0.0.0.0", 9092)
    assert (config.advertised_host, config.advertised_port) == ("localhost", 9092)


def test_a_renamed_listener_mapped_to_plaintext_is_accepted() -> None:
    config = BrokerConfig.from_kafka({"listeners": "CLIENT://127.0.0.1:9000",
                                      "listener.security.protocol.map": "CLIENT:PLAINTEXT"})
    assert config.listener_port == 9000


@pytest.mark.parametrize(("settings", "message"), [
    ({"listeners": "SSL://:9093"},
     "listener SSL uses TLS but has no key: set ssl.keystore.location (a PEM file with the private key and "
     "certificate chain) or ssl.keystore.key and ssl.keystore.certificate.chain (or their listener.name.ssl. forms)"),
    ({"listeners": "INTERNAL://:9093", "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT"},
     "listener INTERNAL (SASL_PLAINTEXT) needs sasl.enabled.mechanisms"),
    ({"listeners": "S://:9093", "listener.security.protocol.map": "S:SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI is not supported (supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)"),
    ({"listeners": "S://:9093", "listener.security.protocol.map": "S:SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": "file:///jwks.json"},
     "sasl.oauthbearer.jwks.endpoint.url of listener S must be an http(s) URL, not 'file:///jwks.json'"),
    ({"listeners": "S://:9093", "listener.security.protocol.map": "S:SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN"}, "listener S enables PLAIN but has no listener.name.s.plain.sasl.jaas.config"),
    ({"listeners": "S://:9093", "listener.security.protocol.map": "S:SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN", "listener.name.s.plain.sasl.jaas.config": "PlainLoginModule required x"},
     "invalid listener.name.s.plain.sasl.jaas.config: cannot read 'x'"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": "/k.pem", "ssl.client.auth": "always"},
     "invalid ssl.client.auth 'always' for listener SSL (one of none, requested, required)"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": "/k.pem", "ssl.client.auth": "required"},
     "listener SSL: ssl.client.auth=required needs ssl.truststore.location"),
    ({"listeners": "SSL://:9093", "ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"},
     "ssl.keystore.type=JKS for listener SSL: streamkit reads PEM only"),
    ({"listeners": "CLIENT://:9092"},
     "listeners: listener CLIENT has no security protocol; map it in listener.security.protocol.map"),
    ({"listeners": "PLAINTEXT://:9092,plaintext://:9093"}, "listeners names listener PLAINTEXT twice"),
    ({"listeners": "PLAINTEXT://a:9092,B://b:9092", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,B:PLAINTEXT"},
     "listeners PLAINTEXT, B share port 9092"),
    ({"listener.security.protocol.map": "A:TLS"}, "invalid security protocol 'TLS' in listener.security.protocol.map"),
    ({"listener.security.protocol.map": "A"}, "expected NAME:PROTOCOL"),
    ({"listeners": "PLAINTEXT://localhost"}, "expected NAME://host:port"),
    ({"listeners": "localhost:9092"}, "expected NAME://host:port"),
    ({"listeners": "PLAINTEXT://:65536"}, "expected NAME://host:port"),
    ({"listeners": "CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"}, "no broker listener"),
    ({"advertised.listeners": "PLAINTEXT://:9092"}, "needs a host name"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "cannot use the nonroutable meta-address 0.0.0.0"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "OTHER://h:1",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"},
     "advertised.listeners names OTHER, which listeners does not have (PLAINTEXT)"),
    ({"log.dirs": "/a,/b"}, "streamkit uses one"),
])
def test_listener_and_log_dir_errors(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        BrokerConfig.from_kafka(settings)


def test_several_listeners_are_parsed(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's multi-listener form: every broker listener is exposed (and bound), with the
    inter-broker one."""
    with caplog.at_level(logging.WARNING, logger="streamkit.broker.config"):
        config = BrokerConfig.from_kafka({
            "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://10.0.0.1:19092,CONTROLLER://:9093",
            "advertised.listeners": "PLAINTEXT://kafka.example:9092,INTERNAL://broker1.internal:19092",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "internal",
        })
    assert config.listener_endpoints == (Listener("PLAINTEXT", "127.0.0.1", 9092), Listener("INTERNAL", "10.0.0.1", 19092))
    assert config.advertised_endpoints == (Listener("PLAINTEXT", "kafka.example", 9092),
                                           Listener("INTERNAL", "broker1.internal", 19092))
    assert config.inter_broker_name == "INTERNAL"
    assert config.inter_broker_listener == Listener("INTERNAL", "broker1.internal", 19092)
    assert (config.listener_host, config.listener_port) == ("127.0.0.1", 9092)
    assert (config.advertised_host, config.advertised_port) == ("kafka.example", 9092)
    assert config.security_protocols == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
    assert [x.name for x in config.listener_securities] == ["PLAINTEXT", "INTERNAL"]
    assert not [r.getMessage() for r in caplog.records if r.getMessage().startswith("listeners")]


def test_port_zero_binds_any_free_port_and_may_repeat() -> None:
    config = BrokerConfig.from_kafka({"listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
                                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT"})
    assert (config.listener_host, config.listener_port) == ("127.0.0.1", 0)
    assert [x.port for x in config.listener_endpoints] == [0, 0]
    # the same port on an IPv4 and an IPv6 address is allowed, as in Kafka
    both = BrokerConfig.from_kafka({"listeners": "PLAINTEXT://127.0.0.1:9092,V6://[::1]:9092",
                                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT"})
    assert both.listener_endpoints[1] == Listener("V6", "::1", 9092)


def test_the_inter_broker_listener() -> None:
    # by default the PLAINTEXT listener (security.inter.broker.protocol), whatever the listeners
    assert BrokerConfig().inter_broker_name == "PLAINTEXT"
    assert BrokerConfig.from_kafka({"listeners": "PLAINTEXT://h:1"}).inter_broker_listener == Listener("PLAINTEXT", "h", 1)
    # a single broker needs none: a renamed listener alone is fine...
    BrokerConfig.from_kafka({"listeners": "CLIENT://h:1", "listener.security.protocol.map": "CLIENT:PLAINTEXT"})
    # ...but a cluster member needs the inter-broker listener among its advertised ones
    cluster = {"zookeeper.connect": "127.0.0.1:2181", "listeners": "CLIENT://h:1",
               "listener.security.protocol.map": "CLIENT:PLAINTEXT"}
    with pytest.raises(ConfigError, match=re.escape(
            "security.inter.broker.protocol gives the inter-broker listener PLAINTEXT, which is not an "
            "advertised listener (listeners here: CLIENT)")):
        BrokerConfig.from_kafka(cluster)
    assert BrokerConfig.from_kafka({**cluster, "inter.broker.listener.name": "CLIENT"}).inter_broker_name == "CLIENT"
    with pytest.raises(ConfigError, match=re.escape("inter.broker.listener.name gives the inter-broker listener OTHER")):
        BrokerConfig.from_kafka({"inter.broker.listener.name": "OTHER"})
    with pytest.raises(ConfigError, match=re.escape("only one of inter.broker.listener.name and security.inter.broker.protocol")):
        BrokerConfig.from_kafka({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"})
    with pytest.raises(ConfigError, match=re.escape("security.inter.broker.protocol gives the inter-broker listener SSL")):
        BrokerConfig.from_kafka({"security.inter.broker.protocol": "SSL"})


def test_advertised_listeners_and_the_older_names() -> None:
    config = BrokerConfig.from_kafka({"listeners": "PLAINTEXT://0.0.0.0:9092",
                                      "advertised.listeners": "PLAINTEXT://kafka.example:19092"})
    assert (config.advertised_host, config.advertised_port) == ("kafka.example", 19092)
    older = BrokerConfig.from_kafka({"advertised.listeners": "PLAINTEXT://kafka.example:19092",
                                     "advertised.host.name": "other", "advertised.port": "1"})
    assert (older.advertised_host, older.advertised_port) == ("other", 1)


def test_log_dirs_and_log_dir() -> None:
    assert BrokerConfig.from_kafka({"log.dirs": "/var/lib/kafka"}).data_dir == Path("/var/lib/kafka")
    assert BrokerConfig.from_kafka({"log.dir": "/one"}).data_dir == Path("/one")
    # Kafka: log.dirs wins over log.dir, whatever the order
    both = BrokerConfig.from_kafka({"log.dirs": "/many", "log.dir": "/one"})
    assert both.data_dir == Path("/many")
    assert BrokerConfig.from_kafka({}).data_dir is None


def test_command_line_wins_over_the_config_file() -> None:
    config = BrokerConfig.from_kafka({"listeners": "PLAINTEXT://127.0.0.3:9999", "log.dirs": "/from/file"})
    assert placement(config, Path("/cli"), "127.0.0.1", 0) == (Path("/cli"), "127.0.0.1", 0)
    assert placement(config, None, None, None) == (Path("/from/file"), "127.0.0.3", 9999)
    assert placement(BrokerConfig(), None, None, None) == (DEFAULT_DATA_DIR, DEFAULT_HOST, DEFAULT_PORT)


def _no_effect_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("settings with no effect")]


def test_kafka_settings_with_no_effect_are_named_once_with_their_values(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamkit.broker.config"):
        config = BrokerConfig.from_kafka({
            "num.network.threads": "3", "num.io.threads": "8", "controller.quorum.voters": "1@localhost:9093",
            "process.roles": "broker,controller", "offsets.topic.replication.factor": "1", "num.partitions": "4",
            "offsets.topic.min.isr": "1", "replica.lag.time.max.ms": "10000",
        })
    assert config.num_partitions == 4
    # a single broker: the cluster settings are checked and kept, and reported as having no effect
    assert (config.offsets_topic_replication_factor, config.offsets_topic_min_isr) == (1, 1)
    assert config.replica_lag_time_max_ms == 10000
    assert _no_effect_lines(caplog) == [
        "settings with no effect here: num.network.threads=3, num.io.threads=8, "
        "controller.quorum.voters=1@localhost:9093, process.roles=broker,controller, "
        "offsets.topic.replication.factor=1, offsets.topic.min.isr=1, replica.lag.time.max.ms=10000"]
    assert config.no_effect[:2] == (("num.network.threads", "3"), ("num.io.threads", "8"))


def test_a_cluster_member_acts_on_the_cluster_settings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamkit.broker.config"):
        config = BrokerConfig.from_kafka({"zookeeper.connect": "127.0.0.1:2181", "num.io.threads": "8",
                                          "offsets.topic.replication.factor": "1", "min.insync.replicas": "2"})
    assert config.cluster_mode and config.min_insync_replicas == 2
    assert _no_effect_lines(caplog) == ["settings with no effect here: num.io.threads=8"]


def test_no_line_without_such_settings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamkit.broker.config"):
        config = BrokerConfig.from_kafka({"num.partitions": "2", "log.retention.hours": "1"})
    assert not caplog.records and config.no_effect == ()


def test_passwords_and_plugin_settings_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's dynamic names are accepted (per-listener, per-SASL-mechanism, config providers,
    tiered-storage plugins); secrets stay out of the log."""
    with caplog.at_level(logging.WARNING, logger="streamkit.broker.config"):
        config = BrokerConfig.from_kafka({
            "ssl.truststore.password": "s3cret", "ssl.keymanager.algorithm": "SunX509",
            "listener.name.internal.ssl.truststore.password": "s3cret",
            "listener.name.sasl_ssl.gssapi.sasl.jaas.config": "s3cret",
            "listener.name.internal.max.connections": "5",
            "config.providers": "vault", "config.providers.vault.param.token": "s3cret",
            "rsm.config.secret.key": "s3cret", "remote.log.metadata.manager.impl.prefix": "meta.",
            "meta.aws.key": "s3cret",
        })
    (line,) = _no_effect_lines(caplog)
    assert "s3cret" not in line
    assert ("ssl.truststore.password=[hidden], ssl.keymanager.algorithm=SunX509, "
            "listener.name.internal.ssl.truststore.password=[hidden], "
            "listener.name.sasl_ssl.gssapi.sasl.jaas.config=[hidden], "
            "listener.name.internal.max.connections=5, config.providers=vault, "
            "config.providers.vault.param.token=[hidden], rsm.config.secret.key=[hidden], "
            "remote.log.metadata.manager.impl.prefix=meta., meta.aws.key=[hidden]") in line
    assert len(config.no_effect) == 10


@pytest.mark.parametrize(("name", "hint"), [
    ("num.partitons", " (did you mean 'num.partitions'?)"),
    ("log.retention.msec", " (did you mean 'log.retention.ms'?)"),
    ("zookeeper.conect", " (did you mean 'zookeeper.connect'?)"),
    ("offsets.topic.min.isrr", " (did you mean 'offsets.topic.min.isr'?)"),
    ("num.netwrk.threads", " (did you mean 'num.network.threads'?)"),
    ("retention.ms", " (did you mean 'log.retention.ms'?)"),  # a topic config, not a broker one
    # topic-only in Kafka; the broker setting is the rate
    ("leader.replication.throttled.replicas", " (did you mean 'leader.replication.throttled.rate'?)"),
    ("listener.name.internal.ssl.keystore.pasword", " (did you mean 'listener.name.internal.ssl.keystore.password'?)"),
    ("wibble", ""),
])
def test_an_unknown_name_is_an_error_with_a_hint(name: str, hint: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_kafka({name: "1"})
    assert str(info.value) == f"unknown broker config {name!r}{hint}"


def test_every_kafka_broker_setting_is_accepted() -> None:
    """Each name of Kafka 3.9 and 4.x (ZooKeeper mode and KRaft) is either acted on or kept
    as having no effect; none is refused."""
    acted = {d.name for d in BROKER_CONFIGS} | set(BROKER_SYNONYMS) | set(BROKER_UNIT_SYNONYMS) | {"broker.id", "log.dir"}
    for name in sorted(set(KAFKA_BROKER_CONFIGS) - acted - SECURITY_ACTED_ON):
        config = BrokerConfig.from_kafka({name: "x"})
        assert config.no_effect == ((name, "x"),), name
    # the listener security settings are kept for the listeners (read per listener): a bad
    # value of one that is checked at once is named
    for name in sorted(SECURITY_ACTED_ON):
        try:
            config = BrokerConfig.from_kafka({name: "x"})
        except ConfigError as exc:
            assert name in str(exc), (name, exc)
            continue
        assert (config.no_effect, config.security_settings) == ((), ((name, "x"),)), name
    for name in sorted(acted & set(KAFKA_BROKER_CONFIGS)):
        assert kafka_type(name) is not None
    # the only names accepted that Kafka does not have: streamkit's offsets.topic.min.isr,
    # metrics.listener, schema.registry.listeners and console.listeners, and the pre-3.0
    # advertised.host.name / advertised.port
    assert acted - set(KAFKA_BROKER_CONFIGS) == {"offsets.topic.min.isr", "metrics.listener", "advertised.host.name",
                                                 "advertised.port", "schema.registry.listeners", "console.listeners"}


def test_the_generated_kafka_names() -> None:
    assert {"zookeeper.connect", "zookeeper.session.timeout.ms", "broker.id.generation.enable",
            "controlled.shutdown.max.retries", "leader.imbalance.per.broker.percentage"} <= set(KAFKA3_BROKER_CONFIGS)
    assert {"broker.id", "node.id", "process.roles", "controller.quorum.bootstrap.servers",
            "offsets.topic.replication.factor", "transaction.state.log.min.isr", "replica.lag.time.max.ms",
            "leader.replication.throttled.rate", "super.users", "group.share.enable"} <= set(KAFKA4_BROKER_CONFIGS)
    assert not set(KAFKA3_BROKER_CONFIGS) & set(KAFKA4_BROKER_CONFIGS)
    assert KAFKA_BROKER_CONFIGS["ssl.keystore.password"] == "password"
    # Kafka has no offsets.topic.min.isr (its offsets topic takes min.insync.replicas)
    assert "offsets.topic.min.isr" not in KAFKA_BROKER_CONFIGS


def test_broker_id_is_node_id_and_both_must_agree() -> None:
    assert BrokerConfig.from_kafka({"broker.id": "3"}).broker_id == 3
    assert BrokerConfig.from_kafka({"node.id": "3"}).broker_id == 3
    assert BrokerConfig.from_kafka({"broker.id": "3", "node.id": "03"}).node_id == 3
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_kafka({"broker.id": "1", "node.id": "2"})
    assert str(info.value) == ("broker.id=1 and node.id=2 disagree: they are the same setting (broker.id in "
                               "ZooKeeper mode, node.id in KRaft); set one, or both to the same id")
    with pytest.raises(ConfigError, match=re.escape("invalid value 'x' for broker.id: expected int")):
        BrokerConfig.from_kafka({"broker.id": "x", "node.id": "1"})
    with pytest.raises(ConfigError, match=re.escape("value '-1' for node.id is out of range")):
        BrokerConfig.from_kafka({"broker.id": "-1"})


def test_cluster_settings_have_kafkas_defaults() -> None:
    config = BrokerConfig()
    assert not config.cluster_mode and config.zookeeper_servers == () and config.zookeeper_chroot == ""
    assert (config.zookeeper_session_timeout_ms, config.zookeeper_connection_timeout) == (18000, 18000)
    assert (config.default_replication_factor, config.offsets_topic_replication_factor,
            config.transaction_state_log_replication_factor, config.transaction_state_log_min_isr) == (1, 3, 3, 2)
    assert (config.min_insync_replicas, config.offsets_topic_min_insync_replicas) == (1, 1)
    assert (config.unclean_leader_election_enable, config.replica_lag_time_max_ms) == (False, 30000)
    assert (config.replica_fetch_max_bytes, config.replica_fetch_wait_max_ms, config.replica_fetch_min_bytes,
            config.replica_fetch_backoff_ms, config.replica_fetch_response_max_bytes,
            config.replica_socket_timeout_ms, config.num_replica_fetchers) == (1048576, 500, 1, 1000, 10485760, 30000, 1)
    assert (config.controlled_shutdown_enable, config.controlled_shutdown_max_retries,
            config.controlled_shutdown_retry_backoff_ms) == (True, 3, 5000)
    assert (config.auto_leader_rebalance_enable, config.leader_imbalance_check_interval_seconds,
            config.leader_imbalance_per_broker_percentage) == (True, 300, 10)
    assert config.leader_replication_throttled_rate == config.follower_replication_throttled_rate == LONG_MAX
    assert config.replica_high_watermark_checkpoint_interval_ms == 5000
    assert (config.broker_rack, config.inter_broker_listener_name) == ("", "")


def test_every_table_default_is_the_field_default() -> None:
    config = BrokerConfig()
    for d in BROKER_CONFIGS:
        assert getattr(config, d.attr) == d.default, d.name
    assert {f.name for f in dataclasses.fields(BrokerConfig)} >= {d.attr for d in BROKER_CONFIGS}


def test_cluster_settings_are_typed_and_checked() -> None:
    config = BrokerConfig.from_kafka({
        "zookeeper.connect": "zk1:2181,zk2:2182/streamkit/prod", "zookeeper.session.timeout.ms": "6000",
        "broker.rack": "rack-a", "default.replication.factor": "3", "min.insync.replicas": "2",
        "offsets.topic.replication.factor": "3", "offsets.topic.min.isr": "2",
        "unclean.leader.election.enable": "true", "replica.fetch.wait.max.ms": "100",
        "leader.replication.throttled.rate": "1048576", "auto.leader.rebalance.enable": "false",
    })
    assert config.zookeeper_servers == (("zk1", 2181), ("zk2", 2182))
    assert config.zookeeper_chroot == "/streamkit/prod"
    assert config.zookeeper_connection_timeout == 6000  # unset: the session timeout
    assert (config.broker_rack, config.default_replication_factor) == ("rack-a", 3)
    assert (config.min_insync_replicas, config.topic_defaults.min_insync_replicas) == (2, 2)
    assert config.offsets_topic_min_insync_replicas == 2
    assert config.unclean_leader_election_enable and config.topic_defaults.unclean_leader_election_enable
    assert (config.replica_fetch_wait_max_ms, config.leader_replication_throttled_rate) == (100, 1048576)
    assert not config.auto_leader_rebalance_enable
    assert config.to_kafka()["zookeeper.connect"] == "zk1:2181,zk2:2182/streamkit/prod"
    rendered = config.to_kafka()
    assert rendered["zookeeper.connection.timeout.ms"] == ""  # Kafka's null: unset
    assert BrokerConfig.from_kafka({"zookeeper.connection.timeout.ms": ""}).zookeeper_connection_timeout_ms is None
    assert BrokerConfig.from_kafka({"zookeeper.connection.timeout.ms": "5000"}).zookeeper_connection_timeout == 5000
    assert BrokerConfig.from_kafka({"zookeeper.connect": "[::1]:2181/"}).zookeeper_servers == (("::1", 2181),)
    assert {"zookeeper.connect", "replica.lag.time.max.ms", "min.insync.replicas"} <= CLUSTER_ONLY


@pytest.mark.parametrize(("settings", "message"), [
    ({"zookeeper.connect": "localhost"}, "invalid zookeeper.connect 'localhost': 'localhost' is not host:port"),
    ({"zookeeper.connect": "a:2181,:2182"}, "':2182' is not host:port"),
    ({"zookeeper.connect": "a:99999"}, "'a:99999' is not host:port"),
    ({"zookeeper.connect": "a:2181/kafka/"}, "chroot '/kafka/' is not a ZooKeeper path"),
    ({"zookeeper.connect": "a:2181/x//y"}, "chroot '/x//y' is not a ZooKeeper path"),
    ({"zookeeper.connect": "a:2181/x/../y"}, "chroot '/x/../y' is not a ZooKeeper path"),
    ({"default.replication.factor": "0"}, "value '0' for default.replication.factor is out of range"),
    ({"offsets.topic.replication.factor": "40000"}, "value '40000' for offsets.topic.replication.factor is out of range"),
    ({"offsets.topic.min.isr": "0"}, "value '0' for offsets.topic.min.isr is out of range"),
    ({"transaction.state.log.min.isr": "0"}, "value '0' for transaction.state.log.min.isr is out of range"),
    ({"min.insync.replicas": "0"}, "value '0' for min.insync.replicas is out of range"),
    ({"unclean.leader.election.enable": "yes"}, "invalid value 'yes' for unclean.leader.election.enable"),
    ({"replica.fetch.wait.max.ms": "40000"}, "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms"),
    ({"replica.fetch.wait.max.ms": "2000", "replica.lag.time.max.ms": "1000"},
     "replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms"),
    ({"security.inter.broker.protocol": "TLS"}, "invalid value 'TLS' for security.inter.broker.protocol"),
    ({"replica.selector.class": "com.example.Mine"}, "invalid value 'com.example.Mine' for replica.selector.class"),
    ({"leader.replication.throttled.rate": "-1"}, "value '-1' for leader.replication.throttled.rate is out of range"),
])
def test_bad_cluster_settings_are_refused_in_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        BrokerConfig.from_kafka(settings)
    assert "\n" not in str(info.value)


DATA = Path(__file__).parent


def test_kafka_sample_files_parse() -> None:
    """Apache Kafka's own config/server.properties, verbatim: 4.0 (KRaft) and 3.9 (ZooKeeper)."""
    kraft = BrokerConfig.from_kafka(read_properties(DATA / "kafka-4.0.0-server.properties"))
    assert (kraft.node_id, kraft.listener_host, kraft.listener_port) == (1, "0.0.0.0", 9092)
    assert (kraft.advertised_host, kraft.advertised_port) == ("localhost", 9092)
    assert kraft.listener_endpoints == (Listener("PLAINTEXT", "", 9092),)
    assert kraft.inter_broker_listener == Listener("PLAINTEXT", "localhost", 9092)
    assert kraft.data_dir == Path("/tmp/kraft-combined-logs") and not kraft.cluster_mode
    assert kraft.topic_defaults.retention_ms == 168 * 3_600_000
    assert {n for n, _ in kraft.no_effect} == {
        "process.roles", "controller.quorum.bootstrap.servers", "inter.broker.listener.name",
        "controller.listener.names", "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir", "offsets.topic.replication.factor",
        "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
        "transaction.state.log.replication.factor", "transaction.state.log.min.isr"}

    zk = BrokerConfig.from_kafka(read_properties(DATA / "kafka-3.9.1-server.properties"))
    assert (zk.broker_id, zk.data_dir, zk.group_initial_rebalance_delay_ms) == (0, Path("/tmp/kafka-logs"), 0)
    assert zk.cluster_mode and zk.zookeeper_servers == (("localhost", 2181),)
    assert (zk.zookeeper_connection_timeout, zk.offsets_topic_replication_factor) == (18000, 1)
    assert (zk.transaction_state_log_replication_factor, zk.transaction_state_log_min_isr) == (1, 1)
    assert {n for n, _ in zk.no_effect} == {"num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
                                             "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir"}


def test_to_kafka_lists_the_new_names() -> None:
    rendered = BrokerConfig.from_kafka({"listeners": "PLAINTEXT://127.0.0.1:1", "log.dirs": "/d"}).to_kafka()
    assert (rendered["listeners"], rendered["log.dirs"]) == ("PLAINTEXT://127.0.0.1:1", "/d")


def test_per_listener_settings_override_the_global_ones() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    config = BrokerConfig.from_kafka({
        "listeners": "SSL://:9093,MTLS://:9094,SASL_SSL://:9095",
        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL",
        "ssl.keystore.location": "/etc/broker.pem", "ssl.truststore.location": "/etc/ca.pem",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.sasl_ssl.ssl.keystore.location": "/etc/other.pem",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
    })
    ssl_, mtls, sasl = config.listener_securities
    assert (ssl_.client_auth, mtls.client_auth) == ("none", "required")
    assert ssl_.get("ssl.keystore.location") == mtls.get("ssl.keystore.location") == "/etc/broker.pem"
    assert sasl.get("ssl.keystore.location") == "/etc/other.pem"
    assert sasl.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert sasl.jaas["PLAIN"].users() == {"admin": "admin-secret", "alice": "alice-secret"}
    assert config.no_effect == ()  # acted on, so not listed as "no effect here"
