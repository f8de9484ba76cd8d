"""A cluster's ACLs and client quotas live in ZooKeeper in Kafka's layout: what one broker
takes, every broker enforces, after a broker's restart too, and it is where Kafka keeps it."""

from __future__ import annotations

import json
import warnings
from typing import Any

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


def _quota_request(client: Any, request: Any, node_id: int) -> Any:
    return client._manager.run(client._manager.send, request, node_id)


def test_client_quotas_taken_by_one_broker_hold_on_all(cluster: BrokerCluster) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient
        from kafka.protocol.admin import AlterClientQuotasRequest as Alter
        from kafka.protocol.admin import DescribeClientQuotasRequest as Describe

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        entry = Alter.EntryData(
            entity=[Alter.EntryData.EntityData(entity_type="user", entity_name="al/ice"),
                    Alter.EntryData.EntityData(entity_type="client-id", entity_name=None)],
            ops=[Alter.EntryData.OpData(key="producer_byte_rate", value=1024.0, remove=False)])
        response = _quota_request(client, Alter(entries=[entry], validate_only=False), 0)
        assert response.entries[0].error_code == 0

        def described(node: int) -> dict[Any, Any]:
            got = _quota_request(client, Describe(components=[], strict=False), node)
            return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
                    {v.key: v.value for v in entry.values} for entry in got.entries}

        wanted = {(("user", "al/ice"), ("client-id", None)): {"producer_byte_rate": 1024.0}}
        for node in (0, 1):
            wait_until(lambda n=node: described(n) == wanted, 20, f"the quota on broker {node}")
        zk = KazooClient(hosts=cluster.zookeeper_connect)
        zk.start()
        try:
            data, _stat = zk.get("/config/users/al%2Fice/clients/<default>")
            assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024"}}
        finally:
            zk.stop()
            zk.close()
        cluster.stop(1)
        cluster.start(1)
        client.close()
        client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)  # knows broker 1 again
        assert described(1) == wanted
        removal = Alter.EntryData(entity=entry.entity, ops=[
            Alter.EntryData.OpData(key="producer_byte_rate", value=0.0, remove=True)])
        assert _quota_request(client, Alter(entries=[removal], validate_only=False), 1).entries[0].error_code == 0
        wait_until(lambda: described(0) == {}, 20, "the quota removed on broker 0")
    finally:
        client.close()
