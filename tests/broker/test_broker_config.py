"""Broker settings: Kafka's server.properties names, including the ones a real Kafka file
carries (listeners, log.dirs, threads, ZooKeeper/KRaft), and typos."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamkit.broker.config import BrokerConfig, read_properties
from streamkit.broker.run import DEFAULT_DATA_DIR, DEFAULT_HOST, DEFAULT_PORT, placement
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
    ({"listeners": "SSL://:9093"}, "uses SSL; streamkit serves PLAINTEXT only"),
    ({"listeners": "PLAINTEXT://:9092,OTHER://:9094",
      "listener.security.protocol.map": "OTHER:PLAINTEXT,PLAINTEXT:PLAINTEXT"}, "exactly one PLAINTEXT"),
    ({"listeners": "PLAINTEXT://localhost"}, "expected NAME://host:port"),
    ({"listeners": "localhost:9092"}, "expected NAME://host:port"),
    ({"advertised.listeners": "PLAINTEXT://:9092"}, "needs a host name"),
    ({"log.dirs": "/a,/b"}, "streamkit uses one"),
])
def test_listener_and_log_dir_errors(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_kafka(settings)


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


def test_kafka_settings_that_do_not_apply_are_ignored_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamkit.broker.config"):
        config = BrokerConfig.from_kafka({
            "num.network.threads": "3", "num.io.threads": "8", "zookeeper.connect": "localhost:2181",
            "controller.quorum.voters": "1@localhost:9093", "process.roles": "broker,controller",
            "offsets.topic.replication.factor": "1", "num.partitions": "4",
        })
    assert config.num_partitions == 4
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["ignoring Kafka settings that do not apply to streamkit: num.network.threads, "
                        "num.io.threads, zookeeper.connect, controller.quorum.voters, process.roles, "
                        "offsets.topic.replication.factor"]


def test_no_warning_without_ignored_settings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamkit.broker.config"):
        BrokerConfig.from_kafka({"num.partitions": "2", "log.retention.hours": "1"})
    assert not caplog.records


@pytest.mark.parametrize(("name", "hint"), [
    ("num.partitons", " (did you mean 'num.partitions'?)"),
    ("log.retention.msec", " (did you mean 'log.retention.ms'?)"),
    ("wibble", ""),
])
def test_an_unknown_name_is_an_error_with_a_hint(name: str, hint: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_kafka({name: "1"})
    assert str(info.value) == f"unknown broker config {name!r}{hint}"


def test_kafka_sample_files_parse(tmp_path: Path) -> None:
    """Kafka's own config/server.properties (ZooKeeper) and config/kraft/server.properties."""
    from tests.broker.kafka_properties import KRAFT_SERVER_PROPERTIES, ZK_SERVER_PROPERTIES

    zk = tmp_path / "server.properties"
    zk.write_text(ZK_SERVER_PROPERTIES.format(port=9092, log_dirs="/tmp/kafka-logs"))
    config = BrokerConfig.from_kafka(read_properties(zk))
    assert (config.node_id, config.data_dir, config.group_initial_rebalance_delay_ms) == (0, Path("/tmp/kafka-logs"), 0)
    assert config.topic_defaults.retention_ms == 168 * 3_600_000
    assert config.topic_defaults.segment_bytes == 1073741824
    kraft = tmp_path / "kraft.properties"
    kraft.write_text(KRAFT_SERVER_PROPERTIES.format(port=9092, log_dirs="/tmp/kraft-combined-logs"))
    config = BrokerConfig.from_kafka(read_properties(kraft))
    assert (config.node_id, config.listener_host, config.listener_port) == (1, "0.0.0.0", 9092)
    assert (config.advertised_host, config.advertised_port) == ("localhost", 9092)


def test_to_kafka_lists_the_new_names() -> None:
    rendered = BrokerConfig.from_kafka({"listeners": "PLAINTEXT://127.0.0.1:1", "log.dirs": "/d"}).to_kafka()
    assert (rendered["listeners"], rendered["log.dirs"]) == ("PLAINTEXT://127.0.0.1:1", "/d")
