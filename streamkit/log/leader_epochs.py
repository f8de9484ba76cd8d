"""The leader epoch cache of one partition (Kafka's LeaderEpochFileCache, KIP-101 and KIP-279).

Every leader stamps its leader epoch into the batches it appends (``partitionLeaderEpoch``),
so the log is a sequence of epochs, each a run of offsets. The cache keeps where each epoch
starts: ``(epoch, start offset)`` entries, strictly increasing in both. A replica uses it
to answer OffsetForLeaderEpoch ("where does your log leave epoch E?"), which is how a
follower finds, and cuts, the tail where its log diverged from its leader's.

The rules, as in Kafka:

- ``assign(epoch, start)``: a new entry when ``epoch`` is above the latest one. An entry
  whose start offset is not below the new one held no batch, so it goes (a leader that was
  elected and deposed before it wrote anything). Epochs at or below the latest are ignored:
  the log's epochs never go down.
- ``end_offset_for(requested, leo)``: the largest epoch <= ``requested`` and where it ends,
  which is the start of the next epoch, or ``leo`` for the latest; ``(-1, -1)`` when the
  cache is empty or ``requested`` is below the first epoch (the log no longer knows it).
- ``truncate_from_end(offset)``: the log lost everything from ``offset`` on, so every
  entry starting at or after it goes.
- ``truncate_from_start(offset)``: the log start moved up to ``offset``; the epoch in effect
  there now starts there, and the entries before it go.

Persistence: the ``leader-epoch-checkpoint`` file in the partition directory, Kafka's text
format (so Kafka's tools read it)::

    0              version
    2              number of entries
    0 0            epoch start_offset
    3 1200

It is rewritten atomically (temp file, fsync, rename, fsync of the directory) after every
change, before the batch that caused it is written: the file never lacks an entry for a
stored batch, and recovery cuts the entries past what survived (see ``PartitionLog.open``).
A change is rare (once per leader election), so the cost is off the append path.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from operator import attrgetter
from pathlib import Path
from typing import Final, NamedTuple

from streamkit.log.checkpoint import write_atomically

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
]

LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1
_VERSION: Final = 0


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


_EPOCH = attrgetter("epoch")
_START = attrgetter("start_offset")


class LeaderEpochCache:
    """The entries of one partition, and the file they are saved in (``path`` None: kept
    in memory only). Not thread-safe: the partition calls it under its own lock."""

    def __init__(self, path: Path | None, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        for entry in entries:
            self._assign(entry.epoch, entry.start_offset)
        # A plain attribute, not a property: the append path compares against it per batch.
        self.latest_epoch = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    # -- the file ------------------------------------------------------------------------

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache | None:
        """The cache saved in ``directory``; None when the file is missing or unreadable
        (the caller rebuilds it from the batches)."""
        path = directory / LEADER_EPOCH_CHECKPOINT
        try:
            return cls(path, parse_checkpoint(path.read_text()))
        except (FileNotFoundError, UnicodeDecodeError, ValueError):
            return None

    def save(self) -> None:
        if self.path is not None:
            write_atomically(self.path, format_checkpoint(self._entries).encode())

    def _changed(self, save: bool = True) -> None:
        self.latest_epoch = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH
        if save:
            self.save()

    # -- queries -------------------------------------------------------------------------

    @property
    def entries(self) -> list[EpochEntry]:
        """The entries, oldest first (a copy)."""
        return list(self._entries)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """KIP-279: ``(epoch, end offset)`` of the largest epoch <= ``requested_epoch``; the
        end offset is the start of the next epoch, or ``log_end_offset`` for the latest.
        ``(-1, -1)`` when no epoch is known at or below ``requested_epoch``."""
        entries = self._entries
        i = bisect_right(entries, requested_epoch, key=_EPOCH)
        if i == 0:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if i == len(entries):
            return entries[-1].epoch, log_end_offset
        return entries[i - 1].epoch, entries[i].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the batch at ``offset`` (-1 when below the first entry)."""
        i = bisect_right(self._entries, offset, key=_START)
        return self._entries[i - 1].epoch if i else UNDEFINED_EPOCH

    # -- changes -------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, save: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (see the module's rules); True
        when that changed anything, and then the file is saved (unless ``save`` is False:
        a rebuild saves once at the end)."""
        if self._assign(epoch, start_offset):
            self._changed(save)
            return True
        return False

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")
        entries = self._entries
        if entries and epoch <= entries[-1].epoch:
            return False
        while entries and entries[-1].start_offset >= start_offset:
            entries.pop()
        entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from_end(self, offset: int) -> bool:
        """Drop the entries starting at or after ``offset`` (the log was cut there)."""
        keep = bisect_right(self._entries, offset - 1, key=_START)
        if keep == len(self._entries):
            return False
        del self._entries[keep:]
        self._changed()
        return True

    def truncate_from_start(self, offset: int) -> bool:
        """The log start offset moved to ``offset``: the epoch in effect there starts there."""
        covering = bisect_right(self._entries, offset, key=_START) - 1
        if covering < 0 or (covering == 0 and self._entries[0].start_offset == offset):
            return False
        first = EpochEntry(self._entries[covering].epoch, offset)
        self._entries[: covering + 1] = [first]
        self._changed()
        return True

    def clear(self) -> None:
        if self._entries:
            self._entries.clear()
            self._changed()


def format_checkpoint(entries: Iterable[EpochEntry]) -> str:
    items = list(entries)
    lines = [str(_VERSION), str(len(items))] + [f"{e.epoch} {e.start_offset}" for e in items]
    return "\n".join(lines) + "\n"


def parse_checkpoint(text: str) -> list[EpochEntry]:
    """The entries of a ``leader-epoch-checkpoint`` file; ValueError when it is malformed."""
    lines = text.splitlines()
    if not lines:
        return []  # Kafka creates the file empty before its first write
    if int(lines[0]) != _VERSION:
        raise ValueError(f"leader-epoch-checkpoint version {lines[0]} is not {_VERSION}")
    count = int(lines[1]) if len(lines) > 1 else 0
    entries = []
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"malformed leader-epoch-checkpoint line {line!r}")
        entries.append(EpochEntry(int(fields[0]), int(fields[1])))
    if len(entries) != count:
        raise ValueError(f"leader-epoch-checkpoint holds {len(entries)} entries, its header says {count}")
    return entries
