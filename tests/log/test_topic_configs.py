"""Topic configs the append path acts on: compression.type (broker-side recompression with
the configured level) and message.timestamp.before/after.max.ms; and the parsing of Kafka's
whole topic config list (order-keeping lists, an empty cleanup.policy, unit synonyms)."""

from __future__ import annotations

import re

import pytest

from streamkit.log import Compression, build_batch, decode_batch
from streamkit.log.batch import parse_header
from streamkit.log.config import BROKER_SYNONYMS, TOPIC_CONFIGS, LogConfig
from streamkit.log.errors import ConfigError, InvalidTimestampError
from streamkit.log.producer_state import AppendOrigin

from .conftest import T0, FakeClock, OpenLog, make_batch, make_records, read_batches, read_records

KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.format.version", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.storage.enable",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}


def test_every_kafka_topic_config_is_defined() -> None:
    assert {d.name for d in TOPIC_CONFIGS} == KAFKA_TOPIC_CONFIGS
    assert set(LogConfig().to_kafka()) == KAFKA_TOPIC_CONFIGS


def test_kafka_defaults_and_round_trip() -> None:
    kafka = LogConfig().to_kafka()
    assert kafka["compression.type"] == "producer"
    assert kafka["compression.gzip.level"] == "-1"
    assert kafka["compression.lz4.level"] == "9"
    assert kafka["compression.zstd.level"] == "3"
    assert kafka["max.compaction.lag.ms"] == "9223372036854775807"
    assert kafka["local.retention.ms"] == "-2" and kafka["local.retention.bytes"] == "-2"
    assert kafka["leader.replication.throttled.replicas"] == ""
    assert kafka["message.downconversion.enable"] == "true"
    assert kafka["segment.index.bytes"] == "10485760"
    assert kafka["file.delete.delay.ms"] == "60000"
    assert LogConfig.from_kafka(kafka) == LogConfig()


def test_lists_keep_kafka_order_and_empty_cleanup_policy_means_keep_everything() -> None:
    assert LogConfig.from_kafka({"cleanup.policy": "delete,compact"}).cleanup_policy == ("delete", "compact")
    assert LogConfig.from_kafka({"cleanup.policy": "compact,delete"}).cleanup_policy == ("compact", "delete")
    empty = LogConfig.from_kafka({"cleanup.policy": ""})
    assert empty.cleanup_policy == () and not empty.compact and not empty.delete
    assert empty.to_kafka()["cleanup.policy"] == ""
    throttled = LogConfig.from_kafka({"leader.replication.throttled.replicas": "0:0, 1:0"})
    assert throttled.leader_replication_throttled_replicas == ("0:0", "1:0")
    assert LogConfig.from_kafka({"follower.replication.throttled.replicas": "*"}).to_kafka()[
        "follower.replication.throttled.replicas"] == "*"


def test_replication_configs_are_typed_with_the_broker_default() -> None:
    """min.insync.replicas and unclean.leader.election.enable default from the broker settings
    of the same names; the throttled-replicas lists answer per (partition, broker)."""
    broker = LogConfig.from_kafka({"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
    topic = LogConfig.from_kafka({"leader.replication.throttled.replicas": "0:1, 2:3",
                                  "follower.replication.throttled.replicas": "*"}, broker)
    assert (topic.min_insync_replicas, topic.unclean_leader_election_enable) == (2, True)
    assert LogConfig.from_kafka({"min.insync.replicas": "3"}, broker).min_insync_replicas == 3
    assert topic.leader_throttled(0, 1) and topic.leader_throttled(2, 3)
    assert not topic.leader_throttled(0, 3) and not topic.leader_throttled(1, 1)
    assert topic.follower_throttled(7, 9) and not LogConfig().follower_throttled(0, 0)
    with pytest.raises(ConfigError, match=re.escape("value '0' for min.insync.replicas is out of range")):
        LogConfig.from_kafka({"min.insync.replicas": "0"})
    # Kafka has no broker-wide throttled-replicas setting, only the per-topic lists
    assert "leader.replication.throttled.replicas" not in BROKER_SYNONYMS
    assert "follower.replication.throttled.replicas" not in BROKER_SYNONYMS
    assert {"min.insync.replicas", "unclean.leader.election.enable"} <= set(BROKER_SYNONYMS)


def test_empty_cleanup_policy_keeps_old_segments(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log({"cleanup.policy": "", "retention.ms": 1, "retention.bytes": 10, "segment.bytes": 200})
    for _ in range(10):
        log.append(make_batch(2, ts=T0))
    clock.advance(10_000)
    assert len(log.segments) > 2
    assert log.apply_retention() == 0
    assert log.log_start_offset == 0


def test_min_compaction_lag_may_not_exceed_max() -> None:
    with pytest.raises(ConfigError, match="conflict"):
        LogConfig.from_kafka({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})
    assert LogConfig.from_kafka({"min.compaction.lag.ms": 5, "max.compaction.lag.ms": 5}).max_compaction_lag_ms == 5


def test_unit_synonyms() -> None:
    assert LogConfig.from_kafka({"log.retention.hours": 2}).retention_ms == 7_200_000
    assert LogConfig.from_kafka({"log.retention.minutes": 3}).retention_ms == 180_000
    assert LogConfig.from_kafka({"log.roll.jitter.hours": 1}).segment_jitter_ms == 3_600_000
    assert LogConfig.from_kafka({"log.cleaner.max.compaction.lag.ms": 5}).max_compaction_lag_ms == 5


# -- compression.type ---------------------------------------------------------------------


def test_producer_compression_is_stored_verbatim(open_log: OpenLog) -> None:
    log = open_log()
    batch = make_batch(5, compression=Compression.SNAPPY)
    log.append(batch)
    assert read_batches(log) == [batch]


@pytest.mark.parametrize("codec,name", [(Compression.GZIP, "gzip"), (Compression.SNAPPY, "snappy"),
                                        (Compression.LZ4, "lz4"), (Compression.ZSTD, "zstd"),
                                        (Compression.NONE, "uncompressed")])
def test_broker_recompresses_to_the_topic_codec(open_log: OpenLog, codec: int, name: str) -> None:
    log = open_log({"compression.type": name})
    sources = [make_batch(4, compression=Compression.NONE, tag="a"),
               make_batch(4, compression=Compression.GZIP, tag="b"),
               make_batch(4, compression=Compression.ZSTD, tag="c")]
    expected = []
    for batch in sources:
        expected += decode_batch(batch)[1]
        log.append(batch)
    stored = read_batches(log)
    assert [parse_header(b).compression for b in stored] == [codec] * 3
    got = read_records(log)
    assert [(r.key, r.value, r.timestamp, r.offset) for r in got] == [
        (r.key, r.value, r.timestamp, i) for i, r in enumerate(expected)]


def test_batch_already_in_the_topic_codec_is_kept_byte_for_byte(open_log: OpenLog) -> None:
    log = open_log({"compression.type": "lz4"})
    batch = make_batch(5, compression=Compression.LZ4)
    log.append(batch)
    assert read_batches(log) == [batch]


def test_recompression_uses_the_configured_level(open_log: OpenLog, tmp_path_factory: pytest.TempPathFactory) -> None:
    records = make_records(200, value_size=400)
    batch = build_batch(records)
    sizes = {}
    for level in (1, 19):
        log = open_log({"compression.type": "zstd", "compression.zstd.level": level},
                       directory=tmp_path_factory.mktemp(f"zstd{level}") / "t-0")
        log.append(batch)
        (stored,) = read_batches(log)
        sizes[level] = len(stored)
        assert [r.value for r in decode_batch(stored)[1]] == [r.value for r in records]
    assert sizes[19] < sizes[1]


def test_recompression_keeps_producer_fields(open_log: OpenLog) -> None:
    log = open_log({"compression.type": "gzip"})
    client = AppendOrigin.CLIENT
    log.append(make_batch(3, producer_id=7, producer_epoch=2, base_sequence=0, transactional=True), origin=client)
    log.append(make_batch(2, producer_id=7, producer_epoch=2, base_sequence=3, transactional=True), origin=client)
    # a retried duplicate is still recognised after recompression
    result = log.append(make_batch(2, producer_id=7, producer_epoch=2, base_sequence=3, transactional=True),
                        origin=client)
    assert (result.base_offset, result.last_offset) == (3, 4)
    headers = [parse_header(b) for b in read_batches(log)]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional, h.compression)
            for h in headers] == [(7, 2, 0, True, Compression.GZIP), (7, 2, 3, True, Compression.GZIP)]


def test_compression_type_change_applies_to_later_batches(open_log: OpenLog) -> None:
    log = open_log()
    log.append(make_batch(2))
    log.update_config(LogConfig.from_kafka({"retention.ms": -1, "compression.type": "snappy"}))
    log.append(make_batch(2))
    assert [parse_header(b).compression for b in read_batches(log)] == [Compression.NONE, Compression.SNAPPY]


# -- message.timestamp.before/after.max.ms --------------------------------------------------


def test_timestamp_bounds(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log({"message.timestamp.before.max.ms": 1000, "message.timestamp.after.max.ms": 500})
    log.append(make_batch(2, ts=[T0 - 1000, T0 + 500]))
    with pytest.raises(InvalidTimestampError, match=r"after\.max\.ms"):
        log.append(make_batch(1, ts=T0 + 501))
    with pytest.raises(InvalidTimestampError, match=r"before\.max\.ms"):
        log.append(make_batch(2, ts=[T0, T0 - 1001]))
    assert log.log_end_offset == 2


def test_deprecated_difference_max_ms_bounds_both_sides_when_they_are_default(
        open_log: OpenLog, tmp_path_factory: pytest.TempPathFactory) -> None:
    log = open_log({"message.timestamp.difference.max.ms": 1000})
    log.append(make_batch(2, ts=[T0 - 1000, T0 + 1000]))
    for ts in (T0 - 1001, T0 + 1001):
        with pytest.raises(InvalidTimestampError):
            log.append(make_batch(1, ts=ts))
    # an explicit after.max.ms wins on its side, difference.max.ms still bounds the other
    both = open_log({"message.timestamp.difference.max.ms": 1000, "message.timestamp.after.max.ms": 5000},
                    directory=tmp_path_factory.mktemp("diff") / "t-0")
    both.append(make_batch(1, ts=T0 + 5000))
    with pytest.raises(InvalidTimestampError):
        both.append(make_batch(1, ts=T0 - 1001))


def test_timestamp_bounds_do_not_apply_to_log_append_time(open_log: OpenLog) -> None:
    log = open_log({"message.timestamp.after.max.ms": 0, "message.timestamp.type": "LogAppendTime"})
    log.append(make_batch(1, ts=T0 + 10_000))
    assert log.log_end_offset == 1


# -- segment.jitter.ms --------------------------------------------------------------------


def _roll_spans(open_log: OpenLog, settings: dict[str, object], tmp: pytest.TempPathFactory) -> list[int]:
    """How far each closed segment's records span when one record comes every ms."""
    log = open_log({"segment.ms": 100, **settings}, directory=tmp.mktemp("jitter") / "t-0")
    for i in range(3000):
        log.append(make_batch(1, ts=T0 + i))
    return [seg.max_timestamp - seg.first_timestamp for seg in log.segments[:-1]
            if seg.first_timestamp is not None]


def test_segment_jitter_rolls_segments_early_by_a_random_amount(
        open_log: OpenLog, tmp_path_factory: pytest.TempPathFactory) -> None:
    assert set(_roll_spans(open_log, {}, tmp_path_factory)) == {100}  # no jitter: exactly segment.ms
    spans = _roll_spans(open_log, {"segment.jitter.ms": 90}, tmp_path_factory)
    assert all(10 <= s <= 100 for s in spans)
    assert len(set(spans)) > 3  # each segment draws its own jitter
