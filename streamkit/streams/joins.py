"""Join logic as pure code: no store, no clock, no I/O.

The DSL runs these rules over its RocksDB-backed buffers (``pipeline._StoreJoinBuffers``); the
tests run them over ``MemoryJoinBuffers`` and compare them with batch joins. Time always
comes in as an argument: stream time is the caller's (per partition, restored on restart).

Windowed stream-stream join (Kafka Streams' KStream-KStream join, symmetric window)
-------------------------------------------------------------------------------------
``within`` W and ``grace`` G in milliseconds; stream time S is the largest timestamp seen on
the partition, on either side, including the record at hand.

* A record at ``ts`` is *late* when ``ts + W + G < S``: its join window ``[ts - W, ts + W]``
  closed more than ``grace`` ago. It is dropped (joined with nothing, never buffered), as
  Kafka drops records for expired windows.
* Otherwise it joins every buffered record of the other side with the same key and
  ``|ts - ts'| <= W`` (result timestamp ``max(ts, ts')``), then is buffered.
* A buffered record is *final* once ``ts + 2W + G < S``: a record that could still match it
  has ``ts' <= ts + W``, so ``ts' + W + G < S``, i.e. it would be late. Final records leave
  the buffer and, if they never matched, come out with ``None`` on the other side (the
  left side's for left and outer joins, the right side's for outer joins).

Hence, whatever the arrival order, the output is exactly the batch join of the records
that were not late: every matching pair once, and an unmatched record with ``None`` only
when nothing can match it any more (never a ``(left, None)`` followed by a match).

Table-table join
----------------
On an update of either side, the key's joined value is recomputed from both tables
(``table_join_update``): the pair when the join has one, a tombstone when the update was a
delete that removed the key's result, nothing otherwise. Materialized, the output is then
always the batch join of the two tables as they stand.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

__all__ = [
    "JoinBuffers",
    "JoinHow",
    "JoinStep",
    "JoinWindows",
    "Joined",
    "TableJoinUpdate",
    "expire_stream_join",
    "joins_with_nothing",
    "stream_join",
    "table_join_update",
]

K = TypeVar("K", bound=Hashable)

JoinHow = Literal["inner", "left", "outer"]
LEFT, RIGHT = 0, 1

Entry = list[Any]
"""A buffered record: ``[value, matched]`` (a list, so the matched flag can be set)."""


def _check_ms(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int of milliseconds, got {value!r}")
    if value < 0:
        raise ValueError(f"{what} must not be negative, got {value} ms")
    return value


@dataclass(frozen=True, slots=True)
class JoinWindows:
    """The window of a stream-stream join: records join when their timestamps differ by at
    most ``within_ms``; ``grace_ms`` admits records that far behind the window's close."""

    within_ms: int
    grace_ms: int = 0

    def __post_init__(self) -> None:
        _check_ms(self.within_ms, "join window (within)")
        _check_ms(self.grace_ms, "join grace period")

    def is_late(self, timestamp: int, stream_time: int) -> bool:
        return timestamp + self.within_ms + self.grace_ms < stream_time

    def final_before(self, stream_time: int) -> int:
        """Buffered records with a timestamp below this are final (see the module doc)."""
        return stream_time - 2 * self.within_ms - self.grace_ms


@dataclass(frozen=True, slots=True)
class Joined(Generic[K]):
    """One join result; ``left`` or ``right`` is None for an unmatched record."""

    key: K
    left: Any
    right: Any
    timestamp: int


@dataclass(frozen=True, slots=True)
class JoinStep(Generic[K]):
    """What one record did: ``late`` (dropped), and the results to emit, in order."""

    late: bool
    results: list[Joined[K]]


class JoinBuffers(Protocol[K]):
    """Each side's buffered records, by key and timestamp (several records may share one)."""

    def get(self, side: int, key: K, timestamp: int) -> list[Entry]:
        """The entries of ``side`` at exactly ``(key, timestamp)`` (a new list if none)."""
        ...

    def scan(self, side: int, key: K, lo: int, hi: int) -> Iterable[tuple[int, list[Entry]]]:
        """``(timestamp, entries)`` of ``side`` for ``key`` with ``lo <= timestamp <= hi``,
        ascending; materialized, since the caller writes back while walking."""
        ...

    def put(self, side: int, key: K, timestamp: int, entries: list[Entry]) -> None: ...

    def pop_before(self, side: int, timestamp: int) -> Iterable[tuple[K, int, list[Entry]]]:
        """Remove and return every ``(key, timestamp, entries)`` of ``side`` with
        ``timestamp`` below the given one, ascending by timestamp."""
        ...


def _reports_unmatched(how: JoinHow, side: int) -> bool:
    return (side == LEFT and how in ("left", "outer")) or (side == RIGHT and how == "outer")


def stream_join(buffers: JoinBuffers[K], windows: JoinWindows, how: JoinHow, side: int, key: K,
                value: Any, timestamp: int, stream_time: int) -> JoinStep[K]:
    """Process one record of ``side`` (0 left, 1 right). ``stream_time`` is the partition's
    stream time after observing ``timestamp``. Then call ``expire_stream_join``."""
    if windows.is_late(timestamp, stream_time):
        return JoinStep(True, [])
    other = 1 - side
    track = _reports_unmatched(how, other)  # an inner join never needs the matched flags
    results: list[Joined[K]] = []
    matched = False
    w = windows.within_ms
    for ts, entries in buffers.scan(other, key, timestamp - w, timestamp + w):
        changed = False
        for entry in entries:
            matched = True
            pair = (value, entry[0]) if side == LEFT else (entry[0], value)
            results.append(Joined(key, pair[0], pair[1], max(timestamp, ts)))
            if track and not entry[1]:
                entry[1] = changed = True
        if changed:
            buffers.put(other, key, ts, entries)
    mine = buffers.get(side, key, timestamp)
    mine.append([value, matched])
    buffers.put(side, key, timestamp, mine)
    return JoinStep(False, results)


def expire_stream_join(buffers: JoinBuffers[K], windows: JoinWindows, how: JoinHow,
                       stream_time: int) -> list[Joined[K]]:
    """Drop the final records of both sides; the unmatched ones the join reports, with None
    for the other side, ascending by timestamp per side (left first)."""
    before = windows.final_before(stream_time)
    out: list[Joined[K]] = []
    for side in (LEFT, RIGHT):
        report = _reports_unmatched(how, side)
        for key, ts, entries in buffers.pop_before(side, before):
            if not report:
                continue
            for value, was_matched in entries:
                if not was_matched:
                    out.append(Joined(key, value, None, ts) if side == LEFT else Joined(key, None, value, ts))
    return out


# -- table-table --------------------------------------------------------------------------


def joins_with_nothing(how: JoinHow, left: Any, right: Any) -> bool:
    """Whether a key with these values (None: absent) has no joined value."""
    if how == "inner":
        return left is None or right is None
    if how == "left":
        return left is None
    return left is None and right is None


@dataclass(frozen=True, slots=True)
class TableJoinUpdate:
    """What a table-table join emits for an update: the joined pair, or (``pair`` None) a
    tombstone for a result that is gone."""

    pair: tuple[Any, Any] | None


def table_join_update(how: JoinHow, left: Any, right: Any, *, deleted: bool) -> TableJoinUpdate | None:
    """The key's output after an update of either table, given both tables' values for it
    after the update (None: absent). ``deleted``: the update was a delete.

    No joined value after an insert means there was none before either (an insert cannot
    take away the other side), so nothing is emitted; after a delete there may have been
    one, and a tombstone retracts it (as Kafka Streams does) so a table built from this
    stream does not keep it forever."""
    if joins_with_nothing(how, left, right):
        return TableJoinUpdate(None) if deleted else None
    return TableJoinUpdate((left, right))
