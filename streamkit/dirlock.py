"""An exclusive lock on a data directory, as Kafka's ``.lock`` file.

Two processes writing the same partition logs or state stores corrupt each other silently:
the second one "recovers" files the first is still appending to. The broker (on its data
directory) and ``streamkit worker`` (on its state directory) therefore take
``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``DIR/.lock`` before they read anything there. The
holder writes its pid into the file so the refusal can name it. The kernel drops the lock
when the process dies, even by SIGKILL, so a stale ``.lock`` file never blocks a restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType

__all__ = ["LOCK_FILE", "DataDirectoryError", "DirectoryLock", "DirectoryLocked"]

LOCK_FILE = ".lock"


class DataDirectoryError(Exception):
    """A data directory that cannot be used (a file in the way, no permission); the
    message names the path."""


class DirectoryLocked(DataDirectoryError):
    """Another process holds the directory's lock."""

    def __init__(self, path: Path, holder: int | None) -> None:
        who = f"process {holder}" if holder is not None else "another process"
        super().__init__(f"{path} is in use by {who} (locked by {path / LOCK_FILE}); "
                         "stop that process or choose another directory")
        self.path = path
        self.holder = holder


def _holder(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    return None


class DirectoryLock:
    """``acquire()`` creates the directory if needed and locks it, ``release()`` unlocks
    (also as a context manager). Held by an open file descriptor of this object."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> DirectoryLock:
        if self._fd is not None:
            return self
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except FileExistsError:
            raise DataDirectoryError(f"{self.path} is not a directory (a file is in the way)") from None
        except NotADirectoryError:
            raise DataDirectoryError(
                f"cannot create {self.path}: a part of the path is a file, not a directory") from None
        except PermissionError:
            raise DataDirectoryError(f"no permission to use {self.path} as a data directory") from None
        except OSError as exc:
            raise DataDirectoryError(f"cannot use {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DirectoryLocked(self.path, holder) from None
        except OSError as exc:
            os.close(fd)
            raise DataDirectoryError(f"cannot lock {self.path / LOCK_FILE}: {exc.strerror or exc}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Unlock; the file stays (removing it would race with a process locking it now)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
