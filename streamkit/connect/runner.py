"""What the source and sink task loops share: a thread for the task's SPI calls, status, the
settings a task runs with, and the start/pause/resume/stop of the loop (``TaskRunner``)."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from streamkit.clients.lifecycle import start_client, stop_client
from streamkit.connect.config import ValidConfig
from streamkit.connect.metrics import ConnectMetrics
from streamkit.connect.status import State, Status, log_failure, trace_of
from streamkit.connect.tolerance import ErrorHandler

__all__ = [
    "GROUP_STOP_WAIT_S",
    "RunnerSettings",
    "TaskLife",
    "TaskRunner",
    "TaskThread",
    "start_client",
    "stop_client",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


class TaskThread:
    """A task's own thread: ``poll``/``put``/``flush`` may block (a JDBC driver, a file)
    without holding up the event loop or the other tasks."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        # a task stuck in a blocking call must not hold the worker's shutdown
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class RunnerSettings:
    connector: str
    task_id: int
    task_config: dict[str, str]
    valid: ValidConfig
    bootstrap: str
    worker_id: str
    offset_flush_interval_ms: int
    shutdown_timeout_ms: int
    metrics: ConnectMetrics
    # the worker's settings, for its consumer.*/producer.* client settings
    worker_settings: Mapping[str, Any] = field(default_factory=dict)

    def client_kwargs(self, kind: str, defaults: dict[str, Any]) -> dict[str, Any]:
        """aiokafka arguments: the runtime's defaults, then the worker's ``{kind}.*``,
        then the connector's ``{kind}.override.*``."""
        from streamkit.connect.client_config import client_kwargs

        return {**defaults, **client_kwargs(kind, self.worker_settings, self.valid.raw)}


class TaskLife:
    """Status and pause/stop flags of one task, changed from the event loop."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.state = State.UNASSIGNED
        self.trace: str | None = None
        # set by stop(): ends the loop, and any wait in it (a pause, a retry's backoff)
        self.stop_requested = asyncio.Event()
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.stop_called = threading.Lock()

    def status(self) -> Status:
        return Status(self.state, self.worker_id, self.trace)

    @property
    def stopping(self) -> bool:
        return self.stop_requested.is_set()

    def request_stop(self) -> None:
        self.stop_requested.set()
        self.resumed.set()

    async def unless_stopped(self, awaitable: Awaitable[T]) -> T | None:
        """``awaitable``'s result; None when a stop comes first (a consumer's poll that
        waits for a rebalance to end must not hold the stop), the awaitable then cancelled."""
        work = asyncio.ensure_future(awaitable)
        stopped = asyncio.ensure_future(self.stop_requested.wait())
        try:
            await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            stopped.cancel()
        if work.done():
            return work.result()
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        return None

    def fail(self, error: BaseException) -> None:
        self.state = State.FAILED
        self.trace = trace_of(error)

    def pause(self) -> None:
        if self.state == State.RUNNING:
            self.state = State.PAUSED
        self.resumed.clear()

    def resume(self) -> None:
        if self.state == State.PAUSED:
            self.state = State.RUNNING
        self.resumed.set()

    @property
    def paused(self) -> bool:
        return not self.resumed.is_set()

    def call_stop_once(self, stop: Callable[[], None]) -> None:
        """Task.stop runs once, whoever gets here first (the stopper or the failed loop)."""
        if self.stop_called.acquire(blocking=False):
            with contextlib.suppress(Exception):
                stop()


class TaskRunner(abc.ABC):
    """One task's loop (``_run``, until ``_life.stopping``) as an asyncio task, with its status
    and pause flag. ``stop`` lets the loop end by itself for up to
    ``task.shutdown.graceful.timeout.ms`` (a second at least), then cancels it."""

    kind: ClassVar[str]  # "source" or "sink", in names and logs

    def __init__(self, settings: RunnerSettings) -> None:
        self.settings = settings
        self.id = settings.task_id
        self.config = settings.task_config
        self._life = TaskLife(settings.worker_id)
        self._thread = TaskThread(f"{settings.connector}-{settings.task_id}")
        self._errors = ErrorHandler(settings.valid.common, settings.connector, settings.task_id,
                                    stop=self._life.stop_requested)
        self._loop_task: asyncio.Task[None] | None = None

    def status(self) -> Status:
        return self._life.status()

    async def start(self, paused: bool = False) -> None:
        self._life.state = State.RUNNING
        if paused:
            self._life.pause()
        self._loop_task = asyncio.create_task(
            self._run(), name=f"{self.kind}-{self.settings.connector}-{self.id}")

    def pause(self) -> None:
        self._life.pause()

    def resume(self) -> None:
        self._life.resume()

    async def stop(self) -> None:
        self._life.request_stop()
        if self._loop_task is not None:
            timeout = max(self.settings.shutdown_timeout_ms, 1000) / 1000
            done, _ = await asyncio.wait({self._loop_task}, timeout=timeout)
            if not done:
                log.warning("%s task %s-%d did not stop within %.1f s; cancelling it",
                            self.kind, self.settings.connector, self.id, timeout)
                self._loop_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._loop_task
        if self._life.state != State.FAILED:
            self._life.state = State.UNASSIGNED
        self._thread.close()

    @abc.abstractmethod
    async def _run(self) -> None:
        """The loop: start the task, then work until ``_life.stopping``; stop the task."""

    def _loop_failed(self, error: Exception) -> None:
        """The loop ended with ``error``: the task FAILED, unless it was being stopped
        (a retry cut short by a delete, say), which is only worth a line at INFO."""
        what = f"{self.kind} task {self.settings.connector}-{self.id}"
        if self._life.stopping:
            log_failure(log, f"{what} (while stopping)", error, logging.INFO)
            return
        log_failure(log, what, error)
        self._life.fail(error)


# How long a group member's stop may wait. aiokafka's consumer leaves its group only after a
# join under way has ended, which lasts as long as the group's rebalance (up to the broker's
# group.initial.rebalance.delay.ms, or a slow member's max.poll.interval.ms); past this the
# worker goes on stopping and the broker drops the member at its session timeout.
GROUP_STOP_WAIT_S = 0.5
