"""What a cluster shows its operators and clients: the CLI (``streamkit cluster``,
``topics describe``), the brokers' /metrics, bootstrap lists that survive a dead broker,
and rack-aware fetching from followers (KIP-392)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition

from streamkit.testing_cluster import BrokerCluster

from .workload import create_topic, eventually, isr, leader_of, wait_for_leaders

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLUSTER_CONFIG = {"replica.lag.time.max.ms": "2000", "metrics.listener": "http://127.0.0.1:0",
                  "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
CLUSTER_OVERRIDES = {i: {"broker.rack": f"rack-{i}"} for i in range(3)}


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamkit", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})


def metric(cluster: BrokerCluster, broker: int, name: str) -> float:
    """The sum of the samples of ``name`` (with labels: of that labelled series; a series
    of a counter that never counted has no sample yet, which is 0) on a broker's /metrics."""
    port = cluster[broker].metrics_port
    assert port is not None, "metrics.listener is set: the ready file names the port"
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    family = name.split("{")[0]
    assert f"# TYPE {family} " in text or f"# TYPE {family.removesuffix('_total')} " in text, (
        f"{family} not on broker {broker}'s /metrics")
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):][:1] in (" ", "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_the_cli_shows_brokers_replicas_and_isr(cluster: BrokerCluster) -> None:
    created = cli("topics", "create", "shown", "-p", "2", "-r", "3", "-b", cluster.bootstrap)
    assert created.returncode == 0, created.stderr
    wait_for_leaders(cluster.bootstrap, "shown", 2)  # on every broker: the CLI may ask any
    described = cli("topics", "describe", "shown", "-b", cluster.bootstrap)
    assert described.returncode == 0, described.stderr
    rows = [[cell.strip() for cell in line.strip("│ ").split("│")] for line in described.stdout.splitlines()]
    rows = [row for row in rows if row and row[0].isdigit()]
    assert [row[0] for row in rows] == ["0", "1"]
    for _partition, leader, replicas, in_sync, *_offsets in rows:
        assert sorted(replicas.split(",")) == ["0", "1", "2"]
        assert sorted(in_sync.split(",")) == ["0", "1", "2"]
        assert leader in replicas.split(",")
    out = cli("cluster", "-b", cluster.bootstrap)
    assert out.returncode == 0, out.stderr
    assert "3 broker(s)" in out.stdout
    assert "under-replicated partitions: 0" in out.stdout
    assert "offline partitions: 0" in out.stdout
    for i in range(3):
        assert f"rack-{i}" in out.stdout


def test_a_dead_broker_shows_and_a_bootstrap_list_gets_past_it(cluster: BrokerCluster) -> None:
    create_topic(cluster.bootstrap, "survivors", partitions=3, replication=3)
    cluster.kill(0)
    eventually(lambda: all(0 not in isr(cluster[1].bootstrap, "survivors", p) for p in range(3)),
               "broker 0 out of every ISR", timeout=30)
    dead_first = cluster.bootstrap  # broker 0's address comes first
    out = cli("cluster", "-b", dead_first)
    assert out.returncode == 0, out.stderr
    assert "2 broker(s)" in out.stdout
    under = next(line for line in out.stdout.splitlines() if line.startswith("under-replicated partitions:"))
    assert all(f"survivors-{p}" in under for p in range(3)), under
    assert "offline partitions: 0" in out.stdout
    produced = cli("produce", "survivors", "-b", dead_first, stdin="a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr
    consumed = cli("consume", "survivors", "--from-beginning", "--max-messages", "3", "-b", dead_first)
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == ["a", "b", "c"]
    assert metric(cluster, 1, "streamkit_cluster_under_replicated_partitions") >= 3
    assert metric(cluster, 1, "streamkit_cluster_brokers") == 2


def test_metrics_name_one_controller_and_the_leaders(cluster: BrokerCluster) -> None:
    create_topic(cluster.bootstrap, "counted", partitions=3, replication=3)
    eventually(lambda: sum(metric(cluster, b, "streamkit_broker_active_controller") for b in range(3)) == 1,
               "one active controller")
    leaders = sum(metric(cluster, b, "streamkit_broker_leader_partitions") for b in range(3))
    assert leaders >= 3
    assert all(metric(cluster, b, "streamkit_cluster_offline_partitions") == 0 for b in range(3))


def test_a_consumer_fetches_from_the_follower_in_its_rack(cluster: BrokerCluster) -> None:
    create_topic(cluster.bootstrap, "racked", partitions=1, replication=3)
    produced = cli("produce", "racked", "-b", cluster.bootstrap, stdin="".join(f"v{i}\n" for i in range(50)))
    assert produced.returncode == 0, produced.stderr
    leader = leader_of(cluster.bootstrap, "racked")
    follower = next(b for b in range(3) if b != leader)
    before = metric(cluster, follower, "streamkit_broker_fetch_requests_total{source=\"consumer\"}")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"racked-{time.time()}",
                         "client.rack": f"rack-{follower}", "enable.auto.commit": False})
    consumer.assign([TopicPartition("racked", 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message.value())
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(50)]
    after = metric(cluster, follower, "streamkit_broker_fetch_requests_total{source=\"consumer\"}")
    assert after > before, "the consumer never fetched from the follower in its rack"
