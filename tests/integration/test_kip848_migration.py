"""Mixed groups with real clients: kafka-python classic consumers and librdkafka consumers
with ``group.protocol=consumer`` in one group, against a real broker process.

The online upgrade (a consumer-protocol member joins a classic group that keeps consuming)
and the downgrade (the last one leaves): every record is consumed, and no partition is ever
owned by two members, as the clients' own rebalance callbacks tell and as
ConsumerGroupDescribe shows while the group is mixed."""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest

from streamkit.testing import BrokerProcess
from tests.integration.members import kafka_python_subscribe
from tests.integration.test_kip848 import Ledger, Snapshots, describe, group, produce

__all__ = ["group"]  # the fixture, shared with test_kip848.py
from tests.integration.util import QUIET, call, connect, create_topic, wait_until

HEARTBEAT_MS = 250
SESSION_MS = 6000
BROKER_SETTINGS = {"group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
                   "group.consumer.session.timeout.ms": SESSION_MS}
PARTITIONS = 6
TP = tuple[str, int]


class Reader(threading.Thread):
    """A group member on a thread: kafka-python (classic, eager ``range``) or librdkafka with
    ``group.protocol=consumer``. It records what it reads and tells the ledger what it owns."""

    def __init__(self, name: str, kind: str, bootstrap: str, group: str, topic: str, ledger: Ledger) -> None:
        super().__init__(name=name, daemon=True)
        self.kind, self.bootstrap, self.group, self.topic, self.ledger = kind, bootstrap, group, topic, ledger
        self.values: list[str] = []
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._kafka_python() if self.kind == "classic" else self._confluent()
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def _kafka_python(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        ledger, name = self.ledger, self.name

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                ledger.revoke(name, list(revoked))

            def on_partitions_assigned(self, assigned: Any) -> None:
                ledger.assign(name, list(assigned))

            def on_partitions_lost(self, lost: Any) -> None:
                ledger.revoke(name, list(lost))

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
                                 session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                                 auto_offset_reset="earliest", auto_commit_interval_ms=500)
        kafka_python_subscribe(consumer, self.topic, Listener())
        try:
            while not self.stop_flag.is_set():
                for records in consumer.poll(timeout_ms=50).values():
                    self.values.extend(r.value.decode() for r in records)
        finally:
            consumer.close()  # commits and leaves (LeaveGroup)

    def _confluent(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
                             "client.id": self.name, "auto.offset.reset": "earliest",
                             "auto.commit.interval.ms": 500, **QUIET})
        name = self.name
        consumer.subscribe([self.topic], on_assign=lambda _c, ps: self.ledger.assign(name, ps),
                           on_revoke=lambda _c, ps: self.ledger.revoke(name, ps),
                           on_lost=lambda _c, ps: self.ledger.revoke(name, ps))
        try:
            while not self.stop_flag.is_set():
                msg = consumer.poll(0.05)
                if msg is not None and not msg.error():
                    self.values.append(msg.value().decode())
        finally:
            consumer.close()  # commits and leaves (member epoch -1)

    def owned(self) -> set[TP]:
        return self.ledger.owned_by(self.name)

    def finish(self) -> None:
        self.stop_flag.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not stop"
        assert self.error is None, f"{self.name} failed: {self.error!r}"


def group_type(bootstrap: str, group: str) -> str | None:
    with connect(bootstrap) as sock:
        response = call(sock, ListGroupsRequest(states_filter=(), types_filter=()))
    return next((g.group_type for g in response.groups if g.group_id == group), None)


def test_a_classic_group_upgrades_online_and_downgrades_when_the_last_consumer_member_leaves(
        broker: BrokerProcess, topic_name: str, group: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, partitions=PARTITIONS)
    ledger = Ledger()
    produced: list[str] = []

    def batch(n: int) -> None:
        values = [f"v{len(produced) + i}" for i in range(n)]
        produce(bs, topic_name, values, PARTITIONS)
        produced.extend(values)

    k1 = Reader("k1", "classic", bs, group, topic_name, ledger)
    k2 = Reader("k2", "classic", bs, group, topic_name, ledger)
    modern = Reader("c1", "consumer", bs, group, topic_name, ledger)
    readers = [k1, k2, modern]
    snapshots = Snapshots(bs, group)
    try:
        batch(60)
        k1.start()
        k2.start()
        wait_until(lambda: len(k1.owned()) + len(k2.owned()) == PARTITIONS and k1.owned() and k2.owned(), 60,
                   lambda: f"the classic members share the partitions: {k1.owned()} {k2.owned()}")
        assert group_type(bs, group) == "classic"
        batch(60)
        # The upgrade: the classic members keep consuming while the new member takes its share.
        modern.start()
        wait_until(lambda: group_type(bs, group) == "consumer", 30, "the group upgraded")
        snapshots.start()
        wait_until(lambda: modern.owned() and len(k1.owned()) + len(k2.owned()) + len(modern.owned()) == PARTITIONS,
                   60, lambda: f"three members share the partitions: {k1.owned()} {k2.owned()} {modern.owned()}")
        batch(60)
        # The mixed group consumes everything: the classic members' partitions as well.
        wait_until(lambda: set(k1.values) | set(k2.values) | set(modern.values) >= set(produced), 60,
                   "everything produced so far consumed by the mixed group")
        described = describe(bs, group)
        assert described.error_code == ErrorCode.none and len(described.members) == 3
        types = sorted(m.member_type for m in described.members)
        assert types == [0, 0, 1]  # two classic members, one consumer-protocol member
        wait_until(lambda: describe(bs, group).group_state == "Stable", 30, "the mixed group stable")
        wait_until(lambda: snapshots.taken >= 5, 30, "snapshots of the mixed group")
        # The downgrade: the last consumer-protocol member leaves; the classic members rebalance.
        modern.finish()
        wait_until(lambda: group_type(bs, group) == "classic", 30, "the group downgraded")
        wait_until(lambda: len(k1.owned()) + len(k2.owned()) == PARTITIONS and k1.owned() and k2.owned(), 60,
                   lambda: f"the classic members share everything again: {k1.owned()} {k2.owned()}")
        batch(60)

        def consumed() -> set[str]:
            return set(k1.values) | set(k2.values) | set(modern.values)

        wait_until(lambda: consumed() >= set(produced), 60,
                   lambda: f"everything consumed; missing {sorted(set(produced) - consumed())[:10]}")
    finally:
        snapshots.stop_flag.set()
        for r in readers:
            if r.is_alive():
                r.finish()
        if snapshots.is_alive():
            snapshots.join(10)
    assert ledger.violations == []
    assert snapshots.taken >= 5 and snapshots.violations == []
    for r in readers:
        assert r.error is None, f"{r.name}: {r.error!r}"


def test_with_upgrades_disabled_a_classic_group_refuses_a_consumer_protocol_member(
        broker_factory: Any, topic_name: str, group: str) -> None:
    broker = broker_factory(settings={**BROKER_SETTINGS, "group.consumer.migration.policy": "disabled"})
    bs = broker.bootstrap
    create_topic(bs, topic_name, partitions=2)
    ledger = Ledger()
    classic = Reader("k1", "classic", bs, group, topic_name, ledger)
    classic.start()
    try:
        wait_until(lambda: len(classic.owned()) == 2, 60, "the classic member owns both partitions")
        refused = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer", **QUIET})
        refused.subscribe([topic_name])
        try:
            def fatal() -> bool:
                msg = refused.poll(0.1)
                return msg is not None and msg.error() is not None and "The group id does not exist" in msg.error().str()

            wait_until(fatal, 30, "GROUP_ID_NOT_FOUND for the consumer-protocol member")
        finally:
            refused.close()
        assert group_type(bs, group) == "classic" and len(classic.owned()) == 2
    finally:
        classic.finish()
