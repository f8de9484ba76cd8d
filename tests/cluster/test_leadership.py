"""Moving leaders and replicas on a real cluster with Kafka's admin APIs: preferred and
unclean leader election (ElectLeaders, confluent-kafka), automatic preferred-leader
rebalancing, and partition reassignment with replication throttles
(Alter/ListPartitionReassignments, kafka-python)."""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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
