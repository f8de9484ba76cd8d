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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
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
class _InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline: int = 0


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


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
        self._records: dict[int, _InFlight] = {}
        self._dirty: set[int] = set()  # offsets changed since the last snapshot() / delta()
        self.state_epoch = 0

    # -- views -----------------------------------------------------------------------------

    def state_of(self, offset: int) -> tuple[RecordState, int]:
        """(state, delivery count) of one offset; below SPSO everything is done."""
        if offset < self.start_offset:
            return RecordState.ACKNOWLEDGED, 0
        rec = self._records.get(offset)
        if rec is None:
            return (RecordState.AVAILABLE, 0) if offset >= self.end_offset else (RecordState.ARCHIVED, 0)
        return rec.state, rec.delivery_count

    def done_in_window(self) -> int:
        """Offsets in the window already acknowledged or archived (for lag)."""
        return sum(1 for r in self._records.values() if r.state in _DONE)

    def acquired_count(self) -> int:
        return sum(1 for r in self._records.values() if r.state is RecordState.ACQUIRED)

    def has_available(self) -> bool:
        return any(r.state is RecordState.AVAILABLE for r in self._records.values())

    # -- acquisition ----------------------------------------------------------------------

    def acquire(self, member_id: str, max_records: int, deliverable: Iterable[tuple[int, int]],
                skipped: Iterable[tuple[int, int]] = ()) -> list[AcquiredRange]:
        """Lock up to ``max_records`` offsets for ``member_id``: AVAILABLE ones in the window
        first (redeliveries), then new ones from SPEO. ``deliverable`` are the inclusive
        offset ranges at or after SPEO that hold data records, ``skipped`` the ones that
        never reach a consumer (archived here). Returns the acquired runs in offset order."""
        self.expire_locks()
        budget = min(max_records, self.max_in_flight - self.acquired_count())
        deadline = self.clock() + self.lock_ms
        acquired: list[int] = []
        for offset in sorted(o for o, r in self._records.items() if r.state is RecordState.AVAILABLE):
            if len(acquired) >= budget:
                break
            self._lock(offset, member_id, deadline)
            acquired.append(offset)
        marks = sorted([(f, last, True) for f, last in deliverable] + [(f, last, False) for f, last in skipped])
        for first, last, data in marks:
            if len(acquired) >= budget or self.end_offset - self.start_offset >= self.max_in_flight:
                break
            first = max(first, self.end_offset)
            for offset in range(self.end_offset, first):  # a gap between batches
                self._records[offset] = _InFlight(RecordState.ARCHIVED, 0)
                self._dirty.add(offset)
            self.end_offset = max(self.end_offset, first)
            for offset in range(first, last + 1):
                if offset - self.start_offset >= self.max_in_flight:
                    break  # the window is full: a stuck record holds SPSO back
                if not data:
                    self._records[offset] = _InFlight(RecordState.ARCHIVED, 0)
                    self._dirty.add(offset)
                elif len(acquired) >= budget:
                    break
                else:
                    self._records[offset] = _InFlight(RecordState.AVAILABLE, 0)
                    self._lock(offset, member_id, deadline)
                    acquired.append(offset)
                self.end_offset = offset + 1
        self._advance()
        return _runs(acquired, self._records)

    def _lock(self, offset: int, member_id: str, deadline: int) -> None:
        self._dirty.add(offset)
        rec = self._records[offset]
        rec.state = RecordState.ACQUIRED
        rec.delivery_count += 1
        rec.member_id = member_id
        rec.deadline = deadline

    def unacquire(self, member_id: str, from_offset: int, ranges: list[AcquiredRange]) -> list[AcquiredRange]:
        """Undo the part of an acquisition at or after ``from_offset`` (its records did not
        fit in the response): AVAILABLE again, the delivery not counted. The kept ranges."""
        kept: list[AcquiredRange] = []
        for r in ranges:
            if r.first_offset < from_offset:
                kept.append(AcquiredRange(r.first_offset, min(r.last_offset, from_offset - 1), r.delivery_count))
            for offset in range(max(r.first_offset, from_offset), r.last_offset + 1):
                rec = self._records.get(offset)
                if rec is not None and rec.state is RecordState.ACQUIRED and rec.member_id == member_id:
                    rec.state = RecordState.AVAILABLE
                    rec.member_id = None
                    rec.delivery_count -= 1
                    self._dirty.add(offset)
        return kept

    # -- acknowledgement ------------------------------------------------------------------

    def acknowledge(self, member_id: str, first: int, last: int, types: tuple[int, ...]) -> None:
        """Settle ``first..last`` held by ``member_id``: one type for the whole range or one
        per offset. All or nothing: InvalidAcknowledgement changes no state."""
        count = last - first + 1
        if count <= 0 or len(types) not in (1, count):
            raise InvalidAcknowledgement(f"acknowledgement of {first}..{last} with {len(types)} types")
        kinds = []
        for t in types:
            try:
                kinds.append(AckType(t))
            except ValueError:
                raise InvalidAcknowledgement(f"unknown acknowledge type {t}") from None
        records = self._records
        per_offset = len(kinds) > 1
        for offset in range(first, last + 1):
            rec = records.get(offset)
            if rec is None or rec.state is not RecordState.ACQUIRED or rec.member_id != member_id:
                kind = kinds[offset - first] if per_offset else kinds[0]
                if kind is AckType.GAP and (rec is None or rec.state is RecordState.ARCHIVED):
                    continue  # a gap the broker already archived
                raise InvalidAcknowledgement(f"offset {offset} is not acquired by member {member_id}")
        renewed = self.clock() + self.lock_ms
        dirty = self._dirty
        for offset in range(first, last + 1):
            rec = records.get(offset)
            if rec is None or rec.state is not RecordState.ACQUIRED:
                continue
            kind = kinds[offset - first] if per_offset else kinds[0]
            dirty.add(offset)
            if kind is AckType.ACCEPT:
                rec.state = RecordState.ACKNOWLEDGED
                rec.member_id = None
            elif kind is AckType.RELEASE:
                self._release(rec)
            elif kind is AckType.RENEW:
                rec.deadline = renewed
            else:
                self._settle(rec, RecordState.ARCHIVED)
        self._advance()

    def _settle(self, rec: _InFlight, state: RecordState) -> None:
        rec.state = state
        rec.member_id = None

    def _release(self, rec: _InFlight) -> None:
        exhausted = rec.delivery_count >= self.delivery_limit
        self._settle(rec, RecordState.ARCHIVED if exhausted else RecordState.AVAILABLE)

    def release_member(self, member_id: str) -> int:
        """Every record ``member_id`` holds goes back (its session closed or it left)."""
        released = 0
        for offset, rec in self._records.items():
            if rec.state is RecordState.ACQUIRED and rec.member_id == member_id:
                self._release(rec)
                self._dirty.add(offset)
                released += 1
        self._advance()
        return released

    def expire_locks(self) -> int:
        """Release every record whose acquisition lock has run out."""
        now = self.clock()
        expired = 0
        for offset, rec in self._records.items():
            if rec.state is RecordState.ACQUIRED and rec.deadline <= now:
                self._release(rec)
                self._dirty.add(offset)
                expired += 1
        if expired:
            self._advance()
        return expired

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline for r in self._records.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- window ---------------------------------------------------------------------------

    def _advance(self) -> None:
        while self.start_offset < self.end_offset:
            rec = self._records.get(self.start_offset)
            if rec is not None and rec.state not in _DONE:
                return
            self._records.pop(self.start_offset, None)
            self.start_offset += 1

    def move_start(self, offset: int) -> None:
        """The log's start moved past SPSO (retention, DeleteRecords): those offsets are gone."""
        if offset <= self.start_offset:
            return
        for o in range(self.start_offset, min(offset, self.end_offset)):
            self._records.pop(o, None)
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance()

    # -- durable form ---------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The state to persist. ACQUIRED is stored as AVAILABLE with its delivery count:
        after a restart the lock is gone but the delivery still counts toward the limit."""
        self._dirty.clear()
        return {"start_offset": self.start_offset, "end_offset": self.end_offset,
                "state_epoch": self.state_epoch,
                "runs": self._runs_of(range(self.start_offset, self.end_offset))}

    def delta(self) -> dict[str, Any]:
        """What changed since the last snapshot() or delta(): the window's bounds and the
        changed offsets still in it (apply() replays it over the snapshot)."""
        changed = sorted(o for o in self._dirty if self.start_offset <= o < self.end_offset)
        self._dirty.clear()
        return {"start_offset": self.start_offset, "end_offset": self.end_offset,
                "runs": self._runs_of(changed)}

    def apply(self, delta: dict[str, Any]) -> None:
        for first, last, state, count in delta["runs"]:
            for offset in range(first, last + 1):
                self._records[offset] = _InFlight(RecordState(state), count)
        self.end_offset = max(self.end_offset, int(delta["end_offset"]))
        self.move_start(int(delta["start_offset"]))
        self._advance()
        self._dirty.clear()

    def _runs_of(self, offsets: Iterable[int]) -> list[list[int]]:
        runs: list[list[int]] = []
        for offset in offsets:
            rec = self._records.get(offset)
            state = RecordState.ARCHIVED if rec is None else rec.state
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            count = 0 if rec is None else rec.delivery_count
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == state and runs[-1][3] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, int(state), count])
        return runs

    def restore(self, snap: dict[str, Any]) -> None:
        self.start_offset = int(snap["start_offset"])
        self.end_offset = int(snap["end_offset"])
        self.state_epoch = int(snap.get("state_epoch", 0))
        self._records = {}
        self._dirty.clear()
        for first, last, state, count in snap["runs"]:
            for offset in range(first, last + 1):
                self._records[offset] = _InFlight(RecordState(state), count)
        self._advance()


def _runs(offsets: list[int], records: dict[int, _InFlight]) -> list[AcquiredRange]:
    out: list[AcquiredRange] = []
    for offset in sorted(offsets):
        count = records[offset].delivery_count
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            out[-1] = AcquiredRange(out[-1].first_offset, offset, count)
        else:
            out.append(AcquiredRange(offset, offset, count))
    return out
