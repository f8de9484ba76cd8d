"""Source offsets and the incremental query that resumes after one, as pure functions.

An offset is what the last delivered row proved: every row before it was delivered.
``{"incrementing": n}`` in incrementing mode, ``{"timestamp": ms, "timestamp_nanos": ns}`` in
timestamp mode (Confluent's layout: ``timestamp_nanos`` is the nanoseconds within the second,
so microsecond timestamps resume exactly), both in timestamp+incrementing mode.

The queries (Confluent's, with ``ts`` the timestamp column or ``COALESCE`` of several):

- incrementing: ``inc > :inc ORDER BY inc``;
- timestamp: ``ts > :ts AND ts < :end ORDER BY ts``;
- timestamp+incrementing: ``ts < :end AND ((ts = :ts AND inc > :inc) OR ts > :ts)
  ORDER BY ts, inc`` - exact even when many rows share one timestamp.

``:end`` is the database's clock minus ``timestamp.delay.interval.ms``: a row whose
transaction commits late with an older timestamp is picked up if it commits within the delay.
Each query takes at most ``batch.max.rows`` (LIMIT) and the next one starts after the last
row delivered, so no cursor stays open between polls.

As in Confluent's connector, incrementing mode trusts that ids become visible in increasing
order; with concurrent writers whose transactions commit out of id order, use
timestamp+incrementing with a ``timestamp.delay.interval.ms`` longer than those transactions.
In timestamp mode, rows sharing a timestamp are delivered together (see ``group_offsets``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Mode", "Offset", "build_query", "group_offsets"]

Mode = Literal["bulk", "incrementing", "timestamp", "timestamp+incrementing"]


@dataclass(frozen=True, slots=True)
class Offset:
    incrementing: int | None = None
    timestamp_us: int | None = None  # microseconds since the epoch, UTC

    def to_dict(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.incrementing is not None:
            out["incrementing"] = self.incrementing
        if self.timestamp_us is not None:
            out["timestamp"] = self.timestamp_us // 1000
            out["timestamp_nanos"] = (self.timestamp_us % 1_000_000) * 1000
        return out

    @classmethod
    def from_dict(cls, offset: Mapping[str, Any] | None) -> Offset:
        if not offset:
            return cls()
        inc = offset.get("incrementing")
        ms = offset.get("timestamp")
        ts_us: int | None = None
        if ms is not None:
            nanos = offset.get("timestamp_nanos")
            ts_us = int(ms) * 1000 if nanos is None else (int(ms) // 1000) * 1_000_000 + int(nanos) // 1000
        return cls(None if inc is None else int(inc), ts_us)


def build_query(
    *,
    mode: Mode,
    select: str,
    inc_column: str | None,
    ts_expr: str | None,
    offset: Offset,
    limit: int | None,
    tiebreak: Sequence[str] = (),
) -> tuple[str, list[str]]:
    """The SQL to run and the names of the bind parameters it uses (``inc``, ``ts``, ``end``).

    ``select`` is ``SELECT ... FROM source``; names are already quoted. ``tiebreak`` orders
    rows of one timestamp (timestamp mode) so every query sees a group in the same order.
    """
    where: list[str] = []
    order: list[str] = []
    params: list[str] = []
    if mode == "incrementing":
        assert inc_column is not None
        if offset.incrementing is not None:
            where.append(f"{inc_column} > :inc")
            params.append("inc")
        order.append(inc_column)
    elif mode in ("timestamp", "timestamp+incrementing"):
        assert ts_expr is not None
        where.append(f"{ts_expr} < :end")
        params.append("end")
        if mode == "timestamp":
            if offset.timestamp_us is not None:
                where.append(f"{ts_expr} > :ts")
                params.append("ts")
            order.extend([ts_expr, *tiebreak])
        else:
            assert inc_column is not None
            if offset.timestamp_us is not None:
                inc_cond = f"{inc_column} > :inc" if offset.incrementing is not None else "1 = 0"
                where.append(f"(({ts_expr} = :ts AND {inc_cond}) OR {ts_expr} > :ts)")
                params.append("ts")
                if offset.incrementing is not None:
                    params.append("inc")
            order.extend([ts_expr, inc_column])
    sql = select
    if where:
        sql += " WHERE " + " AND ".join(where)
    if order:
        sql += " ORDER BY " + ", ".join(f"{o} ASC" for o in order)
    if limit is not None and mode != "bulk":
        sql += f" LIMIT {int(limit)}"
    return sql, params


def group_offsets(
    timestamps: Sequence[int], start: Offset, full: bool
) -> tuple[int, list[Offset]]:
    """Timestamp mode: how many of a batch's rows to deliver and each one's offset.

    Rows sharing a timestamp can only be resumed after as a whole (no column tells them apart),
    so a row's offset is the last timestamp whose rows were all delivered. A full batch may
    have cut the last timestamp's rows short: those are left for the next query, unless the
    batch is that one timestamp only (then the caller reads the rest of it first).
    """
    n = len(timestamps)
    if full and n and timestamps[0] != timestamps[-1]:
        while timestamps[n - 1] == timestamps[-1]:
            n -= 1
    offsets: list[Offset] = []
    done = start.timestamp_us
    for i in range(n):
        if i + 1 == n or timestamps[i + 1] != timestamps[i]:
            done = timestamps[i]
        offsets.append(Offset(timestamp_us=done))
    return n, offsets

