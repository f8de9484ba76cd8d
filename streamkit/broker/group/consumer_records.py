"""Consumer groups (KIP-848) in ``__consumer_offsets``: Kafka's six record types, and the
journal that writes a group's changes and rebuilds the groups on load.

Keys (int16 version, then int16-length strings, as the classic keys in ``records.py``):

    3 ConsumerGroupMetadataKey                  group
    4 ConsumerGroupPartitionMetadataKey         group
    5 ConsumerGroupMemberMetadataKey            group, member
    6 ConsumerGroupTargetAssignmentMetadataKey  group
    7 ConsumerGroupTargetAssignmentMemberKey    group, member
    8 ConsumerGroupCurrentMemberAssignmentKey   group, member

Values are version 0 of Kafka's flexible schemas (compact strings and arrays, a tagged-field
section at the end of each struct), topics by id:

    3 Epoch int32
    4 Topics [TopicId uuid, TopicName string, NumPartitions int32, PartitionMetadata []]
    5 InstanceId string?, RackId string?, ClientId, ClientHost, SubscribedTopicNames [string],
      SubscribedTopicRegex string?, RebalanceTimeoutMs int32, ServerAssignor string?,
      tag 0: ClassicMemberMetadata {SessionTimeoutMs int32, SupportedProtocols [Name, Metadata bytes]}
    6 AssignmentEpoch int32
    7 TopicPartitions [TopicId uuid, Partitions [int32]]
    8 MemberEpoch int32, PreviousMemberEpoch int32, State int8,
      AssignedPartitions [TopicId, Partitions], PartitionsPendingRevocation [TopicId, Partitions]

The journal keeps, per group, the value last written under each key. After a change it
encodes the group's records again and appends only those whose bytes differ, plus a
tombstone for each key that no longer exists (a member that left): Kafka's incremental
records, found by comparison instead of by hand at every place that changes a group.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from streamkit.broker.group.consumer_group import (
    ClassicMembership,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from streamkit.broker.group.consumer_protocol import protocol_version
from streamkit.broker.group.records import Reader, Writer

__all__ = ["CONSUMER_KEY_VERSIONS", "ConsumerGroupJournal"]

TopicPartition = tuple[str, int]
_EPOCH, _SUBSCRIPTION, _MEMBER, _TARGET_EPOCH, _TARGET_MEMBER, _CURRENT = 3, 4, 5, 6, 7, 8
CONSUMER_KEY_VERSIONS = frozenset(range(_EPOCH, _CURRENT + 1))
_MEMBER_KEYS = frozenset({_MEMBER, _TARGET_MEMBER, _CURRENT})
_STATE_BYTES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {v: k for k, v in _STATE_BYTES.items()}
_CLASSIC_TAG = 0


def _key(version: int, group: str, member: str | None = None) -> bytes:
    w = Writer().i16(version).string(group)
    if member is not None:
        w.string(member)
    return bytes(w.buf)


def decode_consumer_key(data: bytes) -> tuple[int, str, str | None] | None:
    """(version, group, member or None) for a consumer group key, None for any other key."""
    r = Reader(data)
    version = r.i16()
    if version not in CONSUMER_KEY_VERSIONS:
        return None
    group = r.string() or ""
    return version, group, (r.string() or "") if version in _MEMBER_KEYS else None


# -- values ------------------------------------------------------------------------------

def _partitions(w: Writer, parts: Iterable[TopicPartition], ids: Mapping[str, uuid.UUID]) -> None:
    by_topic: dict[str, list[int]] = {}
    for topic, p in parts:
        if topic in ids:  # a deleted topic's partitions are gone
            by_topic.setdefault(topic, []).append(p)
    w.uvarint(len(by_topic) + 1)
    for topic in sorted(by_topic):
        w.uuid(ids[topic]).uvarint(len(by_topic[topic]) + 1)
        for p in sorted(by_topic[topic]):
            w.i32(p)
        w.no_tags()


def _read_partitions(r: Reader, names: Mapping[uuid.UUID, str]) -> set[TopicPartition]:
    out: set[TopicPartition] = set()
    for _ in range(r.uvarint() - 1):
        topic_id = r.uuid()
        parts = [r.i32() for _ in range(r.uvarint() - 1)]
        r.tags()
        if topic_id in names:
            out.update((names[topic_id], p) for p in parts)
    return out


def _member_value(m: ConsumerMember) -> bytes:
    w = Writer().i16(0).compact_string(m.instance_id).compact_string(m.rack_id)
    w.compact_string(m.client_id).compact_string(m.client_host).uvarint(len(m.topic_names) + 1)
    for t in m.topic_names:
        w.compact_string(t)
    w.compact_string(m.topic_regex).i32(m.rebalance_timeout_ms).compact_string(m.server_assignor)
    if m.classic is None:
        return bytes(w.no_tags().buf)
    tagged = Writer().i8(1).i32(m.classic.session_timeout_ms).uvarint(len(m.classic.protocols) + 1)
    for name, meta in m.classic.protocols:
        tagged.compact_string(name).compact_bytes(meta).no_tags()
    tagged.no_tags()
    w.uvarint(1).uvarint(_CLASSIC_TAG).uvarint(len(tagged.buf))
    w.buf += tagged.buf
    return bytes(w.buf)


def _read_member(r: Reader, member_id: str) -> ConsumerMember:
    r.i16()
    m = ConsumerMember(member_id)
    m.instance_id, m.rack_id = r.compact_string(), r.compact_string()
    m.client_id, m.client_host = r.compact_string() or "", r.compact_string() or ""
    m.topic_names = tuple(r.compact_string() or "" for _ in range(r.uvarint() - 1))
    m.topic_regex = r.compact_string()
    m.rebalance_timeout_ms = r.i32()
    m.server_assignor = r.compact_string()
    classic = r.tags().get(_CLASSIC_TAG)
    if classic is not None:
        c = Reader(classic)
        if c.i8() >= 0:
            session = c.i32()
            protocols = []
            for _ in range(c.uvarint() - 1):
                name, meta = c.compact_string() or "", c.compact_bytes()
                c.tags()
                protocols.append((name, meta))
            version = protocol_version(protocols[0][1]) if protocols and len(protocols[0][1]) >= 2 else 0
            m.classic = ClassicMembership(session, tuple(protocols), version)
    return m


def _current_value(m: ConsumerMember, ids: Mapping[str, uuid.UUID]) -> bytes:
    w = Writer().i16(0).i32(m.member_epoch).i32(m.previous_epoch).i8(_STATE_BYTES[m.state])
    _partitions(w, m.assigned, ids)
    _partitions(w, m.pending_revocation, ids)
    return bytes(w.no_tags().buf)


def _epoch_value(epoch: int) -> bytes:
    return bytes(Writer().i16(0).i32(epoch).no_tags().buf)


def _subscription_value(sizes: Mapping[str, int], ids: Mapping[str, uuid.UUID]) -> bytes:
    known = [t for t in sorted(sizes) if t in ids]
    w = Writer().i16(0).uvarint(len(known) + 1)
    for t in known:
        w.uuid(ids[t]).compact_string(t).i32(sizes[t]).uvarint(1).no_tags()
    return bytes(w.no_tags().buf)


def _read_subscription(r: Reader, names: Mapping[uuid.UUID, str]) -> dict[str, int]:
    r.i16()
    out = {}
    for _ in range(r.uvarint() - 1):
        topic_id, _name, count = r.uuid(), r.compact_string(), r.i32()
        for _p in range(r.uvarint() - 1):  # PartitionMetadata: partition, racks (unused)
            r.i32()
            for _rack in range(r.uvarint() - 1):
                r.compact_string()
            r.tags()
        r.tags()
        if topic_id in names:
            out[names[topic_id]] = count
    return out


def _group_level(group: ConsumerGroup, ids: Mapping[str, uuid.UUID]) -> dict[bytes, bytes]:
    g = group.group_id
    return {_key(_EPOCH, g): _epoch_value(group.group_epoch),
            _key(_SUBSCRIPTION, g): _subscription_value(group.subscribed_sizes, ids),
            _key(_TARGET_EPOCH, g): _epoch_value(group.assignment_epoch)}


def _member_records(group: ConsumerGroup, m: ConsumerMember, ids: Mapping[str, uuid.UUID]) -> dict[bytes, bytes]:
    g, mid = group.group_id, m.member_id
    target = Writer().i16(0)
    _partitions(target, group.target.get(mid, ()), ids)
    return {_key(_MEMBER, g, mid): _member_value(m), _key(_TARGET_MEMBER, g, mid): bytes(target.no_tags().buf),
            _key(_CURRENT, g, mid): _current_value(m, ids)}


def group_records(group: ConsumerGroup, ids: Mapping[str, uuid.UUID]) -> dict[bytes, bytes]:
    """Every record (key -> value) that describes ``group`` now."""
    out = _group_level(group, ids)
    for m in group.members.values():
        out.update(_member_records(group, m, ids))
    return out


# -- replay ------------------------------------------------------------------------------

@dataclass
class _Loaded:
    """What the records of one group said, as read so far."""

    epoch: int | None = None
    assignment_epoch: int = 0
    sizes: dict[str, int] = field(default_factory=dict)
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    targets: dict[str, set[TopicPartition]] = field(default_factory=dict)
    current: dict[str, tuple[int, int, MemberState, set[TopicPartition], set[TopicPartition]]] = field(
        default_factory=dict)


class ConsumerGroupJournal:
    """Writes consumer groups to ``__consumer_offsets`` and reads them back.

    ``topic_ids`` maps each existing topic's name to its id (Kafka's records name topics by
    id, so a topic deleted and recreated under the same name is not mistaken for the old one).
    """

    def __init__(self, topic_ids: Callable[[], Mapping[str, uuid.UUID]]) -> None:
        self.topic_ids = topic_ids
        self.written: dict[str, dict[bytes, bytes]] = {}
        # Per group, what a change limited to some members cannot have touched elsewhere:
        # the target assignment's epoch and the member ids, when the records were written.
        self._shape: dict[str, tuple[int, frozenset[str]]] = {}

    # -- writing ---------------------------------------------------------------------------

    def changes(self, group_id: str, group: ConsumerGroup | None,
                touched: Iterable[str] | None = None) -> list[tuple[bytes, bytes | None]]:
        """The records to append for ``group`` to be stored as it is now (``None``: the group
        is gone, every record of it becomes a tombstone). The caller appends them, in order.

        ``touched``: the only members whose own records can have changed (a heartbeat moves
        its member alone, unless it brought a new target assignment or a membership
        change): the others are not encoded again, so a heartbeat costs one member's records
        rather than the whole group's."""
        before = self.written.get(group_id, {})
        now: dict[bytes, bytes] = {}
        if group is not None:
            ids = self.topic_ids()
            shape = (group.assignment_epoch, frozenset(group.members))
            if touched is not None and self._shape.get(group_id) == shape:
                now = {**before, **_group_level(group, ids)}
                for mid in touched:
                    if mid in group.members:
                        now.update(_member_records(group, group.members[mid], ids))
            else:
                now = group_records(group, ids)
            self._shape[group_id] = shape
        else:
            self._shape.pop(group_id, None)
        out: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in now.items() if before.get(k) != v]
        # Tombstones for members first, the group's own keys last, as Kafka orders a deletion.
        gone = sorted((k for k in before if k not in now), key=lambda k: -len(k))
        out.extend((k, None) for k in gone)
        if now:
            self.written[group_id] = now
        else:
            self.written.pop(group_id, None)
        return out

    def forget(self, group_ids: Callable[[str], bool]) -> None:
        """Drop what is known of the groups ``group_ids`` accepts (their partition moved to
        another coordinator)."""
        for group_id in [g for g in self.written if group_ids(g)]:
            del self.written[group_id]
        for group_id in [g for g in self._shape if group_ids(g)]:
            del self._shape[group_id]

    # -- loading ---------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """Apply one record of ``__consumer_offsets``; False when it is not a consumer group's."""
        decoded = decode_consumer_key(key)
        if decoded is None:
            return False
        written = self.written.setdefault(decoded[1], {})
        if value is None:
            written.pop(key, None)
        else:
            written[key] = value
        if not written:
            del self.written[decoded[1]]
        return True

    def groups(self) -> dict[str, ConsumerGroup]:
        """The groups the replayed records describe: only those whose epoch record stands
        (the others were deleted or converted to classic groups)."""
        names = {v: k for k, v in self.topic_ids().items()}
        out = {}
        for group_id, records in self.written.items():
            loaded = _Loaded()
            for key, value in records.items():
                decoded = decode_consumer_key(key)
                assert decoded is not None
                self._read(loaded, decoded[0], decoded[2] or "", Reader(value), names)
            if loaded.epoch is not None:
                out[group_id] = self._build(group_id, loaded)
        return out

    @staticmethod
    def _read(loaded: _Loaded, version: int, member_id: str, r: Reader, names: Mapping[uuid.UUID, str]) -> None:
        if version == _EPOCH:
            r.i16()
            loaded.epoch = r.i32()
        elif version == _TARGET_EPOCH:
            r.i16()
            loaded.assignment_epoch = r.i32()
        elif version == _SUBSCRIPTION:
            loaded.sizes = _read_subscription(r, names)
        elif version == _MEMBER:
            loaded.members[member_id] = _read_member(r, member_id)
        elif version == _TARGET_MEMBER:
            r.i16()
            loaded.targets[member_id] = _read_partitions(r, names)
        else:
            r.i16()
            epoch, previous, state = r.i32(), r.i32(), _STATES.get(r.i8(), MemberState.STABLE)
            loaded.current[member_id] = (epoch, previous, state, _read_partitions(r, names),
                                         _read_partitions(r, names))

    @staticmethod
    def _build(group_id: str, loaded: _Loaded) -> ConsumerGroup:
        group = ConsumerGroup(group_id)
        group.group_epoch = loaded.epoch or 0
        group.assignment_epoch = loaded.assignment_epoch
        group.subscribed_sizes = loaded.sizes
        for mid, member in loaded.members.items():
            if mid in loaded.current:
                epoch, previous, state, assigned, pending = loaded.current[mid]
                member.member_epoch, member.previous_epoch, member.state = epoch, previous, state
                # A partition is never restored to two members, whatever the records say.
                member.assigned = {tp for tp in assigned if tp not in group.owners}
                member.pending_revocation = {tp for tp in pending if tp not in group.owners}
                for tp in member.assigned | member.pending_revocation:
                    group.owners[tp] = mid
            group.members[mid] = member
            if member.instance_id is not None:
                group.static[member.instance_id] = mid
            group.target[mid] = loaded.targets.get(mid, set())
        return group
