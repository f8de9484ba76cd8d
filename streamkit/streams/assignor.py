"""Task assignment for the workers of one app: co-partitioned, sticky, with standby replicas.

A *task* is a partition number: task *p* is partition *p* of every input topic that has one,
and partition *p* of every table. Whoever is assigned task *p* reads all of those input
partitions and owns those table partitions, so a table partition and the records that update
it are always on the same worker, whatever the partition counts of the inputs (the range
assignor, used before, split each topic on its own: with inputs of different partition
counts, partition *p* of two topics could land on two workers).

The group leader computes the assignment (``assign_tasks``, pure, below) from what each
member reported when it joined (in its subscription's user data): the tasks it was active
for, those it kept as standby, and those it has local state for. The rules:

1. Balance: every member gets ``floor(T/M)`` or ``ceil(T/M)`` of the ``T`` tasks.
2. Sticky: a task goes back to its previous active owner when that member is still here and
   has room; a task whose owner is gone goes to a member that kept it as standby (warm
   state), then to one with local state for it, then to the least loaded.
3. Standby: each stateful task (one with table partitions) gets up to
   ``num.standby.replicas`` standby members, never its active one; members that already
   hold its state (standby before, or active before) are preferred, then the least loaded.

Each member's standby tasks travel in its assignment's user data (as in Kafka Streams), with
its active tasks; the topic partitions of its active tasks are the assignment proper.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

__all__ = ["MemberState", "StreamsAssignor", "TaskAssignment", "assign_tasks", "decode_user_data"]

_USER_DATA_VERSION = 1


@dataclass(frozen=True)
class MemberState:
    """What a member reports when it joins."""

    active: frozenset[int] = frozenset()
    standby: frozenset[int] = frozenset()
    local: frozenset[int] = frozenset()


@dataclass
class TaskAssignment:
    active: dict[str, list[int]] = field(default_factory=dict)
    standby: dict[str, list[int]] = field(default_factory=dict)


def assign_tasks(tasks: Iterable[int], members: Mapping[str, MemberState], *, standby_replicas: int,
                 stateful: Collection[int]) -> TaskAssignment:
    """Active and standby tasks per member (see the module docstring for the rules)."""
    task_list = sorted(set(tasks))
    names = sorted(members)
    out = TaskAssignment({m: [] for m in names}, {m: [] for m in names})
    if not names:
        return out
    base, extra = divmod(len(task_list), len(names))
    load = dict.fromkeys(names, 0)
    extra_left = extra
    owner: dict[int, str] = {}

    def take(member: str, task: int) -> bool:
        nonlocal extra_left
        if load[member] < base:
            pass
        elif load[member] == base and extra_left > 0:
            extra_left -= 1
        else:
            return False
        load[member] += 1
        owner[task] = member
        return True

    # 1. back to the previous owner
    for task in task_list:
        for m in names:
            if task in members[m].active and take(m, task):
                break
    # 2. to a member holding its state (standby, then local), else the least loaded
    for task in task_list:
        if task in owner:
            continue
        ranked = sorted(names, key=lambda m: (_warmth(members[m], task), load[m], m))
        for m in ranked:
            if take(m, task):
                break
    for task in task_list:
        out.active[owner[task]].append(task)

    # 3. standby replicas
    replicas = min(standby_replicas, len(names) - 1)
    standby_load = dict.fromkeys(names, 0)
    for task in task_list:
        if replicas <= 0 or task not in stateful:
            continue
        candidates = [m for m in names if m != owner[task]]
        candidates.sort(key=lambda m: (_standby_warmth(members[m], task), standby_load[m], m))
        for m in candidates[:replicas]:
            out.standby[m].append(task)
            standby_load[m] += 1
    return out


def _warmth(state: MemberState, task: int) -> int:
    """Who should take over an orphaned task: 0 warmest."""
    if task in state.standby:
        return 0
    if task in state.local:
        return 1
    return 2


def _standby_warmth(state: MemberState, task: int) -> int:
    if task in state.standby or task in state.active:
        return 0
    if task in state.local:
        return 1
    return 2


def encode_user_data(**tasks: Collection[int]) -> bytes:
    return orjson.dumps({"version": _USER_DATA_VERSION, **{k: sorted(v) for k, v in tasks.items()}})


def decode_user_data(data: bytes | None) -> dict[str, frozenset[int]]:
    """``{"active": ..., "standby": ..., "local": ...}`` from a subscription or an
    assignment's user data; empty sets for a member that sent none (another client)."""
    try:
        raw: Any = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        raw = {}
    if not isinstance(raw, dict):
        raw = {}
    out = {}
    for name in ("active", "standby", "local"):
        values = raw.get(name, [])
        out[name] = frozenset(int(v) for v in values if isinstance(v, int)) if isinstance(values, list) else frozenset()
    return out


class StreamsAssignor(AbstractPartitionAssignor):  # type: ignore[misc]  # aiokafka is untyped
    """The aiokafka side of ``assign_tasks``: one instance per worker, which remembers its
    own last assignment to report it at the next join.

    ``stateful_tasks()`` (the leader's) is the number of table partitions, ``local_tasks()``
    the tasks this worker has state on disk for."""

    name = "streamkit"
    version = 0

    def __init__(self, *, standby_replicas: int, stateful_tasks: Callable[[], int],
                 local_tasks: Callable[[], set[int]]) -> None:
        self.standby_replicas = standby_replicas
        self._stateful_tasks = stateful_tasks
        self._local_tasks = local_tasks
        self.active: frozenset[int] = frozenset()
        self.standby: frozenset[int] = frozenset()

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        data = encode_user_data(active=self.active, standby=self.standby, local=self._local_tasks())
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), data)

    def assign(self, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
               ) -> dict[str, ConsumerProtocolMemberAssignment]:
        counts: dict[str, int] = {}
        subscribers: dict[str, list[str]] = {}
        for member_id, meta in members.items():
            for topic in meta.subscription:
                subscribers.setdefault(topic, []).append(member_id)
        for topic in subscribers:
            partitions = cluster.partitions_for_topic(topic)
            if partitions:
                counts[topic] = max(partitions) + 1
        states = {}
        for member_id, meta in members.items():
            reported = decode_user_data(meta.user_data)
            states[member_id] = MemberState(reported["active"], reported["standby"], reported["local"])
        tasks = range(max(counts.values(), default=0))
        plan = assign_tasks(tasks, states, standby_replicas=self.standby_replicas,
                            stateful=range(self._stateful_tasks()))
        topic_parts: dict[str, dict[str, list[int]]] = {m: {} for m in members}
        for member_id, active in plan.active.items():
            subscribed = set(members[member_id].subscription)
            for task in active:
                for topic, count in counts.items():
                    if task >= count:
                        continue
                    # A member not reading this topic (another version of the app) cannot
                    # take its partition: the first subscriber does.
                    taker = member_id if topic in subscribed else sorted(subscribers[topic])[0]
                    topic_parts[taker].setdefault(topic, []).append(task)
        return {
            member_id: ConsumerProtocolMemberAssignment(
                self.version, sorted((t, sorted(ps)) for t, ps in topic_parts[member_id].items()),
                encode_user_data(active=plan.active.get(member_id, []), standby=plan.standby.get(member_id, [])))
            for member_id in members
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        tasks = decode_user_data(assignment.user_data)
        self.active = tasks["active"]
        self.standby = tasks["standby"] - self.active
