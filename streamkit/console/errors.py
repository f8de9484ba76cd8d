"""The console's errors: each is a status and one line for the user, shown in the page (or
as ``{"error": ...}`` to a JSON client). Nothing else reaches the browser: an unexpected
failure is logged and answered with a plain 500 page without a traceback."""

from __future__ import annotations

from typing import Any

__all__ = ["BadInput", "Conflict", "ConsoleError", "NotFound", "Unavailable"]


class ConsoleError(Exception):
    status = 400

    def __init__(self, message: str, status: int | None = None,
                 detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail or {}  # what the service said, e.g. Connect's per-field problems
        if status is not None:
            self.status = status


class BadInput(ConsoleError):
    status = 400


class NotFound(ConsoleError):
    status = 404


class Conflict(ConsoleError):
    status = 409


class Unavailable(ConsoleError):
    """A broker, Connect worker or stream worker that does not answer."""

    status = 503
