"""Consumer groups of the new protocol (KIP-848): ConsumerGroupHeartbeat's state machine.

Pure and synchronous, driven by an injected clock (milliseconds) and an injected view of the
topics (name -> partition count), so tests drive it without sockets.

Three epochs, as in Kafka's GroupMetadataManager:

- the *group epoch* rises whenever membership, a subscription or a subscribed topic's size
  changes;
- the *assignment epoch* is the group epoch the current target assignment was computed for
  (by the ``uniform`` or ``range`` assignor, see ``assignors.py``);
- each member's *member epoch* reaches the assignment epoch once the member has converged.

A member moves toward its target incrementally (Kafka's CurrentAssignmentBuilder): it is
first told to give up what the target takes away (UNREVOKED_PARTITIONS, epoch unchanged);
only when its heartbeat no longer reports those partitions are they released, and it gets
its new epoch plus whatever of its target is free; what another member still holds follows
on later heartbeats (UNRELEASED_PARTITIONS). ``owners`` maps every partition to the one
member that holds it (assigned or pending revocation): a partition is never given to a
second member before the first has released it.

Regex subscriptions use Python's ``re`` (``fullmatch``), close to the RE2 syntax Kafka
uses; topics whose names start with ``__`` (internal topics) never match a regex.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from kio.schema.errors import ErrorCode

from streamkit.broker.group.assignors import ASSIGNORS, MemberSubscription

__all__ = [
    "LEAVE_GROUP_EPOCH",
    "LEAVE_GROUP_STATIC_EPOCH",
    "MIGRATION_POLICIES",
    "ClassicMembership",
    "ConsumerGroup",
    "ConsumerGroups",
    "ConsumerMember",
    "ConsumerSettings",
    "HeartbeatRequest",
    "HeartbeatResult",
    "MemberState",
]

TopicPartition = tuple[str, int]
LEAVE_GROUP_EPOCH = -1
LEAVE_GROUP_STATIC_EPOCH = -2
# group.consumer.migration.policy: which online conversions between a classic group and a
# consumer group the coordinator makes.
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """Kafka's broker defaults: group.consumer.session.timeout.ms,
    group.consumer.heartbeat.interval.ms, group.consumer.assignors (the first is the default),
    group.consumer.max.size, group.consumer.migration.policy."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2147483647
    migration_policy: str = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat's fields; ``None`` means "unchanged since the last heartbeat"."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: frozenset[TopicPartition] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: frozenset[TopicPartition] | None = None


@dataclass(slots=True)
class ClassicMembership:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
    consumer group: what its JoinGroup said, and the deadlines of its rebalance steps."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    version: int  # of its embedded consumer protocol: its assignment is encoded in it
    join_deadline_ms: int | None = None  # told to rejoin: JoinGroup due by then
    sync_deadline_ms: int | None = None  # joined: SyncGroup due by then

    def deadlines(self) -> tuple[int | None, int | None]:
        return self.join_deadline_ms, self.sync_deadline_ms


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    topic_names: tuple[str, ...] = ()
    topic_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_epoch: int = 0
    assigned: set[TopicPartition] = field(default_factory=set)
    pending_revocation: set[TopicPartition] = field(default_factory=set)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    last_sent: frozenset[TopicPartition] | None = None
    classic: ClassicMembership | None = None

    def subscribed(self, topics: Mapping[str, int]) -> frozenset[str]:
        out = {t for t in self.topic_names if t in topics}
        if self.topic_regex is not None:
            pattern = re.compile(self.topic_regex)
            out.update(t for t in topics if not t.startswith("__") and pattern.fullmatch(t))
        return frozenset(out)


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignor_name = ""
        self.members: dict[str, ConsumerMember] = {}
        self.static: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, set[TopicPartition]] = {}
        self.subscribed_sizes: dict[str, int] = {}
        self.owners: dict[TopicPartition, str] = {}

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroup states, as ListGroups and ConsumerGroupDescribe spell them."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def check_invariants(self) -> None:
        """Every partition held (assigned or pending revocation) by at most one member, and
        ``owners`` says which. Tests call this after every step."""
        seen: dict[TopicPartition, str] = {}
        for m in self.members.values():
            for tp in m.assigned | m.pending_revocation:
                if tp in seen:
                    raise AssertionError(f"{tp} held by {seen[tp]} and {m.member_id}")
                seen[tp] = m.member_id
            if m.assigned & m.pending_revocation:
                raise AssertionError(f"{m.member_id} both holds and revokes a partition")
        if seen != self.owners:
            raise AssertionError(f"owners {self.owners} != held {seen}")

    def rename(self, old_id: str, new_id: str) -> ConsumerMember:
        """A restarted static member takes over its predecessor's place under a new id."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = new_id
        for tp in member.assigned | member.pending_revocation:
            self.owners[tp] = new_id
        if old_id in self.target:
            self.target[new_id] = self.target.pop(old_id)
        return member

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Some partition of the member's target is still held by another member."""
        return any(self.owners.get(tp, member.member_id) != member.member_id
                   for tp in self.target.get(member.member_id, set()) - member.assigned)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        if member.instance_id is not None and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        for tp in member.assigned | member.pending_revocation:
            if self.owners.get(tp) == member_id:
                del self.owners[tp]
        self.target.pop(member_id, None)
        self.group_epoch += 1


class ConsumerGroups:
    """Every consumer group of the new protocol on this broker."""

    def __init__(self, settings: ConsumerSettings, topics: Callable[[], Mapping[str, int]],
                 clock: Callable[[], int],
                 timeouts: Callable[[str], tuple[int, int]] | None = None) -> None:
        self.settings = settings
        self.topics = topics
        self.clock = clock
        # A group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms (its
        # GROUP-resource configs), when set; the broker's defaults otherwise.
        self.timeouts = timeouts or (lambda _g: (settings.session_timeout_ms, settings.heartbeat_interval_ms))
        self.groups: dict[str, ConsumerGroup] = {}

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    # -- heartbeat -----------------------------------------------------------------------

    def _fail(self, error: ErrorCode, message: str, req: HeartbeatRequest) -> HeartbeatResult:
        return HeartbeatResult(error, message, req.member_id or None, req.member_epoch,
                               self.timeouts(req.group_id)[1])

    def _validate(self, req: HeartbeatRequest) -> HeartbeatResult | None:
        if not req.group_id:
            return self._fail(ErrorCode.invalid_request, "GroupId can't be empty.", req)
        if not req.member_id:
            return self._fail(ErrorCode.invalid_request, "MemberId can't be empty.", req)
        if req.instance_id is not None and not req.instance_id:
            return self._fail(ErrorCode.invalid_request, "InstanceId can't be empty.", req)
        if req.member_epoch < LEAVE_GROUP_STATIC_EPOCH:
            return self._fail(ErrorCode.invalid_request, f"MemberEpoch is invalid: {req.member_epoch}.", req)
        if req.member_epoch == LEAVE_GROUP_STATIC_EPOCH and req.instance_id is None:
            return self._fail(ErrorCode.invalid_request,
                              "InstanceId can't be null when MemberEpoch is -2 (static leave).", req)
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return self._fail(ErrorCode.invalid_request,
                                  "RebalanceTimeoutMs must be provided in first request.", req)
            if req.owned:
                return self._fail(ErrorCode.invalid_request,
                                  "TopicPartitions must be empty when (re-)joining.", req)
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return self._fail(ErrorCode.invalid_request,
                                  "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.", req)
        if req.server_assignor is not None and req.server_assignor not in self.settings.assignors:
            return self._fail(ErrorCode.unsupported_assignor,
                              f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                              f"{', '.join(self.settings.assignors)}.", req)
        if req.subscribed_topic_regex:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as exc:
                return self._fail(ErrorCode.invalid_regular_expression,
                                  f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid "
                                  f"regular expression: {exc}.", req)
        return None

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        invalid = self._validate(req)
        if invalid is not None:
            return invalid
        now = self.clock()
        group = self.groups.get(req.group_id)
        if req.member_epoch in (LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH):
            return self._leave(group, req)
        if group is None:
            if req.member_epoch != 0:
                # Also what members of a group that predates a broker restart hear: the
                # state is rebuilt from their rejoining with epoch 0.
                return self._fail(ErrorCode.unknown_member_id,
                                  f"Member {req.member_id} is not a member of group {req.group_id}.", req)
            group = self.groups[req.group_id] = ConsumerGroup(req.group_id)
        found = self._member(group, req)
        if isinstance(found, HeartbeatResult):
            return found
        member, changed = found
        session_timeout_ms, heartbeat_interval_ms = self.timeouts(req.group_id)
        member.session_deadline_ms = now + session_timeout_ms
        changed |= self._update(member, req)
        self.advance(group, member, changed, req.owned, now)
        assigned = frozenset(member.assigned)
        send = (req.member_epoch == 0 or member.last_sent != assigned
                or (req.owned is not None and req.owned != assigned))
        if send:
            member.last_sent = assigned
        return HeartbeatResult(ErrorCode.none, None, member.member_id, member.member_epoch,
                               heartbeat_interval_ms, assigned if send else None)

    def _member(self, group: ConsumerGroup, req: HeartbeatRequest) -> tuple[ConsumerMember, bool] | HeartbeatResult:
        """The request's member, created or taken over on a join; ``True`` when it is new."""
        mid = req.member_id
        if req.member_epoch == 0:
            if req.instance_id is not None:
                holder = group.static.get(req.instance_id)
                if holder is not None and holder != mid:
                    old = group.members[holder]
                    if old.member_epoch != LEAVE_GROUP_STATIC_EPOCH:
                        return self._fail(ErrorCode.unreleased_instance_id,
                                          f"Static member {holder} with instance id {req.instance_id} is "
                                          "not released yet.", req)
                    # A restarted static member takes over its predecessor's assignment and
                    # epoch under its new id, without a rebalance (KIP-848 static membership).
                    group.rename(holder, mid)
                    old.member_epoch = old.previous_epoch
                    old.last_sent = None
                    return old, False
            member = group.members.get(mid)
            if member is not None:
                return member, False
            if len(group.members) >= self.settings.max_size:
                return self._fail(ErrorCode.group_max_size_reached,
                                  f"The consumer group has reached its maximum capacity of "
                                  f"{self.settings.max_size} members.", req)
            member = ConsumerMember(mid, instance_id=req.instance_id)
            group.members[mid] = member
            if req.instance_id is not None:
                group.static[req.instance_id] = mid
            return member, True
        member = group.members.get(mid)
        if member is None:
            return self._fail(ErrorCode.unknown_member_id,
                              f"Member {mid} is not a member of group {group.group_id}.", req)
        if req.instance_id is not None and group.static.get(req.instance_id) != mid:
            return self._fail(ErrorCode.fenced_instance_id,
                              f"Static member {mid} with instance id {req.instance_id} was fenced.", req)
        if req.member_epoch > member.member_epoch:
            return self._fail(ErrorCode.fenced_member_epoch,
                              f"The consumer group member has a greater member epoch ({req.member_epoch}) "
                              f"than the one known by the group coordinator ({member.member_epoch}).", req)
        # Kafka tolerates the previous epoch when the response carrying the new one was
        # lost, as long as the member owns nothing it no longer has.
        if req.member_epoch < member.member_epoch and (
                req.member_epoch != member.previous_epoch
                or (req.owned is not None and not req.owned <= member.assigned)):
            return self._fail(ErrorCode.fenced_member_epoch,
                              f"The consumer group member has a smaller member epoch ({req.member_epoch}) "
                              f"than the one known by the group coordinator ({member.member_epoch}).", req)
        return member, False

    @staticmethod
    def _update(member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply what the request changes; ``True`` when the subscription changed."""
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        changed = False
        if req.subscribed_topic_names is not None and tuple(sorted(req.subscribed_topic_names)) != member.topic_names:
            member.topic_names = tuple(sorted(req.subscribed_topic_names))
            changed = True
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            if regex != member.topic_regex:
                member.topic_regex = regex
                changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        return changed

    def advance(self, group: ConsumerGroup, member: ConsumerMember, changed: bool,
                owned: frozenset[TopicPartition] | None, now: int) -> None:
        """After ``member`` spoke (``changed``: its subscription changed): bump the group
        epoch when subscriptions or a subscribed topic's size changed, compute a new target
        when the epoch passed the assignment epoch, and move the member toward its target."""
        sizes = self.subscribed_sizes(group)
        if changed or sizes != group.subscribed_sizes:
            group.group_epoch += 1
            group.subscribed_sizes = sizes
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        self._reconcile(group, member, owned, now)

    def subscribed_sizes(self, group: ConsumerGroup) -> dict[str, int]:
        topics = self.topics()
        names: set[str] = set()
        for m in group.members.values():
            names |= m.subscribed(topics)
        return {t: topics[t] for t in sorted(names)}

    def _compute_target(self, group: ConsumerGroup) -> None:
        """A new target assignment for the group epoch, with the assignor most members ask
        for (Kafka's rule), else the broker's default."""
        wanted = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        name = wanted.most_common(1)[0][0] if wanted else self.settings.assignors[0]
        topics = self.topics()
        subs = {mid: MemberSubscription(m.subscribed(topics), frozenset(group.target.get(mid, ())))
                for mid, m in group.members.items()}
        group.target = ASSIGNORS[name](subs, group.subscribed_sizes)
        group.assignor_name = name
        group.assignment_epoch = group.group_epoch

    @staticmethod
    def _reconcile(group: ConsumerGroup, member: ConsumerMember,
                   owned: frozenset[TopicPartition] | None, now: int) -> None:
        """``owned``: what the member says it holds now (None: it did not say)."""
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & member.pending_revocation:
                return  # still revoking
            for tp in member.pending_revocation:
                if group.owners.get(tp) == member.member_id:
                    del group.owners[tp]
            member.pending_revocation = set()
            member.revocation_deadline_ms = None
            member.state = MemberState.STABLE
        if member.member_epoch == group.assignment_epoch and member.state == MemberState.STABLE:
            return
        target = group.target.get(member.member_id, set())
        revoke = member.assigned - target
        if revoke:
            member.assigned -= revoke
            member.pending_revocation = revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.revocation_deadline_ms = now + member.rebalance_timeout_ms
            if owned is None or owned & revoke:
                return
            # It already holds none of them (a classic member rejoins having revoked
            # everything, as the eager protocol does): released at once, not a round later.
            ConsumerGroups._reconcile(group, member, owned, now)
            return
        for tp in target - member.assigned:
            if group.owners.get(tp, member.member_id) == member.member_id:
                member.assigned.add(tp)
                group.owners[tp] = member.member_id
        if member.member_epoch != group.assignment_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.state = (MemberState.STABLE if member.assigned == target
                        else MemberState.UNRELEASED_PARTITIONS)

    def _leave(self, group: ConsumerGroup | None, req: HeartbeatRequest) -> HeartbeatResult:
        mid = req.member_id
        if group is not None and req.instance_id is not None:
            holder = group.static.get(req.instance_id)
            if holder is None:
                return self._fail(ErrorCode.unknown_member_id,
                                  f"Instance id {req.instance_id} is unknown.", req)
            if holder != mid:
                return self._fail(ErrorCode.fenced_instance_id,
                                  f"Static member {mid} with instance id {req.instance_id} was fenced.", req)
        member = group.members.get(mid) if group is not None else None
        if group is None or member is None:
            return self._fail(ErrorCode.unknown_member_id,
                              f"Member {mid} is not a member of group {req.group_id}.", req)
        if member.classic is not None:
            return self._fail(ErrorCode.unknown_member_id,
                              f"Member {mid} uses the classic protocol: it leaves with LeaveGroup.", req)
        if req.member_epoch == LEAVE_GROUP_STATIC_EPOCH:
            # A static member leaving for a restart keeps its partitions (no rebalance) until
            # its session times out or its successor with the same instance id joins.
            member.previous_epoch = member.member_epoch
            member.member_epoch = LEAVE_GROUP_STATIC_EPOCH
        else:
            group.remove(mid)
        return HeartbeatResult(ErrorCode.none, None, mid, req.member_epoch, self.timeouts(req.group_id)[1])

    # -- timers --------------------------------------------------------------------------

    def tick(self) -> list[tuple[str, str]]:
        """Fence members whose session expired or who took longer than their rebalance
        timeout to revoke; returns the (group, member) pairs removed."""
        now = self.clock()
        removed = []
        for group in self.groups.values():
            for mid, m in list(group.members.items()):
                late = m.revocation_deadline_ms is not None and now >= m.revocation_deadline_ms
                if m.classic is not None:
                    # A classic member revokes by rejoining: its join and sync deadlines
                    # (rebalance timeout) take the revocation deadline's place.
                    late = any(d is not None and now >= d for d in m.classic.deadlines())
                if now >= m.session_deadline_ms or late:
                    group.remove(mid)
                    removed.append((group.group_id, mid))
        return removed

    def next_deadline(self) -> int | None:
        out: int | None = None
        for group in self.groups.values():
            for m in group.members.values():
                classic = m.classic.deadlines() if m.classic is not None else (m.revocation_deadline_ms,)
                for d in (m.session_deadline_ms, *classic):
                    if d is not None and (out is None or d < out):
                        out = d
        return out

    # -- offsets -------------------------------------------------------------------------

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit: a member commits with its current epoch
        (a classic member's generation is its epoch: ILLEGAL_GENERATION when it is not); with
        no members, anyone may commit with a negative epoch (admin tools)."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.illegal_generation if member.classic is not None else ErrorCode.stale_member_epoch
        return ErrorCode.none

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch: only a request naming a member is checked."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.none
        group = self.groups[group_id]
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        return ErrorCode.none


def new_member_id() -> str:
    """For ConsumerGroupHeartbeat v0, where the coordinator may pick the member id."""
    return str(uuid.uuid4())
