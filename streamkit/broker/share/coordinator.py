"""The share-group coordinator: groups, share-partitions and share sessions, pure logic.

Holds every share group's membership (``ShareGroup``), every share-partition's delivery
state (``SharePartition``) and every member's share session, and persists a share-partition
through ``ShareStateStore`` whenever its state changed. The handlers call it on the event
loop; nothing here touches sockets.

Share sessions (KIP-932): a ShareFetch with epoch 0 opens a member's session (replacing one
it had, whose records go back), each following request carries the next epoch, and epoch
-1 closes it. Closing a session, leaving the group or missing the session timeout releases
every record the member still holds; acknowledged records stay acknowledged.

A share request makes its changes inside ``batched()``: each share-partition it changed is
then written once, as one delta (or snapshot), and the records go to each partition of
``__share_group_state`` in one append, before the request waits for them to be replicated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from streamkit.broker.errors import ErrorCode
from streamkit.broker.ownership import OwnedPartitions
from streamkit.broker.share.group import HeartbeatResult, ShareGroup
from streamkit.broker.share.partition import SharePartition
from streamkit.broker.share.store import ShareKey, ShareStateStore

__all__ = ["ShareCoordinator", "ShareSession", "ShareSettings"]

_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """Broker-level defaults (group.share.*); a group's own configs (share.*) override them."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    partition_max_record_locks: int = 2000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"

    def with_group_configs(self, configs: Mapping[str, str]) -> ShareSettings:
        names = {
            "share.record.lock.duration.ms": ("record_lock_duration_ms", int),
            "share.delivery.count.limit": ("delivery_count_limit", int),
            "share.session.timeout.ms": ("session_timeout_ms", int),
            "share.heartbeat.interval.ms": ("heartbeat_interval_ms", int),
            "share.auto.offset.reset": ("auto_offset_reset", str),
            "share.isolation.level": ("isolation_level", str),
        }
        changes = {attr: kind(configs[name]) for name, (attr, kind) in names.items() if name in configs}
        return replace(self, **changes) if changes else self


@dataclass(slots=True)
class ShareSession:
    next_epoch: int = 1
    partitions: set[tuple[str, int]] = field(default_factory=set)


class ShareCoordinator:
    def __init__(self, settings: ShareSettings, store: ShareStateStore, clock: Callable[[], int],
                 group_configs: Callable[[str], Mapping[str, str]] = lambda _g: {}) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.group_configs = group_configs
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[ShareKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.topic_ids: dict[ShareKey, str] = {}
        # While batched(): the share-partitions changed and not yet written (True: a snapshot is due).
        self._pending: dict[ShareKey, bool] | None = None
        # The partitions of __share_group_state this coordinator answers for (``load_partition``).
        self.owned = OwnedPartitions()

    def settings_for(self, group_id: str) -> ShareSettings:
        return self.settings.with_group_configs(self.group_configs(group_id))

    # -- the partitions of __share_group_state it owns --------------------------------------

    def partition_of(self, group_id: str) -> int:
        return self.store.partition_for(group_id)

    def load(self) -> int:
        """Every share-partition's state from ``__share_group_state`` (what a single broker,
        which owns every partition, does at start); the count loaded."""
        for partition in range(self.store.partitions):
            for _ in self.load_partition(partition):
                pass
        return len(self.partitions)

    def load_partition(self, partition: int) -> Iterator[None]:
        """Start coordinating the share groups stored in ``partition``: loading
        (COORDINATOR_LOAD_IN_PROGRESS) until the returned iterator is exhausted, which reads
        their share-partitions' state and makes the partition active. The state is
        compacted snapshots and their deltas, so one step reads it all."""
        self.owned.start_loading(partition)
        return self._replay_partition(partition)

    def _replay_partition(self, partition: int) -> Iterator[None]:
        self._forget(partition)
        for key, loaded in self.store.load(partition).items():
            sp = self._new_partition(key, int(loaded.snapshot["start_offset"]))
            sp.restore(loaded.snapshot)
            for delta in loaded.deltas:
                sp.apply(delta)
            self.partitions[key] = sp
            self.topic_ids[key] = str(loaded.snapshot.get("topic_id", ""))
        self.owned.activate(partition)
        yield from ()

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating the share groups of ``partition``: their members, sessions and
        share-partitions are dropped here (members heartbeat to the new coordinator, which
        loaded the share-partitions; what they held is available again there)."""
        self.owned.drop(partition)
        self._forget(partition)

    def _forget(self, partition: int) -> None:
        def mine(group_id: str) -> bool:
            return self.partition_of(group_id) == partition

        for group_id in [g for g in self.groups if mine(g)]:
            del self.groups[group_id]
        for key in [k for k in self.partitions if mine(k[0])]:
            del self.partitions[key]
            self.topic_ids.pop(key, None)
        for session in [s for s in self.sessions if mine(s[0])]:
            del self.sessions[session]
        self.store.forget(partition)

    # -- groups ---------------------------------------------------------------------------

    def group(self, group_id: str, create: bool = False) -> ShareGroup | None:
        found = self.groups.get(group_id)
        if found is None and create:
            found = ShareGroup(group_id, self.clock, self.settings_for(group_id).session_timeout_ms)
            self.groups[group_id] = found
        return found

    def group_ids(self) -> set[str]:
        """Share groups with members or with share-partition state."""
        return set(self.groups) | {k[0] for k in self.partitions}

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group."""
        out = []
        for group_id in sorted(self.group_ids()):
            group = self.groups.get(group_id)
            out.append((group_id, group.state if group is not None else "Empty"))
        return out

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                  subscribed: tuple[str, ...] | None, rack_id: str | None, client_id: str,
                  client_host: str, partitions_of: Callable[[str], int | None],
                  topic_id_of: Callable[[str], str | None] = lambda _t: None) -> HeartbeatResult:
        self.expire_members()
        group = self.group(group_id, create=member_epoch == 0)
        if group is None:
            code = ErrorCode.unknown_member_id if member_epoch != -1 else ErrorCode.none
            return HeartbeatResult(code, f"share group {group_id} has no member {member_id}"
                                   if code != ErrorCode.none else None, member_epoch=-1)
        result = group.heartbeat(member_id, member_epoch, subscribed, rack_id, client_id,
                                 client_host, partitions_of, topic_id_of)
        if member_epoch == -1:
            self._member_gone(group_id, member_id)
        return result

    def expire_members(self) -> list[tuple[str, str]]:
        gone = []
        for group in self.groups.values():
            for member_id in group.expire():
                gone.append((group.group_id, member_id))
        for group_id, member_id in gone:
            self._member_gone(group_id, member_id)
        return gone

    def _member_gone(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
        for key, sp in self.partitions.items():
            if key[0] == group_id and sp.release_member(member_id):
                self.persist(key)

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    # -- share-partitions -----------------------------------------------------------------

    def _new_partition(self, key: ShareKey, start: int) -> SharePartition:
        s = self.settings_for(key[0])
        return SharePartition(start, self.clock, s.record_lock_duration_ms, s.delivery_count_limit,
                              s.partition_max_record_locks)

    def partition(self, key: ShareKey, topic_id: str,
                  initial_offset: Callable[[str], int | None]) -> SharePartition | None:
        """The share-partition, initialized on first use at the offset
        ``share.auto.offset.reset`` names (``initial_offset("earliest" | "latest")``); None
        while that offset is not available (``initial_offset`` gave None): it is not
        initialized then, and the next request asks again."""
        sp = self.partitions.get(key)
        if sp is None or self.topic_ids.get(key) not in (topic_id, ""):
            reset = self.settings_for(key[0]).auto_offset_reset
            offset = initial_offset(reset)
            if offset is None:
                return None
            sp = self._new_partition(key, offset)
            self.partitions[key] = sp
            self.topic_ids[key] = topic_id
            self.persist(key, snapshot=True)
        return sp

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Write what changes inside at the end, one record per changed share-partition and
        one append per partition of ``__share_group_state``. Synchronous code only: a
        request that awaits inside would let another's changes wait for its end."""
        if self._pending is not None:
            yield  # the outer batch writes
            return
        self._pending = {}
        try:
            yield
        finally:
            pending, self._pending = self._pending, None
            self._write(pending)

    def persist(self, key: ShareKey, snapshot: bool = False) -> None:
        """Store what changed: a delta, or a full snapshot when one is due (at the end of
        the batch, inside ``batched()``)."""
        if self._pending is not None:
            self._pending[key] = self._pending.get(key, False) or snapshot
            return
        self._write({key: snapshot})

    def _write(self, pending: Mapping[ShareKey, bool]) -> None:
        if not pending:
            return
        with self.store.batch():
            for key, snapshot in pending.items():
                sp = self.partitions.get(key)
                if sp is None:
                    self.store.delete(key)
                elif snapshot or self.store.needs_snapshot(key):
                    self.store.write_snapshot(key, {"topic_id": self.topic_ids.get(key, ""), **sp.snapshot()})
                else:
                    self.store.write_delta(key, sp.delta())

    def expire_locks(self) -> None:
        with self.batched():
            for key, sp in self.partitions.items():
                if sp.expire_locks():
                    self.persist(key)

    def reset(self, key: ShareKey, topic_id: str, start_offset: int) -> None:
        """AlterShareGroupOffsets: a fresh window from ``start_offset``."""
        sp = self._new_partition(key, start_offset)
        old = self.partitions.get(key)
        sp.state_epoch = (old.state_epoch + 1) if old else 0
        self.partitions[key] = sp
        self.topic_ids[key] = topic_id
        self.persist(key, snapshot=True)

    def delete(self, key: ShareKey) -> bool:
        if self.partitions.pop(key, None) is None:
            return False
        self.topic_ids.pop(key, None)
        if self._pending is not None:
            self._pending[key] = False  # written as a deletion: the partition is gone
        else:
            self.store.delete(key)
        return True

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups on a share group: refused while it has members; otherwise the group
        and every share-partition state it has are gone."""
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.non_empty_group
        if group is None and group_id not in self.group_ids():
            return ErrorCode.group_id_not_found
        self.groups.pop(group_id, None)
        for key in [k for k in self.partitions if k[0] == group_id]:
            self.delete(key)
        return ErrorCode.none

    # -- share sessions -------------------------------------------------------------------

    def session(self, group_id: str, member_id: str, epoch: int) -> tuple[ErrorCode, ShareSession | None]:
        """The member's session for a request with ``epoch`` (0 opens a new one)."""
        key = (group_id, member_id)
        if epoch == 0:
            if key in self.sessions:
                self._member_gone(group_id, member_id)
            fresh = ShareSession()
            self.sessions[key] = fresh
            return ErrorCode.none, fresh
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.share_session_not_found, None
        if epoch != -1 and epoch != session.next_epoch:
            return ErrorCode.invalid_share_session_epoch, None
        if epoch != -1:
            session.next_epoch = 1 if epoch >= _MAX_EPOCH else epoch + 1
        return ErrorCode.none, session

    def close_session(self, group_id: str, member_id: str) -> None:
        """Epoch -1: the session ends and the member's unacknowledged records go back."""
        self._member_gone(group_id, member_id)
