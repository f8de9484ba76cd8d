"""The controller: one broker at a time, elected through ZooKeeper's ``/controller``.

It decides leaders and who leaves an ISR for being down; everything else a partition's
leader decides itself. Every write it makes is a compare-and-set of a partition state in a
ZooKeeper multi-op that also checks ``/controller_epoch`` is still the one it was elected
with: a controller that lost its session and does not know yet can no longer change
anything.

It works level-triggered: on any change (a broker comes or goes, a topic is created or
grown, an admin request arrives) it compares every partition's state with what it should be
(``plan``, pure) and writes the difference. A missed or coalesced ZooKeeper event therefore
costs nothing: the next pass sees the state as it is.

What a partition should be:

- no state yet (a new topic or partition): led by its first live replica, ISR the live
  replicas;
- a leader that is down, shutting down, or came back with a new ZooKeeper session (its
  leadership must be confirmed with a new leader epoch): the first live ISR replica in
  assignment order leads (``assignment.elect_leader``); with none, and
  ``unclean.leader.election.enable`` false, the partition goes offline (leader -1) and its
  ISR stays as it was, so that the last ISR member to have led it is the one to lead it again;
- ISR members that are down or shutting down leave the ISR (never its last member).

Admin requests come through ``/admin``: topic deletion, reassignment (KIP-455: the replicas
being added catch up, join the ISR, then the assignment becomes the target), preferred leader
election, and controlled shutdown (leadership moves off the broker before it stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from kazoo.exceptions import KazooException

from streamkit.broker.cluster.assignment import elect_leader
from streamkit.broker.cluster.metadata import ClusterMetadata
from streamkit.broker.cluster.settings import ClusterSettings
from streamkit.broker.cluster.zk import ControllerFenced, StaleState, ZkClient
from streamkit.broker.cluster.zkdata import (
    CONTROLLED_SHUTDOWN,
    DELETE_TOPICS,
    PREFERRED_ELECTION,
    REASSIGN,
    PartitionState,
    TopicAssignment,
    decode_json,
)

__all__ = ["Controller", "Decision", "plan_partition"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Decision:
    topic: str
    partition: int
    state: PartitionState  # the state to write; version = the one it replaces (-1: create)
    why: str


def plan_partition(topic: str, partition: int, replicas: tuple[int, ...], state: PartitionState | None,
                   live: Collection[int], restarted: Collection[int], shutting_down: Collection[int],
                   unclean: bool, controller_epoch: int, preferred: bool = False) -> Decision | None:
    """What the controller writes for one partition, or None (see the module docstring)."""
    if state is None:
        alive = tuple(r for r in replicas if r in live)
        if not alive:
            return None  # created once a replica is up
        leader = next((r for r in alive if r not in shutting_down), alive[0])
        return Decision(topic, partition, PartitionState(leader, 0, alive, controller_epoch, -1), "new partition")
    leader, isr = state.leader, state.isr
    leader_ok = leader in live and leader not in restarted and leader not in shutting_down
    if preferred and replicas and leader != replicas[0] and replicas[0] in live and replicas[0] in isr \
            and replicas[0] not in shutting_down:
        return Decision(topic, partition, replace(state, leader=replicas[0], leader_epoch=state.leader_epoch + 1,
                                                  controller_epoch=controller_epoch),
                        f"preferred leader {replicas[0]}")
    # A broker back with a new session may have lost what it had not flushed: like one
    # shutting down, it leads and stays in an ISR only when nobody else can.
    avoided = set(shutting_down) | set(restarted)
    if not leader_ok:
        candidates_isr = [r for r in isr if r in live]
        new_leader = elect_leader(replicas, candidates_isr, live, unclean=False, excluded=avoided)
        why = f"leader {leader} is " + ("down" if leader not in live and leader >= 0 else
                                        "offline" if leader < 0 else
                                        "back with a new session" if leader in restarted else "shutting down")
        if new_leader is None and unclean:
            new_leader = elect_leader(replicas, (), live, unclean=True, excluded=avoided)
            if new_leader is not None:
                return Decision(topic, partition, replace(state, leader=new_leader, leader_epoch=state.leader_epoch + 1,
                                                          isr=(new_leader,), controller_epoch=controller_epoch),
                                why + "; unclean election (acknowledged records may be lost)")
        if new_leader is None:
            if leader in shutting_down and leader in live:
                return None  # nobody else can lead it: it stays until the broker stops
            if leader < 0:
                return None  # already offline
            return Decision(topic, partition, replace(state, leader=-1, leader_epoch=state.leader_epoch + 1,
                                                      controller_epoch=controller_epoch),
                            why + "; no live ISR replica: offline")
        new_isr = tuple(r for r in isr if r in live and (r not in avoided or r == new_leader))
        if new_leader not in new_isr:
            new_isr = (*new_isr, new_leader)
        return Decision(topic, partition, replace(state, leader=new_leader, leader_epoch=state.leader_epoch + 1,
                                                  isr=new_isr, controller_epoch=controller_epoch),
                        why + f"; broker {new_leader} leads")
    out = tuple(r for r in isr if r != leader and (r not in live or r in avoided))
    if out:
        new_isr = tuple(r for r in isr if r not in out)
        return Decision(topic, partition, replace(state, isr=new_isr, controller_epoch=controller_epoch),
                        f"broker(s) {list(out)} down or shutting down leave the ISR")
    return None


class Controller:
    """The controller's work while this broker holds ``/controller`` (see the module docstring)."""

    def __init__(self, broker_id: int, zk: ZkClient, metadata: ClusterMetadata, settings: ClusterSettings,
                 epoch: int, epoch_version: int) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.metadata = metadata
        self.settings = settings
        self.epoch = epoch
        self.epoch_version = epoch_version
        self._known_epochs: dict[int, int] = {}  # broker -> its registration's epoch
        self._restarted: set[int] = set()  # brokers whose leaderships await confirmation
        self._shutting_down: set[int] = set()
        self._preferred: set[TP] = set()
        self._unclean: set[TP] = set()  # unclean elections asked for (ElectLeaders UNCLEAN)
        # What this controller wrote, until the metadata (ZooKeeper's watches) catches up:
        # the shared metadata is the sync's to update, so that every broker, this one
        # included, learns of a change the same way.
        self._written: dict[TP, PartitionState] = {}
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rebalance: asyncio.Task[None] | None = None
        self.fenced = False

    def start(self) -> None:
        self._known_epochs = {b: r.epoch for b, r in self.metadata.brokers.items()}
        self._dirty.set()
        self._task = asyncio.create_task(self._run(), name="streamkit-controller")
        if self.settings.auto_leader_rebalance_enable:
            self._rebalance = asyncio.create_task(self._rebalance_loop(), name="streamkit-leader-rebalance")
        log.info("broker %d is the controller (controller epoch %d)", self.broker_id, self.epoch)

    async def stop(self) -> None:
        for task in (self._task, self._rebalance):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._task = self._rebalance = None

    def poke(self) -> None:
        """Something changed: run a pass."""
        self._dirty.set()

    def brokers_changed(self) -> None:
        for broker, registration in self.metadata.brokers.items():
            known = self._known_epochs.get(broker)
            if known is not None and known != registration.epoch:
                self._restarted.add(broker)  # gone and back between two reads
            self._known_epochs[broker] = registration.epoch
        for broker in set(self._known_epochs) - set(self.metadata.brokers):
            del self._known_epochs[broker]
        self.poke()

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self.fenced:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._admin()
                await self._pass()
            except ControllerFenced as exc:
                log.warning("no longer the controller: %s", exc)
                self.fenced = True
                return
            except KazooException as exc:
                log.info("controller: ZooKeeper unavailable (%s); retrying", type(exc).__name__)
                await asyncio.sleep(0.5)
                self._dirty.set()
            except Exception:
                log.exception("controller pass failed; retrying")
                await asyncio.sleep(1)
                self._dirty.set()

    async def _pass(self) -> None:
        md = self.metadata
        live = set(md.brokers)
        restarted = self._restarted & live
        retry = False
        for topic, assignment in sorted(md.topics.items()):
            unclean = _flag(md.configs.get(topic, {}), "unclean.leader.election.enable",
                            self.settings.unclean_leader_election_enable)
            for partition, replicas in sorted(assignment.partitions.items()):
                state = self._state(topic, partition)
                if state is None:
                    state = await self.zk.partition_state(topic, partition)
                preferred = (topic, partition) in self._preferred
                decision = plan_partition(topic, partition, replicas, state, live, restarted, self._shutting_down,
                                          unclean or (topic, partition) in self._unclean, self.epoch, preferred)
                self._preferred.discard((topic, partition))
                self._unclean.discard((topic, partition))
                if decision is None:
                    continue
                if not await self._write(decision):
                    retry = True
            if assignment.adding or assignment.removing:
                retry = not await self._advance_reassignment(topic, assignment) or retry
        if not retry:
            self._restarted -= restarted  # every leadership of theirs is confirmed or moved
        await self._settle_shutdowns()
        if retry:
            await asyncio.sleep(0.1)
            self._dirty.set()

    async def _write(self, decision: Decision) -> bool:
        state = decision.state
        try:
            if state.version < 0:
                written = await self.zk.create_partition_state(decision.topic, decision.partition, state,
                                                               self.epoch_version)
            else:
                written = await self.zk.update_partition_state(decision.topic, decision.partition, state,
                                                               self.epoch_version)
        except StaleState:
            fresh = await self.zk.partition_state(decision.topic, decision.partition)
            if fresh is not None:
                self._written[(decision.topic, decision.partition)] = fresh
            return False
        self._written[(decision.topic, decision.partition)] = written
        log.info("%s-%d: %s (leader %d, leader epoch %d, ISR %s)", decision.topic, decision.partition,
                 decision.why, written.leader, written.leader_epoch, list(written.isr))
        return True

    def _state(self, topic: str, partition: int) -> PartitionState | None:
        """The newest state known: the metadata's, or the one this controller wrote last."""
        tp = (topic, partition)
        known, written = self.metadata.states.get(tp), self._written.get(tp)
        if written is None:
            return known
        if known is not None and known.version >= written.version:
            del self._written[tp]
            return known
        return written

    # -- admin requests ----------------------------------------------------------------------

    async def _admin(self) -> None:
        zk = self.zk
        for topic in await zk.children(DELETE_TOPICS, self.poke):
            await zk.delete_topic_nodes(topic)
            await zk.delete(f"{DELETE_TOPICS}/{topic}")
            log.info("deleted topic %s", topic)
        self._shutting_down = {int(b) for b in await zk.children(CONTROLLED_SHUTDOWN, self.poke) if b.isdigit()}
        got = await zk.get(PREFERRED_ELECTION, self.poke)
        if got is not None:
            for entry in (decode_json(got[0]) or {}).get("partitions", []):
                tp = (str(entry["topic"]), int(entry["partition"]))
                # election_type 1 (ours, from ElectLeaders UNCLEAN): a live replica out of
                # the ISR may lead an offline partition.
                (self._unclean if int(entry.get("election_type", 0)) == 1 else self._preferred).add(tp)
            await zk.delete(PREFERRED_ELECTION)
        got = await zk.get(REASSIGN, self.poke)
        if got is not None:
            await self._start_reassignments(decode_json(got[0]) or {})
            await zk.delete(REASSIGN)

    async def _settle_shutdowns(self) -> None:
        """Tell each broker shutting down when nothing it leads can move any more and it has
        left every ISR it can leave."""
        md = self.metadata
        for broker in sorted(self._shutting_down):
            pending = [tp for tp, s in md.states.items()
                       if (s.leader == broker and any(r in md.brokers and r != broker for r in s.isr))
                       or (broker in s.isr and s.leader != broker and len(s.isr) > 1)]
            path = f"{CONTROLLED_SHUTDOWN}/{broker}"
            got = await self.zk.get(path)
            if got is None:
                continue
            status = {"version": 1, "remaining": len(pending), "done": not pending}
            data = json.dumps(status).encode()
            if got[0] != data:
                await self.zk.set(path, data)

    async def _start_reassignments(self, request: Mapping[str, object]) -> None:
        entries = request.get("partitions", [])
        assert isinstance(entries, list)
        by_topic: dict[str, dict[int, tuple[int, ...] | None]] = {}
        for entry in entries:
            target = entry.get("replicas")
            by_topic.setdefault(str(entry["topic"]), {})[int(entry["partition"])] = (
                None if target is None else tuple(int(r) for r in target))
        for topic, targets in by_topic.items():
            current = await self.zk.topic_with_version(topic)
            if current is None:
                continue
            assignment, version = current
            partitions = dict(assignment.partitions)
            adding, removing = dict(assignment.adding), dict(assignment.removing)
            for p, target in targets.items():
                if p not in partitions:
                    continue
                original = _original(partitions[p], adding.get(p, ()))
                if target is None:  # cancel: back to the replicas it had
                    target = original
                if target == original:
                    partitions[p] = original
                    adding.pop(p, None)
                    removing.pop(p, None)
                    continue
                partitions[p] = tuple(dict.fromkeys((*target, *original)))
                adding[p] = tuple(r for r in target if r not in original)
                removing[p] = tuple(r for r in original if r not in target)
                log.info("reassigning %s-%d from %s to %s", topic, p, list(original), list(target))
            updated = TopicAssignment(assignment.topic_id, partitions,
                                      {p: r for p, r in adding.items() if r}, {p: r for p, r in removing.items() if r})
            try:
                await self.zk.set_assignment(topic, updated, version)
            except StaleState:
                self._dirty.set()

    async def _advance_reassignment(self, topic: str, assignment: TopicAssignment) -> bool:
        """Finish the reassignments of ``topic`` whose new replicas are all in the ISR."""
        md = self.metadata
        partitions = dict(assignment.partitions)
        adding, removing = dict(assignment.adding), dict(assignment.removing)
        finished = False
        for p in sorted(set(adding) | set(removing)):
            state = self._state(topic, p)
            if state is None:
                continue
            target = tuple(r for r in partitions[p] if r not in removing.get(p, ()))
            if not all(r in state.isr for r in target):
                continue  # the new replicas are still catching up
            leader = state.leader
            if leader not in target:
                leader = next((r for r in target if r in state.isr and r in md.brokers), -1)
                if leader < 0:
                    continue
            new_state = replace(state, leader=leader, isr=tuple(r for r in state.isr if r in target),
                                leader_epoch=state.leader_epoch + (leader != state.leader),
                                controller_epoch=self.epoch)
            if new_state != state and not await self._write(Decision(topic, p, new_state, "reassignment done")):
                return False
            partitions[p] = target
            adding.pop(p, None)
            removing.pop(p, None)
            finished = True
        if not finished:
            return True
        current = await self.zk.topic_with_version(topic)
        if current is None:
            return True
        updated = TopicAssignment(assignment.topic_id, partitions, adding, removing)
        try:
            await self.zk.set_assignment(topic, updated, current[1])
        except StaleState:
            return False
        return True

    # -- preferred leaders ---------------------------------------------------------------------

    async def _rebalance_loop(self) -> None:
        interval = self.settings.leader_imbalance_check_interval_seconds
        while True:
            await asyncio.sleep(interval)
            imbalanced = self.imbalanced()
            if imbalanced:
                log.info("preferred leader election for %d partition(s) (leader imbalance above %d%%)",
                         len(imbalanced), self.settings.leader_imbalance_per_broker_percentage)
                self._preferred |= imbalanced
                self.poke()

    def imbalanced(self) -> set[TP]:
        """The partitions not led by their preferred leader, of the brokers whose share of
        such partitions is above leader.imbalance.per.broker.percentage."""
        md = self.metadata
        by_preferred: dict[int, list[TP]] = {}
        for topic, assignment in md.topics.items():
            for p, replicas in assignment.partitions.items():
                if replicas:
                    by_preferred.setdefault(replicas[0], []).append((topic, p))
        out: set[TP] = set()
        for broker, tps in by_preferred.items():
            if broker not in md.brokers:
                continue
            off = [tp for tp in tps if md.leader(*tp) != broker and broker in md.states.get(tp, _NONE).isr]
            if off and 100 * len(off) / len(tps) > self.settings.leader_imbalance_per_broker_percentage:
                out.update(off)
        return out

    def elect_preferred(self, partitions: Collection[TP]) -> None:
        self._preferred.update(partitions)
        self.poke()


_NONE = PartitionState(-1, -1, (), -1)


def _original(replicas: tuple[int, ...], adding: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(r for r in replicas if r not in adding)


def _flag(configs: Mapping[str, str], name: str, default: bool) -> bool:
    value = configs.get(name)
    return default if value is None else value.strip().lower() == "true"
