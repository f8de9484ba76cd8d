"""BrokerCluster, the harness the replication tests run on: the command line each broker
gets, and start/stop/kill/pause/resume/restart on real broker processes (one broker without
ZooKeeper here: the cluster behaviour itself is for the replication tests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster

QUIET = {"log_level": 0}


def _sets(command: list[str]) -> dict[str, str]:
    """The ``--set key=value`` pairs of a command line."""
    pairs = [command[i + 1] for i, arg in enumerate(command[:-1]) if arg == "--set"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_each_broker_gets_its_id_the_zookeeper_chroot_and_a_port_0_listener(tmp_path: Path) -> None:
    cluster = BrokerCluster("127.0.0.1:2181", 3, tmp_path, chroot="/c1", config={"min.insync.replicas": 2},
                            overrides={1: {"broker.rack": "b"}})
    data_dirs = set()
    for i in range(3):
        command = cluster.command(i)
        settings = _sets(command)
        assert settings["broker.id"] == str(i)
        assert settings["zookeeper.connect"] == "127.0.0.1:2181/c1"
        assert settings["listeners"] == "PLAINTEXT://127.0.0.1:0"
        assert settings["min.insync.replicas"] == "2"
        assert settings["zookeeper.session.timeout.ms"] == "4000"
        assert ("broker.rack" in settings) == (i == 1)
        assert "--host" not in command and "--port" not in command  # listeners decides
        data_dirs.add(command[command.index("--data-dir") + 1])
    assert data_dirs == {str(tmp_path / f"broker-{i}") for i in range(3)}


def test_a_zookeeper_server_gives_its_address_and_each_cluster_its_own_chroot(tmp_path: Path) -> None:
    zk = ZooKeeperServer(tmp_path / "zk")
    zk.port = 2999  # not started: only its address is read
    first, second = BrokerCluster(zk, 1, tmp_path / "a"), BrokerCluster(zk, 1, tmp_path / "b")
    assert _sets(first.command(0))["zookeeper.connect"] == f"127.0.0.1:2999{first.chroot}"
    assert first.chroot != second.chroot


def test_without_zookeeper_the_brokers_get_no_zookeeper_settings(tmp_path: Path) -> None:
    settings = _sets(BrokerCluster(None, 1, tmp_path).command(0))
    assert not any(key.startswith("zookeeper.") for key in settings)


def _proc_state(pid: int) -> str:
    # /proc/PID/stat: "pid (comm) STATE ..."; comm may hold spaces, the state follows ")".
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **QUIET})
    errors: list[object] = []
    producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0 and errors == [None], errors


def _values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "harness", "enable.partition.eof": True,
                         **QUIET})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        while (message := consumer.poll(30)) is not None:
            if message.error():
                break  # end of the partition
            values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.fixture(scope="module")
def _one_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    with BrokerCluster(None, 1, tmp_path_factory.mktemp("one")) as cluster:
        _produce(cluster.bootstrap, "t", b"one")
        yield cluster


@pytest.fixture
def one_broker(_one_broker: BrokerCluster) -> BrokerCluster:
    """A cluster of one broker (no ZooKeeper) holding topic t, running at each test's start."""
    return _one_broker.heal()


@pytest.mark.integration
def test_the_broker_runs_the_command_line_the_cluster_built(one_broker: BrokerCluster) -> None:
    broker = one_broker[0]
    assert broker.process is not None and broker.port != 0
    assert one_broker.bootstrap == f"127.0.0.1:{broker.port}"
    running = Path(f"/proc/{broker.process.pid}/cmdline").read_text().split("\0")[:-1]
    ready = running.index("--ready-file") + 1  # the only difference: a fresh ready file
    assert running[:ready] + running[ready + 1:] == [arg for i, arg in enumerate(one_broker.command(0))
                                                     if i != ready]
    assert _sets(running)["broker.id"] == "0"
    assert one_broker.partition_leader("t") == 0


@pytest.mark.integration
def test_pause_freezes_a_broker_until_resume_or_heal(one_broker: BrokerCluster) -> None:
    broker = one_broker[0]
    assert broker.process is not None
    one_broker.pause(0)
    assert _proc_state(broker.process.pid) == "T" and broker.paused
    with pytest.raises(KafkaException):
        one_broker.partition_leader("t", timeout_s=1)
    one_broker.resume(0)
    assert _proc_state(broker.process.pid) != "T" and not broker.paused
    assert one_broker.partition_leader("t") == 0
    one_broker.pause(0)
    one_broker.heal()
    assert not broker.paused and one_broker.partition_leader("t") == 0


@pytest.mark.integration
def test_a_killed_broker_starts_again_on_its_port_and_data(one_broker: BrokerCluster) -> None:
    broker, port = one_broker[0], one_broker[0].port
    one_broker.kill(0)
    assert not one_broker.alive(0) and broker.process is not None and broker.process.returncode == -9
    one_broker.start(0)
    assert broker.port == port  # the bootstrap list stays valid
    assert _values(one_broker.bootstrap, "t")[0] == b"one"


@pytest.mark.integration
def test_heal_starts_a_killed_broker(one_broker: BrokerCluster) -> None:
    one_broker.kill(0)
    one_broker.heal()
    assert one_broker.alive(0) and one_broker.partition_leader("t") == 0


@pytest.mark.integration
def test_restart_is_a_clean_stop_then_a_start(one_broker: BrokerCluster) -> None:
    broker, port = one_broker[0], one_broker[0].port
    first = broker.process
    one_broker.restart(0)
    assert first is not None and first.returncode == 0
    assert broker.port == port and broker.process is not first
    assert "shutting down" in one_broker.log_tail(0, 1000)
    _produce(one_broker.bootstrap, "t", b"after restart")
    assert _values(one_broker.bootstrap, "t")[-1] == b"after restart"
    assert one_broker.stop(0) == 0


@pytest.mark.integration
def test_stop_all_stops_every_broker_cleanly(tmp_path: Path) -> None:
    with BrokerCluster(None, 3, tmp_path) as cluster:
        assert cluster.stop_all() == {0: 0, 1: 0, 2: 0}, [cluster.log_tail(i) for i in range(3)]


@pytest.mark.integration
def test_every_broker_is_killed_at_exit_even_when_the_test_fails(tmp_path: Path) -> None:
    cluster = BrokerCluster(None, 2, tmp_path)
    with pytest.raises(RuntimeError, match="the test failed"), cluster:
        assert len({broker.port for broker in cluster.brokers}) == 2
        cluster.pause(1)
        raise RuntimeError("the test failed")
    assert [broker.process.returncode for broker in cluster.brokers if broker.process] == [-9, -9]


# Run on a host: ask ZooKeeper (argv[1], argv[2]) "ruok" and print its answer, or the error
# within 2 s.
ZOOKEEPER_PROBE = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as sock:
        sock.sendall(b"ruok")
        print(sock.recv(16).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.integration
def test_a_broker_on_its_own_host_is_cut_off_from_zookeeper_and_clients_then_back(
        tmp_path: Path, need_zookeeper: None, need_netns: None) -> None:
    import sys

    from streamkit.testing_netns import Network

    with Network(["b0"]) as net, ZooKeeperServer(tmp_path / "zk", host=net.gateway) as zk, \
            BrokerCluster(None, 1, tmp_path / "cluster", hosts=[net["b0"]]) as cluster:
        host = net["b0"]
        assert cluster.bootstrap == f"{host.address}:{cluster[0].port}"

        def zookeeper_from_the_host() -> str:
            probe = host.run([sys.executable, "-c", ZOOKEEPER_PROBE, zk.host, str(zk.port)], capture_output=True,
                             text=True, timeout=60)
            return probe.stdout.strip() or probe.stderr

        _produce(cluster.bootstrap, "t", b"before")
        assert zookeeper_from_the_host() == "imok"

        host.cut()
        with pytest.raises(KafkaException):
            cluster.partition_leader("t", timeout_s=2)
        assert zookeeper_from_the_host() == "TimeoutError"
        assert cluster.alive(0)

        host.restore()
        assert zookeeper_from_the_host() == "imok"
        _produce(cluster.bootstrap, "t", b"after")
        assert _values(cluster.bootstrap, "t") == [b"before", b"after"]
