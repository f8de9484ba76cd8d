"""Hypothesis strategies for records with event times and partitions, to property-test
windowed logic through ``AppTestDriver`` (``driver.input(topic).send_many(records)``)::

    @given(timestamped_records(st.integers(), keys=st.sampled_from("abc"), max_disorder_ms=5_000))
    def test_counts(records):
        with AppTestDriver(app) as driver:
            driver.input("numbers").send_many(records)

Needs hypothesis (streamkit's ``dev`` extra); ``streamkit.testing`` does not import it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["timestamped_records"]

# 2023-11-14T22:13:20Z: a fixed start keeps failing examples reproducible.
DEFAULT_START_MS = 1_700_000_000_000


@st.composite
def _records(draw: st.DrawFn, values: st.SearchStrategy[Any], keys: st.SearchStrategy[Any] | None,
             partitions: int | None, start_ms: int, max_gap_ms: int, max_disorder_ms: int, min_size: int,
             max_size: int) -> list[dict[str, Any]]:
    count = draw(st.integers(min_size, max_size))
    clock = start_ms
    out = []
    for _ in range(count):
        clock += draw(st.integers(0, max_gap_ms))
        # Out of order by at most max_disorder_ms behind the latest time so far.
        timestamp = clock - draw(st.integers(0, max_disorder_ms)) if max_disorder_ms else clock
        record: dict[str, Any] = {"value": draw(values), "timestamp": max(timestamp, 0)}
        if keys is not None:
            record["key"] = draw(keys)
        if partitions is not None:
            record["partition"] = draw(st.integers(0, partitions - 1))
        out.append(record)
    return out


def timestamped_records(values: st.SearchStrategy[Any], *, keys: st.SearchStrategy[Any] | None = None,
                        partitions: int | None = None, start_ms: int = DEFAULT_START_MS, max_gap_ms: int = 30_000,
                        max_disorder_ms: int = 0, min_size: int = 0,
                        max_size: int = 50) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Lists of records (dicts of ``send()``'s arguments) whose event times start at
    ``start_ms`` and advance by up to ``max_gap_ms``; each record may lag the latest time so
    far by up to ``max_disorder_ms`` (out-of-order data). ``keys`` draws keys (none: keyless
    records); ``partitions`` draws an explicit partition below it for each record."""
    if partitions is not None and partitions < 1:
        raise ValueError("partitions must be at least 1")
    if min(max_gap_ms, max_disorder_ms, min_size) < 0 or max_size < min_size:
        raise ValueError("gaps, disorder and sizes must be non-negative, and max_size >= min_size")
    return _records(values, keys, partitions, start_ms, max_gap_ms, max_disorder_ms, min_size, max_size)
