"""This broker's replicas: leader or follower of each partition it has a copy of.

A replica acts on the partition state from ZooKeeper (``PartitionState``) and only on a
leader epoch at least as high as the one it acts on now.

As **leader** it takes produces (stamping its leader epoch into each batch), knows how far
each follower has fetched, and moves the high watermark to the smallest log end offset over
the ISR; ``acks=all`` waits for that. It shrinks the ISR of followers that have not caught
up for ``replica.lag.time.max.ms`` and adds back those that caught up, each change a
compare-and-set of the partition state in ZooKeeper at its leader epoch: when the state has
changed under it (a new leader elected), the write fails and the replica follows the new
state instead.

As **follower** it is fetched into by a ``ReplicaFetcher`` (``cluster/fetcher.py``), which
first truncates a divergent tail, then appends the leader's batches as they are.

While the broker's ZooKeeper session is gone (suspended, or lost until a new session's
registration is confirmed by a new leader epoch), it leads nothing: a deposed leader that
does not know it yet must not acknowledge writes a new leader will not have.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kazoo.exceptions import KazooException

from streamkit.broker.cluster.zk import StaleState, ZkClient
from streamkit.broker.cluster.zkdata import PartitionState
from streamkit.broker.errors import ErrorCode
from streamkit.log.partition import PartitionLog

__all__ = ["FollowerProgress", "Replica", "ReplicaError", "ReplicaManager", "Role"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"  # no leader (or not yet told)


class ReplicaError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower (Kafka's ``Replica`` state)."""

    leo: int = -1  # unknown until its first fetch in this leader's term
    last_fetch_ms: int = 0
    leo_at_last_fetch: int = 0  # the leader's LEO when it last fetched
    last_caught_up_ms: int = 0


@dataclass(eq=False)
class Replica:
    topic: str
    partition: int
    plog: PartitionLog
    replicas: tuple[int, ...]
    state: PartitionState | None = None
    role: Role = Role.OFFLINE
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    # acks=all produces waiting for the high watermark: (offset, sequence, future)
    acks: list[tuple[int, int, asyncio.Future[ErrorCode]]] = field(default_factory=list)
    isr_change: asyncio.Task[None] | None = None
    # Set when the session was lost while leading: leadership resumes only with a leader
    # epoch above this one (the controller's confirmation).
    fenced_epoch: int | None = None
    min_isr: int = 1
    # As leader: the log end offset when this replica became leader in its leader epoch,
    # the epoch's first offset (Kafka's leaderEpochStartOffsetOpt); -1 otherwise.
    epoch_start_offset: int = -1

    @property
    def tp(self) -> TP:
        return self.topic, self.partition

    @property
    def leader_epoch(self) -> int:
        return -1 if self.state is None else self.state.leader_epoch

    @property
    def leader(self) -> int:
        return -1 if self.state is None else self.state.leader

    @property
    def isr(self) -> tuple[int, ...]:
        return () if self.state is None else self.state.isr

    @property
    def high_watermark_stale(self) -> bool:
        """A leader that has not committed anything in its leader epoch yet: its high
        watermark is the one it had as a follower, which may lag what the previous leader
        had committed, and only moves once the ISR's fetches in this epoch reach the
        epoch's first offset. Until then ListOffsets answers OFFSET_NOT_AVAILABLE (KIP-207)
        rather than an end offset that may be too low."""
        return self.role is Role.LEADER and self.plog.high_watermark < self.epoch_start_offset


class FetcherControl(Protocol):
    """What the replica manager asks of the fetchers (``cluster/fetcher.py``)."""

    def follow(self, replica: Replica, leader: int) -> None: ...

    def unfollow(self, replica: Replica) -> None: ...


class ReplicaManager:
    """Every local replica (see the module docstring)."""

    def __init__(self, broker_id: int, zk: ZkClient, clock: Callable[[], int],
                 notify: Callable[[TP], None], replica_lag_time_max_ms: int) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.clock = clock
        self.notify = notify  # wakes fetches waiting on the partition (new data or HW)
        self.lag_max_ms = replica_lag_time_max_ms
        self.replicas: dict[TP, Replica] = {}
        self.fetchers: FetcherControl | None = None
        self.fenced = False  # the ZooKeeper session is not usable
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._seq = itertools.count()
        # Called with (topic, partition, leading) when this broker starts or stops leading a
        # partition: coordinators load or drop their state.
        self.leadership_listeners: list[Callable[[str, int, bool], None]] = []

    # -- state changes -----------------------------------------------------------------------

    def add(self, replica: Replica) -> None:
        self.replicas[replica.tp] = replica

    def remove(self, tp: TP) -> Replica | None:
        replica = self.replicas.pop(tp, None)
        if replica is not None:
            self._stop_role(replica, "the replica was removed from this broker")
        return replica

    def reassigned(self, replica: Replica, replicas: tuple[int, ...]) -> None:
        """The partition's replicas changed (a reassignment adds the new ones first, then
        drops the old): as leader, track the new followers' progress so that they can
        join the ISR, and forget the removed ones."""
        if replicas == replica.replicas:
            return
        replica.replicas = replicas
        if replica.role is not Role.LEADER:
            return
        now = self.clock()
        for r in replicas:
            if r != self.broker_id and r not in replica.followers:
                replica.followers[r] = FollowerProgress(last_caught_up_ms=now, last_fetch_ms=now)
        for r in [r for r in replica.followers if r not in replicas]:
            del replica.followers[r]

    def apply(self, replica: Replica, state: PartitionState) -> None:
        """Act on a partition state from ZooKeeper (a watch, the controller's write, or the
        answer to our own compare-and-set)."""
        current = replica.state
        if current is not None and (state.leader_epoch, state.version) < (current.leader_epoch, current.version):
            return  # older than what we act on
        if current is not None and state.leader_epoch < current.leader_epoch:
            return
        me = self.broker_id
        if state.leader == me:
            if replica.fenced_epoch is not None and state.leader_epoch <= replica.fenced_epoch:
                replica.state = state
                self._stop_role(replica, "waiting for the controller to confirm this broker's leadership")
                replica.role = Role.OFFLINE
                return
            replica.fenced_epoch = None
            if replica.role is Role.LEADER and current is not None and current.leader_epoch == state.leader_epoch:
                replica.state = state  # an ISR change (ours or the controller's)
                self._update_hw(replica)
                return
            self._become_leader(replica, state)
        elif state.leader < 0:
            replica.state = state
            if replica.role is not Role.OFFLINE:
                self._stop_role(replica, "the partition has no leader")
            replica.role = Role.OFFLINE
        else:
            if (replica.role is Role.FOLLOWER and current is not None
                    and current.leader == state.leader and current.leader_epoch == state.leader_epoch):
                replica.state = state
                return
            self._become_follower(replica, state)

    def _become_leader(self, replica: Replica, state: PartitionState) -> None:
        was_leader = replica.role is Role.LEADER
        if replica.role is Role.FOLLOWER and self.fetchers is not None:
            self.fetchers.unfollow(replica)
        plog = replica.plog
        replica.state = state
        replica.role = Role.LEADER
        now = self.clock()
        replica.followers = {r: FollowerProgress(last_caught_up_ms=now, last_fetch_ms=now)
                             for r in replica.replicas if r != self.broker_id}
        replica.epoch_start_offset = plog.log_end_offset
        plog.start_leader_epoch(state.leader_epoch)
        log.info("leading %s-%d at leader epoch %d (ISR %s, log end offset %d, high watermark %d)",
                 replica.topic, replica.partition, state.leader_epoch, list(state.isr), plog.log_end_offset,
                 plog.high_watermark)
        self._update_hw(replica)
        if not was_leader:
            self._tell_leadership(replica, True)

    def _become_follower(self, replica: Replica, state: PartitionState) -> None:
        was_leader = replica.role is Role.LEADER
        self._stop_role(replica, f"broker {state.leader} leads it now")
        replica.state = state
        replica.role = Role.FOLLOWER
        log.info("following broker %d for %s-%d at leader epoch %d", state.leader, replica.topic,
                 replica.partition, state.leader_epoch)
        if self.fetchers is not None:
            self.fetchers.follow(replica, state.leader)
        if was_leader:
            self._tell_leadership(replica, False)

    def _stop_role(self, replica: Replica, why: str) -> None:
        if replica.role is Role.FOLLOWER and self.fetchers is not None:
            self.fetchers.unfollow(replica)
        if replica.role is Role.LEADER:
            self._fail_acks(replica, ErrorCode.not_leader_or_follower)
            replica.followers = {}
            if replica.isr_change is not None:
                replica.isr_change.cancel()
                replica.isr_change = None
            log.info("no longer leading %s-%d: %s", replica.topic, replica.partition, why)
            replica.role = Role.OFFLINE
            replica.epoch_start_offset = -1
            self._tell_leadership(replica, False)
        replica.role = Role.OFFLINE

    def _tell_leadership(self, replica: Replica, leading: bool) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(replica.topic, replica.partition, leading)
            except Exception:
                log.exception("a leadership listener failed for %s-%d", replica.topic, replica.partition)

    # -- the session ---------------------------------------------------------------------------

    def session_suspended(self) -> None:
        """The connection to ZooKeeper is gone: lead nothing until it is back."""
        self.fenced = True
        for replica in self.replicas.values():
            if replica.role is Role.LEADER:
                self._fail_acks(replica, ErrorCode.not_leader_or_follower)

    def session_resumed(self, new_session: bool) -> None:
        """Back on the same session: nothing happened meanwhile that needs a new term. On a
        new session (the old one expired, the controller may have moved leaderships away):
        every partition this broker led waits for a higher leader epoch."""
        if new_session:
            for replica in self.replicas.values():
                if replica.role is Role.LEADER or replica.leader == self.broker_id:
                    replica.fenced_epoch = replica.leader_epoch
                    self._stop_role(replica, "the ZooKeeper session expired")
        self.fenced = False

    # -- leading --------------------------------------------------------------------------------

    def leader(self, topic: str, partition: int) -> Replica:
        """The replica, if this broker leads it now; else ReplicaError with Kafka's code."""
        replica = self.replicas.get((topic, partition))
        if replica is None:
            raise ReplicaError(ErrorCode.not_leader_or_follower, f"broker {self.broker_id} has no replica of "
                               f"{topic}-{partition}")
        if replica.role is not Role.LEADER or self.fenced:
            raise ReplicaError(ErrorCode.not_leader_or_follower,
                               f"broker {self.broker_id} does not lead {topic}-{partition}")
        return replica

    def leading(self, topic: str, partition: int) -> Replica:
        """The replica, if this broker leads it, also while the ZooKeeper session is
        suspended: for a coordinator's own writes, whose answers wait for replication (a
        suspension fails that wait, and a deposed leader's high watermark stops)."""
        replica = self.replicas.get((topic, partition))
        if replica is None or replica.role is not Role.LEADER:
            raise ReplicaError(ErrorCode.not_leader_or_follower, f"broker {self.broker_id} does not lead "
                               f"{topic}-{partition}")
        return replica

    def is_leader(self, replica: Replica) -> bool:
        return replica.role is Role.LEADER and not self.fenced

    def check_epoch(self, replica: Replica, epoch: int) -> ErrorCode:
        """A request's ``current_leader_epoch`` against ours (KIP-320): -1 means not given."""
        if epoch < 0 or epoch == replica.leader_epoch:
            return ErrorCode.none
        return ErrorCode.fenced_leader_epoch if epoch < replica.leader_epoch else ErrorCode.unknown_leader_epoch

    def appended(self, replica: Replica) -> None:
        """After a local append as leader: with no other ISR member, the HW moves now."""
        self._update_hw(replica)

    def follower_fetched(self, replica: Replica, follower: int, fetch_offset: int) -> None:
        """A follower's fetch at ``fetch_offset`` tells the leader its log end offset."""
        progress = replica.followers.get(follower)
        if progress is None:
            return  # not a replica of this partition (a reassignment in flight)
        now = self.clock()
        leo = replica.plog.log_end_offset
        if fetch_offset >= leo:
            progress.last_caught_up_ms = now
        elif fetch_offset >= progress.leo_at_last_fetch:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.leo = fetch_offset
        progress.last_fetch_ms = now
        progress.leo_at_last_fetch = leo
        if follower not in replica.isr and self._can_join_isr(replica, fetch_offset):
            self._change_isr(replica, (*replica.isr, follower), f"broker {follower} caught up")
        self._update_hw(replica)

    def _can_join_isr(self, replica: Replica, fetch_offset: int) -> bool:
        """Kafka's rule: caught up to the high watermark, and into this leader's term (a
        follower that has not reached the term's first offset may still hold a divergent
        tail of an older one)."""
        return fetch_offset >= replica.plog.high_watermark and fetch_offset >= replica.epoch_start_offset

    def _update_hw(self, replica: Replica) -> None:
        if replica.role is not Role.LEADER:
            return
        plog = replica.plog
        hw = plog.log_end_offset
        for r in replica.isr:
            if r == self.broker_id:
                continue
            progress = replica.followers.get(r)
            if progress is None or progress.leo < 0:
                return  # an ISR member that has not fetched in this term holds the HW
            hw = min(hw, progress.leo)
        if hw > plog.high_watermark:
            plog.set_high_watermark(hw)
            self.notify(replica.tp)
            self._release_acks(replica)

    # -- acks=all --------------------------------------------------------------------------------

    def enough_replicas(self, replica: Replica) -> bool:
        return len(replica.isr) >= replica.min_isr

    async def wait_replicated(self, replica: Replica, offset: int, timeout_ms: int) -> ErrorCode:
        """Wait until the high watermark passes ``offset`` (exclusive end): NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas,
        NOT_LEADER_OR_FOLLOWER when leadership moved, REQUEST_TIMED_OUT."""
        if replica.plog.high_watermark >= offset:
            return ErrorCode.none if self.enough_replicas(replica) else ErrorCode.not_enough_replicas_after_append
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        heapq.heappush(replica.acks, (offset, next(self._seq), future))
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000)
        except TimeoutError:
            return ErrorCode.request_timed_out
        finally:
            if not future.done():
                future.cancel()

    def _release_acks(self, replica: Replica) -> None:
        hw = replica.plog.high_watermark
        code = ErrorCode.none if self.enough_replicas(replica) else ErrorCode.not_enough_replicas_after_append
        acks = replica.acks
        while acks and acks[0][0] <= hw:
            _offset, _seq, future = heapq.heappop(acks)
            if not future.done():
                future.set_result(code)

    @staticmethod
    def _fail_acks(replica: Replica, code: ErrorCode) -> None:
        acks, replica.acks = replica.acks, []
        for _offset, _seq, future in acks:
            if not future.done():
                future.set_result(code)

    # -- the ISR ---------------------------------------------------------------------------------

    def shrink_isr(self) -> None:
        """Drop from each led partition's ISR the followers not caught up for
        replica.lag.time.max.ms (run periodically)."""
        if self.fenced:
            return
        now = self.clock()
        for replica in self.replicas.values():
            if replica.role is not Role.LEADER or replica.isr_change is not None:
                continue
            lagging = [r for r in replica.isr if r != self.broker_id
                       and now - replica.followers.get(r, FollowerProgress()).last_caught_up_ms > self.lag_max_ms]
            if lagging:
                keep = tuple(r for r in replica.isr if r not in lagging)
                self._change_isr(replica, keep, f"broker(s) {lagging} not caught up for {self.lag_max_ms} ms")

    def _change_isr(self, replica: Replica, isr: tuple[int, ...], why: str) -> None:
        if replica.isr_change is not None or self.fenced or replica.state is None:
            return
        replica.isr_change = asyncio.create_task(self._write_isr(replica, replica.state, isr, why),
                                                 name=f"isr-{replica.topic}-{replica.partition}")

    async def _write_isr(self, replica: Replica, state: PartitionState, isr: tuple[int, ...], why: str) -> None:
        try:
            written = await self.zk.update_partition_state(replica.topic, replica.partition, state.with_isr(isr))
        except StaleState:
            log.info("ISR change of %s-%d lost to a newer state; reading it", replica.topic, replica.partition)
            with contextlib.suppress(KazooException):
                fresh = await self.zk.partition_state(replica.topic, replica.partition)
                if fresh is not None:
                    replica.isr_change = None
                    self.apply(replica, fresh)
            return
        except KazooException as exc:
            log.info("ISR change of %s-%d not written (ZooKeeper: %s)", replica.topic, replica.partition,
                     type(exc).__name__)
            return
        finally:
            if replica.isr_change is asyncio.current_task():
                replica.isr_change = None
        shrank = len(isr) < len(state.isr)
        if shrank:
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1
        log.info("ISR of %s-%d %s from %s to %s: %s", replica.topic, replica.partition,
                 "shrank" if shrank else "expanded", list(state.isr), list(isr), why)
        if replica.role is Role.LEADER and replica.leader_epoch == written.leader_epoch:
            replica.state = written
            self._update_hw(replica)
            self._release_acks(replica)
