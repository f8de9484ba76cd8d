"""Windowed state: a view over a ``Transaction`` that stores values per (key, window).

Two key spaces inside the transaction's keys (layouts in ``serialization``):

* ``b"\\x00" + window_key(key, start, end)``         -> the window's value;
* ``b"\\x01" + window_expiry_key(key, start, end)``  -> ``b""``, the same windows by end.

The second one makes expiry a range scan over exactly the expired windows instead of a
scan of all state. Both are ordinary transaction writes, so both reach the changelog and a
restore rebuilds the index with the data (the index record is empty, so this costs a key,
not a value, per window written in a commit interval).

A table uses either this view or plain keys, not both: the namespaces would collide.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from streamkit.state.serialization import (
    INT64_MAX,
    encode_int64,
    next_prefix,
    parse_window_expiry_key,
    parse_window_key,
    window_expiry_key,
    window_key,
    window_key_prefix,
)
from streamkit.state.transaction import Transaction

__all__ = ["Window", "WindowedTransaction"]

_WINDOWS = b"\x00"
_BY_END = b"\x01"
_BY_END_STOP = b"\x02"


class Window(NamedTuple):
    key: bytes
    start_ms: int
    end_ms: int
    value: bytes


class WindowedTransaction:
    """Window reads and writes through ``transaction`` (commit and rollback stay with it)."""

    __slots__ = ("_tx", "transaction")

    def __init__(self, transaction: Transaction) -> None:
        self._tx = transaction
        # The transaction under the view (an attribute, not a property: the per-record
        # window update writes through it without another Python frame). Read-only by
        # convention.
        self.transaction = transaction

    def get_window(self, key: bytes, start_ms: int, end_ms: int) -> bytes | None:
        return self._tx.get(_WINDOWS + window_key(key, start_ms, end_ms))

    def update_window(self, key: bytes, start_ms: int, end_ms: int, value: bytes) -> None:
        """Set the value of window ``[start_ms, end_ms)`` of ``key``."""
        if start_ms > end_ms:
            raise ValueError(f"window start {start_ms} is after its end {end_ms}")
        self._tx.set(_WINDOWS + window_key(key, start_ms, end_ms), value)
        # Written on every update rather than only when the window is new: knowing would
        # cost a read, and the write is a dict operation that the commit folds per key.
        self._tx.set(_BY_END + window_expiry_key(key, start_ms, end_ms), b"")

    @staticmethod
    def slot(key: bytes, start_ms: int, end_ms: int) -> bytes:
        """Where window ``[start_ms, end_ms)`` of ``key`` is stored: for a read-modify-write
        (``read_slot``, then ``store_window``) that encodes the key once."""
        return _WINDOWS + window_key(key, start_ms, end_ms)

    def read_slot(self, slot: bytes) -> bytes | None:
        return self._tx.get(slot)

    def store_window(self, slot: bytes, key: bytes, start_ms: int, end_ms: int, value: bytes, *, new: bool) -> None:
        """Write ``value`` at the ``slot`` of window ``[start_ms, end_ms)`` of ``key``. ``new``
        (``read_slot`` found no value) also writes the window's entry in the by-end index;
        an existing window has one."""
        self._tx.set(slot, value)
        if new:
            self._tx.set(_BY_END + window_expiry_key(key, start_ms, end_ms), b"")

    def delete_window(self, key: bytes, start_ms: int, end_ms: int) -> None:
        self._tx.delete(_WINDOWS + window_key(key, start_ms, end_ms))
        self._tx.delete(_BY_END + window_expiry_key(key, start_ms, end_ms))

    def iter_windows(
        self,
        key: bytes,
        from_start_ms: int | None = None,
        to_start_ms: int | None = None,
        *,
        reverse: bool = False,
    ) -> Iterator[Window]:
        """The windows of ``key`` with ``from_start_ms <= start < to_start_ms`` (either bound
        may be None: open), ordered by start then end (descending if ``reverse``)."""
        prefix = _WINDOWS + window_key_prefix(key)
        lo = prefix if from_start_ms is None else prefix + encode_int64(from_start_ms)
        hi = next_prefix(prefix) if to_start_ms is None else prefix + encode_int64(to_start_ms)
        return self._windows(self._tx.iter_range(lo, hi, reverse))

    def iter_all_windows(self) -> Iterator[Window]:
        """Every window of every key, ordered by key then start (interactive queries)."""
        return self._windows(self._tx.iter_range(_WINDOWS, _BY_END))

    def windows_ending(self, after_end_ms: int | None, up_to_end_ms: int) -> list[Window]:
        """The windows with ``after_end_ms < end <= up_to_end_ms`` (None: no lower bound),
        ordered by end, without deleting them: those a watermark moving from one bound to
        the other closes, when closed windows stay stored (``expires``) for queries."""
        if after_end_ms is not None and after_end_ms >= up_to_end_ms:
            return []
        lo = _BY_END if after_end_ms is None else _BY_END + encode_int64(after_end_ms + 1)
        hi = _BY_END_STOP if up_to_end_ms >= INT64_MAX else _BY_END + encode_int64(up_to_end_ms + 1)
        tx = self._tx
        out: list[Window] = []
        for ikey, _ in tx.iter_range(lo, hi):
            key, start, end = parse_window_expiry_key(ikey[1:])
            value = tx.get(_WINDOWS + window_key(key, start, end))
            if value is not None:
                out.append(Window(key, start, end, value))
        return out

    def expire_windows(self, before_end_ms: int) -> list[Window]:
        """Delete every window with ``end <= before_end_ms`` (the deletes reach the
        changelog as tombstones) and return them, ordered by end, for final emission."""
        if before_end_ms >= INT64_MAX:
            hi = _BY_END_STOP
        else:
            hi = _BY_END + encode_int64(before_end_ms + 1)
        tx = self._tx
        # Materialized first: the loop deletes what the scan walks over.
        index_keys = [ikey for ikey, _ in tx.iter_range(_BY_END, hi)]
        expired: list[Window] = []
        for ikey in index_keys:
            key, start, end = parse_window_expiry_key(ikey[1:])
            wkey = _WINDOWS + window_key(key, start, end)
            value = tx.get(wkey)
            tx.delete(wkey)
            tx.delete(ikey)
            if value is not None:
                expired.append(Window(key, start, end, value))
        return expired

    @staticmethod
    def _windows(items: Iterator[tuple[bytes, bytes]]) -> Iterator[Window]:
        for wkey, value in items:
            key, start, end = parse_window_key(wkey[1:])
            yield Window(key, start, end, value)
