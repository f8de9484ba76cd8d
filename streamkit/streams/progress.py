"""Progress of long work (table restores, catching up with a backlog) for whoever watches.

On a terminal (stderr is a TTY) a rich progress bar per piece of work, gone when the work
is done; otherwise (a service log, a pipe) one log line per piece of work every
``LOG_INTERVAL_MS``, and one when it ends. The work itself only calls ``advance``/``finish``.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import IO, Any

__all__ = ["LOG_INTERVAL_MS", "ProgressReporter", "Task"]

log = logging.getLogger("streamkit.streams.progress")

LOG_INTERVAL_MS = 5000
"""How often a piece of work in progress is logged when stderr is not a terminal."""


class Task:
    """One piece of work: ``total`` units, of which ``done`` so far."""

    __slots__ = ("_bar_id", "_last_log", "_reporter", "description", "done", "started", "total", "unit")

    def __init__(self, reporter: ProgressReporter, description: str, total: int, unit: str) -> None:
        self._reporter = reporter
        self.description = description
        self.total = total
        self.unit = unit
        self.done = 0
        self.started = time.monotonic()
        self._last_log = self.started
        self._bar_id: Any = None

    def advance(self, n: int) -> None:
        self.done += n
        self._reporter._update(self)

    def set_done(self, done: int) -> None:
        self.done = done
        self._reporter._update(self)

    def finish(self) -> None:
        self._reporter._finish(self)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        percent = f" ({100 * self.done // self.total}%)" if self.total else ""
        left = ""
        if rate > 0 and self.total > self.done:
            left = f", about {(self.total - self.done) / rate:.0f}s left"
        return f"{self.description}: {self.done}/{self.total} {self.unit}{percent}, {rate:.0f}/s{left}"


class ProgressReporter:
    """Bars on a terminal, periodic log lines otherwise (``stream``: stderr by default)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._bars: Any = None  # rich.progress.Progress while a bar is shown
        self._tasks: set[Task] = set()

    @property
    def terminal(self) -> bool:
        isatty = getattr(self._stream, "isatty", None)
        return bool(isatty and isatty())

    def start(self, description: str, total: int, unit: str = "records") -> Task:
        task = Task(self, description, total, unit)
        self._tasks.add(task)
        if self.terminal:
            bars = self._progress()
            task._bar_id = bars.add_task(description, total=total or None)
        return task

    def _progress(self) -> Any:
        if self._bars is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            console = Console(file=self._stream, force_terminal=True)
            self._bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeRemainingColumn(), console=console, transient=True)
            self._bars.start()
        return self._bars

    def _update(self, task: Task) -> None:
        if task._bar_id is not None and self._bars is not None:
            self._bars.update(task._bar_id, completed=task.done, total=task.total or None)
            return
        now = time.monotonic()
        if (now - task._last_log) * 1000 >= LOG_INTERVAL_MS:
            task._last_log = now
            log.info("%s", task.line())

    def _finish(self, task: Task) -> None:
        if task not in self._tasks:
            return
        self._tasks.discard(task)
        if task._bar_id is not None and self._bars is not None:
            self._bars.remove_task(task._bar_id)
            if not self._tasks:
                self.close()

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None
