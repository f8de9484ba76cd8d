"""A cluster's ACLs live in ZooKeeper in Kafka's layout: an ACL created through one broker
is enforced by every broker, survives a broker's restart, and is where Kafka keeps it."""

from __future__ import annotations

import json

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster
from tests.integration.util import wait_until

CLUSTER_SIZE = 2
CLUSTER_CONFIG = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                  "allow.everyone.if.no.acl.found": "true"}
ANON = "User:ANONYMOUS"


def _visible(bootstrap: str, topic: str) -> bool:
    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def _produce_errors(bootstrap: str, topic: str, partitions: int) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    for p in range(partitions):
        producer.produce(topic, b"v", partition=p, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(20)
    return errors


def test_an_acl_taken_by_one_broker_is_enforced_by_all(cluster: BrokerCluster, zookeeper: ZooKeeperServer) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = "acl-everywhere"
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(20)
    for broker in cluster.brokers:
        wait_until(lambda b=broker: _visible(b.bootstrap, topic), 20, f"{topic} on {broker.bootstrap}")
    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, ANON, "*", AclOperation.ALL,
                      AclPermissionType.DENY)
    prefixed = AclBinding(ResourceType.GROUP, "team-", ResourcePatternType.PREFIXED, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
    only_first = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    for future in only_first.create_acls([deny, prefixed]).values():
        future.result(20)
    for broker in cluster.brokers:  # each broker learns it through ZooKeeper's change node
        wait_until(lambda b=broker: not _visible(b.bootstrap, topic), 20, f"{topic} hidden on {broker.bootstrap}")
    errors = _produce_errors(cluster.bootstrap, topic, 2)  # one partition led by each broker
    assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2

    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start()
    try:
        data, _stat = zk.get(f"/kafka-acl/Topic/{topic}")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": ANON, "permissionType": "Deny", "operation": "All", "host": "*"}]}
        data, _stat = zk.get("/kafka-acl-extended/prefixed/Group/team-")
        assert json.loads(data)["acls"] == [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    finally:
        zk.stop()
        zk.close()

    cluster.stop(1)
    cluster.start(1)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert not _visible(cluster[1].bootstrap, topic)
    only_second = AdminClient({"bootstrap.servers": cluster[1].bootstrap})
    deleted = only_second.delete_acls([everything])[everything].result(20)
    assert set(deleted) == {deny, prefixed}
    for broker in cluster.brokers:
        wait_until(lambda b=broker: _visible(b.bootstrap, topic), 20, f"{topic} visible again on {broker.bootstrap}")
