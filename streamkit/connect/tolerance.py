"""Error handling of a task: retries with backoff, ``errors.tolerance``, error logging and the
dead-letter queue's context headers (Kafka Connect's RetryWithToleranceOperator and
DeadLetterQueueReporter).

- A ``RetriableError`` from a task's ``poll``, ``put`` or ``pre_commit``/``flush`` is
  retried with exponential backoff (300 ms doubling, capped at
  ``errors.retry.delay.max.ms``), as Kafka Connect redelivers a batch whose ``put`` raised
  one: for up to ``errors.retry.timeout`` ms when that is set (-1: forever), and without
  limit when it is 0 (the default).
- A failure to convert or transform a record (or a ``DataError`` from ``put``) fails the task with
  ``errors.tolerance=none``; with ``all`` the record is skipped, logged when
  ``errors.log.enable``, and (sinks) written to ``errors.deadletterqueue.topic.name``
  with Kafka's ``__connect.errors.*`` headers when context headers are enabled.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from streamkit.connect.config import CommonConfig
from streamkit.connect.errors import RetriableError

__all__ = ["ERROR_HEADER_PREFIX", "ErrorHandler", "Stage", "error_headers"]

log = logging.getLogger(__name__)
T = TypeVar("T")

ERROR_HEADER_PREFIX = "__connect.errors."
_INITIAL_BACKOFF_MS = 300


class Stage(enum.StrEnum):
    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


def _java_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def error_headers(*, topic: str, partition: int, offset: int, connector: str, task_id: int,
                  stage: Stage, executing: type | None, error: BaseException) -> list[tuple[str, bytes]]:
    """Kafka Connect's DLQ context headers, values as UTF-8 strings."""
    pairs = [
        ("topic", topic), ("partition", str(partition)), ("offset", str(offset)),
        ("connector.name", connector), ("task.id", str(task_id)), ("stage", stage.value),
        ("class.name", _java_name(executing) if executing is not None else ""),
        ("exception.class.name", _java_name(type(error))),
        ("exception.message", str(error)),
        ("exception.stacktrace", "".join(traceback.format_exception(error))),
    ]
    return [(ERROR_HEADER_PREFIX + key, value.encode()) for key, value in pairs]


class ErrorHandler:
    def __init__(self, common: CommonConfig, connector: str, task_id: int,
                 clock: Callable[[], float] = time.monotonic, stop: asyncio.Event | None = None) -> None:
        self.common = common
        self.stop = stop or asyncio.Event()  # set: a retry gives up at once (the task is stopping)
        self.connector = connector
        self.task_id = task_id
        self.clock = clock
        self.tolerated = 0

    @property
    def tolerates(self) -> bool:
        return self.common.errors_tolerance == "all"

    def backoff_ms(self, attempt: int) -> int:
        return int(min(_INITIAL_BACKOFF_MS * (2 ** attempt), self.common.errors_retry_delay_max_ms))

    async def retry(self, call: Callable[[], Awaitable[T]], stage: Stage, always: bool = False) -> T:
        """``await call()``, retried on RetriableError while the retry budget lasts
        (``always``: also when errors.retry.timeout is 0, for the task's own calls) and the
        task is not stopping: a stop ends the backoff and raises the last error."""
        budget = self.common.errors_retry_timeout
        deadline = None if budget < 0 or (budget == 0 and always) else self.clock() + budget / 1000
        attempt = 0
        while True:
            try:
                return await call()
            except RetriableError as exc:
                wait_ms = self.backoff_ms(attempt)
                if deadline is not None and self.clock() + wait_ms / 1000 > deadline:
                    raise
                log.warning("%s task %d: retriable failure in %s (attempt %d), retrying in %d ms: %s",
                            self.connector, self.task_id, stage.value, attempt + 1, wait_ms, exc)
                attempt += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), wait_ms / 1000)
                if self.stop.is_set():
                    raise

    def tolerate(self, stage: Stage, error: BaseException, record: Any = None) -> bool:
        """Whether to skip the record that failed (errors.tolerance=all); logs it if asked."""
        if not self.tolerates:
            return False
        self.tolerated += 1
        if self.common.errors_log_enable:
            detail = f" record: {record!r}" if self.common.errors_log_include_messages else ""
            log.error("Error encountered in task %s-%d. Executing stage '%s' failed: %s.%s",
                      self.connector, self.task_id, stage.value, error, detail)
        return True
