"""Mixed groups (KIP-848 online migration) and consumer groups in ``__consumer_offsets``,
driven through the GroupCoordinator with an in-memory store and an injected clock.

Classic members here speak the real consumer protocol (subscriptions and assignments in
kio's layouts), eagerly: they own nothing when they rejoin."""

from __future__ import annotations

import io

import pytest
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from streamkit.broker.group.consumer_group import (
    ConsumerGroup,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
)
from streamkit.broker.group.consumer_protocol import decode_assignment, encode_assignment
from streamkit.broker.group.consumer_records import decode_consumer_key
from streamkit.broker.group.group import JoinRequest, JoinResult, SyncResult
from streamkit.broker.group.records import decode_key
from streamkit.broker.group.state import GroupState
from tests.broker.test_consumer_group_coordinator import Env
from tests.broker.test_group_coordinator import T0, MemoryStore, commit_one

SESSION = 10_000
REBALANCE = 30_000
TP = tuple[str, int]


def subscription(topics: tuple[str, ...], owned: tuple[TP, ...] = ()) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in owned:
        by_topic.setdefault(t, []).append(p)
    value = subscription_v1.ConsumerProtocolSubscription(
        topics=topics, user_data=None, owned_partitions=tuple(
            subscription_v1.TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()))  # type: ignore[arg-type]
    buf = io.BytesIO(b"\x00\x01")
    buf.seek(2)
    entity_writer(subscription_v1.ConsumerProtocolSubscription)(buf, value)
    return buf.getvalue()


def classic_join(member_id: str = "", owned: tuple[TP, ...] = (), instance: str | None = None) -> JoinRequest:
    return JoinRequest(member_id=member_id, group_instance_id=instance, client_id="kp", client_host="/10.0.0.1",
                       session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE, protocol_type="consumer",
                       protocols=(("range", subscription(("t",), owned)),), require_known_member_id=True)


class Mixed(Env):
    """The coordinator of test_consumer_group_coordinator.py, with classic members that
    speak the consumer protocol and a consumer-protocol member's heartbeat by epoch."""

    def modern(self) -> ConsumerGroup:
        group = self.co.consumer.get("g")
        assert group is not None
        group.check_invariants()
        return group

    def beat(self, member: str, epoch: int, owned: frozenset[TP] | None = None) -> HeartbeatResult:
        req = HeartbeatRequest("g", member, epoch, rebalance_timeout_ms=REBALANCE if epoch == 0 else -1,
                               subscribed_topic_names=("t",) if epoch == 0 else None,
                               owned=frozenset() if epoch == 0 else owned)
        result, _ = self.co.consumer_heartbeat(req)
        return result

    # -- classic members -------------------------------------------------------------------

    def classic(self, member_id: str = "", owned: tuple[TP, ...] = ()) -> JoinResult:
        out = self.co.join("g", classic_join(member_id, owned))
        if isinstance(out.result, JoinResult) and out.result.error == ErrorCode.member_id_required:
            out = self.co.join("g", classic_join(out.result.member_id, owned))
        assert isinstance(out.result, JoinResult)
        return out.result

    def sync(self, member_id: str, generation: int) -> tuple[ErrorCode, frozenset[TP]]:
        out = self.co.sync("g", member_id, None, generation, {})
        assert isinstance(out.result, SyncResult)
        return out.result.error, decode_assignment(out.result.assignment) if out.result.assignment else frozenset()

    def classic_group(self, members: int) -> list[tuple[str, int]]:
        """A Stable classic group whose members share the four partitions: (id, generation)."""
        ids = []
        for _ in range(members):
            out = self.co.join("g", classic_join())
            assert isinstance(out.result, JoinResult)
            ids.append(out.result.member_id)
        results = [self.co.join("g", classic_join(mid)) for mid in ids]
        self.clock.now += 3000  # the initial rebalance delay
        deliveries = {d.member_id: d.result for d in self.co.tick()}
        answers = {mid: (r.result if isinstance(r.result, JoinResult) else deliveries[mid])
                   for mid, r in zip(ids, results, strict=True)}
        leader = next(a for a in answers.values() if isinstance(a, JoinResult) and a.leader_id == a.member_id)
        assert isinstance(leader, JoinResult)
        share = {mid: [("t", p) for p in range(4) if p % members == i] for i, mid in enumerate(ids)}
        assignments = {mid: encode_assignment(share[mid], 1) for mid in ids}
        for mid in ids:
            if mid != leader.member_id:
                self.co.sync("g", mid, None, leader.generation_id, {})
        self.co.sync("g", leader.member_id, None, leader.generation_id, assignments)
        group = self.co.get("g")
        assert group is not None and group.state == GroupState.STABLE
        return [(mid, leader.generation_id) for mid in ids]


def owned_by(group: ConsumerGroup) -> dict[str, set[TP]]:
    out: dict[str, set[TP]] = {}
    for tp, who in group.owners.items():
        out.setdefault(who, set()).add(tp)
    return out


def test_online_upgrade_hands_partitions_over_without_a_second_owner() -> None:
    env = Mixed()
    (a, gen_a), (b, _gen_b) = env.classic_group(2)
    r = env.beat("m", 0)
    assert r.error == ErrorCode.none
    group = env.modern()
    assert env.co.get("g") is None and env.co.group_type("g") == "consumer"
    # The classic members keep what they consume; the newcomer waits for it.
    assert owned_by(group) == {a: {("t", 0), ("t", 2)}, b: {("t", 1), ("t", 3)}}
    assert r.assignment == frozenset() and group.group_epoch == gen_a + 1
    assert env.co.heartbeat("g", a, None, gen_a) == ErrorCode.rebalance_in_progress
    # a rejoins having revoked everything (eager): its share of the new target at once.
    joined = env.classic(a)
    assert joined.error == ErrorCode.none and joined.generation_id == group.group_epoch
    assert joined.leader_id == "" and joined.members == ()
    error, assigned_a = env.sync(a, joined.generation_id)
    assert error == ErrorCode.none and assigned_a == frozenset(group.target[a])
    assert env.beat("m", r.member_epoch, frozenset()).assignment is not None
    joined_b = env.classic(b)
    error, assigned_b = env.sync(b, joined_b.generation_id)
    assert error == ErrorCode.none
    m = env.beat("m", group.group_epoch, frozenset())
    assert m.assignment is not None
    assert sorted(assigned_a | assigned_b | m.assignment) == [("t", p) for p in range(4)]
    assert not assigned_a & assigned_b and not (assigned_a | assigned_b) & m.assignment
    assert len(m.assignment) >= 1 and env.modern().state == "Stable"
    assert env.co.heartbeat("g", a, None, joined.generation_id) == ErrorCode.none


def test_a_classic_member_revoking_with_the_cooperative_protocol_keeps_what_it_still_owns() -> None:
    env = Mixed()
    (a, gen), = env.classic_group(1)
    env.beat("m", 0)
    # a rejoins still owning its partitions: it must give some up before m gets them.
    joined = env.classic(a, owned=tuple(("t", p) for p in range(4)))
    group = env.modern()
    member = group.members[a]
    assert member.state == MemberState.UNREVOKED_PARTITIONS and joined.generation_id == gen
    error, kept = env.sync(a, gen)
    assert error == ErrorCode.none and kept == frozenset(member.assigned) and len(kept) == 2
    assert env.beat("m", group.group_epoch, frozenset()).error == ErrorCode.none
    assert group.members["m"].assigned == set()  # a still holds what m is to get
    assert env.co.heartbeat("g", a, None, gen) == ErrorCode.rebalance_in_progress
    again = env.classic(a, owned=tuple(sorted(kept)))
    assert again.generation_id == group.group_epoch
    assert env.beat("m", group.group_epoch, frozenset()).assignment == frozenset(group.target["m"])
    env.modern()


@pytest.mark.parametrize("policy", ["upgrade", "bidirectional"])
def test_deferred_classic_requests_are_told_to_rejoin_when_the_group_upgrades(policy: str) -> None:
    env = Mixed(policy=policy)
    (a, gen), = env.classic_group(1)
    out = env.co.join("g", classic_join())
    assert isinstance(out.result, JoinResult)
    waiting = env.co.join("g", classic_join(out.result.member_id))
    assert waiting.result is None  # a rebalance started: a's rejoin is due
    _, deliveries = env.co.consumer_heartbeat(HeartbeatRequest(
        "g", "m", 0, rebalance_timeout_ms=REBALANCE, subscribed_topic_names=("t",), owned=frozenset()))
    assert [(d.member_id, d.result.error) for d in deliveries] == [(out.result.member_id, ErrorCode.rebalance_in_progress)]
    assert env.co.group_type("g") == "consumer"
    del a, gen


def test_downgrade_when_the_last_consumer_protocol_member_leaves() -> None:
    env = Mixed()
    (a, _gen), = env.classic_group(1)
    r = env.beat("m", 0)
    env.co.commit("g", a, None, env.modern().members[a].member_epoch, commit_one(offset=3))
    env.beat("m", -1)
    assert env.co.group_type("g") == "classic" and env.co.consumer.get("g") is None
    classic = env.co.get("g")
    assert classic is not None and classic.state == GroupState.PREPARING_REBALANCE
    assert classic.generation_id == r.member_epoch + 1 and list(classic.members) == [a]
    # a knew the older epoch: told to rejoin, it does so under its member id.
    assert env.co.heartbeat("g", a, None, r.member_epoch) == ErrorCode.illegal_generation
    out = env.co.join("g", classic_join(a))
    assert isinstance(out.result, JoinResult) and out.result.leader_id == a
    assert out.result.generation_id == classic.generation_id + 0 and classic.state == GroupState.COMPLETING_REBALANCE
    assert env.co.fetch("g", [("t", 0)])[("t", 0)].offset == 3  # type: ignore[union-attr]


def test_downgrade_when_the_last_consumer_protocol_member_is_fenced() -> None:
    env = Mixed()
    env.classic_group(1)
    env.beat("m", 0)
    for _ in range(20):  # the classic member keeps its session and rejoins when told; m goes silent
        group = env.co.consumer.get("g")
        if group is None:
            break
        a = next(mid for mid, m in group.members.items() if m.classic is not None)
        if env.co.heartbeat("g", a, None, group.members[a].member_epoch) == ErrorCode.rebalance_in_progress:
            env.sync(a, env.classic(a).generation_id)
        env.clock.now += 5000
        env.co.tick()
    assert env.co.group_type("g") == "classic" and env.clock.now - T0 <= 50_000


@pytest.mark.parametrize("policy", ["disabled", "upgrade"])
def test_without_online_downgrade_the_classic_members_stay_in_a_consumer_group(policy: str) -> None:
    env = Mixed(policy=policy)
    env.beat("m", 0)
    a = env.classic().member_id
    env.beat("m", -1)
    group = env.modern()
    assert list(group.members) == [a] and env.co.group_type("g") == "consumer"


def test_a_classic_member_joins_a_consumer_group_whatever_the_policy() -> None:
    env = Mixed(policy="disabled")
    env.beat("m", 0)
    joined = env.classic()
    assert joined.error == ErrorCode.none and joined.protocol_type == "consumer" and joined.protocol_name == "range"
    group = env.modern()
    assert group.members[joined.member_id].classic is not None
    # Wrong generation: ILLEGAL_GENERATION for classic members (their generation is the epoch).
    assert env.co.heartbeat("g", joined.member_id, None, 999) == ErrorCode.illegal_generation
    assert env.co.commit("g", joined.member_id, None, 999, commit_one())[0] == ErrorCode.illegal_generation
    error, _ = env.sync(joined.member_id, joined.generation_id)
    assert error == ErrorCode.none
    bad = env.co.join("g", JoinRequest("", None, "x", "/h", SESSION, REBALANCE, "consumer",
                                       (("roundrobin", subscription(("t",))),), True))
    assert isinstance(bad.result, JoinResult) and bad.result.error == ErrorCode.inconsistent_group_protocol
    assert env.co.leave("g", [(joined.member_id, None)])[0] == ErrorCode.none
    assert list(env.modern().members) == ["m"]


def test_a_classic_member_that_does_not_rejoin_in_time_is_fenced() -> None:
    env = Mixed()
    env.beat("m", 0)
    a = env.classic()
    env.sync(a.member_id, a.generation_id)
    env.beat("n", 0)  # a new epoch: a is told to rejoin
    assert env.co.heartbeat("g", a.member_id, None, a.generation_id) == ErrorCode.rebalance_in_progress
    for _ in range(REBALANCE // 5000 + 1):
        env.clock.now += 5000
        env.beat("m", env.modern().members["m"].member_epoch)
        env.beat("n", env.modern().members["n"].member_epoch)
        env.co.heartbeat("g", a.member_id, None, a.generation_id)  # heartbeats, never rejoins
        env.co.tick()
    assert a.member_id not in env.modern().members


# -- persistence ---------------------------------------------------------------------------

def consumer_records(store: MemoryStore) -> list[tuple[int, str, str | None, bool]]:
    out = []
    for _p, record in store.all_records():
        assert record.key is not None
        key = decode_consumer_key(record.key)
        if key is not None:
            out.append((key[0], key[1], key[2], record.value is None))
    return out


def test_a_consumer_group_survives_a_reload_with_its_epochs_and_assignments() -> None:
    env = Mixed()
    env.beat("m1", 0)
    env.beat("m2", 0)
    for _ in range(3):
        for mid in ("m1", "m2"):
            member = env.modern().members[mid]
            env.beat(mid, member.member_epoch, frozenset(member.assigned))
    before = env.modern()
    assert before.state == "Stable"
    kinds = {k[0] for k in consumer_records(env.store)}
    assert kinds == {3, 4, 5, 6, 7, 8}  # Kafka's six consumer group record types
    snapshot = {mid: (m.member_epoch, set(m.assigned), m.state) for mid, m in before.members.items()}
    env2 = env.reopen()
    after = env2.modern()
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert {mid: (m.member_epoch, set(m.assigned), m.state) for mid, m in after.members.items()} == snapshot
    assert after.target == before.target and after.subscribed_sizes == before.subscribed_sizes
    r = env2.beat("m1", snapshot["m1"][0], frozenset(snapshot["m1"][1]))
    assert r.error == ErrorCode.none and r.member_epoch == snapshot["m1"][0]
    assert env2.modern().group_epoch == before.group_epoch  # no rebalance
    # Members that do not come back expire after a full session.
    env2.clock.now += 45_000
    env2.co.tick()
    assert list(env2.modern().members) == ["m1"] or env2.modern().members.keys() == set()


def test_a_member_that_left_is_tombstoned_and_stays_gone_after_a_reload() -> None:
    env = Mixed()
    env.beat("m1", 0)
    env.beat("m2", 0)
    env.beat("m2", -1)
    tombstones = {(k, member) for k, _g, member, dead in consumer_records(env.store) if dead}
    assert tombstones == {(5, "m2"), (7, "m2"), (8, "m2")}
    assert list(env.reopen().modern().members) == ["m1"]


def test_mixed_groups_reload_with_their_classic_members() -> None:
    env = Mixed()
    (a, _gen), = env.classic_group(1)
    env.beat("m", 0)
    env2 = env.reopen()
    group = env2.modern()
    classic = group.members[a].classic
    assert classic is not None and classic.session_timeout_ms == SESSION and classic.protocols[0][0] == "range"
    assert env2.co.get("g") is None  # the classic group's metadata was tombstoned by the upgrade
    # The downgrade tombstones the consumer group: it reloads as the classic group it became.
    env2.beat("m", -1)
    assert env2.co.group_type("g") == "classic"
    env3 = env2.reopen()
    assert env3.co.consumer.get("g") is None and env3.co.group_type("g") == "classic"
    assert any(decode_key(r.key) == ("g",) and r.value is None for _p, r in env.store.all_records() if r.key)
