"""The task assignor without a broker: co-partitioning, balance, stickiness, standby replicas,
and the user data members exchange through the group protocol."""

from __future__ import annotations

from collections import Counter

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.streams.assignor import (
    MemberState,
    StreamsAssignor,
    assign_tasks,
    decode_user_data,
    encode_user_data,
)


class Cluster:
    """The one thing an assignor asks of aiokafka's ClusterMetadata."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self.counts.get(topic)
        return set(range(n)) if n is not None else None


def fresh(*names: str) -> dict[str, MemberState]:
    return {n: MemberState() for n in names}


def owners(plan_active: dict[str, list[int]]) -> dict[int, str]:
    return {t: m for m, ts in plan_active.items() for t in ts}


# -- the pure assignment ------------------------------------------------------------------


def test_balanced_and_complete() -> None:
    plan = assign_tasks(range(7), fresh("a", "b", "c"), standby_replicas=0, stateful=range(7))
    assert sorted(t for ts in plan.active.values() for t in ts) == list(range(7))
    assert sorted(len(ts) for ts in plan.active.values()) == [2, 2, 3]
    assert all(not ts for ts in plan.standby.values())


def test_tasks_go_back_to_their_previous_owners() -> None:
    members = {"a": MemberState(active=frozenset({1, 3})), "b": MemberState(active=frozenset({0, 2}))}
    plan = assign_tasks(range(4), members, standby_replicas=0, stateful=())
    assert plan.active == {"a": [1, 3], "b": [0, 2]}


def test_a_new_member_takes_only_what_balance_needs() -> None:
    members = {"a": MemberState(active=frozenset({0, 1, 2, 3})), "b": MemberState()}
    plan = assign_tasks(range(4), members, standby_replicas=0, stateful=())
    assert plan.active["a"] == [0, 1]  # kept two of its four
    assert plan.active["b"] == [2, 3]


def test_an_orphaned_task_goes_to_its_standby_then_to_local_state() -> None:
    """The owner of tasks 2 and 3 is gone: 2 goes to the member that kept it as a standby,
    3 to the member that has local state for it, though the other would balance as well."""
    members = {
        "a": MemberState(active=frozenset({0}), local=frozenset({3})),
        "b": MemberState(active=frozenset({1}), standby=frozenset({2})),
    }
    plan = assign_tasks(range(4), members, standby_replicas=0, stateful=range(4))
    assert plan.active == {"a": [0, 3], "b": [1, 2]}


def test_standbys_are_never_the_active_member_and_prefer_warm_state() -> None:
    members = {
        "a": MemberState(active=frozenset({0, 1})),
        "b": MemberState(active=frozenset({2, 3}), standby=frozenset({0})),
        "c": MemberState(standby=frozenset({1})),
    }
    plan = assign_tasks(range(4), members, standby_replicas=1, stateful=range(4))
    own = owners(plan.active)
    for m, tasks in plan.standby.items():
        assert not set(tasks) & set(plan.active[m])
    standby_of = {t: m for m, ts in plan.standby.items() for t in ts}
    assert set(standby_of) == {0, 1, 2, 3}
    assert all(standby_of[t] != own[t] for t in range(4))
    # "a" keeps 0 and 1 (one over the base load of 1), "b" keeps 2, "c" gets 3; the warm
    # standbys keep theirs: "b" for 0, "c" for 1; "a", the old owner of nothing else, and
    # the least loaded take the rest.
    assert plan.active == {"a": [0, 1], "b": [2], "c": [3]}
    assert standby_of[0] == "b" and standby_of[1] == "c"


def test_only_stateful_tasks_get_standbys_and_at_most_members_minus_one() -> None:
    plan = assign_tasks(range(4), fresh("a", "b"), standby_replicas=3, stateful=range(2))
    standby = Counter(t for ts in plan.standby.values() for t in ts)
    assert standby == {0: 1, 1: 1}
    alone = assign_tasks(range(4), fresh("a"), standby_replicas=1, stateful=range(4))
    assert alone.standby == {"a": []}


@settings(max_examples=200, deadline=None)
@given(
    tasks=st.integers(0, 12),
    members=st.dictionaries(
        st.sampled_from("abcdef"),
        st.tuples(st.frozensets(st.integers(0, 14)), st.frozensets(st.integers(0, 14)), st.frozensets(st.integers(0, 14))),
        min_size=1,
    ),
    replicas=st.integers(0, 3),
    stateful=st.integers(0, 12),
)
def test_assignment_properties(tasks: int, members: dict[str, tuple[frozenset[int], ...]], replicas: int,
                               stateful: int) -> None:
    """Whatever members report (even overlapping or stale claims): every task has exactly one
    active member, loads differ by at most one, a member is never active and standby for one
    task, and each stateful task has min(replicas, members - 1) distinct standbys."""
    states = {m: MemberState(*v) for m, v in members.items()}
    plan = assign_tasks(range(tasks), states, standby_replicas=replicas, stateful=range(stateful))
    active = [t for ts in plan.active.values() for t in ts]
    assert sorted(active) == list(range(tasks))
    loads = [len(ts) for ts in plan.active.values()]
    assert max(loads) - min(loads) <= 1
    for m in states:
        assert not set(plan.active[m]) & set(plan.standby[m])
        assert len(set(plan.standby[m])) == len(plan.standby[m])
    want = min(replicas, len(states) - 1)
    counts = Counter(t for ts in plan.standby.values() for t in ts)
    for t in range(tasks):
        assert counts.get(t, 0) == (want if t < stateful else 0)


@settings(max_examples=100, deadline=None)
@given(tasks=st.integers(1, 12), names=st.sets(st.sampled_from("abcdef"), min_size=1))
def test_a_stable_group_keeps_its_assignment(tasks: int, names: set[str]) -> None:
    """Rejoining with nothing changed (as every eager rebalance does) moves nothing."""
    first = assign_tasks(range(tasks), fresh(*names), standby_replicas=1, stateful=range(tasks))
    again = {m: MemberState(active=frozenset(first.active[m]), standby=frozenset(first.standby[m])) for m in names}
    second = assign_tasks(range(tasks), again, standby_replicas=1, stateful=range(tasks))
    assert second.active == first.active
    assert second.standby == first.standby


# -- the aiokafka adapter ------------------------------------------------------------------


def member(assignor: StreamsAssignor, topics: list[str]) -> ConsumerProtocolMemberMetadata:
    return ConsumerProtocolMemberMetadata.decode(assignor.metadata(topics).encode())


def test_partition_p_of_every_topic_goes_to_one_member() -> None:
    """Inputs of different partition counts: task p is partition p of each, on one member
    (the range assignor split each topic on its own, so a 2-partition topic's partition 1
    and a 4-partition topic's partition 1 could land on different members)."""
    assignor = StreamsAssignor(standby_replicas=1, stateful_tasks=lambda: 4, local_tasks=set)
    topics = ["four", "two", "one"]
    cluster = Cluster({"four": 4, "two": 2, "one": 1})
    result = assignor.assign(cluster, {m: member(assignor, topics) for m in ("m1", "m2", "m3")})
    where: dict[int, set[str]] = {}
    for member_id, assignment in result.items():
        tasks = decode_user_data(assignment.user_data)
        for _topic, partitions in assignment.assignment:
            for p in partitions:
                where.setdefault(p, set()).add(member_id)
                assert p in tasks["active"]
        assert not tasks["active"] & tasks["standby"]
    assert all(len(ms) == 1 for ms in where.values()), where
    assert set(where) == {0, 1, 2, 3}
    assigned = Counter((t, p) for a in result.values() for t, ps in a.assignment for p in ps)
    assert set(assigned) == {("four", p) for p in range(4)} | {("two", 0), ("two", 1), ("one", 0)}
    assert set(assigned.values()) == {1}


def test_the_adapter_reports_its_last_assignment_at_the_next_join() -> None:
    a = StreamsAssignor(standby_replicas=1, stateful_tasks=lambda: 2, local_tasks=lambda: {5})
    b = StreamsAssignor(standby_replicas=1, stateful_tasks=lambda: 2, local_tasks=set)
    cluster = Cluster({"t": 2})
    result = a.assign(cluster, {"a": member(a, ["t"]), "b": member(b, ["t"])})
    a.on_assignment(result["a"])
    b.on_assignment(result["b"])
    assert a.active | b.active == {0, 1} and not a.active & b.active
    assert a.standby == b.active and b.standby == a.active
    reported = decode_user_data(member(a, ["t"]).user_data)
    assert reported == {"active": a.active, "standby": a.standby, "local": frozenset({5})}
    # a member that sends no user data (or garbage) is a fresh member, not an error
    again = a.assign(cluster, {"a": member(a, ["t"]),
                               "b": ConsumerProtocolMemberMetadata(0, ["t"], b"not json")})
    assert decode_user_data(again["a"].user_data)["active"] == a.active


@pytest.mark.parametrize("data", [b"", b"[]", b'{"active": "x"}', b'{"active": [1, "2", 3]}', b"\xff"])
def test_user_data_decoding_tolerates_other_clients(data: bytes) -> None:
    decoded = decode_user_data(data)
    assert set(decoded) == {"active", "standby", "local"}
    assert decoded["active"] <= {1, 3}


def test_user_data_round_trip() -> None:
    data = encode_user_data(active={2, 0}, standby=[1])
    assert decode_user_data(data) == {"active": frozenset({0, 2}), "standby": frozenset({1}), "local": frozenset()}
