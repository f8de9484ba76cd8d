"""Connector and task states, as Kafka Connect reports them on ``/status``.

A connector or task is UNASSIGNED before it starts, RUNNING, PAUSED (kept, not polling),
STOPPED (a stopped connector has no tasks; its offsets may then be edited), FAILED (with
the trace of what failed) or RESTARTING while a restart is under way.

A failure the connector explains (a ``ConnectError``: a missing column, an unreachable
database, a bad config) is reported and logged as its one-line reason; any other error is
a bug, shown with its Python traceback.
"""

from __future__ import annotations

import enum
import logging
import traceback
from dataclasses import dataclass

from streamkit.connect.errors import ConnectError

__all__ = ["State", "Status", "TargetState", "log_failure", "reason_of", "trace_of"]


class State(enum.StrEnum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"


class TargetState(enum.StrEnum):
    """What the user asked for (pause, resume, stop); the state follows it."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@dataclass(frozen=True, slots=True)
class Status:
    state: State
    worker_id: str
    trace: str | None = None

    def as_json(self) -> dict[str, str]:
        out = {"state": self.state.value, "worker_id": self.worker_id}
        if self.trace:
            out["trace"] = self.trace
        return out


def reason_of(error: BaseException) -> str:
    """``ErrorClass: message`` on one line."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def trace_of(error: BaseException) -> str:
    """The ``trace`` of a FAILED status: the reason of a ConnectError, else the traceback."""
    if isinstance(error, ConnectError):
        return reason_of(error)
    return "".join(traceback.format_exception(error))


def log_failure(logger: logging.Logger, what: str, error: BaseException,
                level: int = logging.ERROR) -> None:
    """Log that ``what`` failed: as one line for a ConnectError, else with the traceback."""
    if isinstance(error, ConnectError):
        logger.log(level, "%s failed: %s", what, reason_of(error))
    else:
        logger.log(level, "%s failed", what, exc_info=error)
