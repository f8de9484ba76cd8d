"""Clients the cluster tests run against a cluster while they break it: a producer thread
that records every produce in a ``History``, and small metadata helpers (what a plain
Kafka client sees: confluent-kafka, librdkafka)."""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.testing_history import History

__all__ = ["ProducerLoad", "create_topic", "eventually", "isr", "leader_of", "partitions_of", "wait_for_leaders"]


def eventually(predicate: Callable[[], Any], what: str, timeout: float = 30, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(interval)


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 3,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication, config=config or {})],
                                  request_timeout=30)
    for future in futures.values():
        future.result()
    wait_for_leaders(bootstrap, name, partitions)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int) -> None:
    """Until every broker in ``bootstrap`` names a leader for each of the topic's
    ``partitions``. Each broker learns of a new topic from its own ZooKeeper watches, some
    later than others (as in Kafka): one broker's answer says nothing of the others'."""
    for address in bootstrap.split(","):
        eventually(functools.partial(_led, address, topic, partitions), f"{topic}'s leaders on {address}")


def _led(bootstrap: str, topic: str, partitions: int) -> bool:
    known = partitions_of(bootstrap, topic)
    return len(known) == partitions and all(p["leader"] >= 0 for p in known.values())


def partitions_of(bootstrap: str, topic: str) -> dict[int, dict[str, Any]]:
    """Partition -> {"leader", "replicas", "isr"} as Metadata says."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(topic, timeout=10)
    found = md.topics.get(topic)
    if found is None or found.error is not None:
        return {}
    return {p.id: {"leader": p.leader, "replicas": list(p.replicas), "isr": sorted(p.isrs)}
            for p in found.partitions.values()}


def leader_of(bootstrap: str, topic: str, partition: int = 0) -> int:
    return int(partitions_of(bootstrap, topic).get(partition, {}).get("leader", -1))


def isr(bootstrap: str, topic: str, partition: int = 0) -> list[int]:
    return list(partitions_of(bootstrap, topic).get(partition, {}).get("isr", []))


class ProducerLoad:
    """A thread producing ``p{n}-{i}`` values with an idempotent ``acks=all`` producer,
    each recorded in ``history``: acknowledged with its offset, failed, or (never
    reported) unknown."""

    def __init__(self, bootstrap: str, topic: str, history: History, name: str = "p1",
                 every_s: float = 0.002, config: dict[str, Any] | None = None) -> None:
        self.topic = topic
        self.history = history
        self.name = name
        self.every_s = every_s
        # librdkafka's idempotent producer resends with a new producer epoch, which the
        # broker cannot deduplicate, when a message times out in flight or requests 2-5 get
        # OUT_OF_ORDER_SEQUENCE after a failed first one (librdkafka#4953; the Java client
        # retries instead). The tests check the broker, not that client's policy: one
        # request in flight, a request to a stalled broker given up after 10 s
        # (socket.timeout.ms) and retried as it was, and messages that do not expire first.
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 180_000, "socket.timeout.ms": 10_000,
                                  "max.in.flight.requests.per.connection": 1, **(config or {})})
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"load-{name}", daemon=True)
        self._seq = itertools.count()

    def start(self) -> ProducerLoad:
        self._thread.start()
        return self

    def _run(self) -> None:
        history, producer = self.history, self.producer
        while not self._stop.is_set():
            i = next(self._seq)
            value = f"{self.name}-{i}"
            op = history.produce(self.name, value, key=str(i % 16), topic=self.topic)

            def report(err: KafkaError | None, msg: Any, op: Any = op) -> None:
                if err is None:
                    history.ack(op, msg.partition(), msg.offset())
                else:
                    self.errors.append(err)
                    history.fail(op)

            while True:
                try:
                    producer.produce(self.topic, value.encode(), key=str(i % 16).encode(), on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            time.sleep(self.every_s)

    def acked(self) -> int:
        return sum(1 for op in self.history.produces if op.outcome == "ok")

    def wait_acked(self, more_than: int, timeout: float = 60) -> int:
        return int(eventually(lambda: self.acked() > more_than and self.acked(), f"{self.name} acks past {more_than}",
                              timeout))

    def stop(self, flush_s: float = 90) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(flush_s)
