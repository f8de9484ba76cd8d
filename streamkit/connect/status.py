"""Connector and task states, as Kafka Connect reports them on ``/status``.

A connector or task is UNASSIGNED before it starts, RUNNING, PAUSED (kept, not polling),
STOPPED (a stopped connector has no tasks; its offsets may then be edited), FAILED (with
the trace of what failed) or RESTARTING while a restart is under way.
"""

from __future__ import annotations

import enum
import traceback
from dataclasses import dataclass

__all__ = ["State", "Status", "TargetState", "trace_of"]


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


def trace_of(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))
