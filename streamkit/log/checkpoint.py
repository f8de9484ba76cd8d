"""The partition checkpoint file and the clean-shutdown marker.

``checkpoint`` holds four offsets and a time, one ``name value`` line each, written
atomically (temp file, fsync, rename, fsync of the directory):

    recovery-point   every batch below it was fsynced; recovery verifies only past it
    log-start-offset  raised by retention and DeleteRecords; reads below it are out of range
    cleaner-offset    compaction has cleaned everything below it (the dirty section starts here)
    delete-horizon    the earliest time (ms) at which compaction may drop a tombstone it kept,
                      -1 for none: the cleaner runs then even if nothing is dirty (optional)
    high-watermark    the high watermark when the file was written (optional, -1: unknown):
                      a replicated partition opens with it, capped at the log end offset
                      (Kafka keeps it in the log dir's replication-offset-checkpoint)

``.clean-shutdown`` exists only between a clean close and the next open.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLEAN_SHUTDOWN", "Checkpoint", "fsync_dir", "write_atomically"]

CHECKPOINT = "checkpoint"
CLEAN_SHUTDOWN = ".clean-shutdown"
_VERSION = "streamkit-checkpoint 1"


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


@dataclass(slots=True)
class Checkpoint:
    recovery_point: int = 0
    log_start_offset: int = 0
    cleaner_offset: int = 0
    delete_horizon: int = -1
    high_watermark: int = -1

    @classmethod
    def read(cls, directory: Path) -> Checkpoint | None:
        """The saved checkpoint, or None when missing or unreadable (then recover it all)."""
        try:
            lines = (directory / CHECKPOINT).read_text().splitlines()
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        if not lines or lines[0] != _VERSION:
            return None
        values: dict[str, int] = {}
        for line in lines[1:]:
            name, _, raw = line.partition(" ")
            try:
                values[name] = int(raw)
            except ValueError:
                return None
        try:
            return cls(
                recovery_point=values["recovery-point"],
                log_start_offset=values["log-start-offset"],
                cleaner_offset=values.get("cleaner-offset", 0),
                delete_horizon=values.get("delete-horizon", -1),
                high_watermark=values.get("high-watermark", -1),
            )
        except KeyError:
            return None

    def write(self, directory: Path) -> None:
        text = (
            f"{_VERSION}\nrecovery-point {self.recovery_point}\n"
            f"log-start-offset {self.log_start_offset}\ncleaner-offset {self.cleaner_offset}\n"
            f"delete-horizon {self.delete_horizon}\nhigh-watermark {self.high_watermark}\n"
        )
        write_atomically(directory / CHECKPOINT, text.encode())
