"""Processing order of a fetched batch: lowest timestamp first, in slices."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from streamkit.streams.ordering import Alignment, by_timestamp


@dataclass(frozen=True)
class Rec:
    timestamp: int
    seq: int


batches = st.dictionaries(st.integers(0, 4), st.lists(st.integers(0, 50), max_size=30), max_size=5).map(
    lambda d: {p: [Rec(ts, i) for i, ts in enumerate(tss)] for p, tss in d.items()})


@given(batch=batches, min_slice=st.integers(1, 5))
def test_slices_keep_each_partitions_order_and_start_at_the_lowest_head(batch: dict[int, list[Rec]],
                                                                       min_slice: int) -> None:
    taken = {p: 0 for p in batch}
    for p, records in by_timestamp(batch, min_slice):
        assert records, "no empty slice"
        assert list(records) == batch[p][taken[p]:taken[p] + len(records)], "a partition's records in order"
        if len(batch) > 1:
            heads = [batch[q][taken[q]].timestamp for q in batch if q != p and taken[q] < len(batch[q])]
            assert all(records[0].timestamp <= h for h in heads), "the slice with the lowest head goes first"
            # Past min_slice, a slice runs only while it is not ahead of the next head.
            for r in records[min_slice:]:
                assert all(r.timestamp <= h for h in heads)
        taken[p] += len(records)
    assert taken == {p: len(records) for p, records in batch.items()}


def test_a_backlog_partition_does_not_run_ahead() -> None:
    batch = {0: [Rec(t, t) for t in range(0, 1000, 10)], 1: [Rec(t, t) for t in range(5, 1000, 10)]}
    order = [(p, r.timestamp) for p, records in by_timestamp(batch, 1) for r in records]
    assert [ts for _p, ts in order] == sorted(ts for _p, ts in order)


def test_alignment_pauses_what_runs_ahead_of_the_slowest_lagging_partition() -> None:
    align: Alignment[str] = Alignment(max_idle_ms=1_000)
    # b and c ahead of a, which still has records to read: paused.
    assert align.update({"a": 100, "b": 500, "c": 900}, {"a", "b", "c"}, now=0) == ({"b", "c"}, set())
    # a caught up with b: b runs again; c still ahead.
    assert align.update({"a": 500, "b": 500, "c": 900}, {"a", "b", "c"}, now=10) == (set(), {"b"})
    # a read to its end (not lagging): the slowest lagging one is b; a, ahead of it, waits.
    assert align.update({"a": 700, "b": 500, "c": 900}, {"b", "c"}, now=20) == ({"a"}, set())
    # c waited max.task.idle.ms: released, and not paused again while it stays ahead.
    assert align.update({"a": 700, "b": 510, "c": 900}, {"b", "c"}, now=1_000) == (set(), {"c"})
    assert align.update({"a": 700, "b": 520, "c": 950}, {"b", "c"}, now=1_010) == (set(), set())
    # b passes c: b waits, a runs again; c, no longer ahead, can be paused again later.
    assert align.update({"a": 700, "b": 960, "c": 950}, {"b", "c"}, now=1_020) == ({"b"}, {"a"})
    assert align.update({"a": 700, "b": 960, "c": 990}, {"b", "c"}, now=1_030) == ({"c"}, {"b"})
    # Nothing lagging: nothing paused.
    assert align.update({"a": 700, "b": 960, "c": 990}, set(), now=1_040) == (set(), {"c"})
