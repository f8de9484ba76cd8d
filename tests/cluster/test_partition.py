"""A network partition that isolates a partition's leader: each broker on its own network
namespace (``streamkit.testing_netns``), ZooKeeper and the clients on the test's side of
the bridge. The isolated leader loses its ZooKeeper session, the others elect a new leader,
and when the link comes back the old leader truncates what it alone had and follows. No
record acknowledged with ``acks=all`` is lost, duplicated or reordered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster
from streamkit.testing_history import History, full_read
from streamkit.testing_netns import Network

from .workload import ProducerLoad, create_topic, eventually, leader_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_S = 4


def zk_state(zk: ZooKeeperServer, cluster: BrokerCluster, topic: str, partition: int = 0) -> dict[str, Any]:
    with zk.client(cluster.chroot) as client:
        data, _stat = client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return dict(json.loads(data))


def test_an_isolated_leader_loses_nothing_acknowledged(tmp_path: Path, need_zookeeper: None,
                                                        need_netns: None) -> None:
    with Network(["b0", "b1", "b2"]) as net, ZooKeeperServer(tmp_path / "zk", host=net.gateway) as zk, \
            BrokerCluster(zk, 3, tmp_path / "cluster", hosts=[net["b0"], net["b1"], net["b2"]],
                          config={"replica.lag.time.max.ms": "2000", "min.insync.replicas": "2"}) as cluster:
        try:
            _run(cluster, net, zk)
        except AssertionError as exc:
            logs = "\n".join(f"--- broker {i} ---\n{cluster.log_tail(i, 60)}" for i in range(3))
            raise AssertionError(f"{exc}\n{logs}") from None


def _run(cluster: BrokerCluster, net: Network, zk: ZooKeeperServer) -> None:
    if True:
        topic = "partitioned"
        create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
        leader = leader_of(cluster.bootstrap, topic)
        others = [b for b in range(3) if b != leader]
        history = History()
        load = ProducerLoad(cluster.bootstrap, topic, history).start()
        acked = load.wait_acked(200)
        net[f"b{leader}"].cut()
        try:
            # From ZooKeeper itself: a client's metadata requests may go to the cut broker
            # and hang until they time out.
            eventually(lambda: zk_state(zk, cluster, topic)["leader"] in others,
                       "a leader elected on the majority side", timeout=SESSION_S * 6)
            acked = load.wait_acked(acked + 200)  # the majority side takes writes
        finally:
            net[f"b{leader}"].restore()
        eventually(lambda: len(zk_state(zk, cluster, topic)["isr"]) == 3, "the isolated broker back in the ISR",
                   timeout=60)
        load.wait_acked(acked + 100)
        load.stop()
        log = cluster.log_tail(leader, 1000)
        assert "no longer leading" in log, log
        history.add_read(full_read(cluster.bootstrap, topic, final=True))
        report = history.check()
        assert report.ok, str(report)
