"""One table's state across the partitions assigned to this process.

Each partition lives in ``state_dir/{app_id}/{table}/{partition}`` and mirrors changelog
partition ``partition`` of ``{app_id}-{table}-changelog``. Partitions open lazily (on
first use after an assignment), ``revoke`` closes one and keeps its files for a later
reassignment, ``destroy`` deletes them.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Literal

from streamkit.state.backend import KVBackend
from streamkit.state.errors import StoreClosedError
from streamkit.state.memory import MemoryBackend
from streamkit.state.partition import ChangelogPartition, StorePartition
from streamkit.state.rocksdb import RocksDBBackend, RocksDBOptions

__all__ = ["BackendFactory", "BackendKind", "Store", "backend_factory", "changelog_topic"]

BackendKind = Literal["rocksdb", "memory"]
BackendFactory = Callable[[Path], KVBackend]
"""Opens the backend of one partition given its directory."""

# Path components and topic-name pieces: Kafka's legal topic characters, which are also
# safe as directory names (no separators, and "." / ".." are rejected separately).
_NAME = re.compile(r"[A-Za-z0-9._-]+")


def changelog_topic(app_id: str, table: str) -> str:
    return f"{app_id}-{table}-changelog"


def backend_factory(
    kind: BackendKind, rocksdb_options: RocksDBOptions | None = None
) -> BackendFactory:
    if kind == "rocksdb":
        return lambda path: RocksDBBackend(path, rocksdb_options)
    if kind == "memory":
        return lambda path: MemoryBackend()
    raise ValueError(f"unknown state backend {kind!r} (expected 'rocksdb' or 'memory')")


def _check_name(what: str, name: str) -> None:
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"{what} {name!r} must be made of [A-Za-z0-9._-] and not . or ..")


class Store:
    """The ``StorePartition``s of one table."""

    def __init__(
        self,
        state_dir: Path | str,
        app_id: str,
        table: str,
        *,
        backend: BackendKind | BackendFactory = "rocksdb",
        rocksdb_options: RocksDBOptions | None = None,
        changelog: str | None = None,
    ) -> None:
        _check_name("app_id", app_id)
        _check_name("table", table)
        self._app_id = app_id
        self._table = table
        self._path = Path(state_dir) / app_id / table
        self._changelog = changelog or changelog_topic(app_id, table)
        self._factory = (
            backend_factory(backend, rocksdb_options) if isinstance(backend, str) else backend
        )
        self._partitions: dict[int, StorePartition] = {}
        self._closed = False

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def app_id(self) -> str:
        return self._app_id

    @property
    def table(self) -> str:
        return self._table

    @property
    def path(self) -> Path:
        return self._path

    @property
    def changelog_topic(self) -> str:
        return self._changelog

    def partition_path(self, partition: int) -> Path:
        if partition < 0:
            raise ValueError(f"partition {partition} is negative")
        return self._path / str(partition)

    def partition(self, partition: int) -> StorePartition:
        """The store of ``partition``, opened on first use."""
        if self._closed:
            raise StoreClosedError(f"store {self._table!r} is closed")
        part = self._partitions.get(partition)
        if part is None:
            backend = self._factory(self.partition_path(partition))
            try:
                part = StorePartition(backend, ChangelogPartition(self._changelog, partition))
            except BaseException:
                backend.close()
                raise
            self._partitions[partition] = part
        return part

    def partitions(self) -> list[int]:
        """The open (assigned) partitions, ascending."""
        return sorted(self._partitions)

    def revoke(self, partition: int) -> None:
        """Close ``partition``; its files stay for a later assignment. No-op if not open."""
        part = self._partitions.pop(partition, None)
        if part is not None:
            part.close()

    def destroy(self, partition: int) -> None:
        """Close ``partition`` if open and delete its data."""
        part = self._partitions.pop(partition, None)
        if part is not None:
            part.destroy()
        path = self.partition_path(partition)
        if path.exists():
            shutil.rmtree(path)

    def close(self) -> None:
        """Close every open partition."""
        for partition in list(self._partitions):
            self.revoke(partition)
        self._closed = True
