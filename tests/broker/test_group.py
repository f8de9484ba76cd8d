"""One consumer group under Kafka's classic rebalance protocol (pure logic, injected time).

The unit tests walk the protocol step by step; the rule-based property test at the end drives
several well-behaved clients through random joins, syncs, heartbeats, leaves, restarts and
clock jumps and checks the invariants after every step."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from kio.schema.errors import ErrorCode

from streamkit.broker.group.group import (
    Delivery,
    Group,
    GroupSettings,
    JoinRequest,
    JoinResult,
    Outcome,
    SyncResult,
)
from streamkit.broker.group.state import GroupEvent, GroupState

E = GroupState.EMPTY
P = GroupState.PREPARING_REBALANCE
C = GroupState.COMPLETING_REBALANCE
S = GroupState.STABLE
D = GroupState.DEAD

DELAY = 3000
SETTINGS = GroupSettings(
    initial_rebalance_delay_ms=DELAY, min_session_timeout_ms=6000, max_session_timeout_ms=300_000
)
SESSION = 10_000
REBALANCE = 30_000
RANGE = (("range", b"meta-range"),)


def jreq(
    member_id: str = "",
    *,
    instance: str | None = None,
    protocols: tuple[tuple[str, bytes], ...] = RANGE,
    protocol_type: str = "consumer",
    session: int = SESSION,
    rebalance: int = REBALANCE,
    client_id: str = "client",
    require_known: bool = True,
) -> JoinRequest:
    return JoinRequest(
        member_id=member_id,
        group_instance_id=instance,
        client_id=client_id,
        client_host="/127.0.0.1",
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        protocol_type=protocol_type,
        protocols=protocols,
        require_known_member_id=require_known,
    )


class Harness:
    """A group, a clock, and an inbox of the answers delivered to deferred requests."""

    def __init__(self, group_settings: GroupSettings = SETTINGS) -> None:
        self.group = Group("g", group_settings)
        self.now = 0
        self.inbox: dict[str, list[JoinResult | SyncResult]] = defaultdict(list)

    def _take(self, deliveries: list[Delivery]) -> list[Delivery]:
        for d in deliveries:
            assert d.group_id == "g"
            self.inbox[d.member_id].append(d.result)
        return deliveries

    def join(self, req: JoinRequest) -> Outcome:
        out = self.group.join(req, self.now)
        self._take(out.deliveries)
        return out

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             instance: str | None = None) -> Outcome:
        out = self.group.sync(member_id, instance, generation, assignments or {}, self.now)
        self._take(out.deliveries)
        return out

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        return self.group.heartbeat(member_id, instance, generation, self.now)

    def leave(self, member_id: str, instance: str | None = None) -> ErrorCode:
        error, deliveries = self.group.leave(member_id, instance, self.now)
        self._take(deliveries)
        return error

    def tick(self, at: int) -> list[Delivery]:
        self.now = at
        return self._take(self.group.tick(at))

    def answer(self, member_id: str) -> JoinResult | SyncResult:
        """The single answer delivered to ``member_id`` since the last call."""
        got = self.inbox.pop(member_id, [])
        assert len(got) == 1, f"{member_id} got {got}"
        return got[0]

    def join_answer(self, member_id: str) -> JoinResult:
        result = self.answer(member_id)
        assert isinstance(result, JoinResult)
        return result

    def sync_answer(self, member_id: str) -> SyncResult:
        result = self.answer(member_id)
        assert isinstance(result, SyncResult)
        return result


def admit(h: Harness, **kw: object) -> tuple[str, Outcome]:
    """A new dynamic member (JoinGroup v4+): MEMBER_ID_REQUIRED, then the real join."""
    first = h.join(jreq("", **kw))  # type: ignore[arg-type]
    assert isinstance(first.result, JoinResult)
    assert first.result.error == ErrorCode.member_id_required
    member_id = first.result.member_id
    return member_id, h.join(jreq(member_id, **kw))  # type: ignore[arg-type]


def form(h: Harness, n: int, **kw: object) -> list[str]:
    """n dynamic members joined at ``h.now``; the initial rebalance completes; returns ids
    (join answers consumed, group in CompletingRebalance)."""
    ids = []
    for _ in range(n):
        member_id, out = admit(h, **kw)
        assert out.result is None
        ids.append(member_id)
    h.tick(h.now + DELAY)
    assert h.group.state == C
    for member_id in ids:
        assert h.join_answer(member_id).error == ErrorCode.none
    return ids


def stabilize(h: Harness, ids: list[str]) -> dict[str, bytes]:
    """Followers sync first (deferred), then the leader: the group becomes Stable."""
    gen = h.group.generation_id
    leader = h.group.leader_id
    assert leader is not None
    assignments = {m: f"assignment-of-{m}".encode() for m in ids}
    for m in ids:
        if m != leader:
            assert h.sync(m, gen).result is None
    out = h.sync(leader, gen, assignments)
    assert isinstance(out.result, SyncResult) and out.result.assignment == assignments[leader]
    for m in ids:
        if m != leader:
            assert h.sync_answer(m).assignment == assignments[m]
    assert h.group.state == S
    return assignments


def stable(h: Harness, n: int, **kw: object) -> list[str]:
    ids = form(h, n, **kw)
    stabilize(h, ids)
    return ids


def rejoin_all(h: Harness, ids: list[str], **kw: object) -> None:
    for m in ids:
        h.join(jreq(m, **kw))  # type: ignore[arg-type]


# -- JoinGroup ------------------------------------------------------------------------------


def test_member_id_required_then_deferred_join_completes_after_initial_delay() -> None:
    h = Harness()
    first = h.join(jreq(""))
    assert isinstance(first.result, JoinResult)
    assert first.result.error == ErrorCode.member_id_required
    member_id = first.result.member_id
    assert member_id and first.result.generation_id == -1
    assert h.group.state == E and not h.group.members  # not a member before it rejoins
    other = h.join(jreq(""))
    assert isinstance(other.result, JoinResult) and other.result.member_id not in ("", member_id)
    assert h.leave(other.result.member_id) == ErrorCode.none  # the pending id goes away

    out = h.join(jreq(member_id))
    assert out.result is None and out.member_id == member_id and out.deliveries == []
    assert h.group.state == P
    assert h.group.next_deadline() == DELAY

    assert h.tick(DELAY - 1) == [] and h.group.state == P
    (delivery,) = h.tick(DELAY)
    assert delivery.member_id == member_id
    result = delivery.result
    assert result == JoinResult(
        error=ErrorCode.none, member_id=member_id, generation_id=1, protocol_type="consumer",
        protocol_name="range", leader_id=member_id, members=((member_id, None, b"meta-range"),),
    )
    assert h.group.state == C and h.group.generation_id == 1


def test_old_join_versions_get_a_member_id_without_the_extra_round_trip() -> None:
    h = Harness()
    out = h.join(jreq("", require_known=False))
    assert out.result is None and out.member_id
    assert h.group.has_member(out.member_id) and h.group.state == P
    (delivery,) = h.tick(DELAY)
    assert delivery.member_id == out.member_id and delivery.result.error == ErrorCode.none


def test_initial_delay_is_extended_by_each_new_member() -> None:
    h = Harness()
    a, _ = admit(h)
    h.now = 2000
    b, _ = admit(h)
    assert h.group.next_deadline() == 2000 + DELAY
    assert h.tick(2000 + DELAY - 1) == []
    delivered = {d.member_id for d in h.tick(2000 + DELAY)}
    assert delivered == {a, b}
    assert h.group.generation_id == 1 and len(h.group.members) == 2


def test_initial_delay_extension_is_capped_by_the_rebalance_timeout() -> None:
    h = Harness()
    ids = []
    for t in (0, 2000, 4000):
        h.now = t
        ids.append(admit(h, rebalance=5000)[0])
    # 4000 + 3000 would be 7000, but the rebalance timeout (5000 from the start) wins.
    assert h.tick(4999) == []
    assert {d.member_id for d in h.tick(5000)} == set(ids)
    assert h.group.state == C


def test_initial_delay_is_capped_by_a_short_rebalance_timeout() -> None:
    h = Harness()
    a, _ = admit(h, rebalance=2000)
    assert h.tick(1999) == []
    assert [d.member_id for d in h.tick(2000)] == [a]


def test_leader_gets_member_list_followers_get_none_and_generation_increments() -> None:
    h = Harness()
    protocols_a = (("range", b"a-range"), ("roundrobin", b"a-rr"))
    protocols_b = (("range", b"b-range"), ("roundrobin", b"b-rr"))
    a, _ = admit(h, protocols=protocols_a)
    b, _ = admit(h, protocols=protocols_b)
    h.tick(DELAY)
    ra, rb = h.join_answer(a), h.join_answer(b)
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader_id == rb.leader_id == a  # the first member leads
    assert set(ra.members) == {(a, None, b"a-range"), (b, None, b"b-range")}
    assert rb.members == ()
    stabilize(h, [a, b])

    # The leader's JoinGroup in Stable forces a rebalance: generation 2.
    assert h.join(jreq(a, protocols=protocols_a)).result is None
    assert h.group.state == P
    out = h.join(jreq(b, protocols=protocols_b))
    assert isinstance(out.result, JoinResult) and out.result.generation_id == 2
    assert h.join_answer(a).generation_id == 2 and h.group.generation_id == 2


@pytest.mark.parametrize(
    ("preferences", "expected"),
    [
        ([("range", "roundrobin"), ("range", "roundrobin"), ("roundrobin", "range")], "range"),
        # The leader prefers range but is outvoted.
        ([("range", "roundrobin"), ("roundrobin", "range"), ("roundrobin", "range")], "roundrobin"),
        # Only protocols every member supports are candidates; each votes for its first one.
        ([("range", "roundrobin", "sticky"), ("sticky", "roundrobin"),
          ("roundrobin", "sticky", "range")], "roundrobin"),
        ([("sticky", "range"), ("sticky", "range"), ("range", "sticky")], "sticky"),
    ],
)
def test_protocol_is_selected_by_votes_of_all_members(
    preferences: list[tuple[str, ...]], expected: str
) -> None:
    h = Harness()
    ids = []
    for i, names in enumerate(preferences):
        protocols = tuple((name, f"{i}-{name}".encode()) for name in names)
        ids.append(admit(h, protocols=protocols)[0])
    h.tick(DELAY)
    results = [h.join_answer(m) for m in ids]
    assert {r.protocol_name for r in results} == {expected}
    leader = results[0]
    assert leader.leader_id == ids[0]
    assert set(leader.members) == {(m, None, f"{i}-{expected}".encode()) for i, m in enumerate(ids)}


def test_inconsistent_protocol_type_or_no_common_protocol_is_rejected() -> None:
    h = Harness()
    (a,) = form(h, 1, protocols=(("range", b""), ("roundrobin", b"")))

    def error(req: JoinRequest) -> ErrorCode:
        out = h.join(req)
        assert isinstance(out.result, JoinResult)
        return out.result.error

    assert error(jreq("", protocol_type="connect")) == ErrorCode.inconsistent_group_protocol
    assert error(jreq("", protocols=(("sticky", b""),))) == ErrorCode.inconsistent_group_protocol
    assert error(jreq("", protocols=())) == ErrorCode.inconsistent_group_protocol
    # The member itself cannot switch protocol type either.
    assert error(jreq(a, protocol_type="connect")) == ErrorCode.inconsistent_group_protocol
    # Nothing above disturbed the group.
    assert h.group.state == C and list(h.group.members) == [a] and not h.group.pending_members
    # A protocol shared with the current member is fine.
    assert error(jreq("", protocols=(("roundrobin", b""),))) == ErrorCode.member_id_required


def test_empty_group_accepts_any_protocol_type_but_not_an_empty_one() -> None:
    h = Harness()
    (a,) = form(h, 1)
    assert h.leave(a) == ErrorCode.none and h.group.state == E
    out = h.join(jreq("", protocol_type="connect", protocols=(("default", b""),)))
    assert isinstance(out.result, JoinResult) and out.result.error == ErrorCode.member_id_required
    out = h.join(jreq("", protocol_type=""))
    assert isinstance(out.result, JoinResult)
    assert out.result.error == ErrorCode.inconsistent_group_protocol


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        (5999, ErrorCode.invalid_session_timeout),
        (6000, ErrorCode.member_id_required),
        (300_000, ErrorCode.member_id_required),
        (300_001, ErrorCode.invalid_session_timeout),
    ],
)
def test_session_timeout_bounds(session: int, expected: ErrorCode) -> None:
    h = Harness()
    out = h.join(jreq("", session=session))
    assert isinstance(out.result, JoinResult) and out.result.error == expected
    assert not h.group.members and h.group.state == E


def test_unknown_member_id_is_rejected_everywhere() -> None:
    h = Harness()
    stable(h, 2)
    gen = h.group.generation_id
    out = h.join(jreq("made-up"))
    assert isinstance(out.result, JoinResult) and out.result.error == ErrorCode.unknown_member_id
    out = h.sync("made-up", gen)
    assert isinstance(out.result, SyncResult) and out.result.error == ErrorCode.unknown_member_id
    assert h.heartbeat("made-up", gen) == ErrorCode.unknown_member_id
    assert h.leave("made-up") == ErrorCode.unknown_member_id
    assert h.group.state == S and len(h.group.members) == 2


def test_pending_member_id_expires_after_the_session_timeout() -> None:
    h = Harness()
    first = h.join(jreq(""))
    assert isinstance(first.result, JoinResult)
    assert h.group.next_deadline() == SESSION
    h.tick(SESSION)
    out = h.join(jreq(first.result.member_id))
    assert isinstance(out.result, JoinResult) and out.result.error == ErrorCode.unknown_member_id


def test_follower_rejoin_in_stable_with_same_metadata_returns_current_generation() -> None:
    h = Harness()
    a, b = stable(h, 2)
    out = h.join(jreq(b))
    assert isinstance(out.result, JoinResult)
    assert (out.result.error, out.result.generation_id, out.result.leader_id) == (ErrorCode.none, 1, a)
    assert out.result.members == () and h.group.state == S
    # Changed metadata does rebalance.
    assert h.join(jreq(b, protocols=(("range", b"new"),))).result is None
    assert h.group.state == P


def test_lost_join_response_in_completing_rebalance_is_answered_again() -> None:
    h = Harness()
    a, b = form(h, 2)
    for member_id in (a, b):
        out = h.join(jreq(member_id))
        assert isinstance(out.result, JoinResult) and out.result.generation_id == 1
        assert bool(out.result.members) == (member_id == a)
    assert h.group.state == C and h.group.generation_id == 1


def test_retried_join_answers_the_superseded_one() -> None:
    h = Harness()
    a, b = stable(h, 2)
    assert h.join(jreq(a)).result is None  # PreparingRebalance: a waits for b
    retry = h.join(jreq(a))
    assert retry.result is None and retry.member_id == a
    assert h.join_answer(a).error == ErrorCode.rebalance_in_progress  # the first request
    h.join(jreq(b))
    assert h.join_answer(a).generation_id == 2  # the retry, answered once


def test_a_member_id_handed_out_holds_the_rebalance_until_it_joins() -> None:
    h = Harness()
    a, b = stable(h, 2)
    first = h.join(jreq(""))  # a newcomer got its id but has not joined yet
    assert isinstance(first.result, JoinResult)
    newcomer = first.result.member_id
    h.join(jreq(a))
    h.join(jreq(b))
    assert h.group.state == P and not h.inbox  # all members joined, but one is pending
    out = h.join(jreq(newcomer))
    assert isinstance(out.result, JoinResult) and out.result.generation_id == 2
    assert set(h.group.members) == {a, b, newcomer}
    assert h.join_answer(a).generation_id == 2


# -- SyncGroup ------------------------------------------------------------------------------


def test_followers_wait_for_the_leader_and_everyone_gets_its_assignment() -> None:
    h = Harness()
    a, b, c = form(h, 3)
    assert h.group.leader_id == a
    assert h.sync(b, 1).result is None
    assert h.sync(c, 1).result is None
    assert not h.inbox and h.group.state == C
    # c gets no entry: an empty assignment; entries for strangers are ignored.
    out = h.sync(a, 1, {a: b"A", b: b"B", "stranger": b"X"})
    assert out.result == SyncResult(ErrorCode.none, "consumer", "range", b"A")
    assert h.sync_answer(b) == SyncResult(ErrorCode.none, "consumer", "range", b"B")
    assert h.sync_answer(c) == SyncResult(ErrorCode.none, "consumer", "range", b"")
    assert h.group.state == S and "stranger" not in h.group.members


def test_follower_syncing_after_the_leader_gets_the_stored_assignment() -> None:
    h = Harness()
    a, b = form(h, 2)
    h.sync(a, 1, {a: b"A", b: b"B"})
    assert h.group.state == S
    out = h.sync(b, 1)
    assert out.result == SyncResult(ErrorCode.none, "consumer", "range", b"B")
    out = h.sync(a, 1, {a: b"ignored", b: b"ignored"})  # Stable: the stored one, not a new one
    assert isinstance(out.result, SyncResult) and out.result.assignment == b"A"


def test_sync_errors() -> None:
    h = Harness()
    a, b = stable(h, 2)
    out = h.sync(b, 0)
    assert isinstance(out.result, SyncResult) and out.result.error == ErrorCode.illegal_generation
    out = h.sync("nobody", 1)
    assert isinstance(out.result, SyncResult) and out.result.error == ErrorCode.unknown_member_id
    h.join(jreq(a))  # the leader rejoins: PreparingRebalance
    assert h.group.state == P
    out = h.sync(b, 1)
    assert isinstance(out.result, SyncResult) and out.result.error == ErrorCode.rebalance_in_progress


def test_retried_sync_answers_the_superseded_one() -> None:
    h = Harness()
    a, b = form(h, 2)
    assert h.sync(b, 1).result is None
    retry = h.sync(b, 1)
    assert retry.result is None and retry.member_id == b
    # The first request is answered (it would otherwise wait forever).
    assert h.sync_answer(b).error == ErrorCode.rebalance_in_progress
    h.sync(a, 1, {a: b"A", b: b"B"})
    assert h.sync_answer(b).assignment == b"B"  # the retry gets the real answer, once


def test_rebalance_during_completing_rebalance_answers_waiting_syncs() -> None:
    h = Harness()
    _a, b = form(h, 2)
    assert h.sync(b, 1).result is None
    _c, out = admit(h)
    assert out.result is None and h.group.state == P
    assert h.sync_answer(b).error == ErrorCode.rebalance_in_progress


# -- Heartbeat ------------------------------------------------------------------------------


def test_heartbeat_answers_by_state() -> None:
    h = Harness()
    a, b = form(h, 2)
    assert h.heartbeat(a, 1) == ErrorCode.none  # CompletingRebalance
    assert h.heartbeat(a, 0) == ErrorCode.illegal_generation
    assert h.heartbeat("nobody", 1) == ErrorCode.unknown_member_id
    stabilize(h, [a, b])
    assert h.heartbeat(b, 1) == ErrorCode.none
    assert h.heartbeat(b, 2) == ErrorCode.illegal_generation
    h.join(jreq(a))
    assert h.group.state == P
    assert h.heartbeat(b, 1) == ErrorCode.rebalance_in_progress


def test_heartbeats_keep_a_member_alive() -> None:
    h = Harness()
    a, b = stable(h, 2)
    for t in range(DELAY + 5000, DELAY + 60_000, 5000):
        h.now = t
        assert h.heartbeat(a, 1) == ErrorCode.none
        assert h.heartbeat(b, 1) == ErrorCode.none
        h.tick(t)
    assert h.group.state == S and set(h.group.members) == {a, b}


# -- membership changes ---------------------------------------------------------------------


def test_new_member_in_stable_group_rebalances_without_waiting_for_the_timeout() -> None:
    h = Harness()
    a, b = stable(h, 2)
    h.now = 10_000
    c, out = admit(h)
    assert out.result is None and h.group.state == P
    assert h.heartbeat(a, 1) == ErrorCode.rebalance_in_progress
    assert h.heartbeat(b, 1) == ErrorCode.rebalance_in_progress
    assert h.join(jreq(a)).result is None
    last = h.join(jreq(b))  # everyone joined: completes now, at 10_000
    assert isinstance(last.result, JoinResult) and last.result.generation_id == 2
    assert h.group.state == C and h.group.generation_id == 2
    ra, rc = h.join_answer(a), h.join_answer(c)
    assert ra.generation_id == rc.generation_id == 2
    assert ra.leader_id == a and {m for m, _, _ in ra.members} == {a, b, c}
    assert not h.inbox


def test_expired_session_removes_the_member_and_rebalances() -> None:
    h = Harness()
    a, b = stable(h, 2)  # both heartbeated at DELAY (join completion / sync)
    h.now = DELAY + 5000
    assert h.heartbeat(a, 1) == ErrorCode.none
    assert h.group.next_deadline() == DELAY + SESSION  # b's session
    h.tick(DELAY + SESSION - 1)
    assert set(h.group.members) == {a, b}
    h.tick(DELAY + SESSION)
    assert set(h.group.members) == {a} and h.group.state == P
    assert h.heartbeat(a, 1) == ErrorCode.rebalance_in_progress
    out = h.join(jreq(a))
    assert isinstance(out.result, JoinResult) and out.result.generation_id == 2
    assert out.result.members == ((a, None, b"meta-range"),)


def test_member_that_never_rejoins_is_dropped_when_its_session_expires() -> None:
    h = Harness()
    a, _b = stable(h, 2)
    h.now = DELAY + 1000
    c, _ = admit(h)
    assert h.join(jreq(a)).result is None
    # b neither rejoins nor heartbeats: its session (DELAY + SESSION) ends long before the
    # rebalance timeout (DELAY + 1000 + REBALANCE).
    h.tick(DELAY + SESSION)
    assert h.group.state == C and set(h.group.members) == {a, c}
    assert h.join_answer(a).generation_id == h.join_answer(c).generation_id == 2


def test_rebalance_timeout_drops_members_that_heartbeat_but_never_rejoin() -> None:
    h = Harness()
    a, b = stable(h, 2)
    start = DELAY + 1000
    h.now = start
    c, _ = admit(h)
    h.join(jreq(a))
    for t in range(start + 5000, start + REBALANCE, 5000):
        h.now = t
        assert h.heartbeat(b, 1) == ErrorCode.rebalance_in_progress
        h.tick(t)
    assert h.group.state == P and b in h.group.members
    h.tick(start + REBALANCE)
    assert h.group.state == C and set(h.group.members) == {a, c}
    assert h.heartbeat(b, 1) == ErrorCode.unknown_member_id
    assert h.join_answer(a).generation_id == 2 and h.join_answer(c).generation_id == 2


def test_leave_rebalances_and_the_last_leave_empties_the_group() -> None:
    h = Harness()
    a, b = stable(h, 2)
    assert h.leave(b) == ErrorCode.none
    assert h.group.state == P and list(h.group.members) == [a]
    out = h.join(jreq(a))
    assert isinstance(out.result, JoinResult) and out.result.generation_id == 2
    h.sync(a, 2, {a: b"A"})
    assert h.group.state == S
    assert h.leave(a) == ErrorCode.none
    assert h.group.state == E and not h.group.members
    assert h.group.generation_id == 3 and h.group.leader_id is None
    assert h.group.protocol_name is None
    assert h.group.next_deadline() is None


def test_leaving_member_gets_answers_for_its_deferred_requests() -> None:
    h = Harness()
    a, b, c = stable(h, 3)
    h.join(jreq(a))  # PreparingRebalance, a waits
    assert h.leave(a) == ErrorCode.none
    assert h.join_answer(a).error == ErrorCode.unknown_member_id
    h.join(jreq(b))
    out = h.join(jreq(c))  # all remaining joined
    assert isinstance(out.result, JoinResult) and out.result.generation_id == 2
    assert h.group.leader_id == b and h.join_answer(b).leader_id == b
    assert h.sync(c, 2).result is None  # c waits for b
    assert h.leave(c) == ErrorCode.none
    assert h.sync_answer(c).error == ErrorCode.unknown_member_id
    assert h.group.state == P


def test_leave_during_preparing_completes_the_rebalance_when_the_rest_joined() -> None:
    h = Harness()
    a, b = stable(h, 2)
    h.join(jreq(a))
    assert h.leave(b) == ErrorCode.none
    assert h.join_answer(a).generation_id == 2 and h.group.state == C


def test_leader_that_never_syncs_is_dropped_after_the_rebalance_timeout() -> None:
    h = Harness()
    a, b, c = form(h, 3)  # completed at DELAY
    assert h.group.leader_id == a
    h.now = DELAY + 1000
    assert h.sync(b, 1).result is None  # b synced, c did not
    for t in range(DELAY + 5000, DELAY + REBALANCE, 5000):  # a and c stay alive
        h.now = t
        assert h.heartbeat(a, 1) == ErrorCode.none
        assert h.heartbeat(c, 1) == ErrorCode.none
        h.tick(t)
    assert h.group.state == C
    h.tick(DELAY + REBALANCE)
    assert h.group.state == P and set(h.group.members) == {b}
    assert h.sync_answer(b).error == ErrorCode.rebalance_in_progress
    out = h.join(jreq(b))
    assert isinstance(out.result, JoinResult)
    assert (out.result.generation_id, out.result.leader_id) == (2, b)


def test_answered_sync_restarts_the_members_session() -> None:
    h = Harness()
    a, b = form(h, 2)  # completed at DELAY: sessions run from there
    h.now = DELAY + 1
    assert h.sync(b, 1).result is None  # b waits, exempt from expiry meanwhile
    h.now = DELAY + SESSION - 100
    assert h.heartbeat(a, 1) == ErrorCode.none
    h.sync(a, 1, {a: b"A", b: b"B"})
    h.sync_answer(b)
    # b got its answer just now: a full session from here, as Kafka does.
    h.tick(DELAY + SESSION + 1000)
    assert set(h.group.members) == {a, b} and h.group.state == S


def test_static_member_that_does_not_rejoin_survives_the_rebalance_timeout() -> None:
    h = Harness()
    s = h.join(jreq("", instance="i-s", session=60_000, rebalance=5000)).member_id
    h.tick(DELAY)
    h.join_answer(s)
    h.sync(s, 1, {s: b"S"})
    h.now = DELAY + 1000
    d, _ = admit(h, rebalance=5000)
    h.tick(DELAY + 1000 + 5000)  # s never rejoined: the rebalance timeout completes it
    assert h.group.state == C and set(h.group.members) == {s, d}
    result = h.join_answer(d)
    assert result.generation_id == 2 and result.leader_id == d  # the leader is one that joined
    assert {m for m, _, _ in result.members} == {s, d}
    assert s not in h.inbox  # s had no request to answer
    # s is still static member i-s; its old generation makes it rejoin.
    assert h.heartbeat(s, 1, "i-s") == ErrorCode.illegal_generation
    out = h.join(jreq(s, instance="i-s", session=60_000, rebalance=5000))
    assert isinstance(out.result, JoinResult) and out.result.generation_id == 2


def test_rebalance_waits_for_the_sessions_of_static_members_when_nobody_rejoins() -> None:
    h = Harness()
    s1 = h.join(jreq("", instance="i-1", session=20_000, rebalance=5000)).member_id
    s2 = h.join(jreq("", instance="i-2", session=20_000, rebalance=5000)).member_id
    h.tick(DELAY)
    h.inbox.clear()
    h.sync(s1, 1, {s1: b"1", s2: b"2"})
    h.sync(s2, 1)
    d, _ = admit(h, rebalance=5000)
    assert h.leave(d) == ErrorCode.none
    assert h.join_answer(d).error == ErrorCode.unknown_member_id
    h.tick(DELAY + 5000)  # rebalance timeout, nobody joined: no new generation yet
    assert h.group.state == P and h.group.generation_id == 1
    h.tick(DELAY + 20_000)  # the static sessions end
    assert h.group.state == E and h.group.generation_id == 2 and not h.group.static_members


# -- static membership ----------------------------------------------------------------------


def static_pair(h: Harness, *, static_leads: bool) -> tuple[str, str]:
    """A static member s (instance "i-s") and a dynamic one d, Stable at generation 1."""
    if static_leads:
        s = h.join(jreq("", instance="i-s", client_id="s")).member_id
        d, _ = admit(h)
    else:
        d, _ = admit(h)
        s = h.join(jreq("", instance="i-s", client_id="s")).member_id
    h.tick(DELAY)
    h.join_answer(s)
    h.join_answer(d)
    leader = s if static_leads else d
    follower = d if static_leads else s
    h.sync(follower, 1, instance="i-s" if follower == s else None)
    h.sync(leader, 1, {s: b"S", d: b"D"}, instance="i-s" if leader == s else None)
    h.inbox.clear()
    assert h.group.state == S
    return s, d


def test_static_member_gets_its_id_on_the_first_join() -> None:
    h = Harness()
    out = h.join(jreq("", instance="i-1"))
    assert out.result is None and out.member_id
    assert h.group.static_members == {"i-1": out.member_id}
    assert not h.group.pending_members and h.group.state == P


@pytest.mark.parametrize("static_leads", [False, True])
def test_restarted_static_member_takes_over_without_a_rebalance(static_leads: bool) -> None:
    h = Harness()
    s, d = static_pair(h, static_leads=static_leads)
    h.now = DELAY + 2000
    out = h.join(jreq("", instance="i-s", client_id="s"))
    assert isinstance(out.result, JoinResult) and out.deliveries == []
    new = out.result.member_id
    assert new not in ("", s)
    assert out.result.error == ErrorCode.none and out.result.generation_id == 1
    assert h.group.state == S and h.group.generation_id == 1
    assert set(h.group.members) == {new, d} and h.group.static_members == {"i-s": new}
    if static_leads:
        assert out.result.leader_id == new and out.result.skip_assignment
        assert {m for m, _, _ in out.result.members} == {new, d}
    else:
        assert out.result.leader_id == d and out.result.members == ()
        assert not out.result.skip_assignment
    sync = h.sync(new, 1, instance="i-s")
    assert isinstance(sync.result, SyncResult) and sync.result.assignment == b"S"
    assert h.heartbeat(d, 1) == ErrorCode.none and h.heartbeat(new, 1, "i-s") == ErrorCode.none

    # The old incarnation is fenced.
    assert h.heartbeat(s, 1, "i-s") == ErrorCode.fenced_instance_id
    old_sync = h.sync(s, 1, instance="i-s")
    assert isinstance(old_sync.result, SyncResult)
    assert old_sync.result.error == ErrorCode.fenced_instance_id
    old_join = h.join(jreq(s, instance="i-s"))
    assert isinstance(old_join.result, JoinResult)
    assert old_join.result.error == ErrorCode.fenced_instance_id
    assert h.leave(s, "i-s") == ErrorCode.fenced_instance_id
    assert h.group.state == S and h.group.generation_id == 1


def test_restarted_static_member_with_new_metadata_but_same_protocol_does_not_rebalance() -> None:
    h = Harness()
    _s, _d = static_pair(h, static_leads=False)
    out = h.join(jreq("", instance="i-s", protocols=(("range", b"other-subscription"),)))
    assert isinstance(out.result, JoinResult) and out.result.generation_id == 1
    assert h.group.state == S
    assert h.group.members[out.result.member_id].metadata("range") == b"other-subscription"


def test_restarted_static_member_changing_the_selected_protocol_rebalances() -> None:
    h = Harness()
    s = h.join(jreq("", instance="i-s", protocols=(("range", b""), ("roundrobin", b"")))).member_id
    h.tick(DELAY)
    assert h.join_answer(s).protocol_name == "range"
    h.sync(s, 1, {s: b"S"})
    out = h.join(jreq("", instance="i-s", protocols=(("roundrobin", b"rr"),)))
    # s is the whole group and rejoined, so the rebalance completes at once.
    assert isinstance(out.result, JoinResult)
    assert (out.result.generation_id, out.result.protocol_name) == (2, "roundrobin")
    assert h.group.state == C


def test_static_restart_during_a_rebalance_fences_the_waiting_join() -> None:
    h = Harness()
    s, d = static_pair(h, static_leads=False)
    h.now = DELAY + 1000
    # New metadata from s: a rebalance, s's join waits for d.
    assert h.join(jreq(s, instance="i-s", protocols=(("range", b"x"),))).result is None
    assert h.group.state == P
    out = h.join(jreq("", instance="i-s"))  # s restarts while its old join waits
    assert h.join_answer(s).error == ErrorCode.fenced_instance_id
    new = out.member_id
    assert out.result is None and new not in ("", s)  # d has not rejoined yet
    assert h.group.static_members == {"i-s": new}
    last = h.join(jreq(d))
    assert isinstance(last.result, JoinResult) and last.result.generation_id == 2
    assert h.join_answer(new).generation_id == 2
    assert not h.inbox.get(s)


def test_leave_by_group_instance_id() -> None:
    h = Harness()
    _s, d = static_pair(h, static_leads=False)
    assert h.leave("", "unknown-instance") == ErrorCode.unknown_member_id
    assert h.leave("", "i-s") == ErrorCode.none
    assert set(h.group.members) == {d} and not h.group.static_members
    assert h.group.state == P


def test_dead_group_refuses_everything() -> None:
    h = Harness()
    a, _ = admit(h)
    assert h.leave(a) == ErrorCode.none
    h.tick(DELAY)  # the initial rebalance, now without members, ends the group
    assert h.group.state == E
    h.group.mark_dead()
    assert h.group.state == D
    out = h.join(jreq(""))
    assert isinstance(out.result, JoinResult)
    assert out.result.error == ErrorCode.coordinator_not_available
    out = h.sync(a, 0)
    assert isinstance(out.result, SyncResult)
    assert out.result.error == ErrorCode.coordinator_not_available
    assert h.heartbeat(a, 0) == ErrorCode.coordinator_not_available
    assert h.leave(a) == ErrorCode.coordinator_not_available


# -- property test: several clients obeying the protocol ------------------------------------

PARTITIONS = 12
VALID_PREVIOUS = {
    P: {S, C, E},
    C: {P},
    S: {C},
    E: {P},
    D: {S, P, C, E},
}
ALLOWED = {(src, dst) for dst, sources in VALID_PREVIOUS.items() for src in sources}

# name -> (group.instance.id, protocol preference, session timeout, rebalance timeout)
CLIENTS: dict[str, tuple[str | None, tuple[str, ...], int, int]] = {
    "c0": (None, ("range", "roundrobin"), 10_000, 20_000),
    "c1": (None, ("roundrobin", "range"), 10_000, 15_000),
    "c2": (None, ("range",), 8_000, 20_000),
    "c3": (None, ("roundrobin", "range"), 12_000, 25_000),
    "s0": ("inst-0", ("roundrobin", "range"), 15_000, 20_000),
    "s1": ("inst-1", ("range", "roundrobin"), 9_000, 20_000),
}


@dataclass
class Client:
    name: str
    instance: str | None
    protocols: tuple[tuple[str, bytes], ...]
    session: int
    rebalance: int
    member_id: str = ""
    generation: int = -1
    waiting: str | None = None  # "join" | "sync": a request awaiting its answer
    planned: dict[str, bytes] | None = None  # the leader's assignment for ``generation``
    assignment: frozenset[int] | None = None
    synced_generation: int = -1

    def reset(self) -> None:
        self.member_id, self.generation, self.planned = "", -1, None
        self.assignment, self.synced_generation = None, -1


def encode_assignment(partitions: list[int]) -> bytes:
    return ",".join(map(str, partitions)).encode()


def decode_assignment(data: bytes) -> frozenset[int]:
    return frozenset(int(p) for p in data.decode().split(",")) if data else frozenset()


class GroupProtocolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.group = Group("g", SETTINGS)
        self.now = 0
        self.transitions: list[tuple[GroupState, GroupState]] = []
        real_fire = self.group._fire

        def logged(event: GroupEvent) -> bool:
            before = self.group.state
            changed = real_fire(event)
            if changed:
                self.transitions.append((before, self.group.state))
            return changed

        self.group._fire = logged  # type: ignore[method-assign]
        self.clients = {
            name: Client(name, inst, tuple((p, f"{name}/{p}".encode()) for p in prefs), sess, reb)
            for name, (inst, prefs, sess, reb) in CLIENTS.items()
        }
        self.outstanding: dict[tuple[str, str], Client] = {}  # (member id, kind) -> client

    # -- answers ---------------------------------------------------------------------------

    def route(self, deliveries: list[Delivery]) -> None:
        for d in deliveries:
            assert d.group_id == "g"
            kind = "join" if isinstance(d.result, JoinResult) else "sync"
            key = (d.member_id, kind)
            assert key in self.outstanding, f"answer without a waiting request: {d}"
            client = self.outstanding.pop(key)
            assert client.waiting == kind
            client.waiting = None
            if kind == "join":
                self.on_join(client, d.result)  # type: ignore[arg-type]
            else:
                self.on_sync(client, d.result)  # type: ignore[arg-type]

    def wait(self, client: Client, outcome: Outcome, kind: str) -> None:
        key = (outcome.member_id, kind)
        assert outcome.member_id and key not in self.outstanding
        self.outstanding[key] = client
        client.waiting = kind
        if kind == "join":
            client.member_id = outcome.member_id

    def owner(self, member_id: str) -> Client:
        member = self.group.members[member_id]
        if member.group_instance_id is not None:
            return next(c for c in self.clients.values() if c.instance == member.group_instance_id)
        return next(c for c in self.clients.values() if c.member_id == member_id)

    def on_join(self, client: Client, result: JoinResult) -> None:
        g = self.group
        if result.error == ErrorCode.member_id_required:
            assert client.instance is None and client.member_id == ""
            assert result.member_id in g.pending_members
            client.member_id = result.member_id
        elif result.error in (ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id):
            client.reset()
        elif result.error == ErrorCode.none:
            assert result.member_id in g.members
            assert result.generation_id == g.generation_id and g.state in (C, S)
            assert result.leader_id == g.leader_id and result.protocol_type == "consumer"
            assert result.protocol_name in dict(client.protocols)
            client.member_id, client.generation = result.member_id, result.generation_id
            client.planned = None
            if result.leader_id == result.member_id:
                listed = {m for m, _, _ in result.members}
                assert listed == set(g.members)
                for m, instance, meta in result.members:
                    assert instance == g.members[m].group_instance_id
                    assert meta == f"{self.owner(m).name}/{result.protocol_name}".encode()
                if not result.skip_assignment:
                    ordered = sorted(listed)
                    client.planned = {
                        m: encode_assignment(list(range(i, PARTITIONS, len(ordered))))
                        for i, m in enumerate(ordered)
                    }
            else:
                assert result.members == () and not result.skip_assignment
        else:
            raise AssertionError(f"unexpected JoinGroup answer {result}")

    def on_sync(self, client: Client, result: SyncResult) -> None:
        g = self.group
        if result.error == ErrorCode.none:
            assert g.state == S and client.generation == g.generation_id
            assert result.assignment == g.members[client.member_id].assignment
            client.assignment = decode_assignment(result.assignment)
            client.synced_generation = client.generation
        elif result.error in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation):
            client.generation = -1
        elif result.error in (ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id):
            client.reset()
        else:
            raise AssertionError(f"unexpected SyncGroup answer {result}")

    # -- rules -----------------------------------------------------------------------------

    names = st.sampled_from(sorted(CLIENTS))

    @rule(name=names)
    def join(self, name: str) -> None:
        c = self.clients[name]
        if c.waiting:
            return
        req = JoinRequest(c.member_id, c.instance, name, "/10.0.0.1", c.session, c.rebalance,
                          "consumer", c.protocols, True)
        out = self.group.join(req, self.now)
        self.route(out.deliveries)
        if out.result is None:
            self.wait(c, out, "join")
        else:
            assert isinstance(out.result, JoinResult)
            self.on_join(c, out.result)

    @rule(name=names)
    def sync(self, name: str) -> None:
        c = self.clients[name]
        if c.waiting or not c.member_id or c.generation < 0:
            return
        out = self.group.sync(c.member_id, c.instance, c.generation, c.planned or {}, self.now)
        self.route(out.deliveries)
        if out.result is None:
            self.wait(c, out, "sync")
        else:
            assert isinstance(out.result, SyncResult)
            self.on_sync(c, out.result)

    @rule(name=names)
    def heartbeat(self, name: str) -> None:
        c = self.clients[name]
        if c.waiting or not c.member_id or c.generation < 0:
            return
        g = self.group
        state = g.state
        error = g.heartbeat(c.member_id, c.instance, c.generation, self.now)
        if c.member_id not in g.members:
            fenced = c.instance is not None and c.instance in g.static_members
            assert error == (ErrorCode.fenced_instance_id if fenced else ErrorCode.unknown_member_id)
            c.reset()
        elif c.generation != g.generation_id:
            assert error == ErrorCode.illegal_generation
            c.generation = -1
        else:
            assert error == (ErrorCode.rebalance_in_progress if state == P else ErrorCode.none)

    @rule(name=names)
    def leave(self, name: str) -> None:
        c = self.clients[name]
        if c.waiting or not c.member_id:
            return
        was_member = c.member_id in self.group.members or c.member_id in self.group.pending_members
        error, deliveries = self.group.leave(c.member_id, c.instance, self.now)
        self.route(deliveries)
        assert (error == ErrorCode.none) == was_member
        c.reset()

    @rule(name=st.sampled_from(["s0", "s1"]))
    def restart_static(self, name: str) -> None:
        c = self.clients[name]
        if not c.waiting:
            c.reset()  # the process restarts and forgets its member id; the group does not

    def act(self, name: str) -> None:
        """What a live client does next: (re)join, fetch its assignment, or heartbeat."""
        c = self.clients[name]
        if c.waiting:
            return
        if not c.member_id or c.generation < 0:
            self.join(name)
        elif c.synced_generation != c.generation:
            self.sync(name)
        else:
            self.heartbeat(name)

    @rule(order=st.permutations(sorted(CLIENTS)), rounds=st.integers(1, 3))
    def everyone_acts(self, order: list[str], rounds: int) -> None:
        for _ in range(rounds):
            for name in order:
                self.act(name)

    @rule(name=names)
    def one_acts(self, name: str) -> None:
        self.act(name)

    @rule(ms=st.one_of(st.integers(0, 3_000), st.integers(3_000, 25_000)))
    def tick(self, ms: int) -> None:
        self.now += ms
        self.route(self.group.tick(self.now))
        deadline = self.group.next_deadline()
        assert deadline is None or deadline > self.now, "a due timer did not fire"

    @rule()
    def drain(self) -> None:
        self.settle()

    def settle(self) -> None:
        """Clients stay silent; time passes: every waiting request gets its answer."""
        for _ in range(300):
            if not self.outstanding:
                return
            self.now += 1000
            self.route(self.group.tick(self.now))
        raise AssertionError(f"requests never answered: {sorted(self.outstanding)}")

    def teardown(self) -> None:
        self.settle()

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def transitions_are_legal(self) -> None:
        assert self.group.state in (E, P, C, S)
        for step in self.transitions:
            assert step in ALLOWED, f"illegal transition {step}"
        self.transitions.clear()

    @invariant()
    def members_belong_to_clients(self) -> None:
        g = self.group
        for member_id, member in g.members.items():
            if member.group_instance_id is None:
                owners = [c for c in self.clients.values() if c.member_id == member_id]
                assert len(owners) == 1 and owners[0].instance is None
            else:
                assert g.static_members[member.group_instance_id] == member_id
                assert self.owner(member_id).member_id in (member_id, "")
        assert all(g.members[m].group_instance_id == i for i, m in g.static_members.items())
        if g.state == E:
            assert not g.members
        if g.state in (C, S):
            assert g.members

    @invariant()
    def waiting_requests_match_the_group(self) -> None:
        g = self.group
        awaiting = {(m, "join") for m, mem in g.members.items() if mem.awaiting_join}
        awaiting |= {(m, "sync") for m, mem in g.members.items() if mem.awaiting_sync}
        assert awaiting == set(self.outstanding)
        if g.state != P:
            assert not any(mem.awaiting_join for mem in g.members.values())
        if g.state != C:
            assert not any(mem.awaiting_sync for mem in g.members.values())

    @invariant()
    def stable_group_is_consistent(self) -> None:
        g = self.group
        if g.state != S:
            return
        assert g.leader_id in g.members
        for member_id, member in g.members.items():
            client = self.owner(member_id)
            if member.group_instance_id is None:
                assert client.generation == g.generation_id
            else:  # a static member may have missed a generation (it keeps its place)
                assert client.generation <= g.generation_id
        # The leader's assignment, as stored: each partition owned by exactly one member.
        owned = Counter(
            p for member in g.members.values() for p in decode_assignment(member.assignment)
        )
        assert owned == Counter(range(PARTITIONS))
        # What the clients were told for this generation agrees and never overlaps.
        seen: set[int] = set()
        for client in self.clients.values():
            if client.synced_generation == g.generation_id and client.member_id in g.members:
                assert client.assignment == decode_assignment(g.members[client.member_id].assignment)
                assert client.assignment is not None and not (client.assignment & seen)
                seen |= client.assignment


TestGroupProtocol = GroupProtocolMachine.TestCase
TestGroupProtocol.settings = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
