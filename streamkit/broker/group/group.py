"""One consumer group under the classic rebalance protocol: pure logic, no I/O, no asyncio.

Every operation takes ``now_ms`` and returns an ``Outcome``: the caller's own answer, or
``None`` when the answer is deferred (a JoinGroup waits for the rebalance to complete, a
follower's SyncGroup waits for the leader's), plus ``deliveries``: answers now due to other
members' deferred requests. The server keeps one future per deferred request and resolves
it from the deliveries. ``tick(now_ms)`` fires the timers (initial rebalance delay,
rebalance timeout, session expiry, pending-member expiry).

State changes go through ``state.py``'s table: each method names the event (a member joined,
left, the leader synced...) and ``_fire`` moves the group where the table says. What a
state change sets in motion (deadlines, answers to waiting requests) happens next to it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from streamkit.broker.group.state import GroupEvent, GroupState, initial_state, next_state

__all__ = [
    "Delivery",
    "Group",
    "GroupSettings",
    "JoinRequest",
    "JoinResult",
    "Member",
    "Outcome",
    "SyncResult",
]


@dataclass(frozen=True, slots=True)
class GroupSettings:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2147483647


@dataclass(frozen=True, slots=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool  # JoinGroup v4+: a new dynamic member gets an id first


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class Delivery:
    group_id: str
    member_id: str
    result: JoinResult | SyncResult


@dataclass(slots=True)
class Outcome:
    result: JoinResult | SyncResult | ErrorCode | None
    deliveries: list[Delivery] = field(default_factory=list)
    member_id: str = ""  # whose deferred answer ``result is None`` refers to


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    last_heartbeat_ms: int
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, other: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == other


class Group:
    def __init__(self, group_id: str, settings: GroupSettings, loaded_members: bool = False) -> None:
        """``loaded_members``: the group is read back from __consumer_offsets with members
        (it resumes Stable in its stored generation)."""
        self.group_id = group_id
        self.settings = settings
        self.state = initial_state(loaded_members)
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # ids handed out (v4+), -> expiry ms
        self._join_deadline_ms = 0  # initial-delay end: completion not before this
        self._rebalance_deadline_ms = 0  # completion at the latest (missing members dropped)
        self._sync_deadline_ms = 0
        self._initial_rebalance = False

    # -- helpers -------------------------------------------------------------------------

    def _fire(self, event: GroupEvent) -> bool:
        """Move by the transition table; True when the state changed."""
        target = next_state(self.state, event)
        changed = target != self.state
        self.state = target
        return changed

    def _new_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id or client_id or 'member'}-{uuid.uuid4()}"

    def _current_join_result(self, member: Member) -> JoinResult:
        is_leader = member.member_id == self.leader_id
        return JoinResult(
            error=ErrorCode.none,
            member_id=member.member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader_id=self.leader_id or "",
            members=self._member_list() if is_leader else (),
        )

    def _member_list(self) -> tuple[tuple[str, str | None, bytes], ...]:
        proto = self.protocol_name or ""
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(proto)) for m in self.members.values()
        )

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Can a member with these protocols join? (Kafka's supportsProtocols.)"""
        names = {name for name, _ in protocols}
        if not names or not protocol_type:
            return False
        if not self.members:
            return self.protocol_type in (None, protocol_type) or self.state == GroupState.EMPTY
        if protocol_type != self.protocol_type:
            return False
        common = set.intersection(*({n for n, _ in m.protocols} for m in self.members.values()))
        return bool(common & names)

    def _select_protocol(self) -> str:
        members = list(self.members.values())
        candidates = set.intersection(*({n for n, _ in m.protocols} for m in members))
        votes: Counter[str] = Counter()
        for m in members:
            votes[next(n for n, _ in m.protocols if n in candidates)] += 1
        best = max(votes.values())
        leader = self.members.get(self.leader_id or "") or members[0]
        for name, _ in leader.protocols:
            if votes.get(name) == best:
                return name
        return sorted(n for n, v in votes.items() if v == best)[0]

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    # -- JoinGroup -----------------------------------------------------------------------

    def join(self, req: JoinRequest, now_ms: int) -> Outcome:
        s = self.settings
        if self.state == GroupState.DEAD:
            return Outcome(JoinResult(ErrorCode.coordinator_not_available, req.member_id))
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return Outcome(JoinResult(ErrorCode.invalid_session_timeout, req.member_id))
        if not self.supports(req.protocol_type, req.protocols):
            return Outcome(JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id))
        if req.group_instance_id is not None:
            return self._join_static(req, now_ms)
        if not req.member_id:
            if req.require_known_member_id:
                member_id = self._new_member_id(req.client_id, None)
                self.pending_members[member_id] = now_ms + req.session_timeout_ms
                return Outcome(JoinResult(ErrorCode.member_id_required, member_id))
            return self._add_member(req, self._new_member_id(req.client_id, None), now_ms)
        if req.member_id in self.pending_members:
            del self.pending_members[req.member_id]
            return self._add_member(req, req.member_id, now_ms)
        member = self.members.get(req.member_id)
        if member is None:
            return Outcome(JoinResult(ErrorCode.unknown_member_id, req.member_id))
        return self._rejoin(member, req, now_ms)

    def _join_static(self, req: JoinRequest, now_ms: int) -> Outcome:
        instance = req.group_instance_id
        assert instance is not None
        known = self.static_members.get(instance)
        if req.member_id and known is not None and req.member_id != known:
            return Outcome(JoinResult(ErrorCode.fenced_instance_id, req.member_id))
        if known is None:
            if req.member_id:
                return Outcome(JoinResult(ErrorCode.unknown_member_id, req.member_id))
            return self._add_member(req, self._new_member_id(req.client_id, instance), now_ms)
        old = self.members[known]
        if req.member_id:
            return self._rejoin(old, req, now_ms)
        # A restarted static member: it takes over its old identity under a new member id.
        # In Stable with unchanged metadata this needs no rebalance (KIP-345).
        new_id = self._new_member_id(req.client_id, instance)
        outcome = Outcome(None)
        if old.awaiting_join:
            outcome.deliveries.append(
                Delivery(self.group_id, old.member_id, JoinResult(ErrorCode.fenced_instance_id, old.member_id))
            )
        if old.awaiting_sync:
            outcome.deliveries.append(
                Delivery(self.group_id, old.member_id, SyncResult(ErrorCode.fenced_instance_id))
            )
        del self.members[old.member_id]
        old.member_id = new_id
        old.awaiting_join = old.awaiting_sync = False
        self._update_member(old, req, now_ms)
        self.members[new_id] = old
        self.static_members[instance] = new_id
        if self.leader_id == known:
            self.leader_id = new_id
        # Kafka rebalances in Stable only when the group's selected protocol would change.
        if self.state == GroupState.STABLE and self._select_protocol() == self.protocol_name:
            result = self._current_join_result(old)
            if old.member_id == self.leader_id:
                result = JoinResult(
                    result.error, result.member_id, result.generation_id, result.protocol_type,
                    result.protocol_name, result.leader_id, result.members, skip_assignment=True,
                )
            outcome.result = result
            return outcome
        old.awaiting_join = True
        outcome.member_id = new_id
        outcome.deliveries.extend(self._rebalance(GroupEvent.MEMBER_JOIN, now_ms))
        done = self._maybe_complete_join(now_ms)
        return self._merge(outcome, done, new_id)

    def _update_member(self, member: Member, req: JoinRequest, now_ms: int) -> None:
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.protocol_type = req.protocol_type
        member.protocols = req.protocols
        member.last_heartbeat_ms = now_ms

    def _add_member(self, req: JoinRequest, member_id: str, now_ms: int) -> Outcome:
        if len(self.members) >= self.settings.max_size:
            return Outcome(JoinResult(ErrorCode.group_max_size_reached, member_id))
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            last_heartbeat_ms=now_ms,
            awaiting_join=True,
        )
        self.members[member_id] = member
        if req.group_instance_id is not None:
            self.static_members[req.group_instance_id] = member_id
        if len(self.members) == 1:
            self.protocol_type = req.protocol_type
        outcome = Outcome(None, member_id=member_id)
        if self.state == GroupState.PREPARING_REBALANCE and self._initial_rebalance:
            # Each newcomer to a group's first rebalance restarts the initial delay (Kafka's
            # InitialDelayedJoin), bounded by the rebalance timeout.
            self._join_deadline_ms = min(
                now_ms + self.settings.initial_rebalance_delay_ms, self._rebalance_deadline_ms
            )
        outcome.deliveries.extend(self._rebalance(GroupEvent.MEMBER_JOIN, now_ms))
        return self._merge(outcome, self._maybe_complete_join(now_ms), member_id)

    def _rejoin(self, member: Member, req: JoinRequest, now_ms: int) -> Outcome:
        if req.protocol_type != member.protocol_type and self.members:
            return Outcome(JoinResult(ErrorCode.inconsistent_group_protocol, member.member_id))
        unchanged = member.same_protocols(req.protocols)
        outcome = Outcome(None, member_id=member.member_id)
        if member.awaiting_join:  # a retried JoinGroup replaces the one that is waiting
            outcome.deliveries.append(
                Delivery(self.group_id, member.member_id,
                         JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
            )
        self._update_member(member, req, now_ms)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE) and unchanged and (
            self.state == GroupState.COMPLETING_REBALANCE or member.member_id != self.leader_id
        ):
            outcome.result = self._current_join_result(member)
            return outcome
        member.awaiting_join = True
        outcome.deliveries.extend(self._rebalance(GroupEvent.MEMBER_JOIN, now_ms))
        return self._merge(outcome, self._maybe_complete_join(now_ms), member.member_id)

    @staticmethod
    def _merge(outcome: Outcome, deliveries: list[Delivery], member_id: str) -> Outcome:
        """Move the caller's own answer out of ``deliveries`` into ``outcome.result``."""
        for d in deliveries:
            if d.member_id == member_id and isinstance(d.result, JoinResult) and outcome.result is None:
                outcome.result = d.result
            else:
                outcome.deliveries.append(d)
        return outcome

    # -- rebalance -----------------------------------------------------------------------

    def _rebalance(self, event: GroupEvent, now_ms: int) -> list[Delivery]:
        """A member joined or left, or the sync timed out. On entering PreparingRebalance:
        members waiting in SyncGroup are told to rejoin and the join deadlines start."""
        previous = self.state
        if not self._fire(event):
            return []
        deliveries = []
        for m in self.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                m.last_heartbeat_ms = now_ms  # its session restarts with the answer (Kafka)
                deliveries.append(
                    Delivery(self.group_id, m.member_id, SyncResult(ErrorCode.rebalance_in_progress))
                )
        self._initial_rebalance = previous == GroupState.EMPTY
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self._rebalance_deadline_ms = now_ms + timeout
        self._join_deadline_ms = (
            now_ms + min(self.settings.initial_rebalance_delay_ms, timeout)
            if self._initial_rebalance
            else now_ms
        )
        return deliveries

    def _all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def _maybe_complete_join(self, now_ms: int) -> list[Delivery]:
        if self.state != GroupState.PREPARING_REBALANCE:
            return []
        if now_ms >= self._rebalance_deadline_ms or (self._all_joined() and now_ms >= self._join_deadline_ms):
            return self._complete_join(now_ms)
        return []

    def _complete_join(self, now_ms: int) -> list[Delivery]:
        # Dynamic members that did not rejoin are dropped; static members stay until their
        # session expires (Kafka's onCompleteJoin).
        for m in [m for m in self.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            self._remove(m.member_id)
        joined = [mid for mid, m in self.members.items() if m.awaiting_join]
        if self.members and not joined:
            # Only static members that never rejoined: wait another rebalance timeout, their
            # sessions expire meanwhile (Kafka: maybeElectNewJoinedLeader failed).
            self._rebalance_deadline_ms = now_ms + max(m.rebalance_timeout_ms for m in self.members.values())
            return []
        self.pending_members.clear()
        self.generation_id += 1
        if not self.members:
            self._fire(GroupEvent.ALL_LEFT)
            self.protocol_name = None
            self.leader_id = None
            return []
        if self.leader_id not in joined:  # the leader must be a member that rejoined
            self.leader_id = joined[0]
        self.protocol_name = self._select_protocol()
        self._fire(GroupEvent.JOIN_COMPLETE)
        self._sync_deadline_ms = now_ms + max(m.rebalance_timeout_ms for m in self.members.values())
        deliveries = []
        for m in self.members.values():
            if m.awaiting_join:
                deliveries.append(Delivery(self.group_id, m.member_id, self._current_join_result(m)))
            m.awaiting_join = False
            m.assignment = b""
            m.last_heartbeat_ms = now_ms
        return deliveries

    def _remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        instance = member.group_instance_id if member is not None else None
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    # -- SyncGroup -----------------------------------------------------------------------

    def sync(
        self,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        assignments: dict[str, bytes],
        now_ms: int,
    ) -> Outcome:
        if self.state == GroupState.DEAD:
            return Outcome(SyncResult(ErrorCode.coordinator_not_available))
        if self.is_static_fenced(member_id, instance_id):
            return Outcome(SyncResult(ErrorCode.fenced_instance_id))
        member = self.members.get(member_id)
        if member is None:
            return Outcome(SyncResult(ErrorCode.unknown_member_id))
        if generation_id != self.generation_id:
            return Outcome(SyncResult(ErrorCode.illegal_generation))
        if self.state in (GroupState.EMPTY, GroupState.PREPARING_REBALANCE):
            return Outcome(SyncResult(ErrorCode.rebalance_in_progress))
        member.last_heartbeat_ms = now_ms
        if self.state == GroupState.STABLE:
            return Outcome(self._sync_result(member))
        # CompletingRebalance: followers wait; the leader's assignment completes everyone.
        outcome = Outcome(None, member_id=member_id)
        if member.awaiting_sync:  # a retried SyncGroup replaces the one that is waiting
            outcome.deliveries.append(
                Delivery(self.group_id, member_id, SyncResult(ErrorCode.rebalance_in_progress))
            )
            member.awaiting_sync = False
        if member_id != self.leader_id:
            member.awaiting_sync = True
            return outcome
        for mid, m in self.members.items():
            m.assignment = assignments.get(mid, b"")
        self._fire(GroupEvent.LEADER_SYNC)
        outcome.result = self._sync_result(member)
        for m in self.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                m.last_heartbeat_ms = now_ms  # its session restarts with the answer (Kafka)
                outcome.deliveries.append(Delivery(self.group_id, m.member_id, self._sync_result(m)))
        return outcome

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.none, self.protocol_type, self.protocol_name, member.assignment)

    # -- Heartbeat, LeaveGroup -------------------------------------------------------------

    def heartbeat(self, member_id: str, instance_id: str | None, generation_id: int, now_ms: int) -> ErrorCode:
        if self.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if self.is_static_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        member.last_heartbeat_ms = now_ms
        if self.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, member_id: str, instance_id: str | None, now_ms: int) -> tuple[ErrorCode, list[Delivery]]:
        if self.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available, []
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return ErrorCode.unknown_member_id, []
            if member_id and member_id != known:
                return ErrorCode.fenced_instance_id, []
            member_id = known
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            return ErrorCode.none, self._maybe_complete_join(now_ms)
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id, []
        deliveries = []
        if member.awaiting_join:
            deliveries.append(Delivery(self.group_id, member_id, JoinResult(ErrorCode.unknown_member_id, member_id)))
        if member.awaiting_sync:
            deliveries.append(Delivery(self.group_id, member_id, SyncResult(ErrorCode.unknown_member_id)))
        self._remove(member_id)
        deliveries.extend(self._member_gone(now_ms))
        return ErrorCode.none, deliveries

    def _member_gone(self, now_ms: int) -> list[Delivery]:
        deliveries = self._rebalance(GroupEvent.MEMBER_LEAVE, now_ms)
        return deliveries + self._maybe_complete_join(now_ms)

    # -- timers --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = list(self.pending_members.values())
        if self.state == GroupState.PREPARING_REBALANCE:
            deadlines.append(self._rebalance_deadline_ms)
            if self._all_joined():
                deadlines.append(self._join_deadline_ms)
        elif self.state == GroupState.COMPLETING_REBALANCE:
            deadlines.append(self._sync_deadline_ms)
        for m in self.members.values():
            if not (m.awaiting_join or m.awaiting_sync):
                deadlines.append(m.last_heartbeat_ms + m.session_timeout_ms)
        return min(deadlines) if deadlines else None

    def tick(self, now_ms: int) -> list[Delivery]:
        deliveries: list[Delivery] = []
        for mid, expiry in list(self.pending_members.items()):
            if now_ms >= expiry:
                del self.pending_members[mid]
        if self.state == GroupState.COMPLETING_REBALANCE and now_ms >= self._sync_deadline_ms:
            # The leader never sent its assignment: drop the members that did not sync.
            for m in [m for m in self.members.values() if not m.awaiting_sync]:
                self._remove(m.member_id)
            deliveries.extend(self._rebalance(GroupEvent.SYNC_TIMEOUT, now_ms))
        expired = [
            m.member_id
            for m in self.members.values()
            if not (m.awaiting_join or m.awaiting_sync)
            and now_ms >= m.last_heartbeat_ms + m.session_timeout_ms
        ]
        for mid in expired:
            self._remove(mid)
        if expired:  # an expired session is a member leaving
            deliveries.extend(self._rebalance(GroupEvent.MEMBER_LEAVE, now_ms))
        deliveries.extend(self._maybe_complete_join(now_ms))
        return deliveries

    def rebalance_after_downgrade(self, now_ms: int) -> list[Delivery]:
        """A consumer group just became this classic group (its last consumer-protocol member
        left; ``migration.py``): pick the protocol the members share and make them rejoin.
        Their generation (the member epoch they knew) is older than the group's, so their
        next Heartbeat is ILLEGAL_GENERATION and they rejoin under their member ids."""
        self.protocol_name = self._select_protocol()
        return self._rebalance(GroupEvent.MEMBER_LEAVE, now_ms)

    def awaiting(self) -> list[Delivery]:
        """REBALANCE_IN_PROGRESS for every deferred JoinGroup and SyncGroup: the group is
        about to become a consumer group (``migration.py``) and its members must rejoin it."""
        out: list[Delivery] = []
        for m in self.members.values():
            if m.awaiting_join:
                out.append(Delivery(self.group_id, m.member_id, JoinResult(ErrorCode.rebalance_in_progress, m.member_id)))
            if m.awaiting_sync:
                out.append(Delivery(self.group_id, m.member_id, SyncResult(ErrorCode.rebalance_in_progress)))
            m.awaiting_join = m.awaiting_sync = False
        return out

    def mark_dead(self) -> list[Delivery]:
        self._fire(GroupEvent.DELETE)
        return []
