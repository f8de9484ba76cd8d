"""The new consumer group protocol (KIP-848) with real librdkafka consumers
(``group.protocol=consumer``): membership changes while the group keeps consuming, never two
owners of a partition, the upgrade from an empty classic group, static members, regex
subscriptions, a broker restart, and the CLI's view."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, Producer, TopicPartition
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from streamkit.testing import BrokerProcess
from tests.integration.test_cli import table_rows
from tests.integration.util import QUIET, admin, call, connect, create_topic, wait_until

HEARTBEAT_MS = 250
SESSION_MS = 6000
BROKER_SETTINGS = {"group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
                   "group.consumer.session.timeout.ms": SESSION_MS}

TP = tuple[str, int]


def new_consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", **QUIET, **extra})


def describe(bootstrap: str, group: str) -> Any:
    with connect(bootstrap) as sock:
        response = call(sock, ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False))
    return response.groups[0]


def owners(described: Any) -> dict[TP, list[str]]:
    out: dict[TP, list[str]] = {}
    for m in described.members:
        for t in m.assignment.topic_partitions:
            for p in t.partitions:
                out.setdefault((t.topic_name, int(p)), []).append(m.member_id)
    return out


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i, v in enumerate(values):
        producer.produce(topic, v.encode(), partition=i % partitions)
    assert producer.flush(30) == 0


class Ledger:
    """Who owns what, from the consumers' own rebalance callbacks: an assign of a partition
    someone else still holds is a violation."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[TP, str] = {}
        self.violations: list[str] = []

    def assign(self, name: str, parts: list[TopicPartition]) -> None:
        with self.lock:
            for tp in parts:
                key = (tp.topic, tp.partition)
                if self.owner.get(key, name) != name:
                    self.violations.append(f"{key} assigned to {name} while {self.owner[key]} owns it")
                self.owner[key] = name

    def owned_by(self, name: str) -> set[TP]:
        with self.lock:
            return {tp for tp, who in self.owner.items() if who == name}

    def revoke(self, name: str, parts: list[TopicPartition]) -> None:
        with self.lock:
            for tp in parts:
                if self.owner.get((tp.topic, tp.partition)) == name:
                    del self.owner[(tp.topic, tp.partition)]


class Member(threading.Thread):
    """A consumer in a thread, recording what it reads and what it owns."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = new_consumer(bootstrap, group, **{"client.id": name})
        self.topic, self.ledger = topic, ledger
        self.values: list[str] = []
        self.stop_flag = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        name = self.name
        self.consumer.subscribe([self.topic],
                                on_assign=lambda c, ps: self.ledger.assign(name, ps),
                                on_revoke=lambda c, ps: self.ledger.revoke(name, ps),
                                on_lost=lambda c, ps: self.ledger.revoke(name, ps))
        try:
            while not self.stop_flag.is_set():
                msg = self.consumer.poll(0.1)
                if msg is None:
                    continue
                if msg.error():
                    if not msg.error().retriable():
                        self.errors.append(str(msg.error()))
                    continue
                self.values.append(msg.value().decode())
        finally:
            self.consumer.close()  # leaves the group (member epoch -1)

    def owned(self) -> set[TP]:
        return self.ledger.owned_by(self.name)

    def finish(self) -> None:
        self.stop_flag.set()
        self.join(30)
        assert not self.is_alive()


_CHILD = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "client.id": "doomed", "log_level": 0})
c.subscribe([sys.argv[3]])
while True:
    m = c.poll(0.1)
    if m is not None and not m.error():
        print(m.value().decode(), flush=True)
"""


class Snapshots(threading.Thread):
    """ConsumerGroupDescribe every 100 ms: no partition in two members' assignments."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group = bootstrap, group
        self.stop_flag = threading.Event()
        self.taken = 0
        self.violations: list[str] = []

    def run(self) -> None:
        while not self.stop_flag.is_set():
            d = describe(self.bootstrap, self.group)
            if d.error_code == ErrorCode.none:
                self.taken += 1
                self.violations += [f"{tp} owned by {who}" for tp, who in owners(d).items() if len(who) > 1]
            time.sleep(0.1)


@pytest.fixture
def group() -> str:
    return f"kip848-{uuid.uuid4().hex[:8]}"


def test_members_join_leave_and_die_while_the_group_keeps_consuming(
        broker: BrokerProcess, topic_name: str, group: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, partitions=6)
    ledger = Ledger()
    snapshots = Snapshots(bs, group)
    produced: list[str] = []

    def batch(n: int) -> None:
        values = [f"v{len(produced) + i}" for i in range(n)]
        produce(bs, topic_name, values, 6)
        produced.extend(values)

    a = Member("a", bs, group, topic_name, ledger)
    b = Member("b", bs, group, topic_name, ledger)
    a.start()
    snapshots.start()
    child: subprocess.Popen[str] | None = None
    members = [a, b]
    try:
        batch(60)
        wait_until(lambda: len(a.owned()) == 6, 30, "a owns all six partitions")
        b.start()
        wait_until(lambda: len(a.owned()) == 3 and len(b.owned()) == 3, 30,
                   lambda: f"a and b split the partitions: {a.owned()} {b.owned()}")
        batch(60)
        child = subprocess.Popen([sys.executable, "-c", _CHILD, bs, group, topic_name],
                                 stdout=subprocess.PIPE, text=True)
        wait_until(lambda: len(describe(bs, group).members) == 3 and all(
            m.assignment.topic_partitions for m in describe(bs, group).members), 60, "three members with partitions")
        batch(60)
        c = Member("d", bs, group, topic_name, ledger)
        members.append(c)
        c.start()
        wait_until(lambda: len(c.owned()) > 0, 30, "d gets partitions")
        b.finish()  # leaves cleanly
        os.kill(child.pid, signal.SIGKILL)  # dies without leaving: the session timeout fences it
        child.wait(10)
        batch(60)
        # The survivors take over everything once the dead member's session expires.
        wait_until(lambda: len(a.owned()) + len(c.owned()) == 6, SESSION_MS / 1000 + 30,
                   lambda: f"a and d own all: {a.owned()} {c.owned()}")
        batch(60)
        assert child.stdout is not None
        from_child = child.stdout.read().split()

        def consumed() -> set[str]:
            return set(a.values) | set(b.values) | set(c.values) | set(from_child)

        wait_until(lambda: consumed() >= set(produced), 60,
                   lambda: f"everything consumed; missing {sorted(set(produced) - consumed())[:10]}")
        described = describe(bs, group)
        assert described.group_state == "Stable" and len(described.members) == 2
        assert {m.member_epoch for m in described.members} == {described.assignment_epoch}
    finally:
        snapshots.stop_flag.set()
        for m in members:
            if m.is_alive():
                m.finish()
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        if child is not None and child.stdout is not None:
            child.stdout.close()
        snapshots.join(10)
    assert ledger.violations == []
    assert snapshots.taken > 10 and snapshots.violations == []
    assert a.errors == [] and c.errors == []


def consume_n(consumer: Consumer, n: int, timeout_s: float = 30) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            out.append(msg)
    return out


def test_upgrade_from_an_empty_classic_group_keeps_the_committed_offsets(
        broker: BrokerProcess, topic_name: str, group: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, partitions=1)
    produce(bs, topic_name, [f"v{i}" for i in range(20)], 1)
    classic = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, **QUIET})
    classic.subscribe([topic_name])
    try:
        got = consume_n(classic, 8)
        assert len(got) == 8
        classic.commit(got[-1], asynchronous=False)
        assert describe(bs, group).error_code == ErrorCode.group_id_not_found  # a classic group
    finally:
        classic.close()
    modern = new_consumer(bs, group)
    modern.subscribe([topic_name])
    try:
        rest = consume_n(modern, 12)
        assert [m.value().decode() for m in rest] == [f"v{i}" for i in range(8, 20)]
        d = describe(bs, group)
        assert d.error_code == ErrorCode.none and len(d.members) == 1 and d.members[0].member_epoch > 0
        modern.commit(rest[-1], asynchronous=False)  # OffsetCommit v9 with the member epoch
        committed = modern.committed([TopicPartition(topic_name, 0)], timeout=10)
        assert committed[0].offset == 20
    finally:
        modern.close()


def test_static_member_restart_gets_its_partitions_back_without_a_rebalance(
        broker: BrokerProcess, topic_name: str, group: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, partitions=4)
    first = new_consumer(bs, group, **{"group.instance.id": "i-1"})
    other = new_consumer(bs, group, **{"group.instance.id": "i-2"})
    first.subscribe([topic_name])
    other.subscribe([topic_name])
    try:
        def stable() -> bool:
            first.poll(0.05)
            other.poll(0.05)
            d = describe(bs, group)
            return d.group_state == "Stable" and len(d.members) == 2 and len(owners(d)) == 4

        wait_until(stable, 60, "two static members share four partitions")
        d = describe(bs, group)
        mine = {tp for tp, who in owners(d).items()
                if who == [m.member_id for m in d.members if m.instance_id == "i-1"]}
        epoch = d.group_epoch
        first.close()  # a static member leaves with epoch -2: its partitions stay reserved
        after = describe(bs, group)
        assert after.group_epoch == epoch and len(after.members) == 2
        again = new_consumer(bs, group, **{"group.instance.id": "i-1"})
        again.subscribe([topic_name])
        try:
            def back() -> bool:
                again.poll(0.05)
                other.poll(0.05)
                return {(tp.topic, tp.partition) for tp in again.assignment()} == mine

            wait_until(back, 30, "the restarted static member has its partitions again")
            assert describe(bs, group).group_epoch == epoch
        finally:
            again.close()
    finally:
        other.close()


def test_regex_subscription_picks_up_new_topics(broker: BrokerProcess, group: str) -> None:
    bs = broker.bootstrap
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    create_topic(bs, f"{prefix}-a", partitions=2)
    create_topic(bs, "unrelated-" + prefix, partitions=1)
    consumer = new_consumer(bs, group)
    consumer.subscribe([f"^{prefix}-.*"])
    try:
        def assigned() -> set[TP]:
            consumer.poll(0.1)
            return {(tp.topic, tp.partition) for tp in consumer.assignment()}

        wait_until(lambda: assigned() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}, 30, "regex assignment")
        # librdkafka sends its regex subscriptions joined into one: "(^a.*)|(^b.*)".
        assert describe(bs, group).members[0].subscribed_topic_regex == f"(^{prefix}-.*)"
        create_topic(bs, f"{prefix}-b", partitions=1)
        wait_until(lambda: (f"{prefix}-b", 0) in assigned(), 60, "the new matching topic is assigned")
    finally:
        consumer.close()


def test_cli_shows_the_protocol_and_member_epochs(broker: BrokerProcess, topic_name: str, group: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, partitions=2)
    consumer = new_consumer(bs, group, **{"client.id": "epoch-test"})
    consumer.subscribe([topic_name])
    try:
        wait_until(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 2, 30, "assignment")
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        listed = subprocess.run([sys.executable, "-m", "streamkit", "groups", "list", "-b", bs],
                                capture_output=True, text=True, timeout=60, env=env)
        assert [group, "consumer", "consumer"] in table_rows(listed.stdout)
        shown = subprocess.run([sys.executable, "-m", "streamkit", "groups", "describe", group, "-b", bs],
                               capture_output=True, text=True, timeout=60, env=env)
        assert shown.returncode == 0, shown.stderr
        # ListGroups v5 reports the group type to Kafka's admin clients.
        client = admin(bs)

        def listed_as(kind: ConsumerGroupType) -> set[str]:
            return {g.group_id for g in client.list_consumer_groups(types={kind}).result().valid
                    if g.type == kind}

        # A new admin client may answer before it knows the brokers: ask until it does.
        wait_until(lambda: group in listed_as(ConsumerGroupType.CONSUMER), 30, "the group listed as consumer")
        assert group not in listed_as(ConsumerGroupType.CLASSIC)
        # The classic DescribeGroups answers a consumer group as Kafka 4 does below v6.
        with connect(bs) as sock:
            classic = call(sock, DescribeGroupsRequest(groups=(group,), include_authorized_operations=False))
        assert classic.groups[0].error_code == ErrorCode.none
        assert (classic.groups[0].group_state, classic.groups[0].members) == ("Dead", ())
        d = describe(bs, group)
        lines = shown.stdout.splitlines()
        assert lines[0] == f"group {group}: Stable, 1 members"
        assert lines[1] == (f"protocol: consumer, group epoch {d.group_epoch}, assignment epoch "
                            f"{d.assignment_epoch}, assignor uniform")
        member = d.members[0]
        assert f"epoch {member.member_epoch}: {topic_name}-0, {topic_name}-1" in lines[2]
        assert "(epoch-test@" in lines[2]
    finally:
        consumer.close()


def poll_into(consumers: list[Consumer], values: list[str]) -> int:
    """One short poll of each consumer; what they read goes to ``values``. Returns its length."""
    for c in consumers:
        msg = c.poll(0.05)
        if msg is not None and not msg.error():
            values.append(msg.value().decode())
    return len(values)


@pytest.fixture
def restartable(broker_factory: Any) -> Iterator[BrokerProcess]:
    # A session long enough that the clients do not give up their assignment while the
    # broker is down.
    yield broker_factory(settings={**BROKER_SETTINGS, "group.consumer.session.timeout.ms": 45000})


def test_a_broker_restart_keeps_the_group_epoch_members_and_assignments(
        restartable: BrokerProcess, group: str) -> None:
    """The group's records in __consumer_offsets bring it back as it was: the members keep
    heartbeating with their epochs, nobody is fenced, no partition moves, and each record
    after the committed offsets is read once."""
    bs = restartable.bootstrap
    topic = "restart-" + group
    create_topic(bs, topic, partitions=4)
    callbacks: list[str] = []
    consumers = [new_consumer(bs, group, **{"enable.auto.commit": False, "client.id": f"c{i}"}) for i in range(2)]
    for i, c in enumerate(consumers):
        c.subscribe([topic], on_assign=lambda _c, ps, i=i: callbacks.append(f"assign c{i} {len(ps)}"),
                    on_revoke=lambda _c, ps, i=i: callbacks.append(f"revoke c{i} {len(ps)}"),
                    on_lost=lambda _c, ps, i=i: callbacks.append(f"lost c{i} {len(ps)}"))
    try:
        def settled() -> bool:
            for c in consumers:
                c.poll(0.05)
            d = describe(bs, group)
            return (d.group_state == "Stable" and len(owners(d)) == 4 and len(d.members) == 2
                    and all(len(c.assignment()) == 2 for c in consumers))

        wait_until(settled, 60, "two members share the four partitions")
        produce(bs, topic, [f"v{i}" for i in range(40)], 4)
        first: list[str] = []
        wait_until(lambda: poll_into(consumers, first) >= 40, 60, lambda: f"the first 40 records: {len(first)}")
        assert sorted(first) == sorted(f"v{i}" for i in range(40))
        for c in consumers:
            c.commit(asynchronous=False)
        before = describe(bs, group)
        seen = list(callbacks)
        assert restartable.stop(timeout_s=30) == 0
        restartable.start()
        produce(bs, topic, [f"w{i}" for i in range(20)], 4)
        after: list[str] = []
        wait_until(lambda: poll_into(consumers, after) >= 20, 60, lambda: f"the 20 new records: {sorted(after)}")
        assert sorted(after) == sorted(f"w{i}" for i in range(20))  # nothing read twice
        d = describe(bs, group)
        assert d.group_epoch == before.group_epoch and d.assignment_epoch == before.assignment_epoch
        assert {(m.member_id, m.member_epoch) for m in d.members} == {
            (m.member_id, m.member_epoch) for m in before.members}
        assert owners(d) == owners(before)
        assert callbacks == seen  # no revocation, no lost partitions, no new assignment
    finally:
        for c in consumers:
            c.close()


def test_a_groups_own_configs_set_its_members_timeouts(broker: BrokerProcess, topic_name: str, group: str) -> None:
    """consumer.heartbeat.interval.ms / consumer.session.timeout.ms set on the GROUP resource
    (IncrementalAlterConfigs, as Kafka 4's admin tools do) reach that group's heartbeats."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest

    create_topic(broker.bootstrap, topic_name, 2)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "6000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    client = admin(broker.bootstrap)
    client.incremental_alter_configs([resource])[resource].result(30)

    def heartbeat(group_id: str) -> Any:
        with connect(broker.bootstrap) as sock:
            return call(sock, ConsumerGroupHeartbeatRequest(
                group_id=group_id, member_id=str(uuid.uuid4()), member_epoch=i32(0), instance_id=None,
                rack_id=None, rebalance_timeout=datetime.timedelta(seconds=60),
                subscribed_topic_names=(topic_name,), server_assignor=None, topic_partitions=()))

    own = heartbeat(group)
    assert own.error_code == ErrorCode.none and own.heartbeat_interval == datetime.timedelta(milliseconds=6000)
    other = heartbeat(f"{group}-other")
    assert other.error_code == ErrorCode.none
    assert other.heartbeat_interval == datetime.timedelta(milliseconds=int(HEARTBEAT_MS))
