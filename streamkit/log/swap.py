"""The crash-safe file protocol that puts a compacted segment in place of the original.

For a segment based at ``B`` the cleaner writes ``B.log.cleaned`` with its two indexes
``B.index.cleaned`` and ``B.timeindex.cleaned`` (built while writing, so the swap never
scans the log), fsyncs them, then renames:

    B.index.cleaned -> B.index.swap, B.timeindex.cleaned -> B.timeindex.swap,
    B.log.cleaned -> B.log.swap                                  (the commit point)

Completing the swap moves each staged index over the old one (or deletes the old index
when none is staged: an index of the old log must never sit beside the new log), then
``B.log.swap`` over ``B.log``. An emptied segment is deleted, unless it is the partition's
first: the first segment's base holds the log start offset in place, which compaction never
moves (Kafka keeps cleaned segments even when empty).

After a crash, on open: every ``*.cleaned`` file never reached the commit point and goes,
so do staged indexes without a ``B.log.swap``; each ``B.log.swap`` is completed. A crash
while completing leaves ``B.log.swap`` and perhaps the new indexes already in place; the
second completion deletes those (nothing staged is left) and recovery rebuilds them.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from streamkit.log.checkpoint import fsync_dir

__all__ = [
    "CLEANED",
    "INDEX_SUFFIXES",
    "complete_swap",
    "discard_cleaned",
    "discard_swap",
    "finish_interrupted_swaps",
    "stage_swap",
    "swap_path",
]

log = logging.getLogger(__name__)

CLEANED = ".cleaned"
_SWAP = ".swap"
INDEX_SUFFIXES = (".index", ".timeindex")
_SUFFIXES = (".log", *INDEX_SUFFIXES)


def _path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}"


def swap_path(directory: Path, base_offset: int) -> Path:
    return _path(directory, base_offset, ".log" + _SWAP)


def stage_swap(directory: Path, base_offset: int) -> None:
    """Rename the fsynced ``.cleaned`` files to ``.swap``, the log file last (the commit)."""
    for suffix in (*INDEX_SUFFIXES, ".log"):
        os.replace(_path(directory, base_offset, suffix + CLEANED),
                   _path(directory, base_offset, suffix + _SWAP))
    fsync_dir(directory)


def discard_cleaned(directory: Path, base_offset: int) -> None:
    for suffix in _SUFFIXES:
        _path(directory, base_offset, suffix + CLEANED).unlink(missing_ok=True)


def discard_swap(directory: Path, base_offset: int) -> None:
    for suffix in _SUFFIXES:
        _path(directory, base_offset, suffix + _SWAP).unlink(missing_ok=True)


def complete_swap(directory: Path, base_offset: int, keep_empty: bool) -> bool:
    """Put the staged segment in place; False when it was empty and is deleted instead."""
    for suffix in INDEX_SUFFIXES:
        staged = _path(directory, base_offset, suffix + _SWAP)
        if staged.exists():
            os.replace(staged, _path(directory, base_offset, suffix))
        else:
            _path(directory, base_offset, suffix).unlink(missing_ok=True)
    swapped = swap_path(directory, base_offset)
    kept = keep_empty or swapped.stat().st_size > 0
    if kept:
        os.replace(swapped, _path(directory, base_offset, ".log"))
    else:
        for suffix in (*_SUFFIXES, ".txnindex"):  # an emptied segment holds no marker either
            _path(directory, base_offset, suffix).unlink(missing_ok=True)
        swapped.unlink()
    fsync_dir(directory)
    return kept


def finish_interrupted_swaps(directory: Path) -> None:
    """Recovery's half of the protocol (see the module doc); runs before segments open."""
    for path in directory.glob(f"*{CLEANED}"):
        log.info("removing unfinished compaction output %s", path)
        path.unlink()
    committed = sorted(int(p.name[:20]) for p in directory.glob(f"*.log{_SWAP}"))
    for suffix in INDEX_SUFFIXES:
        for path in directory.glob(f"*{suffix}{_SWAP}"):
            if int(path.name[:20]) not in committed:
                path.unlink()
    if not committed:
        return
    bases = sorted(int(p.name[:20]) for p in directory.glob("*.log") if p.name[:20].isdigit())
    for base in committed:
        log.info("completing interrupted compaction swap of segment %d", base)
        complete_swap(directory, base, keep_empty=not bases or base <= bases[0])
