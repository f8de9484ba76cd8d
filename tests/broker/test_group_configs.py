"""Group configs (Kafka 4's GROUP config resource): validation against the broker's
group.<kind>.min/max bounds, session > heartbeat, defaults from the broker, durability."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkit.broker.config import BrokerConfig
from streamkit.broker.group_configs import GroupConfig, GroupConfigStore, validate_group_configs
from streamkit.log.errors import ConfigError


def test_defaults_come_from_the_broker() -> None:
    broker = BrokerConfig.from_kafka({"group.consumer.session.timeout.ms": "50000",
                                      "group.share.record.lock.duration.ms": "20000"})
    config = validate_group_configs({}, broker)
    assert config.consumer_session_timeout_ms == 50000
    assert config.share_record_lock_duration_ms == 20000
    assert config.share_auto_offset_reset == "latest"
    assert GroupConfig().to_kafka()["share.isolation.level"] == "read_uncommitted"


@pytest.mark.parametrize("overrides,message", [
    ({"consumer.session.timeout.ms": "44999"}, "greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "60001"}, "less than or equal to group.consumer.max.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "15001"}, "group.consumer.max.heartbeat.interval.ms"),
    ({"share.session.timeout.ms": "1"}, "group.share.min.session.timeout.ms"),
    ({"share.heartbeat.interval.ms": "4999"}, "group.share.min.heartbeat.interval.ms"),
    ({"share.record.lock.duration.ms": "60001"}, "group.share.max.record.lock.duration.ms"),
    ({"streams.num.standby.replicas": "3"}, "group.streams.max.standby.replicas"),
    ({"streams.session.timeout.ms": "x"}, "expected int"),
    ({"share.auto.offset.reset": "none"}, "by_duration"),
    ({"share.auto.offset.reset": "by_duration:1h"}, "by_duration"),
    ({"share.isolation.level": "committed"}, "read_committed"),
    ({"consumer.session.timeout.msx": "1"}, "did you mean 'consumer.session.timeout.ms'"),
])
def test_invalid_group_configs(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_group_configs(overrides, BrokerConfig())


def test_session_timeout_must_exceed_heartbeat_interval() -> None:
    broker = BrokerConfig.from_kafka({"group.consumer.min.session.timeout.ms": "1000",
                                      "group.consumer.max.heartbeat.interval.ms": "30000"})
    with pytest.raises(ConfigError, match=r"consumer\.session\.timeout\.ms must be greater than"):
        validate_group_configs({"consumer.session.timeout.ms": "10000",
                                "consumer.heartbeat.interval.ms": "10000"}, broker)
    assert validate_group_configs({"consumer.session.timeout.ms": "10001", "consumer.heartbeat.interval.ms": "10000"},
                                  broker).consumer_session_timeout_ms == 10001


def test_valid_values() -> None:
    config = validate_group_configs({"share.auto.offset.reset": "by_duration:P1DT2H30M", "share.isolation.level":
                                     "read_committed", "streams.num.standby.replicas": "2"}, BrokerConfig())
    assert config.share_auto_offset_reset == "by_duration:P1DT2H30M"
    assert config.share_isolation_level == "read_committed"
    assert config.streams_num_standby_replicas == 2


def test_store_is_durable_and_validate_only_changes_nothing(tmp_path: Path) -> None:
    broker = BrokerConfig()
    store = GroupConfigStore(tmp_path, broker)
    store.load()
    assert store.get("g") == store.defaults
    store.set_overrides("g", {"consumer.heartbeat.interval.ms": "6000"}, validate_only=True)
    assert store.overrides("g") == {}
    store.set_overrides("g", {"consumer.heartbeat.interval.ms": "6000"})
    with pytest.raises(ConfigError):
        store.set_overrides("g", {"consumer.heartbeat.interval.ms": "1"})
    reopened = GroupConfigStore(tmp_path, broker)
    reopened.load()
    assert reopened.get("g").consumer_heartbeat_interval_ms == 6000
    assert reopened.get("other") == reopened.defaults
    reopened.set_overrides("g", {})
    again = GroupConfigStore(tmp_path, broker)
    again.load()
    assert again.overrides("g") == {} and again.get("g") == again.defaults


def test_broker_wide_topic_defaults_under_kafka_names() -> None:
    """Topic configs Kafka sets broker-wide (same name or log.* synonym) become every
    topic's default instead of being ignored."""
    broker = BrokerConfig.from_kafka({
        "compression.type": "zstd", "log.cleaner.max.compaction.lag.ms": "60000",
        "log.roll.jitter.hours": "1", "min.insync.replicas": "2", "log.preallocate": "true",
        "log.local.retention.ms": "1000", "log.message.timestamp.after.max.ms": "3600000",
    })
    defaults = broker.topic_defaults
    assert defaults.compression_type == "zstd" and defaults.max_compaction_lag_ms == 60000
    assert defaults.segment_jitter_ms == 3_600_000 and defaults.min_insync_replicas == 2
    assert defaults.preallocate and defaults.local_retention_ms == 1000
    assert defaults.message_timestamp_after_max_ms == 3_600_000
    assert broker.to_kafka()["log.cleaner.max.compaction.lag.ms"] == "60000"
    with pytest.raises(ConfigError):
        BrokerConfig.from_kafka({"compression.type": "brotli"})
