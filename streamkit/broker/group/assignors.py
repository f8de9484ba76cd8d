"""Server-side partition assignors of the consumer group protocol (KIP-848): ``uniform`` and
``range``, Kafka's names for what a member asks for with ``group.remote.assignor``.

Pure functions: subscriptions and topic sizes in, a target assignment out. Every partition of
a subscribed topic goes to exactly one member subscribed to that topic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["ASSIGNORS", "Assignment", "MemberSubscription", "range_assign", "uniform_assign"]

TopicPartition = tuple[str, int]
Assignment = dict[str, set[TopicPartition]]  # member id -> partitions


class MemberSubscription:
    """What an assignor knows of a member: the topics it subscribes to (names and resolved
    regex alike) and the partitions the previous target assignment gave it."""

    __slots__ = ("previous", "topics")

    def __init__(self, topics: frozenset[str], previous: frozenset[TopicPartition] = frozenset()) -> None:
        self.topics = topics
        self.previous = previous


def uniform_assign(members: Mapping[str, MemberSubscription], partitions: Mapping[str, int]) -> Assignment:
    """Kafka's UniformAssignor goal: partition counts as even as the subscriptions allow, and
    sticky: a member keeps what it had as long as that stays balanced (so a rebalance moves
    few partitions). Greedy rather than Kafka's optimal builder for heterogeneous
    subscriptions: counts can then differ by more than one where a move would fix it only
    through a chain of swaps."""
    out: Assignment = {m: set() for m in members}
    if not members:
        return out
    eligible: dict[str, list[str]] = {
        t: sorted(m for m, s in members.items() if t in s.topics) for t in partitions}
    all_parts = [(t, p) for t in sorted(partitions) for p in range(partitions[t]) if eligible[t]]
    total = len(all_parts)
    # A member's fair share: with homogeneous subscriptions floor/ceil of total / members.
    ceiling = -(-total // len(members))
    owner: dict[TopicPartition, str] = {}
    for m in sorted(members):
        for tp in sorted(members[m].previous):
            t, p = tp
            if t in members[m].topics and t in partitions and p < partitions[t] and tp not in owner \
                    and len(out[m]) < ceiling:
                out[m].add(tp)
                owner[tp] = m
    for tp in all_parts:
        if tp not in owner:
            m = min(eligible[tp[0]], key=lambda x: (len(out[x]), x))
            out[m].add(tp)
            owner[tp] = m
    # Even out: move a partition from a fuller member to an eligible emptier one.
    moved = True
    while moved:
        moved = False
        for tp in sorted(owner):
            src = owner[tp]
            dst = min(eligible[tp[0]], key=lambda x: (len(out[x]), x))
            if len(out[src]) - len(out[dst]) > 1:
                out[src].discard(tp)
                out[dst].add(tp)
                owner[tp] = dst
                moved = True
    return out


def range_assign(members: Mapping[str, MemberSubscription], partitions: Mapping[str, int]) -> Assignment:
    """Kafka's RangeAssignor: per topic, the subscribed members in member-id order each get
    a contiguous range; the first ``partitions % members`` get one more. Members with the
    same subscriptions thus get the same partition numbers of co-partitioned topics."""
    out: Assignment = {m: set() for m in members}
    for topic in sorted(partitions):
        subs = sorted(m for m, s in members.items() if topic in s.topics)
        if not subs:
            continue
        count = partitions[topic]
        base, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = base + (1 if i < extra else 0)
            out[m].update((topic, p) for p in range(start, start + n))
            start += n
    return out


ASSIGNORS: dict[str, Callable[[Mapping[str, MemberSubscription], Mapping[str, int]], Assignment]] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
