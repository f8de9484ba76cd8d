"""Processing order of a fetched batch: lowest timestamp first, in slices."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from streamkit.streams.ordering import by_timestamp


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
