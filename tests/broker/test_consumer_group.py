"""The KIP-848 consumer group state machine, driven without sockets by an injected clock."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from streamkit.broker.group.assignors import MemberSubscription, range_assign, uniform_assign
from streamkit.broker.group.consumer_group import (
    ConsumerGroups,
    ConsumerSettings,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
)

TP = tuple[str, int]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def make(topics: dict[str, int] | None = None, **kw: int | tuple[str, ...]) -> tuple[ConsumerGroups, Clock, dict[str, int]]:
    clock = Clock()
    sizes = dict(topics or {"t": 6})
    return ConsumerGroups(ConsumerSettings(**kw), lambda: sizes, clock), clock, sizes  # type: ignore[arg-type]


def join(groups: ConsumerGroups, member: str, topics: Iterable[str] = ("t",), *, group: str = "g",
         instance: str | None = None, assignor: str | None = None, regex: str | None = None) -> HeartbeatResult:
    names = None if regex is not None else tuple(topics)
    return groups.heartbeat(HeartbeatRequest(group, member, 0, instance_id=instance, rebalance_timeout_ms=60000,
                                             subscribed_topic_names=names, subscribed_topic_regex=regex,
                                             server_assignor=assignor, owned=frozenset()))


def beat(groups: ConsumerGroups, member: str, epoch: int, owned: Iterable[TP] | None = None, *,
         group: str = "g", instance: str | None = None) -> HeartbeatResult:
    return groups.heartbeat(HeartbeatRequest(group, member, epoch, instance_id=instance,
                                             owned=frozenset(owned) if owned is not None else None))


def parts(*ps: int, topic: str = "t") -> frozenset[TP]:
    return frozenset((topic, p) for p in ps)


# -- joining, epochs, incremental assignment --------------------------------------------


def test_first_member_gets_everything_with_the_group_epoch() -> None:
    groups, _, _ = make()
    r = join(groups, "a")
    assert r.error == ErrorCode.none and r.member_epoch == 1 and r.member_id == "a"
    assert r.assignment == parts(0, 1, 2, 3, 4, 5)
    g = groups.get("g")
    assert g is not None and g.group_epoch == 1 and g.assignment_epoch == 1 and g.state == "Stable"
    assert r.heartbeat_interval_ms == 5000


def test_partitions_are_revoked_before_they_are_reassigned() -> None:
    groups, _, _ = make()
    a = join(groups, "a")
    b = join(groups, "b")
    g = groups.get("g")
    assert g is not None and g.group_epoch == 2
    # b converged to epoch 2 but cannot have a's partitions yet: a still owns them.
    assert b.member_epoch == 2 and b.assignment == frozenset()
    assert g.members["b"].state == MemberState.UNRELEASED_PARTITIONS
    # a is told to keep only its half, at its old epoch.
    ra = beat(groups, "a", a.member_epoch, a.assignment)
    assert ra.member_epoch == 1 and ra.assignment is not None and len(ra.assignment) == 3
    assert g.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    revoked = a.assignment - ra.assignment  # type: ignore[operator]
    # b asks again: still nothing, a has not confirmed the revocation.
    assert beat(groups, "b", 2, frozenset()).assignment is None
    assert g.members["b"].assigned == set()
    # a confirms: it gets epoch 2; then b gets what a released.
    ra2 = beat(groups, "a", 1, ra.assignment)
    assert ra2.member_epoch == 2
    rb = beat(groups, "b", 2, frozenset())
    assert rb.assignment == revoked and g.state == "Stable"
    g.check_invariants()


def test_a_member_still_holding_revoked_partitions_keeps_them_pending() -> None:
    groups, _, _ = make()
    a = join(groups, "a")
    join(groups, "b")
    ra = beat(groups, "a", 1, a.assignment)
    # a's next heartbeat still reports everything: nothing is released.
    beat(groups, "a", 1, a.assignment)
    g = groups.get("g")
    assert g is not None and g.members["a"].pending_revocation
    assert g.members["a"].pending_revocation == set(a.assignment - ra.assignment)  # type: ignore[operator]
    g.check_invariants()


# -- fencing, leaving, timeouts -------------------------------------------------------


def test_unknown_member_and_fenced_epochs() -> None:
    groups, _, _ = make()
    join(groups, "a")
    assert beat(groups, "zz", 1).error == ErrorCode.unknown_member_id
    assert beat(groups, "a", 7).error == ErrorCode.fenced_member_epoch
    assert beat(groups, "a", 1).error == ErrorCode.none
    assert beat(groups, "a", 1, group="other").error == ErrorCode.unknown_member_id


def test_previous_epoch_is_tolerated_only_without_extra_partitions() -> None:
    groups, _, _ = make()
    a = join(groups, "a")
    join(groups, "b")
    ra = beat(groups, "a", 1, a.assignment)
    beat(groups, "a", 1, ra.assignment)  # now epoch 2, previous 1
    assert beat(groups, "a", 1, ra.assignment).error == ErrorCode.none
    assert beat(groups, "a", 1, a.assignment).error == ErrorCode.fenced_member_epoch


def test_leave_frees_partitions_and_bumps_the_group_epoch() -> None:
    groups, _, _ = make()
    a = join(groups, "a")
    b = join(groups, "b")
    ra = beat(groups, "a", a.member_epoch, a.assignment)
    beat(groups, "a", 1, ra.assignment)
    beat(groups, "b", b.member_epoch, frozenset())
    r = beat(groups, "a", -1)
    assert r.error == ErrorCode.none and r.member_epoch == -1
    g = groups.get("g")
    assert g is not None and "a" not in g.members and g.group_epoch == 3
    rb = beat(groups, "b", 2, g.members["b"].assigned)
    assert rb.member_epoch == 3 and rb.assignment == parts(0, 1, 2, 3, 4, 5)
    g.check_invariants()


def test_session_timeout_removes_a_silent_member() -> None:
    groups, clock, _ = make(session_timeout_ms=10000)
    join(groups, "a")
    join(groups, "b")
    clock.now += 6000
    beat(groups, "b", 2, frozenset())
    clock.now += 6000
    assert groups.tick() == [("g", "a")]
    g = groups.get("g")
    assert g is not None and list(g.members) == ["b"]
    rb = beat(groups, "b", 2, frozenset())
    assert rb.assignment == parts(0, 1, 2, 3, 4, 5)


def test_a_groups_own_timeouts_override_the_brokers() -> None:
    """consumer.session.timeout.ms / consumer.heartbeat.interval.ms set on one group (its
    GROUP-resource configs) apply to that group only."""
    clock = Clock()
    own = {"fast": (8000, 1500)}
    groups = ConsumerGroups(ConsumerSettings(session_timeout_ms=45000, heartbeat_interval_ms=5000),
                            lambda: {"t": 6}, clock, lambda g: own.get(g, (45000, 5000)))
    assert join(groups, "a", group="fast").heartbeat_interval_ms == 1500
    assert join(groups, "b", group="slow").heartbeat_interval_ms == 5000
    clock.now += 9000
    assert groups.tick() == [("fast", "a")]
    clock.now += 40000
    assert groups.tick() == [("slow", "b")]


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    groups, clock, _ = make()
    a = join(groups, "a")
    join(groups, "b")
    beat(groups, "a", 1, a.assignment)  # told to revoke, rebalance timeout 60 s
    clock.now += 30000
    beat(groups, "a", 1, a.assignment)
    beat(groups, "b", 2, frozenset())
    clock.now += 31000
    assert ("g", "a") in groups.tick()


def test_join_validation_errors() -> None:
    groups, _, _ = make()
    missing = groups.heartbeat(HeartbeatRequest("g", "a", 0, subscribed_topic_names=("t",)))
    assert missing.error == ErrorCode.invalid_request
    assert groups.heartbeat(HeartbeatRequest("", "a", 0)).error == ErrorCode.invalid_request
    assert groups.heartbeat(HeartbeatRequest("g", "", 0)).error == ErrorCode.invalid_request
    assert join(groups, "a", assignor="sticky").error == ErrorCode.unsupported_assignor
    assert join(groups, "a", regex="t(").error == ErrorCode.invalid_regular_expression


# -- static membership ----------------------------------------------------------------


def test_static_member_restart_keeps_its_assignment_without_a_rebalance() -> None:
    groups, _, _ = make()
    a = join(groups, "a", instance="i-1")
    join(groups, "b", instance="i-2")
    g = groups.get("g")
    assert g is not None
    # Another process with the same instance id while a is alive: refused.
    assert join(groups, "a2", instance="i-1").error == ErrorCode.unreleased_instance_id
    ra = beat(groups, "a", a.member_epoch, a.assignment, instance="i-1")
    beat(groups, "a", 1, ra.assignment, instance="i-1")
    held = set(g.members["a"].assigned)
    epoch = g.group_epoch
    assert beat(groups, "a", -2, instance="i-1").member_epoch == -2
    assert g.members["a"].assigned == held and g.group_epoch == epoch
    back = join(groups, "a2", instance="i-1")
    assert back.error == ErrorCode.none and back.assignment == frozenset(held)
    assert "a" not in g.members and g.group_epoch == epoch and g.static["i-1"] == "a2"
    assert beat(groups, "a", 2, instance="i-1").error == ErrorCode.unknown_member_id
    g.check_invariants()


# -- regex, assignors -----------------------------------------------------------------


def test_regex_subscription_follows_new_topics_and_skips_internal_ones() -> None:
    groups, _, sizes = make({"orders-eu": 2, "payments": 2, "__consumer_offsets": 4})
    r = join(groups, "a", regex="orders-.*")
    assert r.assignment == parts(0, 1, topic="orders-eu")
    sizes["orders-us"] = 1
    r2 = beat(groups, "a", r.member_epoch)
    assert r2.member_epoch == r.member_epoch + 1
    assert r2.assignment == parts(0, 1, topic="orders-eu") | parts(0, topic="orders-us")
    assert join(groups, "b", group="h", regex=".*").assignment == parts(0, 1, topic="orders-eu") | parts(
        0, topic="orders-us") | parts(0, 1, topic="payments")


def test_range_assignor_gives_contiguous_ranges() -> None:
    members = {m: MemberSubscription(frozenset({"t", "u"})) for m in ("a", "b", "c")}
    out = range_assign(members, {"t": 7, "u": 3})
    assert out["a"] == {("t", 0), ("t", 1), ("t", 2), ("u", 0)}
    assert out["b"] == {("t", 3), ("t", 4), ("u", 1)}
    assert out["c"] == {("t", 5), ("t", 6), ("u", 2)}


def test_uniform_assignor_is_balanced_and_sticky() -> None:
    members = {m: MemberSubscription(frozenset({"t"})) for m in ("a", "b")}
    first = uniform_assign(members, {"t": 8})
    assert sorted(len(v) for v in first.values()) == [4, 4]
    members = {m: MemberSubscription(frozenset({"t"}), frozenset(first.get(m, ()))) for m in ("a", "b", "c")}
    second = uniform_assign(members, {"t": 8})
    assert sorted(len(v) for v in second.values()) == [2, 3, 3]
    moved = sum(len(second[m] - first[m]) for m in ("a", "b"))
    assert moved == 0  # a and b only gave partitions up to c


def test_uniform_assignor_respects_heterogeneous_subscriptions() -> None:
    members = {"a": MemberSubscription(frozenset({"t"})), "b": MemberSubscription(frozenset({"t", "u"}))}
    out = uniform_assign(members, {"t": 2, "u": 4})
    assert all(t == "t" for t, _ in out["a"])
    assert sum(len(v) for v in out.values()) == 6
    assert len(out["a"]) == 2


def test_the_assignor_most_members_ask_for_wins() -> None:
    groups, _, _ = make({"t": 4})
    join(groups, "a", assignor="range")
    g = groups.get("g")
    assert g is not None and g.assignor_name == "range"
    groups2, _, _ = make({"t": 4}, assignors=("range", "uniform"))
    join(groups2, "a")
    assert groups2.get("g").assignor_name == "range"  # type: ignore[union-attr]


# -- offsets --------------------------------------------------------------------------


def test_offset_commit_and_fetch_check_the_member_epoch() -> None:
    groups, _, _ = make()
    join(groups, "a")
    assert groups.validate_offset_commit("g", "a", 1) == ErrorCode.none
    assert groups.validate_offset_commit("g", "a", 0) == ErrorCode.stale_member_epoch
    assert groups.validate_offset_commit("g", "x", 1) == ErrorCode.unknown_member_id
    assert groups.validate_offset_fetch("g", None, -1) == ErrorCode.none
    assert groups.validate_offset_fetch("g", "a", 3) == ErrorCode.stale_member_epoch
    beat(groups, "a", -1)
    assert groups.validate_offset_commit("g", "", -1) == ErrorCode.none


# -- property: never two owners -------------------------------------------------------


class Client:
    """A consumer that does what the coordinator says: it drops revoked partitions at once
    and reports what it owns on its next heartbeat."""

    def __init__(self, name: str, epoch: int, owned: frozenset[TP]) -> None:
        self.name, self.epoch, self.owned = name, epoch, owned

    def apply(self, r: HeartbeatResult) -> None:
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = r.assignment


ops = st.lists(st.tuples(st.sampled_from(["join", "beat", "beat", "beat", "leave", "kill", "grow", "time"]),
                         st.integers(0, 5)), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops, st.sampled_from(["uniform", "range"]))
def test_no_partition_ever_has_two_owners(steps: list[tuple[str, int]], assignor: str) -> None:
    groups, clock, sizes = make({"t": 5, "u": 3}, session_timeout_ms=10000)
    clients: dict[str, Client] = {}
    joined = 0
    for op, n in steps:
        live = sorted(clients)
        if op == "join" or not live:
            joined += 1
            name = f"m{joined}"
            r = join(groups, name, ("t", "u"), assignor=assignor)
            assert r.error == ErrorCode.none
            clients[name] = Client(name, r.member_epoch, frozenset())
            clients[name].apply(r)
        else:
            c = clients[live[n % len(live)]]
            if op == "beat":
                r = beat(groups, c.name, c.epoch, c.owned)
                if r.error != ErrorCode.none:  # fenced after a timeout: rejoin from scratch
                    assert r.error in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch)
                    c.owned = frozenset()
                    r = join(groups, c.name, ("t", "u"), assignor=assignor)
                c.apply(r)
            elif op == "leave":
                beat(groups, c.name, -1)
                del clients[c.name]
            elif op == "kill":
                del clients[c.name]  # stops heartbeating; the session timeout removes it
            elif op == "grow":
                sizes["t"] += 1
            elif op == "time":
                clock.now += 4000
                for _, mid in groups.tick():
                    if mid in clients:
                        clients[mid].owned = frozenset()  # the client sees its session expire
        for g in groups.groups.values():
            g.check_invariants()
        seen: dict[TP, str] = {}
        for c in clients.values():
            for tp in c.owned:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {c.name}"
                seen[tp] = c.name


def test_everything_converges_once_members_keep_heartbeating() -> None:
    groups, _, _ = make({"t": 7, "u": 5})
    clients = {}
    for name in ("a", "b", "c"):
        r = join(groups, name, ("t", "u"))
        clients[name] = Client(name, r.member_epoch, frozenset())
        clients[name].apply(r)
    for _ in range(5):
        for c in clients.values():
            c.apply(beat(groups, c.name, c.epoch, c.owned))
    g = groups.get("g")
    assert g is not None and g.state == "Stable"
    owned = [c.owned for c in clients.values()]
    assert sum(len(o) for o in owned) == 12 and sorted(len(o) for o in owned) == [4, 4, 4]


@pytest.mark.parametrize("epoch", [-3, -100])
def test_invalid_epochs(epoch: int) -> None:
    groups, _, _ = make()
    assert beat(groups, "a", epoch).error == ErrorCode.invalid_request
