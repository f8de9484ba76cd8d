"""Share-group membership and server-side assignment (KIP-932), pure with an injected clock.

A member joins with epoch 0, heartbeats with the epoch it was given and leaves with -1. The
group epoch moves whenever the target assignment changes (members, subscriptions or a
topic's partition count); share groups never revoke before assigning (several members may
read one partition at once), so a member takes the new assignment and epoch on its next
heartbeat. A member silent past the session timeout is removed.

Assignment (``uniform``): per topic, with S subscribers and P partitions, partition p goes
to subscriber p mod S when S <= P; otherwise subscriber i reads partition i mod P, so every
partition is read and several members share one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from streamkit.broker.errors import ErrorCode

__all__ = ["HeartbeatResult", "ShareGroup", "ShareMember", "assign_uniform"]

Assignment = dict[str, tuple[int, ...]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    deadline: int
    epoch: int = 0
    assignment: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_epoch: int = -1
    assignment: Assignment | None = None


def assign_uniform(subscriptions: Mapping[str, tuple[str, ...]],
                   partitions_of: Callable[[str], int | None]) -> dict[str, Assignment]:
    """Member id -> {topic: partitions} (see the module doc)."""
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    topics = sorted({t for subs in subscriptions.values() for t in subs})
    for topic in topics:
        count = partitions_of(topic)
        if not count:
            continue
        members = sorted(m for m, subs in subscriptions.items() if topic in subs)
        chosen: dict[str, list[int]] = {m: [] for m in members}
        if len(members) <= count:
            for p in range(count):
                chosen[members[p % len(members)]].append(p)
        else:
            for i, m in enumerate(members):
                chosen[m].append(i % count)
        for m, parts in chosen.items():
            out[m][topic] = tuple(parts)
    return out


class ShareGroup:
    def __init__(self, group_id: str, clock: Callable[[], int], session_timeout_ms: int) -> None:
        self.group_id = group_id
        self.clock = clock
        self.session_timeout_ms = session_timeout_ms
        self.members: dict[str, ShareMember] = {}
        self.epoch = 0
        self.assignment_epoch = 0
        self._target: dict[str, Assignment] = {}
        # The ids of the topics assigned: a topic deleted and created again under its name
        # is another topic, so the assignment (and the topic id members fetch with) moves.
        self._topic_ids: dict[str, str] = {}

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def heartbeat(self, member_id: str, member_epoch: int, subscribed: tuple[str, ...] | None,
                  rack_id: str | None, client_id: str, client_host: str,
                  partitions_of: Callable[[str], int | None],
                  topic_id_of: Callable[[str], str | None] = lambda _t: None) -> HeartbeatResult:
        now = self.clock()
        if not member_id:
            return HeartbeatResult(ErrorCode.invalid_request, "a share member must send its member id")
        if member_epoch == -1:
            self.leave(member_id)
            self._recompute(partitions_of, topic_id_of)
            return HeartbeatResult(ErrorCode.none, member_epoch=-1)
        member = self.members.get(member_id)
        full = member_epoch == 0 or subscribed is not None
        if member is None:
            if member_epoch != 0:
                return HeartbeatResult(ErrorCode.unknown_member_id,
                                       f"member {member_id} is not in share group {self.group_id}")
            if not subscribed:
                return HeartbeatResult(ErrorCode.invalid_request, "the first heartbeat must name the subscribed topics")
            member = ShareMember(member_id, client_id, client_host, rack_id, tuple(subscribed), now)
            self.members[member_id] = member
        elif member_epoch != 0 and member_epoch != member.epoch:
            return HeartbeatResult(ErrorCode.fenced_member_epoch,
                                   f"member epoch {member_epoch} is not the current {member.epoch}")
        if subscribed is not None:
            member.subscribed = tuple(subscribed)
        if rack_id is not None:
            member.rack_id = rack_id
        member.deadline = now + self.session_timeout_ms
        self._recompute(partitions_of, topic_id_of)
        target = self._target.get(member_id, {})
        changed = full or member.epoch != self.epoch or target != member.assignment
        member.epoch = self.epoch
        member.assignment = target
        return HeartbeatResult(ErrorCode.none, member_epoch=member.epoch,
                               assignment=target if changed else None)

    def _recompute(self, partitions_of: Callable[[str], int | None],
                   topic_id_of: Callable[[str], str | None]) -> None:
        target = assign_uniform({m.member_id: m.subscribed for m in self.members.values()}, partitions_of)
        ids = {t: topic_id_of(t) or "" for a in target.values() for t in a}
        if target != self._target or ids != self._topic_ids:
            self._target = target
            self._topic_ids = ids
            self.epoch += 1
            self.assignment_epoch = self.epoch

    def leave(self, member_id: str) -> bool:
        return self.members.pop(member_id, None) is not None

    def expire(self) -> list[str]:
        """Members silent past the session timeout, removed."""
        now = self.clock()
        gone = [m.member_id for m in self.members.values() if m.deadline <= now]
        for m in gone:
            del self.members[m]
        if gone:
            self._target = {m: a for m, a in self._target.items() if m in self.members}
            self.epoch += 1
        return gone

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}
