"""The key-value backend protocol every store partition is built on.

A backend is an ordered map of raw bytes with atomic batch writes. It knows nothing of
transactions, changelogs or key layouts: those live in the layers above, so the two
implementations (``MemoryBackend``, ``RocksDBBackend``) stay small and interchangeable.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeAlias

__all__ = ["Change", "KVBackend"]

Change: TypeAlias = tuple[bytes, bytes | None]
"""One write: ``(key, value)``, where a ``None`` value deletes the key."""


class KVBackend(Protocol):
    """An ordered bytes -> bytes map with atomic batch writes.

    After ``close()`` or ``destroy()`` every method but ``close`` raises
    ``StoreClosedError``, and so does a scan still being walked; ``close`` is idempotent.
    """

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key``, or None."""
        ...

    def write(self, batch: Sequence[Change]) -> None:
        """Apply every change in ``batch``, in order, atomically: after a crash either all
        of them are visible or none. A later change to the same key wins."""
        ...

    def write_prefixed(self, prefix: bytes, items: Iterable[Sequence[Any]], last: Change | None = None) -> None:
        """``write`` of ``(prefix + key, value)`` for each ``(key, value, ...)`` of ``items``
        (fields after the value are ignored), then ``last`` if given, as it is: a store
        partition's commit or restore chunk, without building the prefixed changes first.
        Nothing at all is a no-op."""
        ...

    def iter_range(
        self, lo: bytes, hi: bytes, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Items with ``lo <= key < hi`` in bytewise key order (descending if ``reverse``).

        Precondition checks (closed backend) happen at the call, not at the first ``next``.
        """
        ...

    def iter_all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every item, in ascending key order."""
        ...

    def close(self) -> None:
        """Release the backend; the data stays (on disk, for a persistent backend)."""
        ...

    def destroy(self) -> None:
        """Close the backend and delete its data."""
        ...
