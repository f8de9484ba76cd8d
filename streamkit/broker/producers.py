"""Producer ids for InitProducerId, kept across restarts in ``.meta/producer-ids``.

Ids are handed out from a block; the block's end is persisted before any id from it is used,
so a restarted broker never repeats an id (Kafka's ProducerIdManager does the same with
blocks from the controller). A cluster member takes its blocks from ZooKeeper instead
(``cluster/producer_ids.py``), so that no two brokers hand out the same id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from streamkit.log.checkpoint import write_atomically

__all__ = ["ProducerIdSource", "ProducerIds", "ProducerIdsUnavailable"]

_BLOCK = 1000


class ProducerIdsUnavailable(Exception):
    """No producer id can be handed out yet (a cluster member waiting for its next block):
    InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry, as Kafka does."""


class ProducerIdSource(Protocol):
    def next_id(self) -> int: ...


class ProducerIds:
    def __init__(self, meta_dir: Path) -> None:
        self._path = meta_dir / "producer-ids"
        meta_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._next = int(self._path.read_text().strip())
        except (FileNotFoundError, ValueError):
            self._next = 0
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + _BLOCK
            write_atomically(self._path, str(self._block_end).encode())
        pid = self._next
        self._next += 1
        return pid
