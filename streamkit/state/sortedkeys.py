"""A lazily maintained sorted view of a changing set of byte keys.

Used by ``MemoryBackend`` (its key index) and by ``Transaction`` (the keys of its write
cache) to answer range queries. Writes only record what changed; the sorted list is
brought up to date when a range is asked for. That keeps the per-write cost at an append
while a burst of range queries between few writes costs a few ``insort``s, not a re-sort.
"""

from __future__ import annotations

from bisect import bisect_left, insort

__all__ = ["SortedKeys"]

# Up to this many pending keys are inserted one by one (binary search + memmove each);
# beyond it one sort is cheaper. Timsort must compare every element once to find the
# existing run, which costs about as much as ~32 memmoves of a large pointer array.
_INSORT_LIMIT = 32


class SortedKeys:
    """Sorted keys with O(1) ``add``/``remove`` and lazy consolidation on ``range``.

    The caller keeps the authoritative set (a dict) and must report only real changes:
    ``add`` a key that is not in the set, ``remove`` one that is.
    """

    __slots__ = ("_added", "_removed", "_sorted")

    def __init__(self, keys: list[bytes] | None = None) -> None:
        self._sorted: list[bytes] = sorted(keys) if keys else []
        self._added: list[bytes] = []  # new keys, not yet in _sorted
        self._removed: set[bytes] = set()  # keys still in _sorted or _added, but gone

    def __len__(self) -> int:
        return len(self._sorted) + len(self._added) - len(self._removed)

    def add(self, key: bytes) -> None:
        removed = self._removed
        if removed and key in removed:
            # Removed then re-added before consolidation: it is still physically listed.
            removed.discard(key)
        else:
            self._added.append(key)

    def remove(self, key: bytes) -> None:
        self._removed.add(key)

    def clear(self) -> None:
        self._sorted = []
        self._added = []
        self._removed = set()

    def range(self, lo: bytes, hi: bytes | None) -> list[bytes]:
        """A snapshot of the keys with ``lo <= key < hi`` (no upper bound if ``hi`` is None),
        ascending. The caller may mutate the set while walking the snapshot."""
        self._settle()
        keys = self._sorted
        i = bisect_left(keys, lo)
        j = len(keys) if hi is None else bisect_left(keys, hi, i)
        return keys[i:j]

    def _settle(self) -> None:
        keys = self._sorted
        added = self._added
        removed = self._removed
        if removed:
            if added:
                added = [k for k in added if k not in removed]
            if len(removed) <= _INSORT_LIMIT:
                for key in removed:
                    i = bisect_left(keys, key)
                    if i < len(keys) and keys[i] == key:
                        del keys[i]
            else:
                keys = self._sorted = [k for k in keys if k not in removed]
            removed.clear()
        if added:
            if len(added) <= _INSORT_LIMIT:
                for key in added:
                    insort(keys, key)
            else:
                keys.extend(added)
                keys.sort()
            added = []
        self._added = added
