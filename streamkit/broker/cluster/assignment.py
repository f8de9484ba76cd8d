"""Where replicas go and who leads: the controller's decisions, as pure functions.

Replica assignment follows Kafka's (``AdminUtils.assignReplicasToBrokers``): the first
replicas of consecutive partitions go round the brokers from a random start, the followers
of each partition at a shift that changes every full round, so that leaders and followers
spread evenly and no two partitions share the same follower pattern. With racks, the
brokers are first listed alternating racks, and each partition's replicas go to as many
different racks as there are (Kafka's rack-aware assignment), so one rack's loss never
takes all of a partition's replicas while another rack is left.

Leader election follows Kafka's too: the first replica in assignment order (the preferred
leader first) that is alive and in the ISR; with unclean election allowed, any live replica
when no ISR member is alive (which may lose acknowledged records: Kafka's
``unclean.leader.election.enable``).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

__all__ = ["AssignmentError", "assign_replicas", "elect_leader", "rack_alternated"]


class AssignmentError(ValueError):
    """The replication factor cannot be met with the live brokers."""


def rack_alternated(racks: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered so that consecutive ones are on different racks (Kafka's
    ``getRackAlternatedBrokerList``): rack by rack in turn, brokers in id order."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker] or "", []).append(broker)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while any(queues):
        queue = queues[i % len(queues)]
        if queue:
            out.append(queue.pop(0))
        i += 1
    return out


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(brokers: Mapping[int, str | None], partitions: int, replication_factor: int,
                    first_partition: int = 0, rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """Replicas of partitions ``first_partition .. first_partition + partitions - 1``
    (``brokers``: live broker id -> rack)."""
    if replication_factor < 1:
        raise AssignmentError(f"replication factor must be at least 1, not {replication_factor}")
    if replication_factor > len(brokers):
        raise AssignmentError(f"replication factor {replication_factor} is larger than the "
                              f"{len(brokers)} available broker{'s' if len(brokers) != 1 else ''}")
    rng = rng or random.Random()
    racked = any(rack for rack in brokers.values())
    ordered = rack_alternated(brokers) if racked else sorted(brokers)
    n = len(ordered)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    for i in range(partitions):
        p = first_partition + i
        if i > 0 and i % n == 0:
            shift += 1
        first = (i + start) % n
        replicas = [ordered[first]]
        if racked:
            replicas += _rack_followers(ordered, brokers, first, shift, replication_factor)
        else:
            replicas += [ordered[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        out[p] = tuple(replicas)
    return out


def _rack_followers(ordered: Sequence[int], racks: Mapping[int, str | None], first: int, shift: int,
                    replication_factor: int) -> list[int]:
    """Followers of the partition led by ``ordered[first]`` (Kafka's
    ``assignReplicasToBrokersRackAware``): a broker on a rack with no replica of the
    partition yet, until every rack has one, then any broker not chosen yet."""
    n = len(ordered)
    rack_count = len({racks[b] or "" for b in ordered})
    chosen = [ordered[first]]
    racks_used = {racks[ordered[first]] or ""}  # only grows: a chosen broker's rack is in it
    k = 0
    while len(chosen) < replication_factor:
        # Kafka shifts by whole rounds of racks here; k walks every other broker in turn.
        candidate = ordered[_replica_index(first, shift * rack_count, k, n)]
        k += 1
        rack = racks[candidate] or ""
        if candidate in chosen or (rack in racks_used and len(racks_used) < rack_count):
            continue
        chosen.append(candidate)
        racks_used.add(rack)
    return chosen[1:]


def elect_leader(replicas: Sequence[int], isr: Collection[int], live: Collection[int], *,
                 unclean: bool = False, excluded: Collection[int] = ()) -> int | None:
    """The new leader: the first replica alive and in the ISR (``excluded`` ones, brokers
    shutting down, only if nobody else can); with ``unclean``, else any live replica. None:
    the partition goes offline."""
    for candidates in ([r for r in replicas if r not in excluded], list(replicas)):
        for r in candidates:
            if r in isr and r in live:
                return r
    if unclean:
        for r in replicas:
            if r in live:
                return r
    return None
