"""Consumer groups with real clients: confluent-kafka, aiokafka, kafka-python and kcat members
(each with the assignors it has), rebalances on join, leave and crash (a SIGKILLed member
process is dropped after its session timeout), committed offsets across a broker restart,
and static membership (a restarted static member rejoins without a rebalance).

Besides the settled end state, every test replays each generation the broker recorded in
__consumer_offsets (generations.py): no partition was ever handed to two members at once."""

from __future__ import annotations

import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, TopicPartition

from streamkit.broker.group.records import (
    GroupMetadataValue,
    MemberMetadata,
    encode_group_key,
    encode_group_value,
    partition_for_group,
)
from streamkit.log.records import Record, build_batch
from streamkit.testing import TEST_SETTINGS, BrokerProcess
from tests.conftest import require_service
from tests.integration.clients import ConfluentClient
from tests.integration.generations import check_generations, group_history
from tests.integration.members import (
    ASSIGNORS,
    HEARTBEAT_MS,
    KCAT,
    KcatMember,
    Member,
    consume_and_commit,
    make_member,
)
from tests.integration.util import QUIET, Rec, admin, create_topic, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6
REPO = Path(__file__).resolve().parents[2]


# -- helpers ---------------------------------------------------------------------------------


def describe(bootstrap: str, group: str) -> Any:
    client = admin(bootstrap)
    return client.describe_consumer_groups([group], request_timeout=10)[group].result(15)


def group_metadata(data_dir: Path, group: str) -> GroupMetadataValue | None:
    """The group's latest metadata record in __consumer_offsets, read from the segment files
    (the broker writes one whenever a generation completes or a static member is replaced)."""
    history = group_history(data_dir, group)
    return history[-1] if history else None


def generation(data_dir: Path, group: str) -> int:
    meta = group_metadata(data_dir, group)
    return -1 if meta is None else meta.generation_id


AnyMember = Member | KcatMember


def balanced(members: list[AnyMember], bootstrap: str, group: str) -> bool:
    """Every partition owned by exactly one member, balanced, and the broker agrees."""
    assignments = [m.assignment for m in members]
    for m in members:
        m.check()
    if any(a is None for a in assignments):
        return False
    owned = [p for a in assignments if a is not None for p in a]
    if sorted(owned) != list(range(PARTITIONS)):
        return False
    sizes = [len(a) for a in assignments if a is not None]
    if max(sizes) - min(sizes) > 1:
        return False
    desc = describe(bootstrap, group)
    if desc.state != ConsumerGroupState.STABLE or len(desc.members) != len(members):
        return False
    broker_view = {d.client_id: frozenset(tp.partition for tp in d.assignment.topic_partitions)
                   for d in desc.members}
    return broker_view == {m.name: m.assignment for m in members}


def wait_balanced(members: list[AnyMember], bootstrap: str, group: str, timeout: float = 45) -> dict[str, frozenset[int]]:
    wait_until(lambda: balanced(members, bootstrap, group), timeout,
               lambda: f"{len(members)} members to share {PARTITIONS} partitions "
                       f"({[(m.name, m.assignment) for m in members]})", interval=0.1)
    return {m.name: m.assignment for m in members if m.assignment is not None}


def wait_settled(members: list[AnyMember], quiet: float = 1.0, timeout: float = 30) -> None:
    """Wait until no member's rebalance listener has fired for ``quiet`` seconds (clients
    may still be finishing a rebalance they started, e.g. after a metadata refresh)."""
    deadline = time.monotonic() + timeout
    last = [len(m.callbacks) for m in members]
    since = time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "the group did not settle"
        time.sleep(0.05)
        now = [len(m.callbacks) for m in members]
        if now != last:
            last, since = now, time.monotonic()


@pytest.fixture
def members() -> Iterator[list[AnyMember]]:
    """Members a test starts; all are stopped at teardown."""
    started: list[AnyMember] = []
    yield started
    for m in started:
        if not m.closed:
            m.stop()


def start(members: list[AnyMember], client: str, *args: Any, **kwargs: Any) -> AnyMember:
    if client == "kcat":
        require_service(KCAT is not None, "the kcat CLI")
    member = make_member(client, *args, **kwargs).start()
    members.append(member)
    return member


GROUP_CASES = [(client, assignor) for client, names in ASSIGNORS.items() for assignor in names]


# -- tests -----------------------------------------------------------------------------------


def test_confluent_has_no_eager_sticky_assignor() -> None:
    # librdkafka offers range, roundrobin and cooperative-sticky; "sticky" (eager) is refused
    # by the client itself, so the matrix tests cooperative-sticky for confluent-kafka.
    from confluent_kafka import Consumer, KafkaException

    with pytest.raises(KafkaException, match=r"Unsupported partition\.assignment\.strategy: sticky"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "partition.assignment.strategy": "sticky"})


@pytest.mark.parametrize(("client", "assignor"), GROUP_CASES)
def test_rebalance_on_join_and_leave(broker: BrokerProcess, topic_name: str, members: list[AnyMember],
                                     client: str, assignor: str) -> None:
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    for i in range(3):
        start(members, client, broker.bootstrap, group, topic_name, assignor, f"m{i}")
    wait_balanced(members, broker.bootstrap, group)
    desc = describe(broker.bootstrap, group)
    assert desc.partition_assignor == assignor
    first = generation(broker.data_dir, group)
    assert first >= 1

    start(members, client, broker.bootstrap, group, topic_name, assignor, "m3")
    wait_balanced(members, broker.bootstrap, group)
    second = generation(broker.data_dir, group)
    assert second > first, "a joining member must cause a rebalance (new generation)"

    leaving = members[0]
    leaving.stop()  # a dynamic member sends LeaveGroup on close
    remaining = members[1:]
    wait_balanced(remaining, broker.bootstrap, group)
    assert generation(broker.data_dir, group) > second
    assert {d.client_id for d in describe(broker.bootstrap, group).members} == {"m1", "m2", "m3"}
    history = check_generations(broker.data_dir, group, topic_name, PARTITIONS,
                                cooperative=assignor == "cooperative-sticky")
    sizes = [len(g.members) for g in history]  # grew to four, ended with three
    assert 4 in sizes and sizes[-1] == 3 and len({g.generation_id for g in history}) >= 3


def _spawn_member(client: str, bootstrap: str, group: str, topic: str, assignor: str, name: str,
                  session_ms: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.group_member", client, bootstrap, group, topic,
         assignor, name, str(session_ms)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def _read_assignment(process: subprocess.Popen[bytes], predicate: Callable[[list[int]], bool],
                     timeout: float) -> list[int]:
    """Read the child's JSON lines until an assignment satisfies ``predicate`` (raw reads on
    the pipe: a buffered reader could hold a line back from the selector)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    pending = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=0.2):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"member process exited with {process.wait()}")
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                assignment = json.loads(line)["assignment"]
                if predicate(assignment):
                    return list(assignment)
    raise AssertionError(f"the member process got no matching assignment within {timeout}s")


class _Victim:
    """A group member in a process of its own, to be SIGKILLed: kcat itself, or a Python
    client in group_member.py."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, session_ms: int) -> None:
        self.kcat: KcatMember | None = None
        self.process: subprocess.Popen[bytes] | None = None
        if client == "kcat":
            require_service(KCAT is not None, "the kcat CLI")
            self.kcat = KcatMember(bootstrap, group, topic, "range", "victim", session_ms=session_ms).start()
        else:
            self.process = _spawn_member(client, bootstrap, group, topic, "range", "victim", session_ms)

    def assignment(self, predicate: Callable[[list[int]], bool], timeout: float) -> set[int]:
        if self.process is not None:
            return set(_read_assignment(self.process, predicate, timeout))
        kcat = self.kcat
        assert kcat is not None

        def matching() -> frozenset[int] | None:
            kcat.check()
            got = kcat.assignment
            return got if got is not None and predicate(sorted(got)) else None

        return set(wait_until(matching, timeout, "the kcat member's assignment"))

    def kill(self) -> None:
        if self.kcat is not None:
            self.kcat.kill()
        else:
            assert self.process is not None
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def close(self) -> None:
        if self.kcat is not None:
            if not self.kcat.closed:
                self.kcat.kill()
            return
        assert self.process is not None
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.mark.parametrize("client", list(ASSIGNORS))
def test_killed_member_is_dropped_after_session_timeout(broker: BrokerProcess, topic_name: str,
                                                      members: list[AnyMember], client: str) -> None:
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    session_ms = 3000
    victim = _Victim(client, broker.bootstrap, group, topic_name, session_ms)
    try:
        for i in range(2):
            start(members, client, broker.bootstrap, group, topic_name, "range", f"m{i}", session_ms=session_ms)
        # the victim holds 2 of the 6 partitions once the three members are balanced
        victim_parts = victim.assignment(lambda a: len(a) == 2, 60)
        wait_until(lambda: all(m.assignment is not None and len(m.assignment) == 2 for m in members)
                   and set().union(*(m.assignment or () for m in members)) | victim_parts == set(range(PARTITIONS)),
                   45, "a balanced group of three")
        assert len(describe(broker.bootstrap, group).members) == 3
        before = generation(broker.data_dir, group)

        victim.kill()  # SIGKILL, no LeaveGroup: only the session timeout can tell
        killed_at = time.monotonic()
        wait_balanced(members, broker.bootstrap, group, timeout=session_ms / 1000 + 30)
        elapsed = time.monotonic() - killed_at
        # Not when its connection dropped, only once its session expired (the bound leaves
        # room for a late last heartbeat); the victim's partitions moved to the survivors.
        assert elapsed >= session_ms / 2000, elapsed
        assert set().union(*(m.assignment or () for m in members)) >= victim_parts
        assert generation(broker.data_dir, group) > before
        assert {d.client_id for d in describe(broker.bootstrap, group).members} == {"m0", "m1"}
        history = check_generations(broker.data_dir, group, topic_name, PARTITIONS)
        assert any(len(g.members) == 3 for g in history) and len(history[-1].members) == 2
    finally:
        victim.close()


@pytest.mark.parametrize(("client", "restart"), [("confluent", "stop"), ("confluent", "kill"),
                                                 ("aiokafka", "stop"), ("kafka-python", "stop"),
                                                 ("kcat", "stop"), ("kcat", "kill")])
def test_committed_offsets_survive_broker_restart(broker_factory: Callable[..., BrokerProcess], topic_name: str,
                                                  client: str, restart: str) -> None:
    if client == "kcat":
        require_service(KCAT is not None, "the kcat CLI")
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name, 3)
    records = [Rec(f"key-{i % 9}".encode(), f"value-{i}".encode(), (), 1_700_000_000_000 + i) for i in range(90)]
    ConfluentClient(broker.bootstrap).produce(topic_name, records)
    group = f"g-{topic_name}"

    first = consume_and_commit(client, broker.bootstrap, group, topic_name, 40)
    assert 40 <= len(first) < 90
    expected = {p: max(o for q, o, _ in first if q == p) + 1 for p in {q for q, _, _ in first}}

    def committed(bootstrap: str) -> dict[int, int]:
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
        try:
            tps = consumer.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=10)
            return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
        finally:
            consumer.close()

    # Partitions the member held but read nothing from may be committed at their start (0):
    # aiokafka commits every assigned partition's position.
    expected.update({p: 0 for p in range(3) if p not in expected})
    before = committed(broker.bootstrap)
    assert {p: before.get(p, 0) for p in range(3)} == expected
    if restart == "stop":
        assert broker.stop() == 0
    else:
        broker.kill()  # SIGKILL: __consumer_offsets is recovered from its log
    broker.start()
    assert committed(broker.bootstrap) == before

    rest = consume_and_commit(client, broker.bootstrap, group, topic_name, 90 - len(first))
    for p in range(3):
        after = [o for q, o, _ in rest if q == p]
        if after:  # resumes exactly at the committed offset, not before, not after
            assert min(after) == expected[p], (p, after[:3], expected)
    together = sorted((p, o) for p, o, _ in first + rest)
    assert len(together) == len(set(together)) == 90, "every record consumed exactly once"
    assert sorted(v for _, _, v in first + rest) == sorted(r.value for r in records if r.value)


@pytest.mark.parametrize("client", list(ASSIGNORS))
def test_static_member_restart_does_not_rebalance(broker: BrokerProcess, topic_name: str,
                                                  members: list[AnyMember], client: str) -> None:
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    session_ms = 10_000
    for i in range(3):
        start(members, client, broker.bootstrap, group, topic_name, "range", f"s{i}",
              instance_id=f"instance-{i}", session_ms=session_ms)
    wait_balanced(members, broker.bootstrap, group)
    wait_settled(members)
    before = wait_balanced(members, broker.bootstrap, group)
    meta = group_metadata(broker.data_dir, group)
    assert meta is not None
    assert {m.group_instance_id for m in meta.members} == {"instance-0", "instance-1", "instance-2"}
    desc = describe(broker.bootstrap, group)
    old_ids = {d.group_instance_id: d.member_id for d in desc.members}
    others = [members[0], members[2]]
    callbacks = {m.name: list(m.callbacks) for m in others}

    members[1].stop()  # a static member does not send LeaveGroup on close
    stopped_at = time.monotonic()
    again = start(members, client, broker.bootstrap, group, topic_name, "range", "s1",
                  instance_id="instance-1", session_ms=session_ms)
    wait_until(lambda: again.check() or again.assignment == before["s1"], 30,
               "the restarted static member to get its old partitions back")
    assert time.monotonic() - stopped_at < session_ms / 1000, "rejoined after the session timeout"

    # Watch for several heartbeat intervals: nobody may be asked to rebalance.
    deadline = time.monotonic() + 8 * HEARTBEAT_MS / 1000
    while time.monotonic() < deadline:
        assert {m.name: m.callbacks for m in others} == callbacks
        assert {m.name: m.assignment for m in others} == {m.name: before[m.name] for m in others}
        time.sleep(0.05)
    after = group_metadata(broker.data_dir, group)
    assert after is not None and after.generation_id == meta.generation_id, "the generation changed"
    desc = describe(broker.bootstrap, group)
    assert desc.state == ConsumerGroupState.STABLE
    new_ids = {d.group_instance_id: d.member_id for d in desc.members}
    assert set(new_ids) == {"instance-0", "instance-1", "instance-2"}
    assert new_ids["instance-1"] != old_ids["instance-1"]  # a new member id for the instance
    assert {k: v for k, v in new_ids.items() if k != "instance-1"} == {
        k: v for k, v in old_ids.items() if k != "instance-1"}
    live = [members[0], again, members[2]]
    assert balanced(live, broker.bootstrap, group)
    history = check_generations(broker.data_dir, group, topic_name, PARTITIONS)
    # the replaced static member is recorded in the same generation, owning the same partitions
    assert history[-1].generation_id == meta.generation_id and history[-1].owners == history[-2].owners


@pytest.mark.parametrize("client", list(ASSIGNORS))
def test_group_survives_broker_restart(broker_factory: Callable[..., BrokerProcess], topic_name: str,
                                       members: list[AnyMember], client: str) -> None:
    """The group's members and generation are kept in __consumer_offsets: after a clean
    broker restart the members go on heartbeating in the same generation (no rebalance)
    and keep consuming."""
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    # Much longer than the restart takes (2-4 s, mostly imports): librdkafka declares its
    # assignment lost when it cannot heartbeat for a whole session.
    session_ms = 15_000
    for i in range(2):
        start(members, client, broker.bootstrap, group, topic_name, "range", f"m{i}", session_ms=session_ms)
    wait_balanced(members, broker.bootstrap, group)
    wait_settled(members)
    before = wait_balanced(members, broker.bootstrap, group)
    gen = generation(broker.data_dir, group)
    callbacks = [list(m.callbacks) for m in members]

    assert broker.stop() == 0
    broker.start()
    # A forgotten group or member would answer the first heartbeats with UNKNOWN_MEMBER_ID
    # (a rejoin at once); watch a dozen heartbeat intervals.
    deadline = time.monotonic() + 12 * HEARTBEAT_MS / 1000
    while time.monotonic() < deadline:
        assert [m.callbacks for m in members] == callbacks, "a rebalance after the restart"
        time.sleep(0.1)
    assert wait_balanced(members, broker.bootstrap, group) == before
    assert generation(broker.data_dir, group) == gen

    consumed = sum(m.consumed for m in members)
    ConfluentClient(broker.bootstrap).produce(
        topic_name, [Rec(None, f"after-{p}".encode(), (), 1_700_000_000_000) for p in range(PARTITIONS)],
        extra={"partitioner": "random"})
    wait_until(lambda: sum(m.consumed for m in members) >= consumed + PARTITIONS, 30,
               "the members to consume after the restart")
    assert check_generations(broker.data_dir, group, topic_name, PARTITIONS)[-1].generation_id == gen


# -- the generation checker itself -------------------------------------------------------------


def _assignment(topic: str, partitions: list[int]) -> bytes:
    body = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions) + struct.pack(">i", -1)


def _subscription(topic: str, owned: list[int]) -> bytes:
    """A v1 ConsumerProtocolSubscription to ``topic`` listing the partitions ``owned``."""
    name = struct.pack(">h", len(topic)) + topic.encode()
    return (struct.pack(">hi", 1, 1) + name + struct.pack(">i", -1) + struct.pack(">i", 1) + name
            + struct.pack(f">i{len(owned)}i", len(owned), *owned))


def _write_generations(data_dir: Path, group: str, generations: list[dict[str, list[int]]],
                       unsynced: frozenset[str] = frozenset()) -> None:
    """A fake __consumer_offsets partition holding one metadata record per generation. Each
    member rejoins claiming what the previous generation gave it, but those in ``unsynced``,
    whose SyncGroup lost the race with the next rebalance: they never got it, and claim nothing."""
    partitions = int(TEST_SETTINGS["offsets.topic.num.partitions"])
    directory = data_dir / f"__consumer_offsets-{partition_for_group(group, partitions)}"
    directory.mkdir(parents=True)
    records = []
    previous: dict[str, list[int]] = {}
    for i, owners in enumerate(generations, 1):
        value = GroupMetadataValue("consumer", i, "range", next(iter(owners), None), 0, tuple(
            MemberMetadata(member, None, member, "/127.0.0.1", 30000, 10000,
                           _subscription("t", [] if member in unsynced else previous.get(member, [])),
                           _assignment("t", parts))
            for member, parts in owners.items()))
        records.append(Record(key=encode_group_key(group), value=encode_group_value(value), timestamp=0))
        previous = owners
    (directory / f"{0:020d}.log").write_bytes(build_batch(records))


@pytest.mark.parametrize(("generations", "cooperative", "error"), [
    ([{"a": [0, 1, 2], "b": [3]}], False, None),
    ([{"a": [0, 1], "b": [1, 2, 3]}], False, r"partitions \[1\] owned twice"),
    ([{"a": [0, 1], "b": [3]}], False, r"partitions \[2\] owned by nobody"),
    ([{"a": [0, 1], "b": [3]}], True, None),
    ([{"a": [0, 1, 2, 3]}, {"a": [0, 1], "b": []}, {"a": [0, 1], "b": [2, 3]}], True, None),
    ([{"a": [0, 1, 2, 3]}, {"a": [0, 1], "b": [2, 3]}], True,
     r"partition 2 moved from a \(still a member, claiming \[0, 1, 2, 3\]\)"),
    ([{"a": [0, 1, 2, 3], "c": []}, {"b": [0, 1, 2, 3]}], True, None),  # a left: a direct move is fine
])
def test_generation_checker(tmp_path: Path, generations: list[dict[str, list[int]]], cooperative: bool,
                            error: str | None) -> None:
    _write_generations(tmp_path, "g", generations)
    if error is None:
        assert len(check_generations(tmp_path, "g", "t", 4, cooperative)) == len(generations)
    else:
        with pytest.raises(AssertionError, match=error):
            check_generations(tmp_path, "g", "t", 4, cooperative)


def test_generation_checker_lets_a_partition_its_owner_never_received_move(tmp_path: Path) -> None:
    """a's SyncGroup of generation 1 lost the race with the rebalance to generation 2: a
    never received partitions 2 and 3, rejoins claiming none, and the leader may give them
    to b at once. The broker's record of generation 1 still lists them under a."""
    _write_generations(tmp_path, "g", [{"a": [0, 1, 2, 3]}, {"a": [0, 1], "b": [2, 3]}], unsynced=frozenset({"a"}))
    assert len(check_generations(tmp_path, "g", "t", 4, cooperative=True)) == 2
