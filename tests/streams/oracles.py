"""Test oracles: the from-scratch definitions the production algorithms are checked against
(quadratic, or in dicts), kept out of the production modules."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeVar

from streamkit.streams.joins import Entry
from streamkit.streams.windows import (
    SlidingWindows,
    Window,
    WindowSpec,
    close_time,
    sliding_window_ranges,
)

A = TypeVar("A")
V = TypeVar("V")
K = TypeVar("K")


def closed_windows(spec: WindowSpec, windows: Iterable[Window], stream_time: int) -> list[Window]:
    """The windows that are closed at ``stream_time``, ascending (the order to emit finals).

    ``end + grace <= stream_time`` (``end + gap + grace`` for sessions, see ``close_time``).
    Monotone in stream time: once a window is in this list it stays in it."""
    return sorted(w for w in windows if close_time(spec, w) <= stream_time)


def sliding_aggregate(
    spec: SlidingWindows,
    records: Sequence[tuple[int, V]],
    init: Callable[[], A],
    add: Callable[[A, V], A],
) -> dict[Window, A]:
    """Every sliding window of ``records`` (timestamp, value) with its aggregate, from
    scratch: the definition the incremental ``plan_sliding`` must reproduce. Each window
    folds its records in the order given (the arrival order). Quadratic: a test oracle."""
    stamps = sorted({ts for ts, _ in records})
    windows: set[Window] = set()
    for i, ts in enumerate(stamps):
        left, right = sliding_window_ranges(spec, ts)
        windows.add(left)
        # right(ts) holds the records in (ts, ts + D + 1]; it exists when the next one is there.
        if i + 1 < len(stamps) and stamps[i + 1] < right.end:
            windows.add(right)
    result: dict[Window, A] = {}
    for window in sorted(windows):
        agg = init()
        for ts, value in records:
            if window.contains(ts):
                agg = add(agg, value)
        result[window] = agg
    return result


def sessionize(gap_ms: int, timestamps: Iterable[int]) -> list[Window]:
    """The sessions of a set of timestamps, ascending, from scratch (the oracle for
    ``merge_session``): sorted, split wherever two neighbours are more than ``gap`` apart."""
    if gap_ms < 0:
        raise ValueError(f"session inactivity gap must not be negative, got {gap_ms} ms")
    sessions: list[Window] = []
    for ts in sorted(timestamps):
        if sessions and ts - (sessions[-1].end - 1) <= gap_ms:
            sessions[-1] = Window(sessions[-1].start, ts + 1)
        else:
            sessions.append(Window(ts, ts + 1))
    return sessions


class MemoryJoinBuffers(Generic[K]):
    """``JoinBuffers`` in dicts: for tests, and for checking a store-backed one."""

    def __init__(self) -> None:
        self._sides: tuple[dict[tuple[K, int], list[Entry]], dict[tuple[K, int], list[Entry]]] = ({}, {})

    def get(self, side: int, key: K, timestamp: int) -> list[Entry]:
        return [list(e) for e in self._sides[side].get((key, timestamp), [])]

    def scan(self, side: int, key: K, lo: int, hi: int) -> list[tuple[int, list[Entry]]]:
        found = [(ts, [list(e) for e in entries]) for (k, ts), entries in self._sides[side].items()
                 if k == key and lo <= ts <= hi]
        return sorted(found, key=lambda item: item[0])

    def put(self, side: int, key: K, timestamp: int, entries: list[Entry]) -> None:
        self._sides[side][(key, timestamp)] = [list(e) for e in entries]

    def pop_before(self, side: int, timestamp: int) -> list[tuple[K, int, list[Entry]]]:
        buffer = self._sides[side]
        gone = sorted((ts, i, k) for i, (k, ts) in enumerate(buffer) if ts < timestamp)
        return [(k, ts, buffer.pop((k, ts))) for ts, _i, k in gone]

    def __len__(self) -> int:
        """Buffered records, both sides."""
        return sum(len(entries) for side in self._sides for entries in side.values())
