"""An in-memory ``KVBackend``: a dict for point reads plus a lazily sorted key index.

For tests and for tables that need no local persistence (they restore from the changelog
on every assignment). Nothing survives ``close``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from streamkit.state.backend import Change
from streamkit.state.errors import StoreClosedError
from streamkit.state.sortedkeys import SortedKeys

__all__ = ["MemoryBackend"]


class MemoryBackend:
    """Implements ``KVBackend`` in process memory."""

    __slots__ = ("_closed", "_data", "_keys")

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys = SortedKeys()
        self._closed = False

    def __len__(self) -> int:
        return len(self._data)

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self, key: bytes) -> bytes | None:
        if self._closed:
            raise StoreClosedError("memory backend is closed")
        return self._data.get(key)

    def write(self, batch: Sequence[Change]) -> None:
        if self._closed:
            raise StoreClosedError("memory backend is closed")
        data = self._data
        keys = self._keys
        for key, value in batch:
            if value is None:
                if data.pop(key, None) is not None:
                    keys.remove(key)
            else:
                # One dict operation tells whether the key is new (the index needs it).
                size = len(data)
                data[key] = value
                if len(data) != size:
                    keys.add(key)

    def write_prefixed(self, prefix: bytes, items: Iterable[Sequence[Any]], last: Change | None = None) -> None:
        batch = [(prefix + item[0], item[1]) for item in items]
        if last is not None:
            batch.append(last)
        self.write(batch)

    def iter_range(
        self, lo: bytes, hi: bytes, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        if self._closed:
            raise StoreClosedError("memory backend is closed")
        if lo >= hi:
            return iter(())
        keys = self._keys.range(lo, hi)
        if reverse:
            keys.reverse()
        return self._items(keys)

    def iter_all(self) -> Iterator[tuple[bytes, bytes]]:
        if self._closed:
            raise StoreClosedError("memory backend is closed")
        return self._items(self._keys.range(b"", None))

    def _items(self, keys: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
        # Values are read as the walk reaches them, so a key deleted by a write made
        # during the walk is skipped rather than yielded stale.
        data = self._data
        for key in keys:
            if self._closed:
                raise StoreClosedError("memory backend was closed during this scan")
            value = data.get(key)
            if value is not None:
                yield key, value

    def close(self) -> None:
        self._closed = True
        self._data = {}
        self._keys.clear()

    def destroy(self) -> None:
        self.close()
