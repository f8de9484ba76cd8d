"""Window arithmetic for event-time aggregations: pure functions over integer milliseconds.

Nothing here reads a clock, touches a store or does I/O. Time always comes in as an argument,
so the runtime decides what "now" means (stream time, restored on restart) and these rules
can be tested exhaustively.

Conventions
-----------
* Every time is an ``int`` of milliseconds since the epoch; every duration an ``int`` of
  milliseconds. Floats and ``datetime`` only appear at the edge (``duration_ms``), because
  float arithmetic would make window boundaries depend on rounding.
* Every window is half-open, ``[start, end)``: a record at ``end`` is in the next window.
  Kafka Streams writes sliding and session windows with an inclusive end; here they are
  stored with ``end = kafka_end + 1`` so that all window kinds share one ``contains``, one
  ``size`` and one lateness rule.
* Windows are aligned to the epoch and the time line is not clamped at 0: a timestamp near 0
  (or a negative one) gets windows that start before the epoch. Kafka Streams and
  quix-streams drop such windows; we keep them so that every timestamp is treated the same.
  Consequence for stores: window starts can be negative, so keys must encode them in an
  order-preserving way.

Lateness (Kafka Streams' grace period)
--------------------------------------
Stream time is the operator's watermark (``streamkit.streams.watermarks``: the minimum over
the partitions feeding it of the largest timestamp each has seen). A window is *closed* once ``close_time(spec, window) <= stream_time``, where the close time is
``window.end + grace`` (plus the inactivity gap for sessions, which can grow until then).
A record that would only change closed windows is late and must be dropped; a closed window
never reopens because stream time never goes back. Kafka observes the record's own timestamp
before checking, and so must the runtime: observe the timestamp first, then the checks.

Retention (``expired``) is separate from closing: a closed window's result may still be
needed (emit-final, interactive queries, and for sliding windows as a seed for new windows),
so it may be deleted only once ``end + expires <= stream_time``. ``min_retention_ms`` is the
smallest ``expires`` that keeps the algorithms here exact.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction
from typing import TypeAlias, TypeVar

__all__ = [
    "MIN_TIMESTAMP",
    "HoppingWindows",
    "NewSlidingWindow",
    "SessionWindows",
    "SlidingPlan",
    "SlidingWindows",
    "TumblingWindows",
    "Window",
    "WindowSpec",
    "apply_sliding_plan",
    "close_time",
    "duration_ms",
    "expired",
    "hopping",
    "is_late",
    "merge_session",
    "min_retention_ms",
    "plan_sliding",
    "seconds_ms",
    "session",
    "sliding",
    "sliding_scan_range",
    "sliding_window_ranges",
    "tumbling",
    "window_starts",
    "windows_for",
]

A = TypeVar("A")
V = TypeVar("V")

# Below every real timestamp (Kafka's record timestamps are signed 64-bit), so a fresh
# clock closes nothing and every first record is on time.
MIN_TIMESTAMP = -(2**63)

_MS_PER_SECOND = 1_000
_MS_PER_MINUTE = 60 * _MS_PER_SECOND
_MS_PER_HOUR = 60 * _MS_PER_MINUTE
_MS_PER_DAY = 24 * _MS_PER_HOUR


def _check_int(value: object, what: str) -> int:
    # bool is an int subclass; True as a window size is always a bug, never 1 ms.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int of milliseconds, got {value!r}")
    return value


def _check_positive(value: object, what: str) -> int:
    ms = _check_int(value, what)
    if ms <= 0:
        raise ValueError(f"{what} must be positive, got {ms} ms")
    return ms


def _check_non_negative(value: object, what: str) -> int:
    ms = _check_int(value, what)
    if ms < 0:
        raise ValueError(f"{what} must not be negative, got {ms} ms")
    return ms


# --------------------------------------------------------------------------- windows


@dataclass(frozen=True, slots=True, order=True)
class Window:
    """The half-open interval ``[start, end)`` of milliseconds. Ordered by (start, end)."""

    start: int
    end: int

    def __post_init__(self) -> None:
        _check_int(self.start, "window start")
        _check_int(self.end, "window end")
        # An empty window can hold no record, so constructing one is always an arithmetic bug.
        if self.end <= self.start:
            raise ValueError(f"window end must be after its start, got [{self.start}, {self.end})")

    def contains(self, timestamp: int) -> bool:
        """Whether ``timestamp`` (ms) falls in ``[start, end)``."""
        return self.start <= timestamp < self.end

    @property
    def size(self) -> int:
        """The window's length in milliseconds."""
        return self.end - self.start


# --------------------------------------------------------------------------- durations


def _part_ms(value: int | float, factor: int, what: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number, got {value!r}")
    if isinstance(value, int):
        return Fraction(value * factor)
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value!r}")
    # Go through the shortest repr so that minutes=0.1 means exactly 6000 ms, not whatever
    # the binary float 0.1 times 60000 rounds to.
    return Fraction(Decimal(repr(value))) * factor


def _duration(
    value: int | float | timedelta | None,
    *,
    ms: float,
    seconds: float,
    minutes: float,
    hours: float,
    days: float,
    what: str,
) -> int:
    parts: tuple[tuple[float, int], ...] = (
        (ms, 1),
        (seconds, _MS_PER_SECOND),
        (minutes, _MS_PER_MINUTE),
        (hours, _MS_PER_HOUR),
        (days, _MS_PER_DAY),
    )
    has_parts = any(part != 0 for part, _ in parts)
    if value is not None and has_parts:
        # Summing them would hide a mistake like tumbling(60, seconds=1): which one was meant?
        raise ValueError(f"{what}: give either a value or keyword parts, not both")
    total: Fraction
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        total = Fraction(micros, 1_000)
    elif value is not None:
        total = _part_ms(value, 1, what)
    else:
        total = sum((_part_ms(part, factor, what) for part, factor in parts), Fraction(0))
    if total.denominator != 1:
        # Truncating would silently shift window boundaries; refuse instead.
        raise ValueError(f"{what} must be a whole number of milliseconds, got {float(total)} ms")
    result = int(total)
    if result < 0:
        raise ValueError(f"{what} must not be negative, got {result} ms")
    return result


def duration_ms(
    value: int | float | timedelta | None = None,
    *,
    ms: int = 0,
    seconds: float = 0,
    minutes: float = 0,
    hours: float = 0,
    days: float = 0,
) -> int:
    """A duration as whole milliseconds: ``value`` (an int/float of ms, or a timedelta), or the
    sum of the keyword parts. Zero is allowed (a grace of 0); negative durations, fractions of
    a millisecond, NaN/inf and bools raise. Sizes are checked for > 0 by the window specs."""
    return _duration(
        value, ms=ms, seconds=seconds, minutes=minutes, hours=hours, days=days, what="duration"
    )


def seconds_ms(value: float | timedelta, what: str) -> int:
    """Faust-style durations (timers, agents' windowed tables): seconds, int or float, or a
    timedelta; a positive whole number of milliseconds (``duration_ms``'s checks)."""
    ms = duration_ms(value) if isinstance(value, timedelta) else duration_ms(seconds=value)
    if ms <= 0:
        raise ValueError(f"{what} must be positive, got {ms} ms")
    return ms


def _grace(grace: int | timedelta | None) -> int:
    if grace is None:
        return 0
    return _duration(grace, ms=0, seconds=0, minutes=0, hours=0, days=0, what="grace period")


def _size(value: int | float | timedelta, what: str) -> int:
    return _check_positive(
        _duration(value, ms=0, seconds=0, minutes=0, hours=0, days=0, what=what), what
    )


# --------------------------------------------------------------------------- window specs


@dataclass(frozen=True, slots=True)
class TumblingWindows:
    """Fixed, non-overlapping windows ``[k*size, (k+1)*size)``; every record is in one."""

    size_ms: int
    grace_ms: int = 0

    def __post_init__(self) -> None:
        _check_positive(self.size_ms, "tumbling window size")
        _check_non_negative(self.grace_ms, "grace period")

    @property
    def advance_ms(self) -> int:
        """How far consecutive windows start apart: the size, for tumbling windows."""
        # A tumbling window is a hopping window that advances by its own size.
        return self.size_ms

    def with_grace(self, grace: int | timedelta) -> TumblingWindows:
        """The same windows with another grace period (ms or a timedelta)."""
        return dataclasses.replace(self, grace_ms=_grace(grace))


@dataclass(frozen=True, slots=True)
class HoppingWindows:
    """Overlapping windows ``[k*advance, k*advance + size)``; ``advance <= size``, and size
    need not be a multiple of advance (then records fall in floor or ceil of size/advance)."""

    size_ms: int
    advance_ms: int
    grace_ms: int = 0

    def __post_init__(self) -> None:
        _check_positive(self.size_ms, "hopping window size")
        _check_positive(self.advance_ms, "hopping window advance")
        _check_non_negative(self.grace_ms, "grace period")
        # advance > size would leave gaps where records belong to no window at all.
        if self.advance_ms > self.size_ms:
            raise ValueError(
                f"hopping window advance ({self.advance_ms} ms) must not exceed its size "
                f"({self.size_ms} ms)"
            )

    def with_grace(self, grace: int | timedelta) -> HoppingWindows:
        """The same windows with another grace period (ms or a timedelta)."""
        return dataclasses.replace(self, grace_ms=_grace(grace))


@dataclass(frozen=True, slots=True)
class SlidingWindows:
    """Kafka Streams' SlidingWindows (KIP-450): ``size_ms`` is its ``timeDifference``, the
    largest distance between two records that still share a window. Windows are stored
    half-open with length ``size_ms + 1``. Zero is allowed, as in Kafka (equal timestamps)."""

    size_ms: int
    grace_ms: int = 0

    def __post_init__(self) -> None:
        _check_non_negative(self.size_ms, "sliding window size (time difference)")
        _check_non_negative(self.grace_ms, "grace period")

    def with_grace(self, grace: int | timedelta) -> SlidingWindows:
        """The same windows with another grace period (ms or a timedelta)."""
        return dataclasses.replace(self, grace_ms=_grace(grace))


@dataclass(frozen=True, slots=True)
class SessionWindows:
    """Kafka Streams' SessionWindows: records whose timestamps are at most ``gap_ms`` apart
    (from the last record of one run to the first of the next) share a session."""

    gap_ms: int
    grace_ms: int = 0

    def __post_init__(self) -> None:
        _check_positive(self.gap_ms, "session inactivity gap")
        _check_non_negative(self.grace_ms, "grace period")

    def with_grace(self, grace: int | timedelta) -> SessionWindows:
        """The same windows with another grace period (ms or a timedelta)."""
        return dataclasses.replace(self, grace_ms=_grace(grace))


WindowSpec: TypeAlias = TumblingWindows | HoppingWindows | SlidingWindows | SessionWindows


def tumbling(
    size: int | float | timedelta | None = None,
    *,
    ms: int = 0,
    seconds: float = 0,
    minutes: float = 0,
    hours: float = 0,
    days: float = 0,
    grace: int | timedelta | None = None,
) -> TumblingWindows:
    """``tumbling(minutes=1)``, ``tumbling(60_000)``, ``tumbling(timedelta(minutes=1))``."""
    what = "tumbling window size"
    size_ms = _duration(
        size, ms=ms, seconds=seconds, minutes=minutes, hours=hours, days=days, what=what
    )
    return TumblingWindows(size_ms=_check_positive(size_ms, what), grace_ms=_grace(grace))


def hopping(
    size: int | timedelta, advance: int | timedelta, *, grace: int | timedelta | None = None
) -> HoppingWindows:
    """Windows of ``size`` starting every ``advance`` (ms or timedelta), each record in
    ``size / advance`` of them: ``hopping(timedelta(minutes=5), timedelta(minutes=1))``."""
    return HoppingWindows(
        size_ms=_size(size, "hopping window size"),
        advance_ms=_size(advance, "hopping window advance"),
        grace_ms=_grace(grace),
    )


def sliding(size: int | timedelta, *, grace: int | timedelta | None = None) -> SlidingWindows:
    """Kafka Streams' sliding windows: records at most ``size`` apart share a window
    (``sliding(timedelta(seconds=30))``)."""
    what = "sliding window size (time difference)"
    size_ms = _duration(size, ms=0, seconds=0, minutes=0, hours=0, days=0, what=what)
    return SlidingWindows(size_ms=size_ms, grace_ms=_grace(grace))


def session(gap: int | timedelta, *, grace: int | timedelta | None = None) -> SessionWindows:
    """Session windows: a key's records at most ``gap`` apart share a session, which ends
    after ``gap`` without records (``session(timedelta(minutes=30))``)."""
    return SessionWindows(gap_ms=_size(gap, "session inactivity gap"), grace_ms=_grace(grace))


# --------------------------------------------------------------------------- time windows


def windows_for(spec: TumblingWindows | HoppingWindows, timestamp: int) -> list[Window]:
    """Every window of ``spec`` that contains ``timestamp``, ascending by start.

    Windows start at multiples of the advance (aligned to epoch 0, extending before it), so
    the ones containing ts are those with ``ts - size < k*advance <= ts``. Floor division
    keeps that right for negative timestamps, where truncating division would be off by one.
    """
    if not isinstance(spec, TumblingWindows | HoppingWindows):
        raise TypeError(f"windows_for needs tumbling or hopping windows, got {spec!r}")
    size = spec.size_ms
    return [Window(start, start + size) for start in window_starts(size, spec.advance_ms, timestamp)]


def window_starts(size_ms: int, advance_ms: int, timestamp: int) -> range:
    """The starts of the windows of ``windows_for``, as a range: the per-record path of
    windowed aggregations uses it to avoid building (and checking) Window objects."""
    return range(((timestamp - size_ms) // advance_ms + 1) * advance_ms, (timestamp // advance_ms) * advance_ms + 1,
                 advance_ms)


# --------------------------------------------------------------------------- lateness


def is_late(window_end: int, grace_ms: int, stream_time: int) -> bool:
    """Whether a window is closed: ``window_end + grace_ms <= stream_time``. A record for it
    is dropped (Kafka: "skipping record for expired window"). Half-open ends make this the
    same inequality Kafka uses with its inclusive sliding/session ends."""
    return window_end + grace_ms <= stream_time


def close_time(spec: WindowSpec, window: Window) -> int:
    """The stream time at which ``window`` closes. A session can still be extended by a
    record up to ``gap`` after its end, so it closes ``gap`` later than a fixed window."""
    if isinstance(spec, SessionWindows):
        return window.end + spec.gap_ms + spec.grace_ms
    return window.end + spec.grace_ms


def expired(window_end: int, expires_ms: int, stream_time: int) -> bool:
    """Whether a window may be deleted from its store: ``window_end + expires_ms <=
    stream_time``. Keep ``expires_ms >= min_retention_ms(spec)``."""
    return window_end + expires_ms <= stream_time


def min_retention_ms(spec: WindowSpec) -> int:
    """The smallest ``expires_ms`` that keeps the arithmetic here exact.

    Fixed windows and sessions are never read again once closed, so they may go as soon as
    they close. Sliding windows seed new windows from older ones and find the previous record
    through them (``plan_sliding``): those are at most one window length older than an open
    window, so they must outlive their close by ``size_ms + 1`` (the half-open length).
    """
    if isinstance(spec, SlidingWindows):
        return spec.size_ms + 1 + spec.grace_ms
    if isinstance(spec, SessionWindows):
        return spec.gap_ms + spec.grace_ms
    return spec.grace_ms


# --------------------------------------------------------------------------- sliding windows
#
# Kafka Streams' sliding windows (KIP-450), with time difference D. In Kafka's inclusive
# notation a window [s, s + D] holds the records with s <= ts <= s + D. For a set R of record
# timestamps the windows that exist are exactly
#
#     left(r)  = [r - D, r]          for every r in R              (r is its last record)
#     right(r) = [r + 1, r + 1 + D]  for every r in R whose right window is not empty
#                                                                  (r is the last excluded)
#
# which are all the distinct non-empty sets of records that fit within D, each once. Stored
# half-open, left(r) = [r - D, r + 1) and right(r) = [r + 1, r + D + 2): every window has
# length D + 1 and is identified by its start, so a store keyed by start holds them.
#
# Divergence from Kafka: it clamps windows of records with ts < D into [0, D]
# ("processEarly"); here windows may start before 0, so no special case is needed.


def sliding_window_ranges(spec: SlidingWindows, timestamp: int) -> tuple[Window, Window]:
    """The record's left window ``[ts - D, ts + 1)`` (ts is its last record) and right window
    ``[ts + 1, ts + D + 2)`` (starts just after ts; exists only while non-empty)."""
    d = spec.size_ms
    return Window(timestamp - d, timestamp + 1), Window(timestamp + 1, timestamp + d + 2)


def sliding_scan_range(spec: SlidingWindows, timestamp: int) -> tuple[int, int]:
    """Half-open range ``[lo, hi)`` of window *starts* that ``plan_sliding`` needs to see.

    Down to ``ts - 2D - 1`` because the previous record p matters when ``p >= ts - D - 1``
    and is found through its left window, which starts at ``p - D``; up to ``ts + 1``, the
    start of the record's own right window (to know whether it already exists)."""
    d = spec.size_ms
    return timestamp - 2 * d - 1, timestamp + 2


@dataclass(frozen=True, slots=True)
class NewSlidingWindow:
    """A window to create. Its aggregate starts as ``seed``'s aggregate as stored *before*
    this record (``None``: the initializer), then gets the record added if ``add_record``."""

    window: Window
    seed: Window | None
    add_record: bool

    def __post_init__(self) -> None:
        # A window seeded with nothing and without the record would be empty; those don't exist.
        if self.seed is None and not self.add_record:
            raise ValueError("a new sliding window needs a seed or the record")


@dataclass(frozen=True, slots=True)
class SlidingPlan:
    """What one record does to a store of sliding windows keyed by start.

    ``update``: existing windows that contain the record (add it, max_ts = max(max_ts, ts)).
    ``create``: new windows (see ``NewSlidingWindow``); their max_ts is ts when the record is
    added, else the seed's. Read every seed before writing anything of this plan."""

    update: tuple[Window, ...]
    create: tuple[NewSlidingWindow, ...]

    def without_closed(self, grace_ms: int, stream_time: int) -> SlidingPlan:
        """The plan minus closed windows, which a late record must not touch. Seeds may be
        closed windows: they are only read, so retention must keep them (min_retention_ms)."""
        return SlidingPlan(
            update=tuple(w for w in self.update if not is_late(w.end, grace_ms, stream_time)),
            create=tuple(
                c for c in self.create if not is_late(c.window.end, grace_ms, stream_time)
            ),
        )


def plan_sliding(spec: SlidingWindows, timestamp: int, stored: Mapping[int, int]) -> SlidingPlan:
    """Plan the incremental update of Kafka's sliding windows for a record at ``timestamp``.

    ``stored`` maps the start of every stored window in ``sliding_scan_range`` (others are
    ignored) to the largest record timestamp in it, which the store keeps next to the
    aggregate (Kafka's ValueAndTimestamp). Records may arrive in any order. The result is
    exact as long as every window the plan touches or reads is still stored: with retention
    ``>= min_retention_ms`` that holds for every record whose left window is still open
    (out of order by at most the grace period). For later records the caller drops the
    closed windows (``SlidingPlan.without_closed``) and, as in Kafka, the rest is best effort.

    With p the previous record (largest timestamp < ts) and D the time difference:

    * update every stored window containing ts (starts ``ts - D .. ts``);
    * create left(ts) unless stored. Its records before ts are those in ``[ts - D, ts)``; if
      any (``p >= ts - D``), some stored window holds exactly them: the one with the largest
      start among those ending at or before ts (left(p), or right(q) for q the last record
      before ``ts - D``). Copy it, then add the record;
    * create right(p) if it is not stored but ts falls in it (``ts <= p + D``; at
      ``ts == p + D + 1`` it is left(ts) itself): it was empty until now, so it starts from
      the initializer plus this record;
    * create right(ts) unless stored, when records after ts fall in it. The stored window
      with the largest start ``<= ts`` that contains ts holds exactly those records (any
      record at or before ts in it would have its own right window starting later), so it
      is non-empty iff that window's max timestamp is > ts, and is its seed, without ts.

    No other window appears: a record only makes its own left/right windows and the right
    window of its predecessor non-empty.
    """
    d = spec.size_ms
    t = timestamp
    lo, hi = sliding_scan_range(spec, t)
    starts = sorted(s for s in stored if lo <= s < hi)
    present = set(starts)
    # max timestamps are record timestamps, and left(p) has max timestamp exactly p, so the
    # largest one below t is p whenever p is recent enough to matter (>= t - D - 1).
    prev = max((stored[s] for s in starts if stored[s] < t), default=None)

    containing = [s for s in starts if t - d <= s <= t]
    create: list[NewSlidingWindow] = []

    left_start = t - d
    if left_start not in present:
        seed: Window | None = None
        if prev is not None and prev >= t - d:
            seed_start = max((s for s in starts if s + d + 1 <= t), default=None)
            seed = None if seed_start is None else Window(seed_start, seed_start + d + 1)
        create.append(NewSlidingWindow(Window(left_start, t + 1), seed, add_record=True))

    # t falls in right(p) when t <= p + D + 1, but at p == t - D - 1 right(p) *is* left(t)
    # (same start), handled above; hence the strict bound.
    if prev is not None and t <= prev + d and prev + 1 not in present:
        create.append(NewSlidingWindow(Window(prev + 1, prev + d + 2), None, add_record=True))

    if t + 1 not in present and containing:
        last = containing[-1]
        if stored[last] > t:
            create.append(
                NewSlidingWindow(
                    Window(t + 1, t + d + 2), Window(last, last + d + 1), add_record=False
                )
            )

    return SlidingPlan(
        update=tuple(Window(s, s + d + 1) for s in containing),
        create=tuple(sorted(create, key=lambda c: c.window)),
    )


def apply_sliding_plan(
    plan: SlidingPlan,
    timestamp: int,
    value: V,
    stored: Mapping[int, tuple[A, int]],
    init: Callable[[], A],
    add: Callable[[A, V], A],
) -> dict[int, tuple[A, int]]:
    """Carry out ``plan``: the new ``(aggregate, max_ts)`` of every window it touches, keyed
    by start, computed from ``stored`` (start -> (aggregate, max_ts)) as it was before the
    record. The caller writes the result back. ``add`` must not mutate its argument: a seed's
    aggregate is shared with the window it is copied into."""
    out: dict[int, tuple[A, int]] = {}
    for new in plan.create:
        if new.seed is None:
            out[new.window.start] = (add(init(), value), timestamp)
            continue
        agg, max_ts = stored[new.seed.start]
        if new.add_record:
            agg, max_ts = add(agg, value), max(max_ts, timestamp)
        out[new.window.start] = (agg, max_ts)
    for window in plan.update:
        agg, max_ts = stored[window.start]
        out[window.start] = (add(agg, value), max(max_ts, timestamp))
    return out


# --------------------------------------------------------------------------- session windows
#
# Kafka Streams' session windows with inactivity gap G. A session spans its first to its last
# record; Kafka writes it [first, last], here [first, last + 1). Two records share a session
# when a chain of records connects them with steps of at most G, i.e. a record at ts joins a
# session [s, e) when s - G <= ts <= (e - 1) + G, which is ``s - G <= ts < e + G``.


def _check_gap(gap_ms: int) -> None:
    if gap_ms < 0:
        raise ValueError(f"session inactivity gap must not be negative, got {gap_ms} ms")


def merge_session(
    gap_ms: int, sessions: Sequence[Window], timestamp: int
) -> tuple[Window, list[Window]]:
    """Add a record to a key's sessions: ``(merged, replaced)``.

    ``replaced`` are the existing sessions it joins (``s - gap <= ts < e + gap``), ascending;
    ``merged`` spans them and ``[ts, ts + 1)``. It can bridge two sessions into one. When ts
    falls inside a session, ``replaced == [merged]``. The caller deletes every replaced
    session, then stores ``merged`` with the merge of their aggregates plus the record.

    Existing sessions are more than ``gap`` apart (this function keeps them so), hence only
    sessions within gap of ts itself can join; a store needs to scan just those
    (end > ts - gap and start <= ts + gap).
    """
    _check_gap(gap_ms)
    replaced = sorted(w for w in sessions if w.start - gap_ms <= timestamp < w.end + gap_ms)
    start = min([timestamp, *(w.start for w in replaced)])
    end = max([timestamp + 1, *(w.end for w in replaced)])
    return Window(start, end), replaced
