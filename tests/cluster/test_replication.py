"""Replication on a real cluster: ZooKeeper and three ``streamkit broker`` processes, real
Kafka clients (librdkafka). Each test breaks the cluster while a producer writes with
``acks=all``, heals it, reads everything back and checks the recorded history
(``streamkit.testing_history``): no acknowledged record lost, duplicated or reordered, and
no read of data that later disappeared."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from streamkit.testing_cluster import BrokerCluster
from streamkit.testing_history import History, full_read

from .workload import ProducerLoad, create_topic, eventually, isr, leader_of, partitions_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# Followers not caught up for 2 s leave the ISR: a stalled follower is noticed quickly.
CLUSTER_CONFIG = {"replica.lag.time.max.ms": "2000", "min.insync.replicas": "2"}


def _check(cluster: BrokerCluster, history: History, topic: str) -> None:
    history.add_read(full_read(cluster.bootstrap, topic, final=True))
    report = history.check()
    assert report.ok, str(report)


def test_metadata_lists_brokers_replicas_and_isr(cluster: BrokerCluster) -> None:
    create_topic(cluster.bootstrap, "meta", partitions=3, replication=3)
    for broker in range(3):
        seen = partitions_of(cluster[broker].bootstrap, "meta")
        assert sorted(seen) == [0, 1, 2]
        for p in seen.values():
            assert sorted(p["replicas"]) == [0, 1, 2]
            assert p["isr"] == [0, 1, 2]
            assert p["leader"] in p["replicas"]
    # Leaders spread over the brokers (the assignment's preferred leaders differ).
    assert len({p["leader"] for p in partitions_of(cluster.bootstrap, "meta").values()}) == 3


def test_killing_the_leader_again_and_again_loses_no_acknowledged_record(cluster: BrokerCluster) -> None:
    topic = "killed-leaders"
    create_topic(cluster.bootstrap, topic, partitions=2, replication=3)
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    acked = load.wait_acked(200)
    for _ in range(3):
        leader = leader_of(cluster.bootstrap, topic, 0)
        cluster.kill(leader)
        acked = load.wait_acked(acked + 200)  # writes go on on the new leader
        cluster.start(leader)
        eventually(lambda: len(isr(cluster.bootstrap, topic, 0)) == 3, "the restarted broker back in the ISR")
    load.stop()
    assert load.acked() > 800
    _check(cluster, history, topic)


def test_a_stalled_follower_leaves_the_isr_and_comes_back(cluster: BrokerCluster) -> None:
    topic = "stalled"
    create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
    leader = leader_of(cluster.bootstrap, topic)
    follower = next(b for b in range(3) if b != leader)
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    acked = load.wait_acked(100)
    cluster.pause(follower)
    try:
        eventually(lambda: follower not in isr(cluster[leader].bootstrap, topic), "the ISR to shrink", timeout=20)
        acked = load.wait_acked(acked + 200)  # two in-sync replicas: min.insync.replicas=2 holds
    finally:
        cluster.resume(follower)
    eventually(lambda: follower in isr(cluster[leader].bootstrap, topic), "the follower back in the ISR")
    load.wait_acked(acked + 100)
    load.stop()
    assert not [e for e in load.errors if not e.retriable()], load.errors[:5]
    _check(cluster, history, topic)


def test_below_min_isr_writes_are_refused_and_none_is_acknowledged(cluster: BrokerCluster) -> None:
    topic = "min-isr"
    create_topic(cluster.bootstrap, topic, partitions=1, replication=3, config={"min.insync.replicas": "3"})
    leader = leader_of(cluster.bootstrap, topic)
    follower = next(b for b in range(3) if b != leader)
    cluster.pause(follower)
    try:
        eventually(lambda: follower not in isr(cluster[leader].bootstrap, topic), "the ISR to shrink", timeout=20)
        errors: list[KafkaError] = []
        acks: list[int] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0,
                             "enable.idempotence": False, "message.timeout.ms": 10_000})
        for i in range(20):
            producer.produce(topic, f"v{i}".encode(),
                             on_delivery=lambda e, m: errors.append(e) if e else acks.append(m.offset()))
        producer.flush(30)
        assert acks == []
        assert {e.code() for e in errors} == {KafkaError.NOT_ENOUGH_REPLICAS}
    finally:
        cluster.resume(follower)
    eventually(lambda: len(isr(cluster[leader].bootstrap, topic)) == 3, "the ISR to be whole again")
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    load.wait_acked(50)
    load.stop()
    _check(cluster, history, topic)


def test_a_controlled_shutdown_moves_leadership_before_the_broker_stops(cluster: BrokerCluster) -> None:
    topic = "controlled"
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    acked = load.wait_acked(100)
    victim = leader_of(cluster.bootstrap, topic, 0)
    assert cluster.stop(victim) == 0
    log = cluster.log_tail(victim, 200)
    assert "controlled shutdown: leadership moved away" in log, log
    others = [b for b in range(3) if b != victim]
    assert all(p["leader"] in others for p in partitions_of(cluster[others[0]].bootstrap, topic).values())
    acked = load.wait_acked(acked + 100)
    cluster.start(victim)
    load.wait_acked(acked + 100)
    load.stop()
    assert not [e for e in load.errors if not e.retriable()], load.errors[:5]
    _check(cluster, history, topic)


def test_a_rolling_restart_under_load_loses_nothing(cluster: BrokerCluster) -> None:
    topic = "rolling"
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    acked = load.wait_acked(100)
    for broker in range(3):
        assert cluster.stop(broker) == 0
        acked = load.wait_acked(acked + 50)
        cluster.start(broker)
        eventually(lambda: all(len(p["isr"]) == 3 for p in partitions_of(cluster.bootstrap, topic).values()),
                   "every partition fully in sync again")
    load.stop()
    _check(cluster, history, topic)


def test_a_restarted_broker_catches_up_from_its_own_data(cluster: BrokerCluster, tmp_path: Path) -> None:
    """A follower stopped while writes go on comes back with its log and fetches only the
    tail; its data directory holds the leader epoch checkpoint Kafka keeps."""
    topic = "catch-up"
    create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
    leader = leader_of(cluster.bootstrap, topic)
    follower = next(b for b in range(3) if b != leader)
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    acked = load.wait_acked(100)
    cluster.stop(follower)
    acked = load.wait_acked(acked + 300)
    cluster.start(follower)
    eventually(lambda: follower in isr(cluster.bootstrap, topic), "the follower back in the ISR")
    load.stop()
    checkpoint = cluster.base_dir / f"broker-{follower}" / f"{topic}-0" / "leader-epoch-checkpoint"
    assert checkpoint.read_text().splitlines()[0] == "0"
    _check(cluster, history, topic)

