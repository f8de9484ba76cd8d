"""A follower's replica fetcher on a real two-broker cluster: a partition it starts to
follow does not wait for the long-polling fetch of the partitions it already follows
(replica.fetch.wait.max.ms), which is what keeps a new leader's acks=all writes moving
right after a leadership change."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.testing_cluster import BrokerCluster

from .workload import eventually, isr, partitions_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CLUSTER_SIZE = 2
# A fetch of idle partitions long-polls for 20 s; the writes below give up after 5 s.
CLUSTER_CONFIG = {"replica.fetch.wait.max.ms": "20000"}


def _create(cluster: BrokerCluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[[0, 1]])]).values():
        future.result()
    eventually(lambda: partitions_of(cluster.bootstrap, name).get(0, {}).get("leader") == 0, f"{name}'s leader")


def _write_all(cluster: BrokerCluster, topic: str, count: int) -> list[str]:
    """Write with acks=all; the errors of the writes that failed."""
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                         "request.timeout.ms": 5000, "message.timeout.ms": 5000})
    for i in range(count):
        producer.produce(topic, str(i).encode(),
                         on_delivery=lambda err, _msg: err is not None and errors.append(str(err)))
    producer.flush(30)
    return errors


def test_a_partition_followed_while_a_fetch_long_polls_replicates_at_once(cluster: BrokerCluster) -> None:
    _create(cluster, "idle")
    assert _write_all(cluster, "idle", 1) == []
    eventually(lambda: isr(cluster.bootstrap, "idle") == [0, 1], "both replicas of idle in sync")
    # Broker 1 now long-polls broker 0 for "idle", which gets nothing more. Broker 1
    # starts to follow "joined" meanwhile: its acks=all writes need broker 1 to fetch it
    # within 5 s, not once the 20 s poll ends.
    _create(cluster, "joined")
    assert _write_all(cluster, "joined", 20) == []
    # The fetch that was cut short loses nothing: both partitions go on replicating.
    assert _write_all(cluster, "idle", 20) == []
    assert _write_all(cluster, "joined", 20) == []
