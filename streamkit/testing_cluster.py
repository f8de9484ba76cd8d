"""A cluster of real ``streamkit broker`` processes on one ZooKeeper, for replication tests.

::

    from streamkit.testing import ZooKeeperServer
    from streamkit.testing_cluster import BrokerCluster

    with ZooKeeperServer(tmp_path / "zk") as zk, \\
            BrokerCluster(zk, 3, tmp_path / "cluster", config={"min.insync.replicas": 2}) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        leader = cluster.partition_leader("orders", 0)   # a broker id, from Metadata
        cluster.kill(leader)          # SIGKILL broker ``leader`` (its broker.id)
        cluster.start(leader)         # again on its data directory and port
        cluster.pause(2); cluster.resume(2)    # SIGSTOP / SIGCONT: a stalled follower
        cluster.stop(0)               # SIGTERM and wait: a controlled shutdown
        cluster.restart(0)            # stop, then start
        print(cluster.log_tail(1))    # the last lines of broker 1's log
        cluster.heal()                # resume the paused, start the dead: all n run

Broker ``i`` (0 to n-1) runs with ``--set broker.id=i``, ``--set
zookeeper.connect=ZK/chroot`` and ``--set listeners=PLAINTEXT://HOST:0`` (``command(i)``
is the exact command line), its data in ``base_dir/broker-i`` and its log in
``base_dir/broker-i.log``. Settings, lowest first: ``streamkit.testing.TEST_SETTINGS``,
``CLUSTER_TEST_SETTINGS`` (with a ZooKeeper), ``config``, ``overrides[i]``, then the three
above. A broker started again binds the port it had, so ``bootstrap`` stays valid across
restarts. The context exit SIGKILLs every broker still running, also when the test failed;
``stop_all()`` is the clean way down when a test wants to check it.

``zk`` may be a ``ZooKeeperServer``, a ``host:port`` string, or None: brokers without
``zookeeper.connect``, each a single broker as today (to test the harness itself).

Each broker may run on its own network namespace: ``hosts=[net["b0"], net["b1"], ...]``
(``streamkit.testing_netns``), with the ZooKeeperServer bound to ``net.gateway``; then
``net["b1"].cut()`` partitions broker 1 from ZooKeeper, its peers and the test's clients.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from streamkit.testing import BrokerProcess, ZooKeeperServer

__all__ = ["CLUSTER_TEST_SETTINGS", "BrokerCluster", "Placement"]

# Kafka's 18 s session would make every failover test wait that long after a SIGKILL;
# ZooKeeperServer grants sessions from 1 to 10 s.
CLUSTER_TEST_SETTINGS: dict[str, str] = {
    "zookeeper.session.timeout.ms": "4000",
}


class Placement(Protocol):
    """Where a broker runs: ``streamkit.testing_netns.Host`` is one."""

    @property
    def address(self) -> str: ...

    @property
    def prefix(self) -> list[str]: ...


class BrokerCluster:
    """``n`` broker processes; see the module docstring."""

    def __init__(self, zk: ZooKeeperServer | str | None, n: int = 3, base_dir: Path | str = ".",
                 config: Mapping[str, Any] | None = None,
                 overrides: Mapping[int, Mapping[str, Any]] | None = None,
                 chroot: str | None = None, hosts: Sequence[Placement] | None = None) -> None:
        if n < 1:
            raise ValueError(f"a cluster needs at least one broker, got n={n}")
        if hosts is not None and len(hosts) != n:
            raise ValueError(f"hosts must name one place per broker: {len(hosts)} for {n} brokers")
        self.base_dir = Path(base_dir)
        self.chroot = chroot if chroot is not None else f"/streamkit-{uuid.uuid4().hex[:8]}"
        if zk is None:
            self.zookeeper_connect: str | None = None
        else:
            address = zk.address if isinstance(zk, ZooKeeperServer) else zk
            self.zookeeper_connect = address + self.chroot
        self.brokers: list[BrokerProcess] = []
        for i in range(n):
            settings: dict[str, Any] = dict(CLUSTER_TEST_SETTINGS) if self.zookeeper_connect else {}
            settings.update(config or {})
            settings.update((overrides or {}).get(i, {}))
            settings["broker.id"] = i
            if self.zookeeper_connect:
                settings["zookeeper.connect"] = self.zookeeper_connect
            host = hosts[i] if hosts is not None else None
            self.brokers.append(BrokerProcess(
                self.base_dir / f"broker-{i}", settings, host=host.address if host else "127.0.0.1",
                log_file=self.base_dir / f"broker-{i}.log", command_prefix=host.prefix if host else ()))
        for i in range(n):
            self._set_listener(i)

    def __getitem__(self, i: int) -> BrokerProcess:
        return self.brokers[i]

    def __len__(self) -> int:
        return len(self.brokers)

    @property
    def bootstrap(self) -> str:
        """``host:port,host:port,...`` of every broker (running or not) once started."""
        return ",".join(broker.bootstrap for broker in self.brokers)

    def command(self, i: int) -> list[str]:
        """The command line that starts broker ``i`` (its ready file named READY)."""
        return self.brokers[i].command()

    def _set_listener(self, i: int) -> None:
        broker = self.brokers[i]
        broker.settings["listeners"] = f"PLAINTEXT://{broker.host}:{broker.port}"

    def start_all(self, timeout_s: float = 60) -> BrokerCluster:
        """Start every broker that is not running, side by side; wait until all listen."""
        waiting = [i for i, broker in enumerate(self.brokers) if not broker.alive]
        try:
            for i in waiting:
                self._set_listener(i)
                self.brokers[i].launch()
            for i in waiting:
                self.brokers[i].wait_ready(timeout_s)
        except BaseException:
            self.kill_all()
            raise
        return self

    def start(self, i: int, timeout_s: float = 60) -> BrokerProcess:
        """Start broker ``i`` (again: same data directory, same port) and wait until it listens."""
        if self.brokers[i].alive:
            raise RuntimeError(f"broker {i} is already running")
        self._set_listener(i)
        return self.brokers[i].start(timeout_s)

    def launch(self, i: int) -> BrokerProcess:
        """Start broker ``i`` (again) and return at once; ``self[i].wait_ready()`` waits
        until it listens (which a broker in a cluster does once registered)."""
        if self.brokers[i].alive:
            raise RuntimeError(f"broker {i} is already running")
        self._set_listener(i)
        self.brokers[i].launch()
        return self.brokers[i]

    def stop(self, i: int, timeout_s: float = 60) -> int:
        """SIGTERM broker ``i`` and wait: its exit code (0 for a clean shutdown)."""
        return self.brokers[i].stop(timeout_s)

    def kill(self, i: int) -> None:
        """SIGKILL broker ``i``: no flush, no controlled shutdown."""
        self.brokers[i].kill()

    def restart(self, i: int, timeout_s: float = 60) -> BrokerProcess:
        """``stop(i)`` (it must exit 0), then ``start(i)``: one step of a rolling restart."""
        code = self.stop(i, timeout_s)
        if code != 0:
            raise RuntimeError(f"broker {i} exited with {code} on SIGTERM:\n{self.log_tail(i)}")
        return self.start(i, timeout_s)

    def pause(self, i: int) -> None:
        """SIGSTOP broker ``i``: it holds its sockets and ZooKeeper session but answers
        nothing, like a long GC pause (its session expires after the session timeout)."""
        self.brokers[i].pause()

    def resume(self, i: int) -> None:
        """SIGCONT broker ``i`` after ``pause``."""
        self.brokers[i].resume()

    def alive(self, i: int) -> bool:
        return self.brokers[i].alive

    def log_tail(self, i: int, lines: int = 40) -> str:
        return self.brokers[i].log_tail(lines)

    def stop_all(self, timeout_s: float = 60) -> dict[int, int]:
        """SIGTERM every running broker, then wait for each: ``{broker id: exit code}``."""
        running = [i for i, broker in enumerate(self.brokers) if broker.alive]
        for i in running:
            self.brokers[i].terminate()
        # Not stop(): a second SIGTERM could land after the broker's handler is gone.
        return {i: self.brokers[i].wait(timeout_s) for i in running}

    def heal(self, timeout_s: float = 60) -> BrokerCluster:
        """Resume every paused broker and start every one that is down, and wait until
        every broker's metadata lists all n as live (a resumed broker whose ZooKeeper
        session expired registers again first): the cluster is whole again (between tests
        on one cluster)."""
        for broker in self.brokers:
            if broker.paused:
                broker.resume()
        self.start_all(timeout_s)
        if self.zookeeper_connect is None:
            return self
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        for broker in self.brokers:
            client = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
            while len(client.list_topics(timeout=timeout_s).brokers) < len(self.brokers):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the cluster is not whole again after {timeout_s} s")
                time.sleep(0.05)
        return self

    def kill_all(self) -> None:
        for broker in self.brokers:
            broker.kill()

    def partition_leader(self, topic: str, partition: int = 0, timeout_s: float = 10) -> int:
        """The broker id that Metadata names as the partition's leader (-1: none), asked of
        any running broker (with confluent-kafka)."""
        from confluent_kafka.admin import AdminClient

        bootstrap = ",".join(b.bootstrap for b in self.brokers if b.alive)
        client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        metadata = client.list_topics(topic, timeout=timeout_s)
        found = metadata.topics[topic]
        if found.error is not None:
            raise RuntimeError(f"metadata of {topic}: {found.error}")
        return int(found.partitions[partition].leader)

    def __enter__(self) -> BrokerCluster:
        return self.start_all()

    def __exit__(self, *exc: object) -> None:
        self.kill_all()
