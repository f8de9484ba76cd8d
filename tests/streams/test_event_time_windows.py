"""Session and sliding windows across partitions, without a broker (as
``test_event_time.py`` does for tumbling windows): for any interleaving of the same
per-partition-ordered input, the final results are the batch computation, and exactly the
records late with respect to their own partition by more than grace are dropped.

The input keeps the batch computation well defined. Records of the shared keys step back
by at most the grace period, so none of them is late and none can reach a window that has
closed (which of them reach a closed window would otherwise depend on the interleaving, as
it does in Kafka Streams). Records that step back further each have a key of their own:
whether they are late depends on their own partition alone."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

import streamkit
from streamkit.streams.app import App
from streamkit.streams.windows import MIN_TIMESTAMP, SlidingWindows, Window, WindowSpec

from .oracles import sessionize, sliding_aggregate
from .pipeline_driver import LATE_TOPIC, Record, Topology

T0 = 1_700_000_040_000
SOURCE_PARTITIONS = 3
PARTITIONS = 2
GRACE = 200
GAP = 300  # session inactivity gap
DIFFERENCE = 500  # sliding windows' time difference

Input = dict[int, list[tuple[str, int]]]  # source partition -> [(page, timestamp)] in order
Results = dict[tuple[str, int, int], int]


def app_with(spec: WindowSpec) -> App:
    app = App("clicks", config={"num.partitions": PARTITIONS, "late.records.topic.name": LATE_TOPIC})
    clicks = app.topic("clicks", value_type=dict, partitions=SOURCE_PARTITIONS)
    (app.stream(clicks).group_by(lambda v: v["page"], name="by-page")
        .window(spec, grace=timedelta(milliseconds=GRACE))
        .count(name="per-window").final().to("counts"))
    return app


def run(spec: WindowSpec, clicks: Input, seed: int, max_batch: int) -> Topology:
    topology = Topology(app_with(spec))
    for p, records in clicks.items():
        log = topology.worker.produced[("clicks", p)]
        for page, ts in records:
            log.append(Record("clicks", p, len(log), ts, f"user{len(log) % 5}".encode(),
                              orjson.dumps({"page": page}), ()))
    asyncio.run(topology.run(random.Random(seed), max_batch))
    return topology


def batch(clicks: Input, close_after: int,
          windows: Callable[[list[int]], dict[Window, int]]) -> tuple[Results, list[tuple[str, int]]]:
    """The batch computation. A record is late when a window of its own, ``[ts, ts + 1)``,
    is closed by its partition's largest timestamp so far (itself included): ``ts + 1 +
    close_after <= high``. ``windows(timestamps)``: a key's windows and counts, from all of
    its records that are not late. Final: the windows closed by the slowest partition."""
    by_key: dict[str, list[int]] = defaultdict(list)
    late: list[tuple[str, int]] = []
    highs = []
    for records in clicks.values():
        high = MIN_TIMESTAMP
        for page, ts in records:
            high = max(high, ts)
            if ts + 1 + close_after <= high:
                late.append((page, ts))
            else:
                by_key[page].append(ts)
        highs.append(high)
    stream_time = min(highs)
    final = {(page, w.start, w.end): n for page, stamps in by_key.items() for w, n in windows(stamps).items()
             if w.end + close_after <= stream_time}
    return final, sorted(late)


def session_counts(stamps: list[int]) -> dict[Window, int]:
    return {w: sum(1 for ts in stamps if w.contains(ts)) for w in sessionize(GAP, stamps)}


def sliding_counts(stamps: list[int]) -> dict[Window, int]:
    return sliding_aggregate(SlidingWindows(DIFFERENCE), [(ts, None) for ts in stamps], lambda: 0,
                             lambda agg, _v: agg + 1)


@st.composite
def partition_input(draw: st.DrawFn, partition: int) -> list[tuple[str, int]]:
    """Shared keys mostly ascending, back by at most grace; keys of their own anywhere behind."""
    ts = T0 + draw(st.integers(0, 2_000))
    out = []
    for i in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["forward", "forward", "back", "alone"]))
        if kind == "forward":
            ts += draw(st.integers(0, 600))
            out.append((draw(st.sampled_from(["/a", "/b", "/c"])), ts))
        elif kind == "back":
            out.append((draw(st.sampled_from(["/a", "/b", "/c"])), ts - draw(st.integers(0, GRACE))))
        else:
            out.append((f"/alone-{partition}-{i}", ts - draw(st.integers(0, 2_000))))
    return out


inputs = st.fixed_dictionaries({p: partition_input(p) for p in range(SOURCE_PARTITIONS)})


def check(topology: Topology, expected: Results, late: list[tuple[str, int]]) -> None:
    assert topology.windows() == expected
    assert topology.late() == late
    assert topology.worker.metrics.late_records == len(late)


@settings(max_examples=40, deadline=None)
@given(clicks=inputs, seed=st.integers(0, 2**32), max_batch=st.integers(1, 30))
def test_sessions_in_any_interleaving_are_the_batch_sessions(clicks: Input, seed: int, max_batch: int) -> None:
    """A session closes ``gap + grace`` after its last record, so a record is late when that
    is past for a session of its own."""
    topology = run(streamkit.session(GAP), clicks, seed, max_batch)
    check(topology, *batch(clicks, GAP + GRACE, session_counts))


@settings(max_examples=40, deadline=None)
@given(clicks=inputs, seed=st.integers(0, 2**32), max_batch=st.integers(1, 30))
def test_sliding_windows_in_any_interleaving_are_the_batch_windows(clicks: Input, seed: int,
                                                                   max_batch: int) -> None:
    """A record is late when its own left window (which ends just after it) has closed."""
    topology = run(streamkit.sliding(DIFFERENCE), clicks, seed, max_batch)
    check(topology, *batch(clicks, GRACE, sliding_counts))


def test_the_inputs_have_late_records_and_windows_of_many_records() -> None:
    """The property tests check something: their input has late records, on-time records
    of keys of their own, and sessions and sliding windows of several records."""
    rng = random.Random(3)
    clicks: Input = {p: [] for p in range(SOURCE_PARTITIONS)}
    for p in clicks:
        ts = T0
        for i in range(30):
            ts += rng.randint(0, 400)
            clicks[p].append((rng.choice(["/a", "/b"]), ts))
            if i % 10 == 9:
                clicks[p].append((f"/alone-{p}-{i}", ts - 1_000))  # late for both kinds
                clicks[p].append((f"/alone-{p}-{i}-ok", ts - 50))
    for spec, close_after, windows in ((streamkit.session(GAP), GAP + GRACE, session_counts),
                                       (streamkit.sliding(DIFFERENCE), GRACE, sliding_counts)):
        expected, late = batch(clicks, close_after, windows)
        assert len(late) == 9 and max(expected.values()) > 3
        assert any(page.endswith("-ok") for page, _s, _e in expected)
        check(run(spec, clicks, 5, 7), expected, late)


