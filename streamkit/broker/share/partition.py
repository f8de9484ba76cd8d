"""One share-partition's delivery state (KIP-932), as pure logic with an injected clock.

The in-flight window runs from the share-partition start offset (SPSO) to the end offset
(SPEO, exclusive: the next offset never yet acquired). Offsets below SPSO are done; every
offset in the window has a state and a delivery count::

    AVAILABLE --acquire--> ACQUIRED --accept-------------------> ACKNOWLEDGED
        ^                      |     --reject / gap-----------> ARCHIVED
        |                      |     --release / lock expiry /
        +----------------------+       member gone ----------> AVAILABLE, or ARCHIVED once
                                                                delivery count >= limit

Acquiring increments the delivery count and locks the record for the member until
``now + lock_ms``. SPSO moves up over every leading ACKNOWLEDGED or ARCHIVED offset, which
are then forgotten. Offsets with no record (control batches, compacted gaps, aborted
transactional data under read_committed) are archived on acquisition, never delivered.

The window is held as runs, as Kafka's in-flight batches: contiguous offset ranges with one
state, delivery count, holder and lock deadline each, covering SPSO..SPEO without holes.
New records are acquired a whole log batch at a time (one run each; ``max_records`` is
reached at a batch boundary, never by splitting a batch) and an acknowledgement of a range
settles the runs it covers at once, splitting a run only where it ends inside one. So the
cost of a request follows the batches it touches, not the records in them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from itertools import groupby
from operator import attrgetter
from typing import Any

__all__ = [
    "AckType",
    "AcquiredRange",
    "InvalidAcknowledgement",
    "RecordState",
    "SharePartition",
]


class RecordState(IntEnum):
    """Kafka's numbering (RecordState in SharePartition.java)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """Acknowledge types on the wire (ShareFetch/ShareAcknowledge)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222: keep the record acquired, with a fresh lock


class InvalidAcknowledgement(ValueError):
    """An acknowledgement of offsets this member does not hold (INVALID_RECORD_STATE)."""


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True)
class _Run:
    """Offsets ``first..last`` (inclusive) in one state: an in-flight batch, or the part of
    one that an acknowledgement split off."""

    first: int
    last: int
    state: RecordState
    count: int
    member_id: str | None = None
    deadline: int = 0

    @property
    def size(self) -> int:
        return self.last - self.first + 1


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_first = attrgetter("first")


class SharePartition:
    """The delivery state of one (group, topic, partition)."""

    def __init__(self, start_offset: int, clock: Callable[[], int], lock_ms: int,
                 delivery_limit: int, max_in_flight: int = 2000) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.clock = clock
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self._runs: list[_Run] = []  # cover start_offset..end_offset - 1, in order, no holes
        self._dirty: list[tuple[int, int]] = []  # ranges changed since the last snapshot() / delta()
        # No lock runs out before this (a lower bound), so most expiry checks scan nothing.
        self._expiry: int | None = None
        self.state_epoch = 0

    # -- views -----------------------------------------------------------------------------

    def state_of(self, offset: int) -> tuple[RecordState, int]:
        """(state, delivery count) of one offset; below SPSO everything is done."""
        if offset < self.start_offset:
            return RecordState.ACKNOWLEDGED, 0
        if offset >= self.end_offset:
            return RecordState.AVAILABLE, 0
        run = self._runs[self._find(offset)]
        return run.state, run.count

    def done_in_window(self) -> int:
        """Offsets in the window already acknowledged or archived (for lag)."""
        return sum(r.size for r in self._runs if r.state in _DONE)

    def acquired_count(self) -> int:
        return sum(r.size for r in self._runs if r.state is RecordState.ACQUIRED)

    def has_available(self) -> bool:
        return any(r.state is RecordState.AVAILABLE for r in self._runs)

    def run_count(self) -> int:
        """How many runs hold the window (what a request's cost follows)."""
        return len(self._runs)

    # -- runs -----------------------------------------------------------------------------

    def _find(self, offset: int) -> int:
        """Index of the run holding ``offset`` (in the window)."""
        return bisect_right(self._runs, offset, key=_first) - 1

    def _split(self, offset: int) -> int:
        """Index of the run starting at ``offset``, splitting the run that holds it;
        len(runs) at or past SPEO."""
        if offset >= self.end_offset:
            return len(self._runs)
        if offset <= self.start_offset:
            return 0
        i = self._find(offset)
        run = self._runs[i]
        if run.first == offset:
            return i
        self._runs.insert(i + 1, _Run(offset, run.last, run.state, run.count, run.member_id, run.deadline))
        run.last = offset - 1
        return i + 1

    def _append(self, first: int, last: int, state: RecordState, count: int) -> _Run:
        """A new run at SPEO (``first == end_offset``)."""
        run = _Run(first, last, state, count)
        self._runs.append(run)
        self.end_offset = last + 1
        self._dirty.append((first, last))
        return run

    def _put(self, first: int, last: int, state: RecordState, count: int) -> None:
        """Set ``first..last`` to one state as stored (restore, replay), growing the window
        with archived offsets up to ``first`` if it ends before."""
        first = max(first, self.start_offset)
        if last < first:
            return
        if first > self.end_offset:
            self._runs.append(_Run(self.end_offset, first - 1, RecordState.ARCHIVED, 0))
            self.end_offset = first
        i = self._split(first)
        j = self._split(last + 1)
        self._runs[i:j] = [_Run(first, last, state, count)]
        self.end_offset = max(self.end_offset, last + 1)

    def _lock(self, run: _Run, member_id: str, deadline: int) -> None:
        run.state = RecordState.ACQUIRED
        run.count += 1
        run.member_id = member_id
        run.deadline = deadline
        if self._expiry is None or deadline < self._expiry:
            self._expiry = deadline
        self._dirty.append((run.first, run.last))

    def _release(self, run: _Run) -> None:
        exhausted = run.count >= self.delivery_limit
        run.state = RecordState.ARCHIVED if exhausted else RecordState.AVAILABLE
        run.member_id = None
        self._dirty.append((run.first, run.last))

    def _merge_done(self, lo: int, hi: int) -> None:
        """Merge neighbouring settled runs of one state and count among runs[lo:hi] (those
        behind a stuck record stay in the window)."""
        runs = self._runs
        i = max(lo, 1)
        while i < min(hi, len(runs)):
            a, b = runs[i - 1], runs[i]
            if a.state in _DONE and a.state is b.state and a.count == b.count:
                a.last = b.last
                del runs[i]
                hi -= 1
            else:
                i += 1

    # -- acquisition ----------------------------------------------------------------------

    def acquire(self, member_id: str, max_records: int, deliverable: Iterable[tuple[int, int]],
                skipped: Iterable[tuple[int, int]] = ()) -> list[AcquiredRange]:
        """Lock about ``max_records`` offsets for ``member_id``, whole runs at a time:
        AVAILABLE runs in the window first (redeliveries), then new batches from SPEO. The
        run or batch that reaches ``max_records`` is taken whole (a soft limit, as
        Kafka's). ``deliverable`` are the log batches' inclusive offset ranges at or after
        SPEO that hold data records, ``skipped`` the ones that never reach a consumer
        (archived here). Returns the acquired runs in offset order."""
        self.expire_locks()
        budget = min(max_records, self.max_in_flight - self.acquired_count())
        deadline = self.clock() + self.lock_ms
        got: list[_Run] = []
        taken = 0
        for run in self._runs:
            if taken >= budget:
                break
            if run.state is RecordState.AVAILABLE:
                self._lock(run, member_id, deadline)
                got.append(run)
                taken += run.size
        marks = sorted([(f, last, True) for f, last in deliverable] + [(f, last, False) for f, last in skipped])
        for first, last, data in marks:
            if taken >= budget or self.end_offset - self.start_offset >= self.max_in_flight:
                break
            if last < self.end_offset:
                continue
            first = max(first, self.end_offset)
            if first > self.end_offset:  # a gap between batches
                self._append(self.end_offset, first - 1, RecordState.ARCHIVED, 0)
            if not data:
                self._append(first, last, RecordState.ARCHIVED, 0)
                continue
            run = self._append(first, last, RecordState.AVAILABLE, 0)
            self._lock(run, member_id, deadline)
            got.append(run)
            taken += run.size
        out = _ranges(got)
        self._advance()
        return out

    def unacquire(self, member_id: str, from_offset: int, ranges: list[AcquiredRange]) -> list[AcquiredRange]:
        """Undo the part of an acquisition at or after ``from_offset`` (its records did not
        fit in the response): AVAILABLE again, the delivery not counted. The kept ranges."""
        kept: list[AcquiredRange] = []
        for r in ranges:
            if r.first_offset < from_offset:
                kept.append(AcquiredRange(r.first_offset, min(r.last_offset, from_offset - 1), r.delivery_count))
            lo = max(r.first_offset, from_offset)
            if lo > r.last_offset:
                continue
            i, j = self._split(lo), self._split(r.last_offset + 1)
            for run in self._runs[i:j]:
                if run.state is RecordState.ACQUIRED and run.member_id == member_id:
                    run.state = RecordState.AVAILABLE
                    run.member_id = None
                    run.count -= 1
                    self._dirty.append((run.first, run.last))
        return kept

    # -- acknowledgement ------------------------------------------------------------------

    def acknowledge(self, member_id: str, first: int, last: int, types: tuple[int, ...]) -> None:
        """Settle ``first..last`` held by ``member_id``: one type for the whole range or one
        per offset. All or nothing: InvalidAcknowledgement changes no state."""
        count = last - first + 1
        if count <= 0 or len(types) not in (1, count):
            raise InvalidAcknowledgement(f"acknowledgement of {first}..{last} with {len(types)} types")
        if len(types) == 1:
            segments = [(first, last, _ack_type(types[0]))]
        else:  # runs of one type, settled a range at a time
            segments = []
            at = first
            for t, same in groupby(types):
                n = sum(1 for _ in same)
                segments.append((at, at + n - 1, _ack_type(t)))
                at += n
        for a, b, kind in segments:
            self._check(member_id, a, b, kind)
        renewed = self.clock() + self.lock_ms
        for a, b, kind in segments:
            self._settle(a, b, kind, renewed)
        self._advance()

    def _check(self, member_id: str, first: int, last: int, kind: AckType) -> None:
        gap = kind is AckType.GAP
        if not gap and (first < self.start_offset or last >= self.end_offset):
            outside = first if first < self.start_offset else max(first, self.end_offset)
            raise InvalidAcknowledgement(f"offset {outside} is not acquired by member {member_id}")
        lo, hi = max(first, self.start_offset), min(last, self.end_offset - 1)
        if lo > hi:
            return  # a gap wholly outside the window: already settled
        runs = self._runs
        i = self._find(lo)
        while i < len(runs) and runs[i].first <= hi:
            run = runs[i]
            if not (run.state is RecordState.ACQUIRED and run.member_id == member_id) and not (
                    gap and run.state is RecordState.ARCHIVED):
                raise InvalidAcknowledgement(f"offset {max(run.first, lo)} is not acquired by member {member_id}")
            i += 1

    def _settle(self, first: int, last: int, kind: AckType, renewed: int) -> None:
        lo, hi = max(first, self.start_offset), min(last, self.end_offset - 1)
        if lo > hi:
            return
        i, j = self._split(lo), self._split(hi + 1)
        for run in self._runs[i:j]:
            if run.state is not RecordState.ACQUIRED:
                continue  # a gap the broker already archived
            if kind is AckType.ACCEPT:
                run.state = RecordState.ACKNOWLEDGED
                run.member_id = None
            elif kind is AckType.RELEASE:
                self._release(run)
            elif kind is AckType.RENEW:
                run.deadline = renewed
            else:  # REJECT, or GAP on offsets the member was given
                run.state = RecordState.ARCHIVED
                run.member_id = None
            self._dirty.append((run.first, run.last))
        self._merge_done(i, j + 1)

    def release_member(self, member_id: str) -> int:
        """Every record ``member_id`` holds goes back (its session closed or it left)."""
        released = 0
        for run in self._runs:
            if run.state is RecordState.ACQUIRED and run.member_id == member_id:
                self._release(run)
                released += run.size
        if released:
            self._advance()
        return released

    def expire_locks(self) -> int:
        """Release every record whose acquisition lock has run out."""
        now = self.clock()
        if self._expiry is None or now < self._expiry:
            return 0
        expired = 0
        earliest: int | None = None
        for run in self._runs:
            if run.state is not RecordState.ACQUIRED:
                continue
            if run.deadline <= now:
                self._release(run)
                expired += run.size
            elif earliest is None or run.deadline < earliest:
                earliest = run.deadline
        self._expiry = earliest
        if expired:
            self._advance()
        return expired

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline for r in self._runs if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- window ---------------------------------------------------------------------------

    def _advance(self) -> None:
        runs = self._runs
        k = 0
        while k < len(runs) and runs[k].state in _DONE:
            k += 1
        if k:
            del runs[:k]
        self.start_offset = runs[0].first if runs else self.end_offset

    def move_start(self, offset: int) -> None:
        """The log's start moved past SPSO (retention, DeleteRecords): those offsets are gone."""
        if offset <= self.start_offset:
            return
        if offset >= self.end_offset:
            self._runs.clear()
            self.start_offset = self.end_offset = offset
            return
        del self._runs[:self._split(offset)]
        self.start_offset = offset
        self._advance()

    # -- durable form ---------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The state to persist. ACQUIRED is stored as AVAILABLE with its delivery count:
        after a restart the lock is gone but the delivery still counts toward the limit."""
        self._dirty.clear()
        return {"start_offset": self.start_offset, "end_offset": self.end_offset,
                "state_epoch": self.state_epoch, "runs": self._stored(self.start_offset, self.end_offset - 1)}

    def delta(self) -> dict[str, Any]:
        """What changed since the last snapshot() or delta(): the window's bounds and the
        changed ranges still in it (apply() replays it over the snapshot)."""
        runs: list[list[int]] = []
        lo = hi = None
        for first, last in sorted(self._dirty):
            if hi is not None and first <= hi + 1:
                hi = max(hi, last)
                continue
            if lo is not None and hi is not None:
                runs += self._stored(lo, hi)
            lo, hi = first, last
        if lo is not None and hi is not None:
            runs += self._stored(lo, hi)
        self._dirty.clear()
        return {"start_offset": self.start_offset, "end_offset": self.end_offset, "runs": runs}

    def _stored(self, first: int, last: int) -> list[list[int]]:
        """[first, last, state, count] of the window's runs over ``first..last``, an ACQUIRED
        one as AVAILABLE, equal neighbours merged."""
        first, last = max(first, self.start_offset), min(last, self.end_offset - 1)
        out: list[list[int]] = []
        if first > last:
            return out
        runs = self._runs
        i = self._find(first)
        while i < len(runs) and runs[i].first <= last:
            run = runs[i]
            state = RecordState.AVAILABLE if run.state is RecordState.ACQUIRED else run.state
            a, b = max(run.first, first), min(run.last, last)
            if out and out[-1][1] == a - 1 and out[-1][2] == state and out[-1][3] == run.count:
                out[-1][1] = b
            else:
                out.append([a, b, int(state), run.count])
            i += 1
        return out

    def apply(self, delta: dict[str, Any]) -> None:
        for first, last, state, count in delta["runs"]:
            self._put(int(first), int(last), RecordState(state), int(count))
        end = int(delta["end_offset"])
        if end > self.end_offset:
            self._put(self.end_offset, end - 1, RecordState.ARCHIVED, 0)
        self.move_start(int(delta["start_offset"]))
        self._advance()
        self._dirty.clear()

    def restore(self, snap: dict[str, Any]) -> None:
        self.start_offset = self.end_offset = int(snap["start_offset"])
        self.state_epoch = int(snap.get("state_epoch", 0))
        self._runs = []
        self._expiry = None
        for first, last, state, count in snap["runs"]:
            self._put(int(first), int(last), RecordState(state), int(count))
        end = int(snap["end_offset"])
        if end > self.end_offset:
            self._put(self.end_offset, end - 1, RecordState.ARCHIVED, 0)
        self._advance()
        self._dirty.clear()


def _ack_type(value: int) -> AckType:
    try:
        return AckType(value)
    except ValueError:
        raise InvalidAcknowledgement(f"unknown acknowledge type {value}") from None


def _ranges(runs: list[_Run]) -> list[AcquiredRange]:
    """Acquired runs as the wire's ranges, neighbours with one delivery count merged."""
    out: list[AcquiredRange] = []
    for run in runs:
        if out and out[-1].last_offset == run.first - 1 and out[-1].delivery_count == run.count:
            out[-1] = AcquiredRange(out[-1].first_offset, run.last, run.count)
        else:
            out.append(AcquiredRange(run.first, run.last, run.count))
    return out
