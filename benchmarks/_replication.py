"""Replication on one 3-broker cluster (ZooKeeper and three ``streamkit broker`` processes),
streamkit only (``broker_bench.py --replication``).

1. Produce throughput, ``trials`` interleaved rounds on fresh single-partition topics:
   replication factor 3 with ``acks=all`` and ``min.insync.replicas=2``, beside replication
   factor 1 with ``acks=1``, the same producer loop as the rest of broker_bench. The ratio
   is the median of the rounds' paired ratios; target >= 0.5 (Kafka's own 2014 figures:
   421,823 against 821,557 records/s, 0.51).
2. Failover: a producer writes one record every millisecond (``acks=all``, idempotent) to a
   partition replicated 3 times; its leader is SIGKILLed, or stopped with SIGTERM (a
   controlled shutdown). Measured: the longest pause in acknowledged writes from the kill
   (or the SIGTERM) on, i.e. how long the partition could not take writes until the new
   leader acknowledged them. After a SIGKILL this includes noticing the death:
   ``zookeeper.session.timeout.ms`` (6 s here; Kafka's default is 18 s). Target for a
   controlled shutdown: under 1 s.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster

__all__ = ["report_replication", "run_replication"]

SESSION_MS = 6000
RATIO_TARGET = 0.5
SHUTDOWN_TARGET_S = 1.0


@dataclass
class ReplicationResult:
    replicated: list[float]  # records/s, RF 3 acks=all
    single: list[float]  # records/s, RF 1 acks=1
    kill_s: list[float]
    shutdown_s: list[float]


def _create(bootstrap: str, name: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if replication > 1 else {}
    for future in admin.create_topics([NewTopic(name, 1, replication, config=config)]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, 10).topics.get(name)
        if md is not None and md.error is None and md.partitions and md.partitions[0].leader >= 0 and \
                len(md.partitions[0].isrs) == replication:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} not fully in sync after 30 s")


def _leader(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, 10)
    return int(md.topics[topic].partitions[0].leader)


def _failover(cluster: BrokerCluster, topic: str, stop: Callable[[int], object]) -> float:
    """The longest pause in acknowledged writes from ``stop(leader)`` on (seconds): the
    time the partition could not take writes (the old leader may still acknowledge some
    during a controlled shutdown, before it hands over)."""
    _create(cluster.bootstrap, topic, 3)
    acks: list[tuple[float, float]] = []  # (sent, acknowledged) by the monotonic clock
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, "message.timeout.ms": 60_000, "retry.backoff.ms": 20,
                         "topic.metadata.refresh.interval.ms": 200})
    done = threading.Event()

    def run() -> None:
        while not done.is_set():
            sent = time.monotonic()
            producer.produce(topic, b"x", on_delivery=lambda e, _m, sent=sent: e is None and acks.append(
                (sent, time.monotonic())))
            producer.poll(0.001)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while len(acks) < 200:
        time.sleep(0.01)
    leader = _leader(cluster.bootstrap, topic)
    at = time.monotonic()
    stop(leader)
    deadline = time.monotonic() + SESSION_MS / 1000 * 5 + 30
    # Acknowledgements flowing steadily again (a second of them after the stop's return).
    settled = time.monotonic() + 1
    while time.monotonic() < deadline and not sum(1 for sent, _acked in list(acks) if sent > settled) > 100:
        time.sleep(0.01)
    done.set()
    thread.join()
    producer.flush(30)
    times = [at, *sorted(acked for _sent, acked in acks if acked > at)]
    cluster.start(leader)
    return max(b - a for a, b in itertools.pairwise(times)) if len(times) > 1 else float("nan")


def run_replication(records: int, trials: int, produce: Callable[..., Any], work: Path | None = None) -> ReplicationResult:
    """``produce(target, topic, records, extra=...)`` is broker_bench's producer loop."""
    base = Path(tempfile.mkdtemp(prefix="replication-", dir=work))
    result = ReplicationResult([], [], [], [])
    with ZooKeeperServer(base / "zk") as zk, BrokerCluster(
            zk, 3, base / "cluster", config={"zookeeper.session.timeout.ms": SESSION_MS}) as cluster:
        from broker_bench import Target  # benchmarks/ is on sys.path (broker_bench puts it there)

        pid = cluster[0].process.pid if cluster[0].process else 0
        target = Target("cluster", cluster.bootstrap, pid, lambda: None)
        for trial in range(trials):
            kinds = [("rf3", 3, {"acks": "all"}), ("rf1", 1, {"acks": 1})]
            for name, replication, extra in (kinds if trial % 2 == 0 else kinds[::-1]):
                topic = f"replication-{name}-{trial}"
                _create(cluster.bootstrap, topic, replication)
                run = produce(target, topic, records, extra=extra)
                (result.replicated if replication == 3 else result.single).append(run.rate)
                print(f"  round {trial + 1}/{trials} {name}: {run.rate:,.0f} records/s", flush=True)
        for trial in range(trials):
            result.kill_s.append(_failover(cluster, f"failover-kill-{trial}", cluster.kill))
            result.shutdown_s.append(_failover(cluster, f"failover-stop-{trial}", cluster.stop))
            print(f"  round {trial + 1}/{trials}: writes paused {result.kill_s[-1]:.2f} s after a leader SIGKILL, "
                  f"{result.shutdown_s[-1]:.2f} s after a controlled shutdown", flush=True)
    return result


def report_replication(records: int, result: ReplicationResult) -> None:
    ratios = [a / b for a, b in zip(result.replicated, result.single, strict=False) if b]
    ratio = statistics.median(ratios) if ratios else float("nan")
    print(f"\nreplication (3 brokers, {records:,} x 100-byte records per round):")
    print(f"  RF=3 acks=all min.insync.replicas=2: {max(result.replicated):,.0f} records/s best, "
          f"{statistics.median(result.replicated):,.0f} median")
    print(f"  RF=1 acks=1:                         {max(result.single):,.0f} records/s best, "
          f"{statistics.median(result.single):,.0f} median")
    print(f"  ratio (median of paired rounds): {ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}); "
          f"target >= {RATIO_TARGET} ({'ok' if ratio >= RATIO_TARGET else 'MISS'}); Kafka 2014: 0.51x")
    print(f"  leader SIGKILL: writes paused {statistics.median(result.kill_s):.2f} s (median) until the new "
          f"leader acknowledged them (zookeeper.session.timeout.ms={SESSION_MS})")
    shutdown = statistics.median(result.shutdown_s)
    print(f"  controlled shutdown: writes paused {shutdown:.2f} s (median); "
          f"target < {SHUTDOWN_TARGET_S:.0f} s ({'ok' if shutdown < SHUTDOWN_TARGET_S else 'MISS'})")
