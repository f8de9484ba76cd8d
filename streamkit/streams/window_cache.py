"""Fixed windows (tumbling, hopping) kept decoded per partition across batches: the one
window store behind the DSL's windowed aggregations (``aggregate.WindowAggregate``) and
agents' windowed tables (``table.WindowedTable``).

A record at ``ts`` is folded into every window that contains it and is still open at
``now``: ``end + close_after > now`` (the DSL closes a window at ``end + grace``; an agent's
table lets it go at ``end + expires``). A record whose windows are all past that is late.

A partition's windows stay decoded in memory from its first update on (``PartitionWindows``),
the store holding the same windows:

* an update merges into the cached aggregate; a window not cached does not exist (the
  cache was filled from the store when the partition was first used), so it costs no read;
* a changed window is written to the transaction once per commit (``flush``: its table
  asks for it before taking the changelog records, and before anything reads the store:
  queries, expiry, a table's reads of its windows), not once per record or batch;
* closing (or expiring) a window takes it out of the cache (by end, no scan) and deletes it
  from the store only if it was ever written there; its result comes from the cached
  aggregate.

The cache is valid while the transactions under it follow each other by commits: a
transaction rolled back, or a store partition reopened (revoked and assigned again, or
restored), fills it again from the store. With more than ``MAX_CACHED`` windows in a
partition the cache is given up for that partition (``complete`` false): windows are then
read from the store, written at each flush and closed by the store's scan.

Aggregates other than plain numbers and strings are passed through the codec when written
and before a result is emitted, so an aggregation sees what a store read would give it. An
aggregation that may mutate its arguments or keep them (a table's ``apply``, an assignment)
is folded ``fresh``: it is given a decoded copy, and its result is encoded at once (errors
surface at the update) and cached as decoded from that encoding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from streamkit.state.serialization import window_expiry_key
from streamkit.state.transaction import Transaction, TransactionStatus
from streamkit.state.windowed import WindowedTransaction
from streamkit.streams.windows import window_starts

__all__ = ["MAX_CACHED", "CachedWindows", "PartitionWindows", "ValueCodec", "WindowUpdated"]


class ValueCodec(Protocol):
    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


# ``(start, end, aggregate)`` of a window a record changed (the DSL's ``.current()``).
WindowUpdated = Callable[[int, int, Any], None]

# Windows cached per partition at most (a few hundred bytes each).
MAX_CACHED = 200_000

# A cached window: ``[key, start, end, aggregate, stored, dirty]``; ``stored``: the store (or
# the open transaction) has it; ``dirty``: changed since it was last written. A list: the
# row path makes one per new window.
_KEY, _START, _END, _AGG, _STORED, _DIRTY = range(6)
_Entry = list[Any]
# Aggregates the codec gives back as they are: no round trip needed.
_PLAIN = (int, float, str, bool, type(None))


class PartitionWindows:
    """One partition's windows: by (key, start), by end, and those to write."""

    __slots__ = ("by_end", "complete", "dirty", "store", "txn", "windows")

    def __init__(self, txn: Transaction, complete: bool) -> None:
        self.windows: dict[tuple[bytes, int], _Entry] = {}
        self.by_end: dict[int, list[_Entry]] = {}
        self.dirty: list[_Entry] = []
        self.txn = txn
        self.store = txn.partition
        self.complete = complete

    def add(self, key: bytes, start: int, end: int, agg: Any, stored: bool) -> _Entry:
        entry = [key, start, end, agg, stored, True]
        self.windows[(key, start)] = entry
        group = self.by_end.get(end)
        if group is None:
            self.by_end[end] = [entry]
        else:
            group.append(entry)
        self.dirty.append(entry)
        return entry


class CachedWindows:
    """Tumbling/hopping windows of ``size_ms`` advancing by ``advance_ms`` that close
    ``close_after_ms`` after their end, aggregated with ``add(aggregate, value)`` from
    ``init()``, stored with ``codec``; cached per partition (see the module doc)."""

    __slots__ = ("add", "advance", "close_after", "codec", "current", "current_txn", "current_view", "init",
                 "partitions", "size", "tumbling")

    def __init__(self, size_ms: int, advance_ms: int, close_after_ms: int, init: Callable[[], Any],
                 add: Callable[[Any, Any], Any], codec: ValueCodec) -> None:
        self.size = size_ms
        self.advance = advance_ms
        self.tumbling = advance_ms == size_ms
        self.close_after = close_after_ms
        self.init = init
        self.add = add
        self.codec = codec
        self.partitions: dict[int, PartitionWindows] = {}
        self.current: PartitionWindows | None = None
        self.current_txn: Transaction | None = None  # ``current``'s transaction
        self.current_view: WindowedTransaction | None = None

    def use(self, partition: int, txn: Transaction) -> PartitionWindows:
        """Make ``partition`` (whose open transaction is ``txn``) the one updates go to."""
        part = self.partitions.get(partition)
        if part is None or not _follows(part, txn):
            part = self.partitions[partition] = self._load(txn)
        self.current, self.current_txn, self.current_view = part, txn, WindowedTransaction(txn)
        return part

    def drop(self, partition: int) -> None:
        """Forget ``partition``'s windows (it was revoked)."""
        part = self.partitions.pop(partition, None)
        if part is not None and part is self.current:
            self.current = self.current_txn = self.current_view = None

    def _load(self, txn: Transaction) -> PartitionWindows:
        part = PartitionWindows(txn, True)
        loads = self.codec.loads
        for n, w in enumerate(WindowedTransaction(txn).iter_all_windows()):
            if n >= MAX_CACHED:
                return PartitionWindows(txn, False)
            part.add(w.key, w.start_ms, w.end_ms, loads(w.value), True)[_DIRTY] = False
        part.dirty.clear()
        return part

    def update(self, key: bytes, ts: int, value: Any, now: int, updated: WindowUpdated | None = None,
               add: Callable[[Any, Any], Any] | None = None, *, fresh: bool = False) -> bool:
        """Fold ``value`` into ``key``'s open windows holding ``ts`` (in the ``use``d
        partition); False if none is open (the record is late). ``updated`` is called with
        each window's new aggregate; ``add`` replaces the aggregation function for this
        update, ``fresh`` for one that may mutate or keep its arguments (see the module doc)."""
        part = self.current
        assert part is not None
        size, close_after, fold = self.size, self.close_after, self._fold
        if add is None:
            add = self.add
        if fresh:
            add = _fresh(add, self.codec)
        if self.tumbling and updated is None:
            # One window: window_starts' arithmetic without its range.
            start = ts - ts % size
            if start + size + close_after <= now:
                return False
            fold(part, key, start, add, value)
            return True
        on_time = False
        for start in window_starts(size, self.advance, ts):
            end = start + size
            if end + close_after <= now:  # windows.is_late, inlined on the per-record path
                continue
            on_time = True
            agg = fold(part, key, start, add, value)
            if updated is not None:
                updated(start, end, agg)
        return on_time

    def _fold(self, part: PartitionWindows, key: bytes, start: int, add: Callable[[Any, Any], Any],
              value: Any) -> Any:
        """``add`` ``value`` to window ``start`` of ``key``: to its cached aggregate, or to
        the stored one (the cache is not complete) or a new one."""
        entry = part.windows.get((key, start))
        if entry is not None:
            entry[_AGG] = agg = add(entry[_AGG], value)
            if not entry[_DIRTY]:
                entry[_DIRTY] = True
                part.dirty.append(entry)
            return agg
        end = start + self.size
        raw = None
        if not part.complete:
            view = self.current_view
            assert view is not None
            raw = view.read_slot(view.slot(key, start, end))
        agg = add(self.init() if raw is None else self.codec.loads(raw), value)
        part.add(key, start, end, agg, raw is not None)
        return agg

    def merge(self, keys: Iterable[bytes], starts: Iterable[int], partials: Iterable[Any],
              merge: Callable[[Any, Any], Any]) -> None:
        """Merge one partial aggregate per (key, window start) into the ``use``d partition's
        windows (the columnar path: the windows are open, the batch checked)."""
        part = self.current
        assert part is not None
        fold = self._fold
        for key, start, partial in zip(keys, starts, partials, strict=True):
            fold(part, key, start, merge, partial)

    def flush(self, partition: int, txn: Transaction) -> None:
        """Write ``partition``'s changed windows to ``txn`` (before its changelog records are
        taken, or a query reads it)."""
        part = self.partitions.get(partition)
        if part is None:
            return
        if not _follows(part, txn):
            self.drop(partition)  # written for a transaction that was rolled back
            return
        if txn.status is TransactionStatus.OPEN:
            self._write(part, WindowedTransaction(txn))

    def _write(self, part: PartitionWindows, view: WindowedTransaction) -> None:
        dumps, loads = self.codec.dumps, self.codec.loads
        for entry in part.dirty:
            if not entry[_DIRTY]:
                continue  # closed since it changed
            key, start, end, agg, stored, _dirty = entry
            raw = dumps(agg)
            view.store_window(view.slot(key, start, end), key, start, end, raw, new=not stored)
            entry[_STORED] = True
            entry[_DIRTY] = False
            if type(agg) not in _PLAIN:
                entry[_AGG] = loads(raw)
        part.dirty.clear()
        if not part.complete or len(part.windows) > MAX_CACHED:
            part.complete = False
            part.windows.clear()
            part.by_end.clear()

    def expire(self, partition: int, txn: Transaction, before_end_ms: int, *,
               results: bool = True) -> list[tuple[bytes, int, int, Any]] | None:
        """Take the windows with ``end <= before_end_ms`` out of ``partition``'s windows and
        of the store, as ``(key, start, end, aggregate)`` ordered as the store's by-end index
        orders them (an empty list without ``results``); None when the cache is not
        complete (after writing what changed: the caller expires from the store)."""
        part = self.use(partition, txn)
        view = WindowedTransaction(txn)
        if not part.complete:
            self._write(part, view)
            return None
        return self._take(part, view, before_end_ms, delete=True, results=results)

    def forget(self, partition: int, txn: Transaction, before_end_ms: int) -> None:
        """Take the windows with ``end <= before_end_ms`` out of the cache only (the caller
        expired them from the store)."""
        part = self.partitions.get(partition)
        if part is not None and _follows(part, txn):
            self._take(part, WindowedTransaction(txn), before_end_ms, delete=False)

    def _take(self, part: PartitionWindows, view: WindowedTransaction, before_end_ms: int,
              *, delete: bool, results: bool = False) -> list[tuple[bytes, int, int, Any]]:
        ends = sorted(end for end in part.by_end if end <= before_end_ms)
        out: list[tuple[bytes, int, int, Any]] = []
        if not ends:
            return out
        windows, codec = part.windows, self.codec
        for end in ends:
            group = part.by_end.pop(end)
            if results and len(group) > 1:
                group.sort(key=lambda e: window_expiry_key(e[_KEY], e[_START], end))
            for entry in group:
                key, start, _end, agg, stored, _dirty = entry
                del windows[(key, start)]
                entry[_DIRTY] = False
                if delete and stored:
                    view.delete_window(key, start, end)
                if results:
                    if type(agg) not in _PLAIN:
                        agg = codec.loads(codec.dumps(agg))
                    out.append((key, start, end, agg))
        return out


def _fresh(add: Callable[[Any, Any], Any], codec: ValueCodec) -> Callable[[Any, Any], Any]:
    """``add`` given a decoded copy of the aggregate, its result as decoded from its
    encoding (a ``fresh`` update: see the module doc)."""
    dumps, loads = codec.dumps, codec.loads

    def fold(agg: Any, value: Any) -> Any:
        if type(agg) not in _PLAIN:
            agg = loads(dumps(agg))
        new = add(agg, value)
        raw = dumps(new)
        return new if type(new) in _PLAIN else loads(raw)

    return fold


def _follows(part: PartitionWindows, txn: Transaction) -> bool:
    """Whether ``part`` holds what ``txn`` sees: the same transaction, or one begun on the
    same store partition after ``part``'s committed (``txn`` then becomes ``part``'s)."""
    if part.txn is txn:
        return True
    if part.txn.status is TransactionStatus.COMMITTED and txn.partition is part.store:
        part.txn = txn
        return True
    return False
