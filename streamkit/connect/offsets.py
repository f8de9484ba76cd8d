"""Source offsets: where each source partition of each connector has been read up to.

Stored as Kafka Connect stores them: the key is the JSON ``[connector, source_partition]``
and the value the JSON source offset, so the same offsets file or topic layout can be
inspected with the same expectations. ``FileOffsetStore`` keeps them in a local file
(standalone's ``offset.storage.file.filename``), written atomically: a temporary file is
written and fsynced, then renamed over the old one, so a crash leaves either the previous
or the new offsets, never a torn file.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import orjson

__all__ = ["FileOffsetStore", "MemoryOffsetStore", "OffsetStore", "offset_key", "offset_value"]

Offset = Mapping[str, Any]


def offset_key(connector: str, partition: Mapping[str, Any]) -> str:
    return orjson.dumps([connector, dict(partition)], option=orjson.OPT_SORT_KEYS).decode()


def offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    """An offset as the offset topic stores it (None: a tombstone, the partition removed)."""
    return orjson.dumps(dict(offset), option=orjson.OPT_SORT_KEYS) if offset is not None else None


class OffsetStore(Protocol):
    def get(self, connector: str, partition: Mapping[str, Any]) -> Offset | None: ...

    def put(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Offset | None]]) -> None:
        """``offsets`` maps offset_key -> (partition, offset); None removes the partition."""

    def committed(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Offset | None]]) -> None:
        """Offsets already durable elsewhere (an exactly-once source task's transaction wrote
        them to the offset topic): remembered, never written again."""

    def connector_offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]: ...

    async def flush(self) -> None:
        """Make every ``put`` so far durable."""

    async def sync(self) -> None:
        """Catch up with offsets other workers stored (before a task starts)."""


class MemoryOffsetStore:
    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, connector: str, partition: Mapping[str, Any]) -> Offset | None:
        with self._lock:
            found: Offset | None = self._data.get(offset_key(connector, partition))
            return found

    def put(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Offset | None]]) -> None:
        with self._lock:
            for key, (_partition, offset) in offsets.items():
                if offset is None:
                    self._data.pop(key, None)
                else:
                    self._data[key] = dict(offset)

    def committed(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Offset | None]]) -> None:
        MemoryOffsetStore.put(self, connector, offsets)

    def connector_offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        with self._lock:
            items = list(self._data.items())
        out = []
        for key, offset in items:
            name, partition = orjson.loads(key)
            if name == connector:
                out.append((partition, offset))
        return out

    async def flush(self) -> None:
        pass

    async def sync(self) -> None:
        pass


class FileOffsetStore(MemoryOffsetStore):
    """Offsets kept in memory and written to ``path`` on ``flush`` (atomically)."""

    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self.path = Path(path)
        self._dirty = False
        if self.path.exists():
            raw = self.path.read_bytes()
            if raw.strip():
                self._data = dict(orjson.loads(raw))

    def put(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Offset | None]]) -> None:
        super().put(connector, offsets)
        self._dirty = True

    async def flush(self) -> None:
        await asyncio.to_thread(self.write)

    def write(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            data = orjson.dumps(self._data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
            self._dirty = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name, suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            self._dirty = True
            with _suppress():
                os.unlink(tmp)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _suppress() -> Any:
    import contextlib

    return contextlib.suppress(OSError)
