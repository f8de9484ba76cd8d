"""Moving leaders and replicas on a real cluster with Kafka's admin APIs: preferred and
unclean leader election (ElectLeaders, confluent-kafka), automatic preferred-leader
rebalancing, and partition reassignment with replication throttles
(Alter/ListPartitionReassignments, kafka-python)."""

from __future__ import annotations

import json
import time
import warnings
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster
from streamkit.testing_history import History, full_read

from .workload import ProducerLoad, eventually, isr, leader_of, partitions_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# A preferred leader back in the ISR leads again within a few seconds (Kafka: 5 minutes).
CLUSTER_CONFIG = {"replica.lag.time.max.ms": "2000", "leader.imbalance.check.interval.seconds": "3",
                  "leader.replication.throttled.rate": "200000", "follower.replication.throttled.rate": "200000"}


def _create(cluster: BrokerCluster, name: str, assignment: list[list[int]], config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=config or {})]).values():
        future.result()
    eventually(lambda: all(p["leader"] >= 0 for p in partitions_of(cluster.bootstrap, name).values())
               and len(partitions_of(cluster.bootstrap, name)) == len(assignment), f"{name}'s leaders")


def _elect(cluster: BrokerCluster, kind: ElectionType, topic: str, partition: int = 0) -> Any:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return admin.elect_leaders(kind, [TopicPartition(topic, partition)]).result(timeout=30)


def test_the_preferred_leader_leads_again_when_asked_and_by_itself(cluster: BrokerCluster) -> None:
    _create(cluster, "preferred", [[0, 1, 2]])
    cluster.kill(0)
    eventually(lambda: leader_of(cluster[1].bootstrap, "preferred") in (1, 2), "another leader")
    result = _elect(cluster, ElectionType.PREFERRED, "preferred")
    error = result[TopicPartition("preferred", 0)]
    assert error is not None and error.code() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    cluster.start(0)
    eventually(lambda: 0 in isr(cluster.bootstrap, "preferred"), "broker 0 back in the ISR")
    # leader.imbalance.check.interval.seconds=3: the controller moves it back by itself...
    eventually(lambda: leader_of(cluster.bootstrap, "preferred") == 0, "the preferred leader leading again",
               timeout=30)
    # ... and asking again is a no-op.
    result = _elect(cluster, ElectionType.PREFERRED, "preferred")
    error = result[TopicPartition("preferred", 0)]
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED


def test_an_unclean_election_brings_an_offline_partition_back(cluster: BrokerCluster) -> None:
    _create(cluster, "unclean", [[0, 1]], {"min.insync.replicas": "1"})
    cluster.kill(1)
    eventually(lambda: isr(cluster[0].bootstrap, "unclean") == [0], "broker 1 out of the ISR")
    cluster.kill(0)
    cluster.start(1)  # out of the ISR: unclean.leader.election.enable=false keeps it offline
    # Once broker 0's session is gone the partition is offline, and stays so.
    eventually(lambda: leader_of(cluster[1].bootstrap, "unclean") == -1, "the partition offline")
    time.sleep(1)
    assert leader_of(cluster[1].bootstrap, "unclean") == -1
    _elect(cluster, ElectionType.UNCLEAN, "unclean")
    eventually(lambda: leader_of(cluster[1].bootstrap, "unclean") == 1, "broker 1 leading after an unclean election")
    cluster.start(0)


def test_a_reassignment_moves_a_partition_under_a_throttle_and_loses_nothing(cluster: BrokerCluster) -> None:
    topic = "moved"
    _create(cluster, topic, [[0, 1]], {"leader.replication.throttled.replicas": "*",
                                       "follower.replication.throttled.replicas": "*"})
    with warnings.catch_warnings():  # kafka-python 3 loads its schemas with a deprecated call
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaAdminClient
        from kafka import TopicPartition as KafkaTopicPartition
        from kafka.errors import InvalidReplicationAssignmentError
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    load.wait_acked(300)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.alter_partition_reassignments({KafkaTopicPartition(topic, 0): [2, 1]})
        eventually(lambda: partitions_of(cluster.bootstrap, topic)[0]["replicas"] == [2, 1], "the new assignment",
                   timeout=60)
        assert admin.list_partition_reassignments() in ({}, [])
        unknown = admin.alter_partition_reassignments({KafkaTopicPartition(topic, 0): [7, 1]})
        assert unknown == {KafkaTopicPartition(topic, 0): InvalidReplicationAssignmentError}
    finally:
        admin.close()
    load.wait_acked(load.acked() + 100)
    load.stop()
    eventually(lambda: not (cluster.base_dir / "broker-0" / f"{topic}-0").exists(), "broker 0's copy deleted")
    history.add_read(full_read(cluster.bootstrap, topic, final=True))
    report = history.check()
    assert report.ok, str(report)


def test_describe_cluster_names_every_broker_and_the_controller_zookeeper_elected(
        cluster: BrokerCluster, zookeeper: ZooKeeperServer) -> None:
    with zookeeper.client(cluster.chroot) as client:
        data, _stat = client.get("/controller")
    controller = json.loads(data)["brokerid"]
    for broker in range(3):
        admin = AdminClient({"bootstrap.servers": cluster[broker].bootstrap})  # kept until answered
        described = admin.describe_cluster().result(30)
        assert described.controller.id == controller
        assert sorted((n.id, n.port) for n in described.nodes) == sorted((b, cluster[b].port) for b in range(3))


def test_create_partitions_gives_the_new_partitions_replicas_that_lead_and_replicate(cluster: BrokerCluster) -> None:
    topic = "grown"
    _create(cluster, topic, [[0, 1, 2]], {"min.insync.replicas": "2"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, 4)]).values():
        future.result(30)
    eventually(lambda: len(partitions_of(cluster.bootstrap, topic)) == 4
               and all(len(p["isr"]) == 3 and p["leader"] >= 0 for p in partitions_of(cluster.bootstrap, topic).values()),
               "four partitions, each fully in sync")
    grown = partitions_of(cluster.bootstrap, topic)
    assert all(sorted(p["replicas"]) == [0, 1, 2] for p in grown.values())
    assert {grown[p]["leader"] for p in (1, 2, 3)} == {0, 1, 2}  # the new partitions' leaders go round
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    load.wait_acked(200)
    load.stop()
    assert {op.partition for op in history.produces if op.outcome == "ok"} == {0, 1, 2, 3}
    history.add_read(full_read(cluster.bootstrap, topic, final=True))
    report = history.check()
    assert report.ok, str(report)
    # Fewer partitions than it has is refused with Kafka's error.
    [future] = admin.create_partitions([NewPartitions(topic, 2)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS
