"""The admin APIs through confluent-kafka's AdminClient (librdkafka's own request code):
topics with configs and validate_only, configs (describe, incremental alter), partitions,
DeleteRecords, DeleteTopics, and consumer groups (list, describe, delete)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from streamkit.testing import BrokerProcess
from tests.integration.clients import ConfluentClient
from tests.integration.util import QUIET, Rec, admin, read_partition, wait_until, watermarks

pytestmark = pytest.mark.integration

TIMEOUT = 15


def error_of(call: Callable[[], Any]) -> int:
    """The Kafka error code ``call`` raises through a future."""
    with pytest.raises(KafkaException) as info:
        call()
    return int(info.value.args[0].code())


def configs(client: Any, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return dict(client.describe_configs([resource], request_timeout=10)[resource].result(TIMEOUT))


def topics(client: Any) -> dict[str, int]:
    meta = client.list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in meta.topics.items()}


def produce(broker: BrokerProcess, topic: str, partition: int, n: int) -> None:
    # Current timestamps: records older than retention.ms (7 days) may go at any retention
    # pass, and DeleteRecords runs one (see test_delete_records).
    now = int(time.time() * 1000)
    records = [Rec(None, f"v{i}".encode(), (), now + i) for i in range(n)]
    ConfluentClient(broker.bootstrap).produce(topic, records, partition=partition)


def test_create_topics_with_configs_and_validate_only(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    config = {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "20000"}
    new = NewTopic(topic_name, 3, 1, config=config)

    assert client.create_topics([new], validate_only=True)[topic_name].result(TIMEOUT) is None
    assert topic_name not in topics(client), "validate_only created the topic"

    assert client.create_topics([new])[topic_name].result(TIMEOUT) is None
    assert topics(client)[topic_name] == 3
    described = configs(client, topic_name)
    for key, value in config.items():
        assert described[key].value == value
        assert described[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert not described[key].is_default
    assert described["segment.bytes"].value == "1073741824"
    assert described["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    def create(t: NewTopic, validate_only: bool = False) -> Any:
        return lambda: client.create_topics([t], validate_only=validate_only)[t.topic].result(TIMEOUT)

    assert error_of(create(new)) == KafkaError.TOPIC_ALREADY_EXISTS
    assert error_of(create(new, validate_only=True)) == KafkaError.TOPIC_ALREADY_EXISTS
    assert error_of(create(NewTopic(f"{topic_name}-x", 1, 1, config={"retention.ms": "soon"}),
                           validate_only=True)) == KafkaError.INVALID_CONFIG
    assert error_of(create(NewTopic(f"{topic_name}-x", 1, 1, config={"no.such.config": "1"}))) == (
        KafkaError.INVALID_CONFIG)
    assert error_of(create(NewTopic(f"{topic_name}-x", 1, 3))) == KafkaError.INVALID_REPLICATION_FACTOR
    assert error_of(create(NewTopic(f"{topic_name}-x", 0, 1))) == KafkaError.INVALID_PARTITIONS
    # a huge count is refused before a single partition directory is made
    assert error_of(create(NewTopic(f"{topic_name}-x", 50_000, 1))) == KafkaError.INVALID_PARTITIONS
    assert error_of(create(NewTopic("bad name!", 1, 1))) == KafkaError.TOPIC_EXCEPTION
    assert f"{topic_name}-x" not in topics(client)

    # the configs are in force: max.message.bytes=20000 refuses a larger batch
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    producer.produce(topic_name, b"x" * 30000, key=b"k", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(TIMEOUT)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]


def test_describe_and_incremental_alter_configs(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(TIMEOUT)
    assert configs(client, topic_name)["cleanup.policy"].value == "delete"

    def alter(*entries: ConfigEntry, validate_only: bool = False) -> None:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=list(entries))
        client.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(TIMEOUT)

    alter(ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    after = configs(client, topic_name)
    assert after["retention.ms"].value == "1000"
    assert sorted(after["cleanup.policy"].value.split(",")) == ["compact", "delete"]
    assert after["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    assert configs(client, topic_name)["cleanup.policy"].value == "compact"

    alter(ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET), validate_only=True)
    assert configs(client, topic_name)["retention.ms"].value == "1000", "validate_only changed a config"

    assert error_of(lambda: alter(ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET))) == (
        KafkaError.INVALID_CONFIG)
    assert error_of(lambda: alter(ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND))) == (
        KafkaError.INVALID_CONFIG)  # not a list
    assert configs(client, topic_name)["retention.ms"].value == "1000"

    alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
          ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE))
    back = configs(client, topic_name)
    assert (back["retention.ms"].value, back["cleanup.policy"].value) == ("604800000", "delete")
    assert back["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # the broker's own configs
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    broker_configs = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert broker_configs["offsets.topic.num.partitions"].value == "4"  # a test setting
    assert broker_configs["message.max.bytes"].value == "1048588"
    missing = ConfigResource(ConfigResource.Type.TOPIC, f"{topic_name}-missing")
    assert error_of(lambda: client.describe_configs([missing])[missing].result(TIMEOUT)) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART)


def test_create_partitions(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(TIMEOUT)

    def grow(count: int, validate_only: bool = False) -> Any:
        return client.create_partitions([NewPartitions(topic_name, count)],
                                        validate_only=validate_only)[topic_name].result(TIMEOUT)

    grow(9, validate_only=True)
    assert topics(client)[topic_name] == 2
    grow(5)
    wait_until(lambda: topics(client)[topic_name] == 5, 10, "5 partitions in metadata")
    produce(broker, topic_name, 4, 3)
    assert watermarks(broker.bootstrap, topic_name, 4) == (0, 3)
    assert error_of(lambda: grow(3)) == KafkaError.INVALID_PARTITIONS
    assert error_of(lambda: grow(5)) == KafkaError.INVALID_PARTITIONS
    assert error_of(lambda: grow(50_000)) == KafkaError.INVALID_PARTITIONS
    assert topics(client)[topic_name] == 5
    missing = f"{topic_name}-missing"
    assert error_of(lambda: client.create_partitions([NewPartitions(missing, 4)])[missing].result(TIMEOUT)) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART)


def test_delete_records(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(TIMEOUT)
    produce(broker, topic_name, 0, 20)
    produce(broker, topic_name, 1, 5)

    [future] = client.delete_records([TopicPartition(topic_name, 0, 7)]).values()
    assert future.result(TIMEOUT).low_watermark == 7
    assert watermarks(broker.bootstrap, topic_name, 0) == (7, 20)
    assert [r.offset for r in read_partition(broker.bootstrap, topic_name, 0)] == list(range(7, 20))
    earliest = client.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(TIMEOUT).offset == 7

    # before the start is a no-op, beyond the high watermark is out of range
    [future] = client.delete_records([TopicPartition(topic_name, 0, 3)]).values()
    assert future.result(TIMEOUT).low_watermark == 7
    [future] = client.delete_records([TopicPartition(topic_name, 0, 21)]).values()
    assert error_of(lambda: future.result(TIMEOUT)) == KafkaError.OFFSET_OUT_OF_RANGE
    # OFFSET_END (-1): everything up to the high watermark
    [future] = client.delete_records([TopicPartition(topic_name, 1, OFFSET_END)]).values()
    assert future.result(TIMEOUT).low_watermark == 5
    assert watermarks(broker.bootstrap, topic_name, 1) == (5, 5)
    assert watermarks(broker.bootstrap, topic_name, 0) == (7, 20)  # untouched


def test_delete_topics(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(TIMEOUT)
    produce(broker, topic_name, 1, 4)
    assert client.delete_topics([topic_name])[topic_name].result(TIMEOUT) is None
    assert topic_name not in topics(client)
    assert not any(broker.data_dir.glob(f"{topic_name}-*")), "partition directories left behind"
    assert error_of(lambda: client.delete_topics([topic_name])[topic_name].result(TIMEOUT)) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert error_of(lambda: client.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(TIMEOUT)) != 0
    assert "__consumer_offsets" in topics(client)
    # a new topic of the same name starts empty
    client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(TIMEOUT)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)


def test_describe_cluster(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    cluster = client.describe_cluster(request_timeout=10).result(TIMEOUT)
    assert cluster.cluster_id == client.list_topics(timeout=10).cluster_id
    assert [(n.id, f"{n.host}:{n.port}") for n in cluster.nodes] == [(0, broker.bootstrap)]
    assert cluster.controller.id == 0


def test_consumer_group_admin(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(TIMEOUT)
    for p in range(3):
        produce(broker, topic_name, p, 4)
    group = f"g-{topic_name}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "admin-test",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 250, **QUIET})
    consumer.subscribe([topic_name])
    try:
        got = 0
        while got < 12:
            wait_until(lambda: (msg := consumer.poll(0.2)) is not None and not msg.error(), 30, "a record")
            got += 1
        consumer.commit(asynchronous=False)

        listed = client.list_consumer_groups(request_timeout=10).result(TIMEOUT)
        states = {g.group_id: g.state for g in listed.valid}
        assert states[group] == ConsumerGroupState.STABLE
        empty_only = client.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(TIMEOUT)
        assert group not in {g.group_id for g in empty_only.valid}

        desc = client.describe_consumer_groups([group])[group].result(TIMEOUT)
        assert (desc.state, desc.is_simple_consumer_group, desc.partition_assignor) == (
            ConsumerGroupState.STABLE, False, "range")
        [member] = desc.members
        assert member.client_id == "admin-test"
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2]
        assert desc.coordinator.id == 0

        offsets = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT)
        assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {0: 4, 1: 4, 2: 4}

        # a group with a live member cannot be deleted
        assert error_of(lambda: client.delete_consumer_groups([group])[group].result(TIMEOUT)) == (
            KafkaError.NON_EMPTY_GROUP)
    finally:
        consumer.close()  # LeaveGroup: the group becomes Empty

    wait_until(lambda: client.describe_consumer_groups([group])[group].result(TIMEOUT).state
               == ConsumerGroupState.EMPTY, 15, "an empty group")
    # offsets of an empty group may be set from outside (as kafka-consumer-groups does)
    altered = client.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0, 1)])])[group].result(TIMEOUT)
    assert [(tp.partition, tp.offset) for tp in altered.topic_partitions] == [(0, 1)]

    assert client.delete_consumer_groups([group])[group].result(TIMEOUT) is None
    assert group not in {g.group_id for g in client.list_consumer_groups().result(TIMEOUT).valid}
    assert error_of(lambda: client.delete_consumer_groups([group])[group].result(TIMEOUT)) == (
        KafkaError.GROUP_ID_NOT_FOUND)
    # its committed offsets went with it
    fresh = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
    try:
        tps = fresh.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=10)
        assert all(tp.offset < 0 for tp in tps), tps
    finally:
        fresh.close()


def test_list_offsets(broker: BrokerProcess, topic_name: str) -> None:
    """ListOffsets through the admin client: earliest, latest, max timestamp (KIP-734: the
    first record with the highest timestamp) and by timestamp."""
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(TIMEOUT)
    now = int(time.time() * 1000)
    stamps = [now + t for t in (100, 300, 900, 200, 900, 50)]
    ConfluentClient(broker.bootstrap).produce(
        topic_name, [Rec(None, f"v{i}".encode(), (), ts) for i, ts in enumerate(stamps)], flush_every=2)
    tp = TopicPartition(topic_name, 0)

    def offset_of(spec: Any) -> tuple[int, int]:
        found = client.list_offsets({tp: spec})[tp].result(TIMEOUT)
        return found.offset, found.timestamp

    assert offset_of(OffsetSpec.earliest())[0] == 0
    assert offset_of(OffsetSpec.latest())[0] == 6
    assert offset_of(OffsetSpec.max_timestamp()) == (2, now + 900)
    assert offset_of(OffsetSpec.for_timestamp(now + 250)) == (1, now + 300)
    assert offset_of(OffsetSpec.for_timestamp(now + 901))[0] == -1
    [future] = client.delete_records([TopicPartition(topic_name, 0, 3)]).values()
    future.result(TIMEOUT)
    assert offset_of(OffsetSpec.earliest())[0] == 3
    assert offset_of(OffsetSpec.max_timestamp()) == (4, now + 900)  # the max below 3 is gone
    assert offset_of(OffsetSpec.for_timestamp(now + 250)) == (4, now + 900)


def test_delete_records_deletes_only_what_was_asked(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(TIMEOUT)
    old = 1_700_000_000_000  # November 2023: far past the default retention.ms (7 days)
    ConfluentClient(broker.bootstrap).produce(topic_name, [Rec(None, b"v", (), old + i) for i in range(20)])
    [future] = client.delete_records([TopicPartition(topic_name, 0, 7)]).values()
    assert future.result(TIMEOUT).low_watermark == 7


def test_kafka_python_create_topics_errors(broker: BrokerProcess, topic_name: str) -> None:
    """kafka-python 3 sends CreateTopics v7, whose error results must carry every v5+ field:
    a duplicate topic and an invalid replica assignment come back as Kafka errors on a
    connection that stays usable (they used to close it: 'socket disconnected')."""
    import kafka.errors
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        client.create_topics([KpNewTopic(topic_name, 2, 1)])
        with pytest.raises(kafka.errors.TopicAlreadyExistsError):
            client.create_topics([KpNewTopic(topic_name, 2, 1)])
        bad = KpNewTopic(f"{topic_name}-bad", -1, -1, replica_assignments={0: [0, 7]})
        with pytest.raises(kafka.errors.InvalidReplicationAssignmentError):
            client.create_topics([bad])
        assert topic_name in client.list_topics()
        assert f"{topic_name}-bad" not in client.list_topics()
    finally:
        client.close()
