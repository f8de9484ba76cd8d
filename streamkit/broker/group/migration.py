"""Mixed groups (KIP-848 online migration): classic-protocol members inside a consumer group,
and the conversions between a classic group and a consumer group.

Pure and synchronous like the two group kinds it joins; the coordinator decides when a
conversion happens, under ``group.consumer.migration.policy``:

- *upgrade*: a consumer-protocol member joins a classic group that has members. The classic
  group becomes a consumer group (``to_consumer_group``) in which every classic member keeps
  its generation as its member epoch and its current partitions as both its assignment and
  its target, so nothing moves until the newcomer's epoch bump computes a new target.
- *classic members in a consumer group* (always allowed, as in Kafka): JoinGroup,
  SyncGroup, Heartbeat and LeaveGroup are answered from the consumer group's state. A
  JoinGroup is answered at once (no barrier): it reconciles the member like a heartbeat
  (the partitions its subscription says it owns are its ``owned``; an eager client owns
  none when it rejoins), its generation is its member epoch, and SyncGroup hands it the
  partitions the reconciliation gave it. Heartbeat answers REBALANCE_IN_PROGRESS when the
  group epoch moved past the member's epoch, when it must revoke, or when partitions it
  waits for are free: the classic client then revokes (all of its partitions, when eager),
  rejoins and gets its new assignment. A partition thus still has one owner at a time: the
  consumer group's ``owners`` covers classic and consumer members alike.
- *downgrade*: the last consumer-protocol member leaves (or is fenced) and classic members
  remain. The group becomes a classic group (``to_classic_group``) in the generation of the
  group epoch, each member keeping its partitions as its assignment, and rebalances.

The classic protocol's own rules still apply to classic members: their session timeout
(from JoinGroup), and the rebalance timeout to rejoin after being told to and to sync after
joining; missing either fences the member.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from streamkit.broker.group.consumer_group import (
    ClassicMembership,
    ConsumerGroup,
    ConsumerGroups,
    ConsumerMember,
    ConsumerSettings,
    MemberState,
)
from streamkit.broker.group.consumer_protocol import (
    PROTOCOL_TYPE,
    MalformedProtocol,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from streamkit.broker.group.group import (
    Group,
    GroupSettings,
    JoinRequest,
    JoinResult,
    Member,
    SyncResult,
)

__all__ = [
    "can_downgrade",
    "can_upgrade",
    "classic_heartbeat",
    "classic_join",
    "classic_leave",
    "classic_sync",
    "to_classic_group",
    "to_consumer_group",
]


# -- conversions --------------------------------------------------------------------------

def can_upgrade(classic: Group, settings: ConsumerSettings) -> bool:
    """Kafka's validateOnlineUpgrade: the policy allows it, the group uses the consumer
    protocol (its members' metadata is a subscription we can read) and it is small enough."""
    return (settings.upgrade_enabled and classic.protocol_type == PROTOCOL_TYPE
            and len(classic.members) <= settings.max_size)


def to_consumer_group(classic: Group, groups: ConsumerGroups, now_ms: int) -> ConsumerGroup:
    """The consumer group a classic group becomes; MalformedProtocol if a member's metadata
    or assignment is not the consumer protocol's."""
    group = ConsumerGroup(classic.group_id)
    epoch = classic.generation_id
    group.group_epoch = group.assignment_epoch = epoch
    for m in classic.members.values():
        subscription = decode_subscription(m.metadata(classic.protocol_name or m.protocols[0][0]))
        member = ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id,
            client_id=m.client_id, client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
            topic_names=tuple(sorted(subscription.topics)), member_epoch=epoch, previous_epoch=epoch,
            session_deadline_ms=now_ms + m.session_timeout_ms,
            classic=ClassicMembership(m.session_timeout_ms, m.protocols, subscription.version))
        # What a (faulty) classic leader gave twice stays with the first member only.
        member.assigned = {tp for tp in decode_assignment(m.assignment) if tp not in group.owners}
        for tp in member.assigned:
            group.owners[tp] = m.member_id
        group.members[m.member_id] = member
        group.target[m.member_id] = set(member.assigned)
        if m.group_instance_id is not None:
            group.static[m.group_instance_id] = m.member_id
    group.subscribed_sizes = groups.subscribed_sizes(group)
    return group


def can_downgrade(group: ConsumerGroup, settings: ConsumerSettings, classic_max_size: int) -> bool:
    """Kafka's validateOnlineDowngrade, checked after a consumer-protocol member left: only
    classic members remain (at least one), the policy allows it, and they fit a classic group."""
    return (bool(group.members) and all(m.classic is not None for m in group.members.values())
            and settings.downgrade_enabled and len(group.members) <= classic_max_size)


def to_classic_group(group: ConsumerGroup, settings: GroupSettings, now_ms: int) -> Group:
    """The classic group a consumer group of classic members becomes, already rebalancing."""
    classic = Group(group.group_id, settings, loaded_members=True)
    classic.generation_id = group.group_epoch
    classic.protocol_type = PROTOCOL_TYPE
    for m in group.members.values():
        assert m.classic is not None
        classic.members[m.member_id] = Member(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host, session_timeout_ms=m.classic.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms, protocol_type=PROTOCOL_TYPE,
            protocols=m.classic.protocols, last_heartbeat_ms=now_ms,
            assignment=encode_assignment(m.assigned, m.classic.version))
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = m.member_id
    classic.leader_id = next(iter(classic.members))
    classic.rebalance_after_downgrade(now_ms)
    return classic


# -- classic members in a consumer group ---------------------------------------------------

def _supports(group: ConsumerGroup, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
    """Kafka's supportsClassicProtocols: the consumer protocol type, and a protocol name every
    other classic member also supports."""
    if protocol_type != PROTOCOL_TYPE or not protocols:
        return False
    names = {name for name, _ in protocols}
    for m in group.members.values():
        if m.classic is not None:
            names &= {name for name, _ in m.classic.protocols}
    return bool(names)


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember | ErrorCode:
    if instance_id is not None:
        holder = group.static.get(instance_id)
        if holder is None:
            return ErrorCode.unknown_member_id
        if holder != member_id:
            return ErrorCode.fenced_instance_id
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        return ErrorCode.unknown_member_id
    return member


def _must_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's three reasons for a classic member to rejoin: a newer group epoch, partitions
    to revoke, or partitions it waits for that are now free."""
    return (member.member_epoch < group.group_epoch
            or member.state == MemberState.UNREVOKED_PARTITIONS
            or (member.state == MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member)))


def _told_to_rejoin(member: ConsumerMember, now_ms: int) -> None:
    assert member.classic is not None
    if member.classic.join_deadline_ms is None:
        member.classic.join_deadline_ms = now_ms + member.rebalance_timeout_ms


def classic_join(groups: ConsumerGroups, group: ConsumerGroup, req: JoinRequest, now_ms: int) -> JoinResult:
    """JoinGroup of a classic member to a consumer group with members, answered at once."""
    member_id = req.member_id or str(uuid.uuid4())
    if not _supports(group, req.protocol_type, req.protocols):
        return JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id)
    if not req.member_id and req.require_known_member_id and req.group_instance_id is None:
        return JoinResult(ErrorCode.member_id_required, member_id)
    try:
        subscription = decode_subscription(req.protocols[0][1])
    except MalformedProtocol:
        return JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id)
    member = group.members.get(member_id)
    if req.group_instance_id is not None:
        holder = group.static.get(req.group_instance_id)
        if holder is not None and holder != member_id:
            if req.member_id:
                return JoinResult(ErrorCode.fenced_instance_id, req.member_id)
            # A restarted static member takes over its predecessor's place and partitions.
            member = group.rename(holder, member_id)
    changed = False
    if member is None:
        if len(group.members) >= groups.settings.max_size:
            return JoinResult(ErrorCode.group_max_size_reached, member_id)
        member = ConsumerMember(member_id, instance_id=req.group_instance_id)
        group.members[member_id] = member
        if req.group_instance_id is not None:
            group.static[req.group_instance_id] = member_id
        changed = True
    elif member.classic is None:
        return JoinResult(ErrorCode.unknown_member_id, member_id)  # a consumer-protocol member's id
    member.classic = ClassicMembership(req.session_timeout_ms, req.protocols, subscription.version)
    member.client_id, member.client_host = req.client_id, req.client_host
    member.rack_id = subscription.rack_id
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    topics = tuple(sorted(subscription.topics))
    if topics != member.topic_names:
        member.topic_names = topics
        changed = True
    groups.advance(group, member, changed, subscription.owned, now_ms)
    member.session_deadline_ms = now_ms + req.session_timeout_ms
    member.classic.sync_deadline_ms = now_ms + member.rebalance_timeout_ms
    member.classic.join_deadline_ms = None
    return JoinResult(ErrorCode.none, member_id, member.member_epoch, PROTOCOL_TYPE, req.protocols[0][0])


def classic_sync(group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int,
                 now_ms: int) -> SyncResult:
    """SyncGroup: the member's partitions as its reconciliation left them."""
    member = _classic_member(group, member_id, instance_id)
    if isinstance(member, ErrorCode):
        return SyncResult(member)
    assert member.classic is not None
    if generation_id != member.member_epoch:
        return SyncResult(ErrorCode.illegal_generation)
    if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
        _told_to_rejoin(member, now_ms)
        return SyncResult(ErrorCode.rebalance_in_progress)
    member.classic.sync_deadline_ms = None
    member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
    return SyncResult(ErrorCode.none, PROTOCOL_TYPE, member.classic.protocols[0][0],
                      encode_assignment(member.assigned, member.classic.version))


def classic_heartbeat(group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int,
                      now_ms: int) -> ErrorCode:
    member = _classic_member(group, member_id, instance_id)
    if isinstance(member, ErrorCode):
        return member
    assert member.classic is not None
    if generation_id != member.member_epoch:
        return ErrorCode.illegal_generation
    member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
    if _must_rejoin(group, member):
        _told_to_rejoin(member, now_ms)
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def classic_leave(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ErrorCode:
    """LeaveGroup of one classic member (by instance id alone when ``member_id`` is empty,
    as admin tools remove static members)."""
    if instance_id is not None and not member_id:
        member_id = group.static.get(instance_id, "")
    member = _classic_member(group, member_id, instance_id)
    if isinstance(member, ErrorCode):
        return member
    group.remove(member.member_id)
    return ErrorCode.none
