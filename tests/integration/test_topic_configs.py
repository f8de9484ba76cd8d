"""Kafka 4's topic and group configs through real admin clients: every standard topic config
round-trips (confluent-kafka, kafka-python, aiokafka), DescribeConfigs reports sources,
synonyms and documentation, APPEND/SUBTRACT keep Kafka's order, a topic with a
compression.type is recompressed by the broker and readable by every client and kcat, and
group configs (the GROUP resource) are validated, stored durably and described."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

from streamkit.log.batch import Compression
from streamkit.testing import BrokerProcess
from tests.conftest import require_service
from tests.integration.util import (
    QUIET,
    admin,
    call,
    connect,
    read_partition,
    stored_batches,
    wait_until,
)

pytestmark = pytest.mark.integration

TIMEOUT = 15

# A valid value other than Kafka's default for every standard topic config.
EVERY_TOPIC_CONFIG = {
    "cleanup.policy": "compact,delete", "compression.type": "gzip", "compression.gzip.level": "9",
    "compression.lz4.level": "4", "compression.zstd.level": "7", "delete.retention.ms": "1000",
    "file.delete.delay.ms": "5", "flush.messages": "1000", "flush.ms": "2000",
    "follower.replication.throttled.replicas": "0:0", "index.interval.bytes": "1024",
    "leader.replication.throttled.replicas": "*", "local.retention.bytes": "-1",
    "local.retention.ms": "1000", "max.compaction.lag.ms": "86400000", "max.message.bytes": "2000000",
    "message.downconversion.enable": "false", "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": "3600000", "message.timestamp.before.max.ms": "86400000",
    "message.timestamp.difference.max.ms": "86400000", "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.3", "min.compaction.lag.ms": "10", "min.insync.replicas": "2",
    "preallocate": "true", "remote.storage.enable": "false", "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true", "retention.bytes": "100000000", "retention.ms": "86400000",
    "segment.bytes": "1000000", "segment.index.bytes": "1000000", "segment.jitter.ms": "10",
    "segment.ms": "3600000", "unclean.leader.election.enable": "true",
}


def _error(call_: Any) -> int:
    with pytest.raises(KafkaException) as info:
        call_()
    return int(info.value.args[0].code())


def _describe(client: Any, resource: ConfigResource) -> dict[str, Any]:
    return dict(client.describe_configs([resource], request_timeout=10)[resource].result(TIMEOUT))


def _alter(client: Any, resource_type: Any, name: str, *entries: ConfigEntry) -> None:
    resource = ConfigResource(resource_type, name, incremental_configs=list(entries))
    client.incremental_alter_configs([resource])[resource].result(TIMEOUT)


def test_every_topic_config_round_trips_through_confluent(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1, config=EVERY_TOPIC_CONFIG)])[topic_name].result(TIMEOUT)
    described = _describe(client, ConfigResource(ConfigResource.Type.TOPIC, topic_name))
    assert {k: described[k].value for k in EVERY_TOPIC_CONFIG} == EVERY_TOPIC_CONFIG
    assert {described[k].source for k in EVERY_TOPIC_CONFIG} == {ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert not any(e.is_read_only for e in described.values())

    # each one alone through IncrementalAlterConfigs, then back to the default
    other = f"{topic_name}-alter"
    client.create_topics([NewTopic(other, 1, 1)])[other].result(TIMEOUT)
    resource = ConfigResource(ConfigResource.Type.TOPIC, other)
    defaults = _describe(client, resource)
    assert {defaults[k].source for k in EVERY_TOPIC_CONFIG} == {ConfigSource.DEFAULT_CONFIG.value}
    _alter(client, ConfigResource.Type.TOPIC, other, *(
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in EVERY_TOPIC_CONFIG.items()))
    assert {k: e.value for k, e in _describe(client, resource).items() if k in EVERY_TOPIC_CONFIG} == (
        EVERY_TOPIC_CONFIG)
    _alter(client, ConfigResource.Type.TOPIC, other, *(
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in EVERY_TOPIC_CONFIG))
    assert {k: e.value for k, e in _describe(client, resource).items()} == {
        k: e.value for k, e in defaults.items()}


@pytest.mark.parametrize("name,value", [
    ("compression.type", "brotli"), ("compression.zstd.level", "23"), ("compression.gzip.level", "0"),
    ("min.insync.replicas", "0"), ("max.compaction.lag.ms", "0"), ("preallocate", "maybe"),
    ("local.retention.ms", "-3"), ("leader.replication.throttled.replicas", "a:b"),
    ("message.format.version", "x"), ("segment.index.bytes", "2"), ("unclean.leader.election.enable", "1"),
])
def test_invalid_topic_configs_are_refused(broker: BrokerProcess, topic_name: str, name: str, value: str) -> None:
    client = admin(broker.bootstrap)
    future = client.create_topics([NewTopic(topic_name, 1, 1, config={name: value})])[topic_name]
    assert _error(lambda: future.result(TIMEOUT)) == KafkaError.INVALID_CONFIG


def test_append_and_subtract_keep_kafka_order_and_empty_cleanup_policy(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(TIMEOUT)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name)

    def policy(op: AlterConfigOpType, value: str) -> str:
        _alter(client, ConfigResource.Type.TOPIC, topic_name,
               ConfigEntry("cleanup.policy", value, incremental_operation=op))
        return str(_describe(client, resource)["cleanup.policy"].value)

    assert policy(AlterConfigOpType.APPEND, "compact") == "delete,compact"  # after the default
    assert policy(AlterConfigOpType.SUBTRACT, "delete") == "compact"
    assert policy(AlterConfigOpType.APPEND, "delete") == "compact,delete"
    assert policy(AlterConfigOpType.APPEND, "compact") == "compact,delete"  # no duplicate
    assert policy(AlterConfigOpType.SUBTRACT, "compact,delete") == ""  # Kafka 4: neither
    entry = _describe(client, resource)["cleanup.policy"]
    assert entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert policy(AlterConfigOpType.SET, "") == ""
    assert _error(lambda: policy(AlterConfigOpType.APPEND, "shred")) == KafkaError.INVALID_CONFIG


def test_describe_reports_synonyms_and_documentation(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1, config={"retention.ms": "1000"})])[topic_name].result(TIMEOUT)
    described = _describe(client, ConfigResource(ConfigResource.Type.TOPIC, topic_name))
    chain = [(s.name, s.value, s.source) for s in described["retention.ms"].synonyms.values()]
    assert chain == [("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
                     ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value)]
    chain = [(s.name, s.source) for s in described["max.compaction.lag.ms"].synonyms.values()]
    assert chain == [("log.cleaner.max.compaction.lag.ms", ConfigSource.DEFAULT_CONFIG.value)]

    # documentation and types, and no synonyms unless asked (a raw DescribeConfigs v4)
    with connect(broker.bootstrap) as sock:
        def describe(synonyms: bool, docs: bool) -> dict[str, Any]:
            request = DescribeConfigsRequest(
                resources=(DescribeConfigsResource(resource_type=2, resource_name=topic_name,
                                                   configuration_keys=("min.insync.replicas", "retention.ms")),),
                include_synonyms=synonyms, include_documentation=docs)
            (result,) = call(sock, request).results
            return {c.name: c for c in result.configs}

        bare = describe(False, False)
        assert bare["retention.ms"].synonyms == () and bare["retention.ms"].documentation is None
        full = describe(True, True)
        assert "acted on in a cluster (zookeeper.connect)" in full["min.insync.replicas"].documentation
        assert int(full["min.insync.replicas"].config_type) == 3  # INT
        assert int(full["retention.ms"].config_type) == 5  # LONG


def test_min_insync_replicas_is_a_topic_config_with_the_broker_default(broker_factory: Any, topic_name: str) -> None:
    """min.insync.replicas on the wire: the broker setting is every topic's default, a topic
    overrides it, and CreateTopics refuses 0 with INVALID_CONFIG and the reason."""
    broker = broker_factory(settings={"min.insync.replicas": "2"})
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(TIMEOUT)
    entry = _describe(client, ConfigResource(ConfigResource.Type.TOPIC, topic_name))["min.insync.replicas"]
    assert (entry.value, entry.source) == ("2", ConfigSource.STATIC_BROKER_CONFIG.value)
    three = f"{topic_name}-3"
    client.create_topics([NewTopic(three, 1, 1, config={"min.insync.replicas": "3"})])[three].result(TIMEOUT)
    entry = _describe(client, ConfigResource(ConfigResource.Type.TOPIC, three))["min.insync.replicas"]
    assert (entry.value, entry.source) == ("3", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    zero = f"{topic_name}-0"
    future = client.create_topics([NewTopic(zero, 1, 1, config={"min.insync.replicas": "0"})])[zero]
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    error = info.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "value '0' for min.insync.replicas is out of range" in error.str()
    assert zero not in client.list_topics(timeout=10).topics


def test_broker_describe_is_read_only_with_sources(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    described = _describe(client, ConfigResource(ConfigResource.Type.BROKER, "0"))
    assert described["offsets.topic.num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert described["log.cleaner.max.compaction.lag.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["compression.type"].value == "producer"
    assert described["group.consumer.max.session.timeout.ms"].value == "60000"
    assert all(e.is_read_only for e in described.values())


def test_broker_describe_reports_the_cluster_settings(broker_factory: Any) -> None:
    """The cluster settings are broker configs like the others, the ones with no default
    (Kafka's null) included: set, they are STATIC_BROKER_CONFIG; unset, empty."""
    broker = broker_factory(settings={"offsets.topic.min.isr": "1", "replica.lag.time.max.ms": "10000"})
    described = _describe(admin(broker.bootstrap), ConfigResource(ConfigResource.Type.BROKER, "0"))
    static = ConfigSource.STATIC_BROKER_CONFIG.value
    assert (described["offsets.topic.min.isr"].value, described["offsets.topic.min.isr"].source) == ("1", static)
    assert (described["replica.lag.time.max.ms"].value, described["replica.lag.time.max.ms"].source) == (
        "10000", static)
    unset = described["zookeeper.connection.timeout.ms"]
    assert (unset.value, unset.source) == ("", ConfigSource.DEFAULT_CONFIG.value)
    assert described["offsets.topic.replication.factor"].value == "3"


# -- compression.type -----------------------------------------------------------------------


def _confluent_produce(bootstrap: str, topic: str, values: list[bytes], **settings: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, **QUIET, **settings})
    for v in values:
        producer.produce(topic, v, key=v[:4])
    assert producer.flush(TIMEOUT) == 0


def _kafka_python_produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    try:
        for v in values:
            producer.send(topic, v, key=v[:4])
        producer.flush(TIMEOUT)
    finally:
        producer.close()


def _aiokafka_produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
        await producer.start()
        try:
            batch = producer.create_batch()
            for v in values:
                assert batch.append(key=v[:4], value=v, timestamp=None) is not None
            await (await producer.send_batch(batch, topic, partition=0))
        finally:
            await producer.stop()

    asyncio.run(run())


def _kafka_python_read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        out: list[bytes] = []
        for message in consumer:
            out.append(message.value)
            if len(out) == count:
                break
        return out
    finally:
        consumer.close()


def _aiokafka_read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            out: list[bytes] = []
            deadline = time.monotonic() + 15
            while len(out) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(tp, timeout_ms=1000)
                out += [m.value for m in batches.get(tp, [])]
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _kcat_read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    kcat = shutil.which("kcat")
    require_service(kcat is not None, "the kcat CLI")
    assert kcat is not None
    out = subprocess.run([kcat, "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
                          "-c", str(count), "-e", "-f", "%s\\n"], capture_output=True, timeout=60, check=True)
    return out.stdout.splitlines()


@pytest.mark.parametrize("codec,name", [(Compression.ZSTD, "zstd"), (Compression.LZ4, "lz4"),
                                        (Compression.GZIP, "gzip"), (Compression.SNAPPY, "snappy")])
def test_broker_recompression_is_readable_by_every_client(broker: BrokerProcess, topic_name: str,
                                                          codec: int, name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1, config={"compression.type": name})])[topic_name].result(TIMEOUT)
    values = [f"value-{i:04d}-".encode() * 8 for i in range(90)]
    _confluent_produce(broker.bootstrap, topic_name, values[:30])  # uncompressed
    _kafka_python_produce(broker.bootstrap, topic_name, values[30:60])
    _confluent_produce(broker.bootstrap, topic_name, values[60:], **{"compression.type": "lz4" if name != "lz4" else "gzip"})
    headers = stored_batches(broker.data_dir, topic_name, 0)
    assert headers and {h.compression for h in headers} == {codec}
    assert [m.value for m in read_partition(broker.bootstrap, topic_name, 0)] == values
    assert _kafka_python_read(broker.bootstrap, topic_name, 90) == values
    assert _aiokafka_read(broker.bootstrap, topic_name, 90) == values
    assert _kcat_read(broker.bootstrap, topic_name, 90) == values


def test_producer_compression_is_kept_verbatim_and_idempotent_batches_keep_producer_fields(
        broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    plain, recompressed = f"{topic_name}-p", f"{topic_name}-z"
    futures = client.create_topics([NewTopic(plain, 1, 1),
                                    NewTopic(recompressed, 1, 1, config={"compression.type": "zstd"})])
    for future in futures.values():
        future.result(TIMEOUT)
    values = [f"v{i}".encode() * 20 for i in range(40)]
    for t in (plain, recompressed):
        _confluent_produce(broker.bootstrap, t, values, **{"enable.idempotence": True, "compression.type": "snappy"})
    assert {h.compression for h in stored_batches(broker.data_dir, plain, 0)} == {Compression.SNAPPY}
    headers = stored_batches(broker.data_dir, recompressed, 0)
    assert {h.compression for h in headers} == {Compression.ZSTD}
    assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)
    assert [m.value for m in read_partition(broker.bootstrap, recompressed, 0)] == values
    _aiokafka_produce(broker.bootstrap, recompressed, values[:5])
    assert _aiokafka_read(broker.bootstrap, recompressed, 45)[-5:] == values[:5]


def test_message_timestamp_after_max_ms_refuses_future_records(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1, config={"message.timestamp.after.max.ms": "60000"})])[
        topic_name].result(TIMEOUT)
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    now = int(time.time() * 1000)
    producer.produce(topic_name, b"ok", timestamp=now, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(TIMEOUT)
    producer.produce(topic_name, b"future", timestamp=now + 3_600_000, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(TIMEOUT)
    assert errors[0] is None and errors[1].code() == KafkaError.INVALID_TIMESTAMP


# -- other clients ------------------------------------------------------------------------


def test_kafka_python_and_aiokafka_admin_round_trip(broker: BrokerProcess, topic_name: str) -> None:
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    settings = {"min.insync.replicas": "2", "segment.jitter.ms": "5", "preallocate": "true",
                "remote.storage.enable": "false", "compression.type": "lz4"}
    k_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        k_admin.create_topics([KNewTopic(topic_name, 1, 1, topic_configs=settings)])
        k_admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic_name,
                                               configs={**settings, "file.delete.delay.ms": "7"})])
        described = k_admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic_name)],
                                             include_synonyms=True, config_filter="all")
        entries = _kafka_python_entries(described)
        assert {k: entries[k] for k in settings} == settings and entries["file.delete.delay.ms"] == "7"
    finally:
        k_admin.close()

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AType

    async def aio() -> dict[str, str]:
        a_admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await a_admin.start()
        try:
            await a_admin.alter_configs([AConfigResource(AType.TOPIC, topic_name, configs={
                "unclean.leader.election.enable": "true", "local.retention.bytes": "1000"})])
            (response,) = await a_admin.describe_configs([AConfigResource(AType.TOPIC, topic_name)])
            return {c[0]: c[1] for r in response.resources for c in r[4]}
        finally:
            await a_admin.close()

    entries = asyncio.run(aio())
    assert entries["unclean.leader.election.enable"] == "true" and entries["local.retention.bytes"] == "1000"
    assert entries["min.insync.replicas"] == "1"  # AlterConfigs replaced the whole set


def _kafka_python_entries(described: Any) -> dict[str, str]:
    """kafka-python 3 answers {resource type: {resource name: {config: {"value": ...}}}}."""
    ((_type, by_name),) = described.items()
    ((_name, entries),) = by_name.items()
    return {k: v["value"] for k, v in entries.items()}


# -- group configs ------------------------------------------------------------------------


def test_group_configs_validated_stored_and_described(broker_factory: Any) -> None:
    broker = broker_factory({"group.share.max.record.lock.duration.ms": "90000"})
    client = admin(broker.bootstrap)
    group = "cfg-group"
    resource = ConfigResource(ResourceType.GROUP, group)
    before = _describe(client, resource)
    assert before["consumer.session.timeout.ms"].value == "45000"
    assert before["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert before["share.auto.offset.reset"].value == "latest"

    _alter(client, ResourceType.GROUP, group,
           ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET),
           ConfigEntry("share.record.lock.duration.ms", "80000", incremental_operation=AlterConfigOpType.SET),
           ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
           ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET))
    after = _describe(client, resource)
    assert after["consumer.session.timeout.ms"].value == "50000"
    assert after["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert after["share.record.lock.duration.ms"].value == "80000"  # within this broker's max
    assert after["share.isolation.level"].value == "read_committed"

    for name, value in [("consumer.session.timeout.ms", "70000"),  # above group.consumer.max
                        ("consumer.heartbeat.interval.ms", "1000"),  # below group.consumer.min
                        ("share.record.lock.duration.ms", "100000"),
                        ("share.auto.offset.reset", "sometime"),
                        ("share.isolation.level", "dirty"),
                        ("consumer.bogus.ms", "1")]:
        assert _error(lambda n=name, v=value: _alter(client, ResourceType.GROUP, group, ConfigEntry(
            n, v, incremental_operation=AlterConfigOpType.SET))) == KafkaError.INVALID_CONFIG, name
    assert _describe(client, resource)["consumer.session.timeout.ms"].value == "50000"
    _alter(client, ResourceType.GROUP, group, ConfigEntry(
        "share.auto.offset.reset", "by_duration:PT1H", incremental_operation=AlterConfigOpType.SET))

    # durable: a restart (even SIGKILL) keeps them
    broker.kill()
    again = broker_factory({"group.share.max.record.lock.duration.ms": "90000"}, name=broker.data_dir.name)
    kept = _describe(admin(again.bootstrap), resource)
    assert kept["consumer.session.timeout.ms"].value == "50000"
    assert kept["share.auto.offset.reset"].value == "by_duration:PT1H"
    assert kept["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    _alter(admin(again.bootstrap), ResourceType.GROUP, group, ConfigEntry(
        "consumer.session.timeout.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    assert _describe(admin(again.bootstrap), resource)["consumer.session.timeout.ms"].value == "45000"


def test_group_configs_through_kafka_python(broker: BrokerProcess) -> None:
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    k_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        resource = KConfigResource(ConfigResourceType.GROUP, "kp-group",
                                   configs={"consumer.heartbeat.interval.ms": "6000",
                                            "streams.num.standby.replicas": "1"})
        k_admin.alter_configs([resource])
        entries = _kafka_python_entries(k_admin.describe_configs(
            [KConfigResource(ConfigResourceType.GROUP, "kp-group")], config_filter="all"))
        assert entries["consumer.heartbeat.interval.ms"] == "6000"
        assert entries["streams.num.standby.replicas"] == "1"
    finally:
        k_admin.close()


# -- max.compaction.lag.ms ----------------------------------------------------------------


def test_max_compaction_lag_forces_the_cleaner(broker_factory: Any) -> None:
    """Two compacted topics with a little dirt, far below min.cleanable.dirty.ratio: the one
    with max.compaction.lag.ms is cleaned once its dirt is older than the lag, the other not."""
    broker = broker_factory({"log.cleaner.backoff.ms": "100"})
    client = admin(broker.bootstrap)
    # Not compacted while the clean part is written: a cleaner pass over a part of it would
    # leave the rest dirty, enough to pass the control's dirty ratio once the dirt comes.
    base = {"cleanup.policy": "delete", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.9"}
    forced, control = "lag-forced", "lag-control"
    futures = client.create_topics([NewTopic(forced, 1, 1, config={**base, "max.compaction.lag.ms": "1500"}),
                                    NewTopic(control, 1, 1, config=base)])
    for future in futures.values():
        future.result(TIMEOUT)

    def produce(keys: list[str]) -> None:
        # batches of ten records, so that segments of 2048 bytes roll often
        producer = Producer({"bootstrap.servers": broker.bootstrap, "batch.num.messages": 10, **QUIET})
        for t in (forced, control):
            for i, key in enumerate(keys):
                producer.produce(t, f"{key}={i}".encode().ljust(100, b"."), key=key.encode())
            assert producer.flush(TIMEOUT) == 0

    def k0_values(topic: str) -> int:
        return sum(1 for r in read_partition(broker.bootstrap, topic, 0) if r.key == b"k0")

    produce([f"k{i}" for i in range(300)])  # distinct keys: the clean part of the log
    for t in (forced, control):
        _alter(client, ConfigResource.Type.TOPIC, t,
               ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET))
    # the first pass (everything dirty) cleans both; wait until it has, then add the dirt
    wait_until(lambda: all(_cleaned_once(broker, t) for t in (forced, control)), 30, "the first cleaning")
    produce(["k0"] * 10 + [f"f{i}" for i in range(40)])  # k0 updates, then fillers to close their segments
    assert k0_values(control) == 11
    wait_until(lambda: k0_values(forced) == 1, 60, "max.compaction.lag.ms to force the cleaner")
    assert k0_values(control) == 11  # same cleaner passes, dirty ratio too low: untouched


def _cleaned_once(broker: BrokerProcess, topic: str) -> bool:
    return f"compacted {broker.data_dir / f'{topic}-0'}:" in broker.log_file.read_text()
