"""Window arithmetic: unit tests at the boundaries, and properties against brute force and
from-scratch oracles (``sliding_aggregate``, ``sessionize``)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.streams.watermarks import InputClock
from streamkit.streams.windows import (
    MIN_TIMESTAMP,
    HoppingWindows,
    NewSlidingWindow,
    SessionWindows,
    SlidingPlan,
    SlidingWindows,
    TumblingWindows,
    Window,
    WindowSpec,
    apply_sliding_plan,
    close_time,
    duration_ms,
    expired,
    hopping,
    is_late,
    merge_session,
    min_retention_ms,
    plan_sliding,
    session,
    sliding,
    sliding_scan_range,
    sliding_window_ranges,
    tumbling,
    windows_for,
)

from .oracles import closed_windows, sessionize, sliding_aggregate

PROPS = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])

Agg = tuple[str, ...]


def init() -> Agg:
    return ()


def add(agg: Agg, value: str) -> Agg:
    # Appending (not summing) checks that every window folds its records in arrival order.
    return (*agg, value)


# --------------------------------------------------------------------------- Window


def test_window_is_half_open() -> None:
    w = Window(10, 20)
    assert not w.contains(9)
    assert w.contains(10)
    assert w.contains(19)
    assert not w.contains(20)
    assert w.size == 10


def test_window_orders_by_start_then_end() -> None:
    assert sorted([Window(5, 9), Window(0, 10), Window(0, 3)]) == [
        Window(0, 3),
        Window(0, 10),
        Window(5, 9),
    ]


def test_window_rejects_empty_or_non_int() -> None:
    with pytest.raises(ValueError, match="after its start"):
        Window(5, 5)
    with pytest.raises(TypeError, match="window start"):
        Window(0.0, 5)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- durations


def test_duration_ms_forms() -> None:
    assert duration_ms(1500) == 1500
    assert duration_ms(1500.0) == 1500
    assert duration_ms(timedelta(minutes=1, milliseconds=5)) == 60_005
    assert duration_ms(minutes=1, seconds=30) == 90_000
    assert duration_ms(hours=1, days=1) == 25 * 3_600_000
    assert duration_ms(ms=7) == 7
    assert duration_ms(minutes=0.1) == 6_000  # exact, not float-rounded
    assert duration_ms(seconds=0.001) == 1
    assert duration_ms() == 0
    assert duration_ms(0) == 0
    assert duration_ms(timedelta(minutes=1, seconds=-10)) == 50_000


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: duration_ms(-1), ValueError, "negative"),
        (lambda: duration_ms(seconds=-1), ValueError, "negative"),
        (lambda: duration_ms(0.5), ValueError, "whole number of milliseconds"),
        (lambda: duration_ms(seconds=0.0005), ValueError, "whole number of milliseconds"),
        (lambda: duration_ms(timedelta(microseconds=1500)), ValueError, "whole number"),
        (lambda: duration_ms(math.nan), ValueError, "finite"),
        (lambda: duration_ms(seconds=math.inf), ValueError, "finite"),
        (lambda: duration_ms(True), TypeError, "number"),
        (lambda: duration_ms("5"), TypeError, "number"),  # type: ignore[arg-type]
        (lambda: duration_ms(60, seconds=1), ValueError, "not both"),
    ],
)
def test_duration_ms_rejects(call: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()  # type: ignore[operator]


# --------------------------------------------------------------------------- specs


def test_factories() -> None:
    assert tumbling(minutes=1) == TumblingWindows(size_ms=60_000, grace_ms=0)
    assert tumbling(timedelta(seconds=2), grace=timedelta(seconds=1)) == TumblingWindows(2000, 1000)
    assert tumbling(100, grace=5).advance_ms == 100
    assert hopping(timedelta(minutes=5), 60_000) == HoppingWindows(300_000, 60_000, 0)
    assert hopping(10, 3, grace=2) == HoppingWindows(10, 3, 2)
    assert sliding(timedelta(seconds=10), grace=0) == SlidingWindows(10_000, 0)
    assert sliding(0) == SlidingWindows(0)  # Kafka allows a time difference of zero
    assert session(timedelta(minutes=30)) == SessionWindows(1_800_000)


def test_with_grace_returns_a_copy() -> None:
    specs: list[WindowSpec] = [tumbling(10), hopping(10, 5), sliding(10), session(10)]
    for spec in specs:
        graced = spec.with_grace(timedelta(seconds=1))
        assert graced.grace_ms == 1000
        assert spec.grace_ms == 0
        assert type(graced) is type(spec)
        assert graced.with_grace(0) == spec


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tumbling(), "tumbling window size must be positive"),
        (lambda: tumbling(0), "tumbling window size must be positive"),
        (lambda: tumbling(-5), "tumbling window size must not be negative"),
        (lambda: tumbling(10, grace=-1), "grace period must not be negative"),
        (lambda: hopping(10, 0), "hopping window advance must be positive"),
        (lambda: hopping(0, 1), "hopping window size must be positive"),
        (lambda: hopping(10, 11), "must not exceed its size"),
        (lambda: sliding(-1), "sliding window size"),
        (lambda: session(0), "session inactivity gap must be positive"),
        (lambda: TumblingWindows(0), "tumbling window size must be positive"),
        (lambda: SessionWindows(5, -1), "grace period must not be negative"),
        (lambda: tumbling(10).with_grace(-1), "grace period must not be negative"),
    ],
)
def test_specs_reject_bad_durations(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_specs_reject_float_fields() -> None:
    with pytest.raises(TypeError, match="int of milliseconds"):
        TumblingWindows(10.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int of milliseconds"):
        HoppingWindows(10, 5, grace_ms=True)


# --------------------------------------------------------------------------- windows_for


def test_tumbling_boundaries() -> None:
    spec = tumbling(10)
    assert windows_for(spec, 0) == [Window(0, 10)]
    assert windows_for(spec, 9) == [Window(0, 10)]
    assert windows_for(spec, 10) == [Window(10, 20)]
    assert windows_for(spec, -1) == [Window(-10, 0)]
    assert windows_for(spec, -10) == [Window(-10, 0)]
    assert windows_for(spec, -11) == [Window(-20, -10)]


def test_hopping_size_multiple_of_advance() -> None:
    spec = hopping(10, 5)
    assert windows_for(spec, 5) == [Window(0, 10), Window(5, 15)]
    assert windows_for(spec, 9) == [Window(0, 10), Window(5, 15)]
    assert windows_for(spec, 10) == [Window(5, 15), Window(10, 20)]
    assert windows_for(spec, -1) == [Window(-10, 0), Window(-5, 5)]


def test_hopping_size_not_multiple_of_advance() -> None:
    spec = hopping(10, 3)
    # ceil(10/3) = 4 windows at some timestamps, floor(10/3) = 3 at others.
    assert windows_for(spec, 9) == [Window(0, 10), Window(3, 13), Window(6, 16), Window(9, 19)]
    assert windows_for(spec, 10) == [Window(3, 13), Window(6, 16), Window(9, 19)]
    assert windows_for(spec, 5) == [Window(-3, 7), Window(0, 10), Window(3, 13)]


def test_hopping_with_advance_equal_to_size_is_tumbling() -> None:
    for ts in range(-25, 25):
        assert windows_for(hopping(7, 7), ts) == windows_for(tumbling(7), ts)


def test_windows_for_rejects_data_driven_windows() -> None:
    with pytest.raises(TypeError, match="tumbling or hopping"):
        windows_for(sliding(10), 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tumbling or hopping"):
        windows_for(session(10), 0)  # type: ignore[arg-type]


@PROPS
@given(size=st.integers(1, 1000), ts=st.integers(-(10**6), 10**6))
def test_tumbling_windows_partition_the_time_line(size: int, ts: int) -> None:
    spec = tumbling(size)
    [w] = windows_for(spec, ts)
    assert w.contains(ts)
    assert w.size == size
    assert w.start % size == 0
    # Contiguous: the next window starts at this end, the previous ends at this start.
    assert windows_for(spec, w.end) == [Window(w.end, w.end + size)]
    assert windows_for(spec, w.start - 1) == [Window(w.start - size, w.start)]
    assert windows_for(spec, w.end - 1) == [w]


@PROPS
@given(data=st.data(), size=st.integers(1, 60), ts=st.integers(-1000, 1000))
def test_hopping_matches_brute_force(data: st.DataObject, size: int, ts: int) -> None:
    advance = data.draw(st.integers(1, size))
    spec = hopping(size, advance)
    candidates = (
        Window(k * advance, k * advance + size)
        for k in range((ts - 2 * size) // advance - 2, (ts + size) // advance + 2)
    )
    expected = [w for w in candidates if w.contains(ts)]
    assert windows_for(spec, ts) == expected
    assert size // advance <= len(expected) <= -(-size // advance)


# --------------------------------------------------------------------------- lateness


def test_is_late_boundary() -> None:
    assert not is_late(100, 0, 99)
    assert is_late(100, 0, 100)  # end is exclusive: stream time at end closes the window
    assert not is_late(100, 10, 109)
    assert is_late(100, 10, 110)
    assert not is_late(100, 0, MIN_TIMESTAMP)


def test_expired_boundary() -> None:
    assert not expired(100, 50, 149)
    assert expired(100, 50, 150)


def test_closed_windows_fixed() -> None:
    spec = tumbling(10, grace=5)
    windows = [Window(20, 30), Window(0, 10), Window(10, 20)]
    assert closed_windows(spec, windows, 14) == []
    assert closed_windows(spec, windows, 15) == [Window(0, 10)]
    assert closed_windows(spec, windows, 25) == [Window(0, 10), Window(10, 20)]
    assert closed_windows(spec, iter(windows), 35) == sorted(windows)
    assert closed_windows(tumbling(10), windows, 10) == [Window(0, 10)]


def test_closed_windows_session_waits_for_the_gap() -> None:
    spec = session(5, grace=2)
    w = Window(0, 4)  # records at 0..3; a record at 8 (3 + gap) could still join
    assert close_time(spec, w) == 11
    assert closed_windows(spec, [w], 10) == []
    assert closed_windows(spec, [w], 11) == [w]


def test_closed_windows_sliding_matches_kafka_inclusive_end() -> None:
    # Kafka keeps a sliding window [0, 10] while windowEnd >= streamTime - grace, i.e. until
    # stream time 11 with grace 0; half-open it is [0, 11), closed at end + grace = 11.
    spec = sliding(10)
    left, _ = sliding_window_ranges(spec, 10)
    assert closed_windows(spec, [left], 10) == []
    assert closed_windows(spec, [left], 11) == [left]


def test_min_retention() -> None:
    assert min_retention_ms(tumbling(10, grace=3)) == 3
    assert min_retention_ms(hopping(10, 5, grace=3)) == 3
    assert min_retention_ms(session(10, grace=3)) == 13
    assert min_retention_ms(sliding(10, grace=3)) == 14


specs = st.one_of(
    st.builds(TumblingWindows, st.integers(1, 50), st.integers(0, 20)),
    st.integers(1, 50).flatmap(
        lambda size: st.builds(
            HoppingWindows, st.just(size), st.integers(1, size), st.integers(0, 20)
        )
    ),
    st.builds(SlidingWindows, st.integers(0, 50), st.integers(0, 20)),
    st.builds(SessionWindows, st.integers(1, 50), st.integers(0, 20)),
)
windows = st.builds(
    lambda start, size: Window(start, start + size), st.integers(-200, 200), st.integers(1, 60)
)


@PROPS
@given(
    spec=specs,
    ws=st.lists(windows, max_size=20),
    times=st.lists(st.integers(-300, 300), min_size=1, max_size=10),
)
def test_closed_stays_closed_as_stream_time_advances(
    spec: WindowSpec, ws: list[Window], times: list[int]
) -> None:
    clock = InputClock(None, 0)
    previous: set[Window] = set()
    for ts in times:  # arbitrary order: stream time only takes the maximum
        now = clock.observe(0, ts, 0)
        closed = closed_windows(spec, ws, now)
        assert closed == sorted(closed)
        assert previous <= set(closed)
        previous = set(closed)
        for w in ws:
            gap = spec.gap_ms if isinstance(spec, SessionWindows) else 0
            assert (w in previous) == is_late(w.end + gap, spec.grace_ms, now)


# --------------------------------------------------------------------------- stream time


def test_stream_time_basics() -> None:
    """A partition's watermark (``watermarks.InputClock`` with one input): the largest
    timestamp so far; it never goes back, which is what makes "closed" final."""
    clock = InputClock(None, 0)
    assert clock.value(0) == MIN_TIMESTAMP
    assert clock.observe(0, -5, 0) == -5
    assert clock.observe(0, 10, 0) == 10
    assert clock.observe(0, 3, 0) == 10  # out of order: stays
    assert clock.value(0) == 10


@PROPS
@given(st.lists(st.integers(-(2**63) + 1, 2**63 - 1), max_size=30))
def test_stream_time_never_decreases(stamps: list[int]) -> None:
    clock = InputClock(None, 0)
    seen = MIN_TIMESTAMP
    for ts in stamps:
        before = clock.value(0)
        after = clock.observe(0, ts, 0)
        seen = max(seen, ts)
        assert after == clock.value(0) == seen >= before


# --------------------------------------------------------------------------- sliding windows


def test_sliding_window_ranges() -> None:
    left, right = sliding_window_ranges(sliding(10), 5)
    assert left == Window(-5, 6)  # Kafka's [-5, 5]: 5 is its last record
    assert right == Window(6, 17)  # Kafka's [6, 16]: starts just after 5
    assert left.size == right.size == 11
    assert sliding_scan_range(sliding(10), 5) == (-16, 7)


def test_sliding_aggregate_example() -> None:
    # Kafka's KIP-450 picture with D = 10: each distinct set of records within 10 ms, once.
    result = sliding_aggregate(sliding(10), [(10, "a"), (15, "b"), (30, "c")], init, add)
    assert result == {
        Window(0, 11): ("a",),  # left(10)
        Window(5, 16): ("a", "b"),  # left(15)
        Window(11, 22): ("b",),  # right(10): 15 is within 10 + 10 + 1
        Window(20, 31): ("c",),  # left(30); right(15) and right(30) are empty
    }


def test_sliding_aggregate_edges() -> None:
    spec = sliding(10)
    assert sliding_aggregate(spec, [], init, add) == {}
    # Exactly D apart: one window holds both (inclusive difference, as in Kafka).
    assert sliding_aggregate(spec, [(0, "a"), (10, "b")], init, add) == {
        Window(-10, 1): ("a",),
        Window(0, 11): ("a", "b"),
        Window(1, 12): ("b",),
    }
    # D + 1 apart: right(0) is left(11), the same window.
    assert sliding_aggregate(spec, [(0, "a"), (11, "b")], init, add) == {
        Window(-10, 1): ("a",),
        Window(1, 12): ("b",),
    }
    # Duplicates share their left window; size 0 separates every distinct timestamp.
    assert sliding_aggregate(spec, [(3, "a"), (3, "b")], init, add) == {Window(-7, 4): ("a", "b")}
    assert sliding_aggregate(sliding(0), [(3, "a"), (4, "b"), (3, "c")], init, add) == {
        Window(3, 4): ("a", "c"),
        Window(4, 5): ("b",),
    }


def test_plan_sliding_steps() -> None:
    spec = sliding(10)
    assert plan_sliding(spec, 0, {}) == SlidingPlan(
        update=(), create=(NewSlidingWindow(Window(-10, 1), None, add_record=True),)
    )
    # In order, 5 after 0: left(5) copies left(0); right(0) is new and holds only 5.
    assert plan_sliding(spec, 5, {-10: 0}) == SlidingPlan(
        update=(),
        create=(
            NewSlidingWindow(Window(-5, 6), Window(-10, 1), add_record=True),
            NewSlidingWindow(Window(1, 12), None, add_record=True),
        ),
    )
    # Out of order, 2 between 0 and 5: updates left(5) and right(0), creates left(2) from
    # left(0) and right(2) from right(0) as it was before this record (just 5).
    stored = {-10: 0, -5: 5, 1: 5}
    assert plan_sliding(spec, 2, stored) == SlidingPlan(
        update=(Window(-5, 6), Window(1, 12)),
        create=(
            NewSlidingWindow(Window(-8, 3), Window(-10, 1), add_record=True),
            NewSlidingWindow(Window(3, 14), Window(1, 12), add_record=False),
        ),
    )
    # A duplicate only updates.
    assert plan_sliding(spec, 5, stored) == SlidingPlan(
        update=(Window(-5, 6), Window(1, 12)), create=()
    )
    # Windows outside the scan range are ignored.
    assert plan_sliding(spec, 100, stored) == plan_sliding(spec, 100, {})


def test_sliding_plan_without_closed() -> None:
    spec = sliding(10)
    plan = plan_sliding(spec, 2, {-10: 0, -5: 5, 1: 5})
    # Stream time 11 with grace 0: [-8, 3) and [-5, 6) are closed, [1, 12) and [3, 14) open.
    assert plan.without_closed(0, 11) == SlidingPlan(
        update=(Window(1, 12),),
        create=(NewSlidingWindow(Window(3, 14), Window(1, 12), add_record=False),),
    )


def test_new_sliding_window_needs_seed_or_record() -> None:
    with pytest.raises(ValueError, match="seed or the record"):
        NewSlidingWindow(Window(0, 1), None, add_record=False)


Store = dict[int, tuple[Agg, int]]


def sliding_step(spec: SlidingWindows, store: Store, ts: int, value: str) -> SlidingPlan:
    """What an aggregator does per record: scan by start, plan, apply, write back."""
    lo, hi = sliding_scan_range(spec, ts)
    scanned = {start: entry for start, entry in store.items() if lo <= start < hi}
    plan = plan_sliding(spec, ts, {start: max_ts for start, (_, max_ts) in scanned.items()})
    for new in plan.create:
        assert new.window.start not in store
        assert new.seed is None or new.seed.start in store
    store.update(apply_sliding_plan(plan, ts, value, scanned, init, add))
    return plan


def as_windows(spec: SlidingWindows, store: Store) -> dict[Window, Agg]:
    return {Window(s, s + spec.size_ms + 1): agg for s, (agg, _) in store.items()}


def check_max_ts(spec: SlidingWindows, store: Store, records: Sequence[tuple[int, str]]) -> None:
    for start, (_, max_ts) in store.items():
        w = Window(start, start + spec.size_ms + 1)
        assert max_ts == max(ts for ts, _ in records if w.contains(ts))


@PROPS
@given(
    size=st.integers(0, 12),
    stamps=st.lists(st.integers(-40, 40), max_size=25),
)
def test_sliding_incremental_matches_oracle_in_any_order(size: int, stamps: list[int]) -> None:
    spec = sliding(size)
    records = [(ts, f"r{i}") for i, ts in enumerate(stamps)]
    store: Store = {}
    for ts, value in records:
        sliding_step(spec, store, ts, value)
    assert as_windows(spec, store) == sliding_aggregate(spec, records, init, add)
    check_max_ts(spec, store, records)


@PROPS
@given(
    size=st.integers(0, 12),
    grace=st.integers(0, 15),
    stamps=st.lists(st.integers(0, 120), max_size=30),
)
def test_sliding_with_grace_and_retention_matches_oracle(
    size: int, grace: int, stamps: list[int]
) -> None:
    """Records up to ``grace`` out of order are exact even though windows are deleted as soon
    as retention allows: nothing the plan touches or reads is closed or gone."""
    spec = sliding(size, grace=grace)
    retention = min_retention_ms(spec)
    clock = InputClock(None, 0)
    store: Store = {}
    deleted: dict[Window, Agg] = {}
    accepted: list[tuple[int, str]] = []
    for i, ts in enumerate(stamps):
        now = clock.observe(0, ts, 0)
        for start in [s for s in store if expired(s + size + 1, retention, now)]:
            deleted[Window(start, start + size + 1)] = store.pop(start)[0]
        if is_late(ts + 1, grace, now):  # its left window is closed: later than grace
            continue
        accepted.append((ts, f"r{i}"))
        plan = sliding_step(spec, store, ts, f"r{i}")
        assert plan.without_closed(grace, now) == plan
    assert deleted.keys().isdisjoint(as_windows(spec, store))
    assert deleted | as_windows(spec, store) == sliding_aggregate(spec, accepted, init, add)


def test_sliding_retention_one_less_is_not_enough() -> None:
    # Records 0 then 13, then 10 at stream time 13 (grace 2): left(10) = [0, 11) is closed,
    # but right(0) = [1, 12) is open and must now be created with just 10. The previous
    # record 0 is known only through left(0) = [-10, 1), which retention must still hold.
    spec = sliding(10, grace=2)
    store: Store = {}
    sliding_step(spec, store, 0, "a")
    sliding_step(spec, store, 13, "b")
    now = 13
    assert is_late(11, spec.grace_ms, now)
    assert not is_late(12, spec.grace_ms, now)

    def open_creates(retention: int) -> list[Window]:
        kept = {s: m for s, (_, m) in store.items() if not expired(s + 11, retention, now)}
        plan = plan_sliding(spec, 10, kept).without_closed(spec.grace_ms, now)
        return [c.window for c in plan.create]

    # right(10) = [11, 22) holds 13 and is found either way.
    assert open_creates(min_retention_ms(spec)) == [Window(1, 12), Window(11, 22)]
    assert open_creates(min_retention_ms(spec) - 1) == [Window(11, 22)]


@PROPS
@given(size=st.integers(0, 10), stamps=st.lists(st.integers(-30, 30), min_size=1, max_size=15))
def test_sliding_oracle_holds_every_distinct_record_set_once(size: int, stamps: list[int]) -> None:
    """The definition itself: every window of length D + 1 that holds records holds the same
    records as exactly one oracle window, and every oracle window is such a window."""
    spec = sliding(size)
    records = [(ts, str(ts)) for ts in stamps]
    result = sliding_aggregate(spec, records, lambda: frozenset[str](), lambda a, v: a | {v})
    assert all(result.values())
    assert len(set(result.values())) == len(result)
    for start in range(min(stamps) - size - 1, max(stamps) + 2):
        content = frozenset(str(ts) for ts in stamps if start <= ts <= start + size)
        assert not content or content in result.values()


# --------------------------------------------------------------------------- sessions


def test_merge_session_into_nothing() -> None:
    assert merge_session(5, [], 7) == (Window(7, 8), [])


def test_merge_session_gap_boundaries() -> None:
    s = Window(10, 13)  # records at 10..12
    assert merge_session(5, [s], 17) == (Window(10, 18), [s])  # 17 - 12 == gap: joins
    assert merge_session(5, [s], 18) == (Window(18, 19), [])  # 18 - 12 > gap: new session
    assert merge_session(5, [s], 5) == (Window(5, 13), [s])  # 10 - 5 == gap: joins
    assert merge_session(5, [s], 4) == (Window(4, 5), [])
    assert merge_session(5, [s], 11) == (s, [s])  # inside: same extent, replaced by itself


def test_merge_session_bridges() -> None:
    a, b, c = Window(0, 1), Window(10, 11), Window(30, 31)
    assert merge_session(5, [c, b, a], 5) == (Window(0, 11), [a, b])
    assert merge_session(5, [a, b, c], -3) == (Window(-3, 1), [a])


def test_sessionize() -> None:
    assert sessionize(5, []) == []
    assert sessionize(5, [12, 0, 5, 5, 10, 25, 30, 36]) == [
        Window(0, 13),
        Window(25, 31),
        Window(36, 37),
    ]
    assert sessionize(5, [-7, -2]) == [Window(-7, -1)]


def test_session_gap_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="gap"):
        merge_session(-1, [], 0)
    with pytest.raises(ValueError, match="gap"):
        sessionize(-1, [0])


@PROPS
@given(
    gap=st.integers(1, 20),
    stamps=st.lists(st.integers(-100, 100), max_size=30).flatmap(st.permutations),
)
def test_merge_session_in_any_order_equals_sessionize(gap: int, stamps: list[int]) -> None:
    """Any arrival order of the same records ends in the sessions of the sorted records, and
    merging counts (merged = sum of replaced + 1) gives each session its record count."""
    sessions: dict[Window, int] = {}
    for ts in stamps:
        merged, replaced = merge_session(gap, list(sessions), ts)
        assert replaced == sorted(replaced)
        assert all(w in sessions for w in replaced)
        count = sum(sessions.pop(w) for w in replaced) + 1
        sessions[merged] = count
        ordered = sorted(sessions)
        # Invariant merge_session relies on: sessions are more than gap apart.
        assert all(b.start - (a.end - 1) > gap for a, b in itertools.pairwise(ordered))
    assert sorted(sessions) == sessionize(gap, sorted(stamps))
    for w, count in sessions.items():
        assert count == sum(1 for ts in stamps if w.contains(ts))
