"""The update of fixed windows (tumbling, hopping) in a windowed store: the one
implementation behind the DSL's windowed aggregations (``aggregate.WindowAggregate``) and
agents' windowed tables (``table.WindowedTable``).

A record at ``ts`` is folded into every window that contains it and is still open at
``now``: ``end + close_after > now`` (the DSL closes a window at ``end + grace``; an agent's
table lets it go at ``end + expires``). A record whose windows are all past that is late.

The DSL keeps aggregates decoded in ``pending`` until ``write`` puts them in the store (once
per batch): a key seen again before then costs a dict lookup, not a store read, a decode, an
encode and a write. A table writes through (``write_through``), so its reads see every write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from streamkit.state.windowed import WindowedTransaction
from streamkit.streams.windows import window_starts

__all__ = ["MAX_SLOTS", "FixedWindows", "ValueCodec", "WindowSlots", "WindowUpdated"]


class ValueCodec(Protocol):
    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


# ``(start, end, aggregate)`` of a window a record changed (the DSL's ``.current()``).
WindowUpdated = Callable[[int, int, Any], None]

# ``(key, window start) -> (storage key, aggregate)``: see ``FixedWindows.update``. Tuples,
# not lists: the cyclic GC stops tracking a tuple of bytes and numbers, so a large cache adds
# nothing to its collections.
WindowSlots = dict[tuple[bytes, int], tuple[bytes, Any]]
# At most this many windows cached per partition (a few MB): a table whose live windows are
# more than that caches the first ones and reads the others from the store, as without it.
# Expired windows leave the cache at commits (``Table._prune_slots``).
MAX_SLOTS = 20_000


@dataclass(slots=True)
class _Pending:
    """A window's aggregate between its update and its write to the store."""

    key: bytes
    start: int
    end: int
    agg: Any
    new: bool


class FixedWindows:
    """Tumbling/hopping windows of ``size_ms`` advancing by ``advance_ms``, aggregated
    with ``add(aggregate, value)`` from ``init()``, stored with ``codec``."""

    __slots__ = ("add", "advance", "close_after", "codec", "init", "pending", "size", "write_through")

    def __init__(self, size_ms: int, advance_ms: int, close_after_ms: int, init: Callable[[], Any],
                 add: Callable[[Any, Any], Any], codec: ValueCodec, *, write_through: bool = False) -> None:
        self.write_through = write_through
        self.size = size_ms
        self.advance = advance_ms
        self.close_after = close_after_ms
        self.init = init
        self.add = add
        self.codec = codec
        self.pending: dict[bytes, _Pending] = {}

    def update(self, view: WindowedTransaction, key: bytes, ts: int, value: Any, now: int,
               updated: WindowUpdated | None = None, *, add: Callable[[Any, Any], Any] | None = None,
               slots: WindowSlots | None = None, trusted: bool = False) -> bool:
        """Fold ``value`` into ``key``'s open windows holding ``ts``; False if none is open
        (the record is late). ``updated`` is called with each window's new aggregate; ``add``
        replaces the aggregation function for this update.

        ``slots`` (write-through only) caches each window's storage key and decoded
        aggregate, so a window updated again skips the key encoding, the read and the
        decode. Every write of the windows of ``view`` must go through it (or drop it); it
        stays valid across commits, as the store then holds what the transaction did. Only a
        ``trusted`` aggregation (one that never mutates its arguments, as the operator
        module's) is fed cached aggregates and has its results cached; any other update
        drops the window's entry."""
        size, close_after, pending = self.size, self.close_after, self.pending
        if add is None:
            add = self.add
        on_time = False
        for start in window_starts(size, self.advance, ts):
            end = start + size
            if end + close_after <= now:  # windows.is_late, inlined on the per-record path
                continue
            on_time = True
            if slots is not None:
                at = (key, start)
                hit = slots.get(at) if trusted else slots.pop(at, None)
                if hit is not None and trusted:
                    agg = add(hit[1], value)
                    view.store_window(hit[0], key, start, end, self.codec.dumps(agg), new=False)
                    slots[at] = (hit[0], agg)  # only once stored: a failed update leaves it as it was
                    if updated is not None:
                        updated(start, end, agg)
                    continue
            slot = view.slot(key, start, end)
            entry = pending.get(slot)
            if entry is None:
                raw = view.read_slot(slot)
                agg = add(self.init() if raw is None else self.codec.loads(raw), value)
                if self.write_through:
                    view.store_window(slot, key, start, end, self.codec.dumps(agg), new=raw is None)
                    if trusted and slots is not None and len(slots) < MAX_SLOTS:
                        slots[(key, start)] = (slot, agg)
                else:
                    pending[slot] = _Pending(key, start, end, agg, raw is None)
            else:
                entry.agg = agg = add(entry.agg, value)
            if updated is not None:
                updated(start, end, agg)
        return on_time

    def write(self, view: WindowedTransaction, *, reindex: bool = False) -> None:
        """Store the pending aggregates (all of one store partition: ``view``'s).
        ``reindex`` writes every window's by-end index entry, new or not: for updates that
        expiry may have raced with (a table's ``take()`` batch spans the agent's awaits)."""
        if not self.pending:
            return
        dumps = self.codec.dumps
        for slot, w in self.pending.items():
            view.store_window(slot, w.key, w.start, w.end, dumps(w.agg), new=reindex or w.new)
        self.pending.clear()

    def discard(self) -> None:
        """Forget the pending aggregates (their partition was revoked)."""
        self.pending.clear()
