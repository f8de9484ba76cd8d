"""Where a cluster's controller puts replicas and whom it elects (``cluster/assignment.py``),
as Kafka's ``AdminUtils`` does: rack-alternated brokers, each partition's replicas on as
many racks as there are, the preferred live ISR replica elected."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.broker.cluster.assignment import (
    AssignmentError,
    assign_replicas,
    elect_leader,
    rack_alternated,
)


class _Fixed:
    """Kafka's fixedStartIndex=0: the first replica of partition 0 is the first broker of
    the list, and the followers' shift starts at 0."""

    def randrange(self, _n: int) -> int:
        return 0


RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_brokers_alternate_racks_as_kafka_lists_them() -> None:
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]


def test_the_rack_aware_assignment_is_kafkas() -> None:
    """Kafka's AdminRackAwareTest, same brokers, racks and start: 7 partitions, 3 replicas."""
    assert assign_replicas(RACKS, 7, 3, rng=_Fixed()) == {  # type: ignore[arg-type]
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2)}


@pytest.mark.timeout(30)
def test_uneven_racks_with_more_replicas_than_racks_are_assigned() -> None:
    """Three brokers on one rack, one on another, four replicas: once every rack has a
    replica, any broker not chosen yet is taken (an earlier version looped forever here,
    and with it the broker creating the topic)."""
    for seed in range(20):
        assignment = assign_replicas({0: "a", 1: "a", 2: "a", 3: "b"}, 8, 4, rng=random.Random(seed))
        assert all(sorted(replicas) == [0, 1, 2, 3] for replicas in assignment.values())


@st.composite
def _brokers(draw: st.DrawFn) -> dict[int, str | None]:
    ids = draw(st.lists(st.integers(0, 50), min_size=1, max_size=9, unique=True))
    racked = draw(st.booleans())
    if not racked:
        return dict.fromkeys(ids)
    return {b: draw(st.sampled_from(["r1", "r2", "r3", "r4"])) for b in ids}


@settings(max_examples=300, deadline=None)
@given(brokers=_brokers(), partitions=st.integers(1, 30), data=st.data(), seed=st.integers(0, 2**32))
def test_every_partition_gets_distinct_brokers_on_as_many_racks_as_it_can(
        brokers: dict[int, str | None], partitions: int, data: st.DataObject, seed: int) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    first = data.draw(st.integers(0, 5))
    assignment = assign_replicas(brokers, partitions, rf, first_partition=first, rng=random.Random(seed))
    assert sorted(assignment) == list(range(first, first + partitions))
    racks = {r for r in brokers.values() if r}
    for replicas in assignment.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(brokers)
        if racks:
            assert len({brokers[r] for r in replicas}) == min(rf, len(racks))
    # Leaders go round the brokers: none leads more than one partition above another.
    led = [sum(1 for r in assignment.values() if r[0] == b) for b in brokers]
    assert max(led) - min(led) <= 1


def test_a_replication_factor_above_the_live_brokers_is_refused() -> None:
    with pytest.raises(AssignmentError, match="larger than the 2 available brokers"):
        assign_replicas({0: None, 1: None}, 1, 3)
    with pytest.raises(AssignmentError, match="at least 1"):
        assign_replicas({0: None}, 1, 0)


def test_the_first_live_isr_replica_leads() -> None:
    assert elect_leader((2, 0, 1), isr=(0, 1, 2), live=(0, 1, 2)) == 2
    assert elect_leader((2, 0, 1), isr=(0, 1), live=(0, 1, 2)) == 0
    assert elect_leader((2, 0, 1), isr=(0, 1), live=(1, 2)) == 1
    # A broker shutting down leads only when no other ISR replica can.
    assert elect_leader((2, 0, 1), isr=(0, 2), live=(0, 1, 2), excluded=(0,)) == 2
    assert elect_leader((2, 0, 1), isr=(0,), live=(0, 1, 2), excluded=(0,)) == 0


def test_without_a_live_isr_replica_only_an_unclean_election_finds_a_leader() -> None:
    assert elect_leader((0, 1), isr=(0,), live=(1,)) is None
    assert elect_leader((0, 1), isr=(0,), live=(1,), unclean=True) == 1
    assert elect_leader((0, 1), isr=(0,), live=(), unclean=True) is None
