"""Client quotas end to end: AlterClientQuotas and DescribeClientQuotas sent by kafka-python
(its own protocol classes: its admin client has no quota methods), and throttling observed
by confluent-kafka clients (librdkafka's throttle callback and their pace) on a real broker.

The sample window is short here (``quota.window.num=2``, 1 s samples) so that a quota
shows within seconds; the arithmetic is Kafka's either way.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.testing import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import AlterClientQuotasRequest as Alter
    from kafka.protocol.admin import DescribeClientQuotasRequest as Describe

BROKER_SETTINGS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
INVALID_REQUEST = 42


@pytest.fixture(scope="module")
def kadmin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def _send(client: KafkaAdminClient, request: Any) -> Any:
    return client._manager.run(client._manager.send, request)


def alter(client: KafkaAdminClient, entity: dict[str, str | None], values: dict[str, float | None],
          validate_only: bool = False) -> Any:
    entry = Alter.EntryData(
        entity=[Alter.EntryData.EntityData(entity_type=k, entity_name=v) for k, v in entity.items()],
        ops=[Alter.EntryData.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in values.items()])
    response = _send(client, Alter(entries=[entry], validate_only=validate_only))
    return response.entries[0]


def describe(client: KafkaAdminClient, components: list[tuple[str, int, str | None]],
             strict: bool = False) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    response = _send(client, Describe(components=[
        Describe.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict))
    assert response.error_code == 0, response
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def test_quotas_are_set_described_and_removed(kadmin: KafkaAdminClient) -> None:
    assert alter(kadmin, {"user": "alice", "client-id": None}, {"producer_byte_rate": 1024.0,
                                                                "request_percentage": 25.0}).error_code == 0
    assert alter(kadmin, {"client-id": None}, {"consumer_byte_rate": 4096.0}).error_code == 0
    assert alter(kadmin, {"client-id": "dry"}, {"producer_byte_rate": 1.0}, validate_only=True).error_code == 0
    everything = describe(kadmin, [])
    assert everything[(("user", "alice"), ("client-id", None))] == {"producer_byte_rate": 1024.0,
                                                                    "request_percentage": 25.0}
    assert everything[(("client-id", None),)] == {"consumer_byte_rate": 4096.0}
    assert (("client-id", "dry"),) not in everything  # validate_only changed nothing
    assert list(describe(kadmin, [("user", EXACT, "alice")])) == [(("user", "alice"), ("client-id", None))]
    assert describe(kadmin, [("user", EXACT, "alice")], strict=True) == {}
    assert list(describe(kadmin, [("client-id", DEFAULT, None)], strict=True)) == [(("client-id", None),)]
    alter(kadmin, {"user": "alice", "client-id": None}, {"producer_byte_rate": None})
    alter(kadmin, {"client-id": None}, {"consumer_byte_rate": None})
    assert describe(kadmin, []) == {(("user", "alice"), ("client-id", None)): {"request_percentage": 25.0}}
    alter(kadmin, {"user": "alice", "client-id": None}, {"request_percentage": None})
    assert describe(kadmin, []) == {}


def test_bad_quotas_are_refused_with_invalid_request(kadmin: KafkaAdminClient) -> None:
    bad_key = alter(kadmin, {"client-id": "x"}, {"producer_rate": 5.0})
    assert bad_key.error_code == INVALID_REQUEST and "producer_byte_rate" in bad_key.error_message
    bad_entity = alter(kadmin, {"ip": "10.0.0.1"}, {"producer_byte_rate": 5.0})
    assert bad_entity.error_code == INVALID_REQUEST
    assert alter(kadmin, {"client-id": "x"}, {"producer_byte_rate": -1.0}).error_code == INVALID_REQUEST
    assert describe(kadmin, []) == {}


def _create_topic(broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)


def _produce(bootstrap: str, client_id: str, topic: str, count: int, throttles: list[int]) -> float:
    def on_throttle(event: Any) -> None:
        throttles.append(event.throttle_time)

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 0,
                         "batch.size": 1100, "throttle_cb": on_throttle})
    started = time.monotonic()
    for _ in range(count):
        producer.produce(topic, b"x" * 1000)
        producer.poll(0)
    assert producer.flush(30) == 0
    return time.monotonic() - started


def test_a_producer_over_its_byte_rate_is_throttled_and_others_are_not(broker: BrokerProcess,
                                                                       kadmin: KafkaAdminClient) -> None:
    topic = "quota-produce"
    _create_topic(broker, topic)
    assert alter(kadmin, {"client-id": "noisy"}, {"producer_byte_rate": 10_000.0}).error_code == 0
    try:
        noisy: list[int] = []
        quiet: list[int] = []
        noisy_took: list[float] = []
        # 60 kB at 10 kB/s, the first window's worth free: about 5 s
        noisy_thread = threading.Thread(
            target=lambda: noisy_took.append(_produce(broker.bootstrap, "noisy", topic, 60, noisy)))
        noisy_thread.start()
        time.sleep(1.5)  # the noisy producer is held back by now
        quiet_took = _produce(broker.bootstrap, "quiet", topic, 60, quiet)
        assert noisy_thread.is_alive(), "the noisy producer was not held back"
        noisy_thread.join(60)
        assert noisy and max(noisy) > 0, "librdkafka saw no throttle_time_ms"
        assert noisy_took[0] >= 3.0, noisy_took
        assert not quiet and quiet_took < 2.0, (quiet, quiet_took)
    finally:
        alter(kadmin, {"client-id": "noisy"}, {"producer_byte_rate": None})


def test_a_consumer_over_its_byte_rate_is_throttled(broker: BrokerProcess, kadmin: KafkaAdminClient) -> None:
    topic = "quota-consume"
    _create_topic(broker, topic)
    _produce(broker.bootstrap, "filler", topic, 40, [])
    assert alter(kadmin, {"client-id": "reader"}, {"consumer_byte_rate": 10_000.0}).error_code == 0
    throttles: list[int] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "reader", "group.id": "quota-reader",
                         "max.partition.fetch.bytes": 2000, "enable.auto.commit": False,
                         "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        started, seen = time.monotonic(), 0
        while seen < 40 and time.monotonic() - started < 30:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
        took = time.monotonic() - started
    finally:
        consumer.close()
        alter(kadmin, {"client-id": "reader"}, {"consumer_byte_rate": None})
    assert seen == 40
    assert throttles and max(throttles) > 0
    assert took >= 2.0, took  # 40 kB at 10 kB/s, the first window's worth free


def test_quotas_survive_a_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    client = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    alter(client, {"user": None}, {"request_percentage": 80.0})
    client.close()
    b.stop()
    b.start()
    client = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        assert describe(client, []) == {(("user", None),): {"request_percentage": 80.0}}
    finally:
        client.close()


def test_a_client_over_its_request_percentage_is_throttled(broker: BrokerProcess, kadmin: KafkaAdminClient) -> None:
    # 0.001 % of a second per second: the first request's handling time is over it already
    assert alter(kadmin, {"client-id": "chatty"}, {"request_percentage": 0.001}).error_code == 0
    throttles: list[int] = []
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "chatty",
                         "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    try:
        for _ in range(3):
            admin.list_topics(timeout=10)
            admin.poll(0)
    finally:
        alter(kadmin, {"client-id": "chatty"}, {"request_percentage": None})
    assert throttles and max(throttles) > 0


def test_principals_with_cluster_action_are_exempt_from_request_quotas(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    b = broker_factory({**BROKER_SETTINGS, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                        "allow.everyone.if.no.acl.found": "true"}, name="exempt")
    client = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        assert alter(client, {"client-id": "chatty"}, {"request_percentage": 0.001}).error_code == 0
    finally:
        client.close()

    def throttled() -> list[int]:
        throttles: list[int] = []
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "client.id": "chatty",
                             "throttle_cb": lambda e: throttles.append(e.throttle_time)})
        for _ in range(3):
            admin.list_topics(timeout=10)
            admin.poll(0)
        return throttles

    assert not throttled()  # no ACL on the cluster: everyone has CLUSTER_ACTION there
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    cluster = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                          op, perm) for op, perm in ((AclOperation.ALL, AclPermissionType.ALLOW),
                                                     (AclOperation.CLUSTER_ACTION, AclPermissionType.DENY))]
    for future in admin.create_acls(cluster).values():
        future.result(10)
    assert max(throttled()) > 0
