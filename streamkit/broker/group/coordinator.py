"""GroupCoordinator: every consumer group of this broker, their committed offsets, and the
``__consumer_offsets`` topic that makes both survive a restart.

Pure and synchronous: it appends to the internal topic through an injected ``OffsetsStore``
and returns deliveries for deferred JoinGroup/SyncGroup answers (see ``group.py``). The
asyncio server owns the futures and the timer that calls ``tick``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from streamkit.broker.group.consumer_group import (
    LEAVE_GROUP_EPOCH,
    ConsumerGroup,
    ConsumerGroups,
    ConsumerSettings,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
)
from streamkit.broker.group.consumer_protocol import MalformedProtocol
from streamkit.broker.group.consumer_records import ConsumerGroupJournal
from streamkit.broker.group.group import (
    Delivery,
    Group,
    GroupSettings,
    JoinRequest,
    JoinResult,
    Member,
    Outcome,
    SyncResult,
)
from streamkit.broker.group.migration import (
    can_downgrade,
    can_upgrade,
    classic_heartbeat,
    classic_join,
    classic_leave,
    classic_sync,
    to_classic_group,
    to_consumer_group,
)
from streamkit.broker.group.records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for_group,
)
from streamkit.broker.group.state import GroupState
from streamkit.broker.ownership import OwnedPartitions
from streamkit.log.batch import BatchHeader
from streamkit.log.records import ControlType, Record, build_batch, decode_control_key

__all__ = ["CommitRequest", "GroupCoordinator", "GroupDescription", "OffsetsStore"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TopicPartition = tuple[str, int]


class OffsetsStore(Protocol):
    """Where the coordinator's records go: partitions of ``__consumer_offsets``. ``batches``
    yields each stored batch's header with its records (from the log start offset on), so
    that a replay can tell transactional offsets and transaction markers apart."""

    def append(self, partition: int, batch: bytes) -> int | None: ...

    def batches(self, partition: int) -> Iterable[tuple[BatchHeader, list[Record]]]: ...


@dataclass(frozen=True, slots=True)
class CommitRequest:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[Member, ...]


def _java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


class GroupCoordinator:
    def __init__(
        self,
        settings: GroupSettings,
        num_partitions: int,
        store: OffsetsStore,
        clock: Callable[[], int],
        metadata_max_bytes: int = 4096,
        consumer: ConsumerGroups | None = None,
        topic_ids: Callable[[], Mapping[str, uuid.UUID]] | None = None,
    ) -> None:
        """``topic_ids``: every topic's id by name, for the consumer group records (which
        name topics by id); by default an id derived from the name."""
        self.settings = settings
        self.num_partitions = num_partitions
        self.store = store
        self.clock = clock
        self.metadata_max_bytes = metadata_max_bytes
        self.groups: dict[str, Group] = {}
        # Groups of the new protocol (KIP-848). A group id is in ``groups`` (classic) or in
        # ``consumer.groups``, never both: the upgrade/downgrade paths move it across.
        self.consumer = consumer or ConsumerGroups(ConsumerSettings(), dict, clock)
        self.journal = ConsumerGroupJournal(topic_ids or self._derived_topic_ids)
        self.offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        self._persisted: dict[str, tuple[int, GroupState, tuple[str, ...]]] = {}
        # Offsets committed inside a transaction (TxnOffsetCommit), by producer id: written
        # to the topic at once, visible only when the transaction's COMMIT marker is.
        self.pending_txn: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]] = {}
        # The partitions of __consumer_offsets this coordinator answers for (``load_partition``).
        self.owned = OwnedPartitions()

    def _derived_topic_ids(self) -> dict[str, uuid.UUID]:
        return {name: uuid.uuid5(uuid.NAMESPACE_URL, name) for name in self.consumer.topics()}

    # -- loading -------------------------------------------------------------------------

    def load(self) -> None:
        """Replay every partition of ``__consumer_offsets``: what a single broker, which
        coordinates them all, does at start."""
        for partition in range(self.num_partitions):
            for _ in self.load_partition(partition):
                pass
        log.info("loaded %d classic and %d consumer groups from %s", len(self.groups),
                 len(self.consumer.groups), OFFSETS_TOPIC)

    def load_partition(self, partition: int) -> Iterator[None]:
        """Start coordinating ``partition``: it is loading (requests for its groups get
        COORDINATOR_LOAD_IN_PROGRESS) until the returned iterator is exhausted, which
        replays the partition's log (latest offsets per group and partition, each group's
        last generation: members come back Stable and keep heartbeating) and makes it
        active. It yields after each batch, so that a broker can load on its event loop.

        The replay goes into a staging coordinator adopted at the end: a half-replayed group
        is never seen by a request or a timer. The adoption happens in the step that finds
        the end of the log, so a record appended meanwhile (a transaction marker) is read."""
        self.owned.start_loading(partition)
        return self._replay_partition(partition)

    def _replay_partition(self, partition: int) -> Iterator[None]:
        staging = GroupCoordinator(
            self.settings, self.num_partitions, self.store, self.clock, self.metadata_max_bytes,
            ConsumerGroups(self.consumer.settings, self.consumer.topics, self.clock, self.consumer.timeouts),
            self.journal.topic_ids)
        now = self.clock()
        for header, records in self.store.batches(partition):
            if header.is_control:
                if records and records[0].key is not None:
                    staging.complete_txn(header.producer_id,
                                         decode_control_key(records[0].key) == ControlType.COMMIT)
            else:
                txn_pid = header.producer_id if header.is_transactional else None
                for record in records:
                    staging._replay(record, now, txn_pid)
            yield
        staging._finish_replay(self.clock())
        self._adopt(staging, partition)

    def _finish_replay(self, now: int) -> None:
        for group_id, group in self.journal.groups().items():
            self._resume(group, now)
            self.consumer.groups[group_id] = group
            self.groups.pop(group_id, None)
            self._persisted.pop(group_id, None)
        for group_id in self.offsets:
            if group_id not in self.consumer.groups:
                self.groups.setdefault(group_id, Group(group_id, self.settings))

    def _adopt(self, staging: GroupCoordinator, partition: int) -> None:
        self._forget(partition)
        self.groups.update(staging.groups)
        self.consumer.groups.update(staging.consumer.groups)
        self.offsets.update(staging.offsets)
        self._persisted.update(staging._persisted)
        self.journal.written.update(staging.journal.written)
        for producer_id, groups in staging.pending_txn.items():
            self.pending_txn.setdefault(producer_id, {}).update(groups)
        self.owned.activate(partition)

    def unload_partition(self, partition: int) -> set[str]:
        """Stop coordinating ``partition`` (another broker leads it now): its groups,
        offsets and pending transactional offsets are dropped; requests for them get
        NOT_COORDINATOR. Returns the ids of the groups dropped."""
        self.owned.drop(partition)
        return self._forget(partition)

    def _forget(self, partition: int) -> set[str]:
        def mine(group_id: str) -> bool:
            return self.partition_of(group_id) == partition

        dropped = {g for g in (*self.groups, *self.consumer.groups, *self.offsets) if mine(g)}
        for group_id in dropped:
            self.groups.pop(group_id, None)
            self.consumer.groups.pop(group_id, None)
            self.offsets.pop(group_id, None)
            self._persisted.pop(group_id, None)
        self.journal.forget(mine)
        for producer_id in list(self.pending_txn):
            pending = self.pending_txn[producer_id]
            for group_id in [g for g in pending if mine(g)]:
                del pending[group_id]
            if not pending:
                del self.pending_txn[producer_id]
        return dropped

    def _resume(self, group: ConsumerGroup, now: int) -> None:
        """A consumer group read back from the topic: every member gets a full session (and
        a revoking one its rebalance timeout) to heartbeat again with the epoch it knows, as
        Kafka schedules the timers of a loaded group."""
        session_ms = self.consumer.timeouts(group.group_id)[0]
        for m in group.members.values():
            m.session_deadline_ms = now + (m.classic.session_timeout_ms if m.classic is not None else session_ms)
            if m.state == MemberState.UNREVOKED_PARTITIONS:
                m.revocation_deadline_ms = now + m.rebalance_timeout_ms

    def _replay(self, record: Record, now: int, txn_pid: int | None) -> None:
        if record.key is None or self.journal.replay(record.key, record.value):
            return
        key = decode_key(record.key)
        if key is None:
            return
        if len(key) == 3:
            group, topic, part = key
            if txn_pid is not None:
                if record.value is not None:
                    self.pending_txn.setdefault(txn_pid, {}).setdefault(group, {})[(topic, part)] = (
                        decode_offset_value(record.value))
            elif record.value is None:
                cache = self.offsets.get(group, {})
                cache.pop((topic, part), None)
                if not cache:
                    self.offsets.pop(group, None)
            else:
                self.offsets.setdefault(group, {})[(topic, part)] = decode_offset_value(record.value)
            return
        (group,) = key
        if record.value is None:
            # Offsets have tombstones of their own (a deleted group's are written with it):
            # a group converted to a consumer group keeps them.
            self.groups.pop(group, None)
            self._persisted.pop(group, None)
        else:
            self.groups[group] = self._restore(group, decode_group_value(record.value), now)

    def _restore(self, group_id: str, value: GroupMetadataValue, now_ms: int) -> Group:
        group = Group(group_id, self.settings, loaded_members=bool(value.members))
        group.generation_id = value.generation_id
        group.protocol_type = value.protocol_type or None
        if value.members:
            group.protocol_name = value.protocol_name
            group.leader_id = value.leader_id
            for m in value.members:
                group.members[m.member_id] = Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    protocol_type=value.protocol_type,
                    protocols=((value.protocol_name or "", m.subscription),),
                    last_heartbeat_ms=now_ms,
                    assignment=m.assignment,
                )
                if m.group_instance_id is not None:
                    group.static_members[m.group_instance_id] = m.member_id
        self._persisted[group_id] = self._persist_key(group)
        return group

    # -- persistence -----------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        """The partition of ``__consumer_offsets`` that holds ``group_id``."""
        return partition_for_group(group_id, self.num_partitions)

    @staticmethod
    def _persist_key(group: Group) -> tuple[int, GroupState, tuple[str, ...]]:
        # The member ids too: a restarted static member changes its id without a new generation.
        return group.generation_id, group.state, tuple(group.members)

    def _persist_group(self, group: Group, converted: bool = False) -> None:
        """Write the group's metadata when it reaches Stable or Empty in a new generation, or
        when a static member's new id replaces its old one in a Stable group; or at once
        when it was a consumer group until now (``converted``), as Kafka writes it then."""
        if group.state not in (GroupState.STABLE, GroupState.EMPTY) and not converted:
            return
        key = self._persist_key(group)
        if self._persisted.get(group.group_id) == key:
            return
        proto = group.protocol_name or ""
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation_id=group.generation_id,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id,
            state_timestamp=self.clock(),
            members=tuple(
                MemberMetadata(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(proto), m.assignment,
                )
                for m in group.members.values()
            ),
        )
        record = Record(key=encode_group_key(group.group_id), value=encode_group_value(value), timestamp=self.clock())
        self.store.append(self.partition_of(group.group_id), build_batch([record]))
        self._persisted[group.group_id] = key

    def _persist_consumer(self, group_id: str, member_id: str | None = None) -> None:
        """Write what changed in a consumer group (all tombstones when it is gone);
        ``member_id``: the one member the request could have changed (see the journal)."""
        touched = None if member_id is None else (member_id,)
        changes = self.journal.changes(group_id, self.consumer.get(group_id), touched)
        if changes:
            now = self.clock()
            self.store.append(self.partition_of(group_id), build_batch(
                [Record(key=k, value=v, timestamp=now) for k, v in changes]))

    def _drop_classic(self, group_id: str) -> None:
        """The classic group is gone (it became a consumer group): its metadata tombstone,
        offsets kept."""
        del self.groups[group_id]
        if self._persisted.pop(group_id, None) is not None:
            record = Record(key=encode_group_key(group_id), value=None, timestamp=self.clock())
            self.store.append(self.partition_of(group_id), build_batch([record]))

    def _after(self, group: Group, deliveries: list[Delivery]) -> list[Delivery]:
        self._persist_group(group)
        return deliveries

    # -- membership ------------------------------------------------------------------------

    def get(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def _get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            group = Group(group_id, self.settings)
            self.groups[group_id] = group
        return group

    def join(self, group_id: str, req: JoinRequest) -> Outcome:
        if not group_id:
            return Outcome(JoinResult(ErrorCode.invalid_group_id, req.member_id))
        modern = self.consumer.get(group_id)
        if modern is not None:
            if modern.members:
                # A classic member of a consumer group (Kafka, whatever the migration policy).
                if not self.settings.min_session_timeout_ms <= req.session_timeout_ms <= self.settings.max_session_timeout_ms:
                    return Outcome(JoinResult(ErrorCode.invalid_session_timeout, req.member_id))
                result = classic_join(self.consumer, modern, req, self.clock())
                self._persist_consumer(group_id, result.member_id)
                return Outcome(result)
            self.consumer.delete(group_id)  # Kafka's offline downgrade of an empty group
            self._persist_consumer(group_id)
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            if req.member_id:  # Kafka creates a group only for a member without an id
                return Outcome(JoinResult(ErrorCode.unknown_member_id, req.member_id))
            group = self._get_or_create(group_id)
        outcome = group.join(req, self.clock())
        self._after(group, outcome.deliveries)
        return outcome

    def sync(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
             assignments: dict[str, bytes]) -> Outcome:
        modern = self.consumer.get(group_id)
        if modern is not None:
            return Outcome(classic_sync(modern, member_id, instance_id, generation_id, self.clock()))
        group = self.groups.get(group_id)
        if group is None:
            return Outcome(SyncResult(ErrorCode.unknown_member_id))
        outcome = group.sync(member_id, instance_id, generation_id, assignments, self.clock())
        self._after(group, outcome.deliveries)
        return outcome

    def consumer_heartbeat(self, req: HeartbeatRequest) -> tuple[HeartbeatResult, list[Delivery]]:
        """ConsumerGroupHeartbeat, and the answers it makes due to classic members' deferred
        requests. A new-protocol member joining a classic group converts it: an empty one
        always (Kafka's offline upgrade), one with members when
        group.consumer.migration.policy allows the online upgrade (``migration.py``).
        Committed offsets stay either way. A consumer-protocol member leaving the last one
        among classic members converts the group back when the policy allows a downgrade."""
        deliveries: list[Delivery] = []
        classic = self.groups.get(req.group_id)
        if classic is not None and req.group_id not in self.consumer.groups and req.member_epoch == 0:
            if classic.state in (GroupState.EMPTY, GroupState.DEAD):
                self._drop_classic(req.group_id)
            else:
                refused = HeartbeatResult(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group.",
                                          req.member_id, req.member_epoch)
                if not can_upgrade(classic, self.consumer.settings):
                    return refused, []
                try:
                    modern = to_consumer_group(classic, self.consumer, self.clock())
                except MalformedProtocol:
                    return refused, []
                deliveries = classic.awaiting()
                self._drop_classic(req.group_id)
                self.consumer.groups[req.group_id] = modern
                log.info("group %s upgraded from classic to consumer with %d members", req.group_id,
                         len(modern.members))
        leaving = self.consumer.get(req.group_id) is not None and req.member_epoch == LEAVE_GROUP_EPOCH
        result = self.consumer.heartbeat(req)
        if leaving and result.error == ErrorCode.none:
            deliveries += self._maybe_downgrade(req.group_id)
        self._persist_consumer(req.group_id, result.member_id or req.member_id)
        return result, deliveries

    def _maybe_downgrade(self, group_id: str) -> list[Delivery]:
        """After a consumer-protocol member left: Kafka's online downgrade."""
        modern = self.consumer.get(group_id)
        if modern is None or not can_downgrade(modern, self.consumer.settings, self.settings.max_size):
            return []
        del self.consumer.groups[group_id]
        self._persist_consumer(group_id)
        classic = to_classic_group(modern, self.settings, self.clock())
        self.groups[group_id] = classic
        self._persist_group(classic, converted=True)
        log.info("group %s downgraded from consumer to classic with %d members", group_id, len(classic.members))
        return []

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        modern = self.consumer.get(group_id)
        if modern is not None:
            return classic_heartbeat(modern, member_id, instance_id, generation_id, self.clock())
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return group.heartbeat(member_id, instance_id, generation_id, self.clock())

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode], list[Delivery]]:
        modern = self.consumer.get(group_id)
        if modern is not None:
            codes = [classic_leave(modern, m, i) for m, i in members]
            self._persist_consumer(group_id)
            return (codes[0] if len(codes) == 1 else ErrorCode.none), codes, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id, [ErrorCode.unknown_member_id] * len(members), []
        errors, deliveries = [], []
        for member_id, instance_id in members:
            error, more = group.leave(member_id, instance_id, self.clock())
            errors.append(error)
            deliveries.extend(more)
        top = errors[0] if len(errors) == 1 else ErrorCode.none
        return top, errors, self._after(group, deliveries)

    def tick(self) -> list[Delivery]:
        now = self.clock()
        deliveries: list[Delivery] = []
        if (d := self.consumer.next_deadline()) is not None and now >= d:
            modern = {(g.group_id, mid) for g in self.consumer.groups.values()
                      for mid, m in g.members.items() if m.classic is None}
            removed = self.consumer.tick()
            downgradable = {g for g, mid in removed if (g, mid) in modern}
            for group_id in {g for g, _ in removed}:
                if group_id in downgradable:
                    deliveries += self._maybe_downgrade(group_id)
                self._persist_consumer(group_id)
        for group in list(self.groups.values()):
            deadline = group.next_deadline()
            if deadline is not None and now >= deadline:
                deliveries.extend(self._after(group, group.tick(now)))
        return deliveries

    def next_deadline(self) -> int | None:
        deadlines = [d for g in self.groups.values() if (d := g.next_deadline()) is not None]
        if (modern := self.consumer.next_deadline()) is not None:
            deadlines.append(modern)
        return min(deadlines) if deadlines else None

    # -- offsets -------------------------------------------------------------------------

    def validate_commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        """Kafka's rules for who may commit (GroupCoordinator.handleCommitOffsets). The empty
        group id is valid here, as in Kafka (offset commits predate group management). In a
        consumer group (KIP-848) ``generation_id`` is the member epoch."""
        if group_id in self.consumer.groups:
            return self.consumer.validate_offset_commit(group_id, member_id, generation_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation
        if group.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if group.is_static_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if generation_id < 0 and group.state == GroupState.EMPTY:
            return ErrorCode.none
        if not group.has_member(member_id):
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
               offsets: list[CommitRequest]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self.validate_commit(group_id, member_id, instance_id, generation_id)
        if error != ErrorCode.none:
            return error, {}
        now = self.clock()
        if group_id not in self.consumer.groups:
            group = self._get_or_create(group_id)
            if member_id in group.members:
                group.members[member_id].last_heartbeat_ms = now
        records, accepted, results = self._offset_records(group_id, offsets, now)
        if records:
            self.store.append(self.partition_of(group_id), build_batch(records))
            cache = self.offsets.setdefault(group_id, {})
            for tp, value in accepted:
                cache[tp] = value
        return ErrorCode.none, results

    def _offset_records(self, group_id: str, offsets: list[CommitRequest], now: int) -> tuple[
            list[Record], list[tuple[TopicPartition, OffsetCommitValue]], dict[TopicPartition, ErrorCode]]:
        """The offset-commit records of ``offsets`` (plain or transactional), the values they
        carry, and each partition's result: metadata longer than offset.metadata.max.bytes
        (Kafka counts String.length()) is refused with OFFSET_METADATA_TOO_LARGE."""
        results: dict[TopicPartition, ErrorCode] = {}
        records = []
        accepted: list[tuple[TopicPartition, OffsetCommitValue]] = []
        for c in offsets:
            metadata = c.metadata or ""
            if _java_length(metadata) > self.metadata_max_bytes:
                results[(c.topic, c.partition)] = ErrorCode.offset_metadata_too_large
                continue
            value = OffsetCommitValue(c.offset, c.leader_epoch, metadata, now)
            records.append(Record(key=encode_offset_key(group_id, c.topic, c.partition),
                                  value=encode_offset_value(value), timestamp=now))
            accepted.append(((c.topic, c.partition), value))
            results[(c.topic, c.partition)] = ErrorCode.none
        return records, accepted, results

    def commit_txn(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                   producer_id: int, producer_epoch: int,
                   offsets: list[CommitRequest]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """TxnOffsetCommit: the offsets go to the topic as a transactional batch of
        ``producer_id`` and stay pending until its transaction's marker (``complete_txn``).
        The group checks are KIP-447's: a member (generation >= 0) must be current."""
        if group_id in self.consumer.groups and (generation_id >= 0 or member_id):
            error = self.consumer.validate_offset_commit(group_id, member_id, generation_id)
            if error != ErrorCode.none:
                # Kafka: a transactional commit with a stale epoch is ILLEGAL_GENERATION.
                return (ErrorCode.illegal_generation if error == ErrorCode.stale_member_epoch else error), {}
        elif generation_id >= 0 or member_id:
            group = self.groups.get(group_id)
            if group is not None and group.is_static_fenced(member_id, instance_id):
                return ErrorCode.fenced_instance_id, {}
            if group is not None and member_id and not group.has_member(member_id):
                return ErrorCode.unknown_member_id, {}
            if group is not None and generation_id >= 0 and generation_id != group.generation_id:
                return ErrorCode.illegal_generation, {}
        now = self.clock()
        records, accepted, results = self._offset_records(group_id, offsets, now)
        if records:
            # Appended as the producer's own transactional batch: the partition checks its
            # epoch (a fenced producer fails here) and holds the LSO until the marker.
            self.store.append(self.partition_of(group_id), build_batch(
                records, producer_id=producer_id, producer_epoch=producer_epoch, transactional=True))
            pending = self.pending_txn.setdefault(producer_id, {}).setdefault(group_id, {})
            for tp, value in accepted:
                pending[tp] = value
        return ErrorCode.none, results

    def complete_txn(self, producer_id: int, commit: bool, partition: int | None = None) -> None:
        """A transaction marker of ``producer_id`` reached ``partition`` of
        ``__consumer_offsets`` (None: every partition): the pending offsets of its groups
        there become the committed ones (COMMIT) or are dropped (ABORT)."""
        everything = self.pending_txn.get(producer_id)
        if not everything:
            return
        pending = {g: o for g, o in everything.items() if partition is None or self.partition_of(g) == partition}
        for group_id in pending:
            del everything[group_id]
        if not everything:
            del self.pending_txn[producer_id]
        if not pending or not commit:
            return
        for group_id, offsets in pending.items():
            self.offsets.setdefault(group_id, {}).update(offsets)
            if group_id not in self.consumer.groups:
                self.groups.setdefault(group_id, Group(group_id, self.settings))

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """An open transaction holds offsets for ``tp`` (OffsetFetch's require_stable)."""
        return any(tp in groups.get(group_id, {}) for groups in self.pending_txn.values())

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None) -> dict[TopicPartition, OffsetCommitValue | None]:
        cache = self.offsets.get(group_id, {})
        if partitions is None:
            return dict(cache)
        return {tp: cache.get(tp) for tp in partitions}

    # -- admin ---------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        return GroupDescription(
            group_id, group.state.value, group.protocol_type or "",
            group.protocol_name or "" if group.state == GroupState.STABLE else "",
            tuple(group.members.values()),
        )

    def list_groups(self, states: set[str] | None = None) -> list[tuple[str, str, str]]:
        out = []
        for group in self.groups.values():
            if group.state == GroupState.DEAD:
                continue
            if states and group.state.value not in states:
                continue
            out.append((group.group_id, group.protocol_type or "", group.state.value))
        for modern in self.consumer.groups.values():
            if not states or modern.state in states:
                out.append((modern.group_id, "consumer", modern.state))
        return out

    def group_type(self, group_id: str) -> str | None:
        """``consumer`` (KIP-848), ``classic``, or None for an unknown group."""
        if group_id in self.consumer.groups:
            return "consumer"
        return "classic" if group_id in self.groups else None

    def delete(self, group_id: str) -> ErrorCode:
        if group_id in self.consumer.groups:
            error = self.consumer.delete(group_id)
            if error == ErrorCode.none:
                self._persist_consumer(group_id)
                self._tombstone(group_id)
            return error
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if group.state != GroupState.EMPTY:
            return ErrorCode.non_empty_group
        group.mark_dead()
        del self.groups[group_id]
        self._tombstone(group_id)
        return ErrorCode.none

    def _tombstone(self, group_id: str) -> None:
        now = self.clock()
        tombstones = [Record(key=encode_offset_key(group_id, t, p), value=None, timestamp=now)
                      for (t, p) in self.offsets.get(group_id, {})]
        tombstones.append(Record(key=encode_group_key(group_id), value=None, timestamp=now))
        self.store.append(self.partition_of(group_id), build_batch(tombstones))
        self.offsets.pop(group_id, None)
        self._persisted.pop(group_id, None)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> None:
        cache = self.offsets.get(group_id, {})
        now = self.clock()
        records = [Record(key=encode_offset_key(group_id, t, p), value=None, timestamp=now)
                   for (t, p) in partitions if (t, p) in cache]
        if records:
            self.store.append(self.partition_of(group_id), build_batch(records))
        for tp in partitions:
            cache.pop(tp, None)
