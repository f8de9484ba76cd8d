"""ZooKeeper sessions failing in ordinary ways, on a real cluster: a leader paused past its
session timeout (a long GC pause, SIGSTOP), and a broker restarted before its old session
expired."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from streamkit.broker.cluster.zk import ZkClient, ZkConnectError
from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster
from streamkit.testing_history import History, full_read

from .workload import ProducerLoad, create_topic, eventually, isr, leader_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLUSTER_CONFIG = {"replica.lag.time.max.ms": "2000", "min.insync.replicas": "2"}
SESSION_S = 4  # CLUSTER_TEST_SETTINGS' zookeeper.session.timeout.ms


def test_the_cluster_lives_under_its_chroot(cluster: BrokerCluster, zookeeper: ZooKeeperServer) -> None:
    """zookeeper.connect's chroot is created when missing, as Kafka creates it."""
    with zookeeper.client() as client:
        assert sorted(client.get_children(f"{cluster.chroot}/brokers/ids")) == ["0", "1", "2"]
        assert client.exists(f"{cluster.chroot}/controller") is not None


def test_a_leader_paused_past_its_session_stops_leading_until_confirmed(cluster: BrokerCluster) -> None:
    topic = "paused-leader"
    create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
    leader = leader_of(cluster.bootstrap, topic)
    history = History()
    load = ProducerLoad(cluster.bootstrap, topic, history).start()
    acked = load.wait_acked(100)
    cluster.pause(leader)
    try:
        others = [b for b in range(3) if b != leader]
        eventually(lambda: leader_of(cluster[others[0]].bootstrap, topic) in others,
                   "a new leader elected after the session expired", timeout=SESSION_S * 5)
        acked = load.wait_acked(acked + 100)
    finally:
        cluster.resume(leader)
    eventually(lambda: "registered again after its ZooKeeper session expired" in cluster.log_tail(leader, 400),
               "the paused broker to register again")
    # Asked of the old leader itself once it knows its session expired: it must not serve
    # its pre-pause picture (itself leading) before it has read the partition's state
    # again, or clients send it requests it refuses (NOT_LEADER_OR_FOLLOWER).
    seen, deadline = [leader_of(cluster[leader].bootstrap, topic)], time.monotonic() + 60
    while seen[-1] not in others and time.monotonic() < deadline:
        assert seen[-1] != leader, f"the resumed broker still names itself leader: {seen}"
        seen.append(leader_of(cluster[leader].bootstrap, topic))
    eventually(lambda: leader_of(cluster[leader].bootstrap, topic) in others
               and len(isr(cluster[leader].bootstrap, topic)) == 3, "the old leader back in the ISR as a follower")
    load.wait_acked(acked + 100)
    load.stop()
    history.add_read(full_read(cluster[leader].bootstrap, topic, final=True))
    report = history.check()
    assert report.ok, str(report)


def test_a_broker_restarted_while_its_old_registration_exists_waits_for_it(
        cluster: BrokerCluster, zookeeper: ZooKeeperServer) -> None:
    """A broker started again before the session of its previous life expired finds its
    ``/brokers/ids/N`` still there: it waits and retries (it does not exit) and registers
    once that session is gone. The previous life's node is held by the test's own session
    (with the broker's registration), so the broker meets it however slowly it starts."""
    topic = "quick-restart"
    create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
    broker = next(b for b in range(3) if b != leader_of(cluster.bootstrap, topic))
    path = f"/brokers/ids/{broker}"
    with zookeeper.client(cluster.chroot, timeout_s=SESSION_S) as previous_life:
        registration, _stat = previous_life.get(path)
        cluster.kill(broker)
        eventually(lambda: previous_life.exists(path) is None, "the killed broker's session to expire",
                   timeout=SESSION_S * 5)
        previous_life.create(path, registration, ephemeral=True)
        log_file = cluster[broker].log_file
        before = log_file.stat().st_size

        def this_life() -> str:  # the log of this start only (a broker's log file is appended to)
            return log_file.read_bytes()[before:].decode(errors="replace")

        process = cluster.launch(broker)
        warning = f"broker id {broker} is still registered in ZooKeeper"
        eventually(lambda: this_life().count(warning) >= 2, "the broker to wait and retry", timeout=120)
        assert process.alive
        assert "registered in ZooKeeper at" not in this_life()
    # The test's session closed: the old node is gone, and the broker registers.
    process.wait_ready(60)
    assert f"broker {broker} registered in ZooKeeper at" in this_life()
    eventually(lambda: broker in isr(cluster.bootstrap, topic), "the restarted broker back in the ISR")


def test_a_broker_tries_an_unreachable_zookeeper_again_at_least_once_a_second() -> None:
    """kazoo's default doubles its wait between connection attempts up to an hour: in 12 s
    it makes 7, the last wait 6 s or more, so a broker would come back to a restarted
    ZooKeeper long after its session could have been kept. A broker's client tries at
    least once a second (1.4 s with kazoo's jitter), and once zookeeper.connection.timeout.ms
    has run out it says it cannot reach ZooKeeper (kazoo's time-out is not a KazooException)."""
    attempts: list[float] = []
    stop = threading.Event()
    # stands for a ZooKeeper that is down or starting: a connection is cut at once
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.1)
        port = server.getsockname()[1]

        def cut_every_connection() -> None:
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                attempts.append(time.monotonic())
                conn.close()

        listener = threading.Thread(target=cut_every_connection, daemon=True)
        listener.start()
        client = ZkClient(f"127.0.0.1:{port}", 4000, 12_000)
        began = time.monotonic()
        try:
            with pytest.raises(ZkConnectError, match="cannot reach ZooKeeper"):
                asyncio.run(client.start())
        finally:
            ended = time.monotonic()
            stop.set()
            listener.join()
    gaps = [later - earlier for earlier, later in zip([began, *attempts], [*attempts, ended], strict=True)]
    assert len(attempts) >= 8, gaps
    assert max(gaps) < 3.0, gaps
