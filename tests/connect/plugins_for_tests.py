"""Connectors used by the tests, loaded by their class path as any third-party one is."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from streamkit.connect import (
    ConnectorConfig,
    DataError,
    RetriableError,
    SinkConnector,
    SinkRecord,
    SinkTask,
)

# what the tasks received, per connector name (tests run the worker in-process)
RECEIVED: dict[str, list[Any]] = {}
ATTEMPTS: dict[str, int] = {}
_LOCK = threading.Lock()


class FlakyConfig(ConnectorConfig):
    fail_first: int = 0  # puts that raise RetriableError first
    poison: str = ""  # values that raise DataError in put


class FlakySinkConnector(SinkConnector):
    """Collects values in RECEIVED[name]; fails the first ``fail_first`` puts with a
    RetriableError and any put holding a ``poison`` value with a DataError."""

    config_model: ClassVar[type[ConnectorConfig]] = FlakyConfig

    def start(self, config: ConnectorConfig) -> None:
        self.config = config

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        assert isinstance(self.config, FlakyConfig)
        return [{"fail_first": str(self.config.fail_first), "poison": self.config.poison}]

    @classmethod
    def task_class(cls) -> type[SinkTask]:
        return FlakySinkTask


class FlakySinkTask(SinkTask):
    def start(self, config: Mapping[str, str]) -> None:
        self.fail_first = int(config["fail_first"])
        self.poison = config["poison"]
        self.name = "flaky"

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        with _LOCK:
            ATTEMPTS[self.name] = ATTEMPTS.get(self.name, 0) + 1
            if ATTEMPTS[self.name] <= self.fail_first:
                raise RetriableError("the database is restarting")
        if self.poison and any(r.value == self.poison for r in records):
            raise DataError(f"cannot write {self.poison!r}")
        with _LOCK:
            RECEIVED.setdefault(self.name, []).extend(r.value for r in records)


class SeekingSinkConnector(FlakySinkConnector):
    """On its first assignment the task asks to start at offset 1 (SinkTaskContext.offset),
    and after each put asks for a commit at once (request_commit)."""

    @classmethod
    def task_class(cls) -> type[SinkTask]:
        return SeekingSinkTask


class SeekingSinkTask(SinkTask):
    def start(self, config: Mapping[str, str]) -> None:
        self.name = "seeking"
        self.sought = False

    def open(self, partitions: frozenset[tuple[str, int]]) -> None:
        assert self.context is not None
        if not self.sought:
            self.context.offset({tp: 1 for tp in partitions})
            self.sought = True

    def put(self, records: Sequence[SinkRecord]) -> None:
        with _LOCK:
            RECEIVED.setdefault(self.name, []).extend((r.offset, r.value) for r in records)
        if records and self.context is not None:
            self.context.request_commit()


class SlowOpeningSinkConnector(FlakySinkConnector):
    """Like SeekingSinkConnector, with an open() that takes a while: what a poll returns
    meanwhile must neither reach put() before open() nor ignore the seek open() asks for."""

    @classmethod
    def task_class(cls) -> type[SinkTask]:
        return SlowOpeningSinkTask


class SlowOpeningSinkTask(SeekingSinkTask):
    def start(self, config: Mapping[str, str]) -> None:
        super().start(config)
        self.name = "slow-opening"
        self.opened = False

    def open(self, partitions: frozenset[tuple[str, int]]) -> None:
        time.sleep(1.5)  # a task connecting to its database, say
        super().open(partitions)
        self.opened = True

    def put(self, records: Sequence[SinkRecord]) -> None:
        if records and not self.opened:
            with _LOCK:
                RECEIVED.setdefault("slow-opening-before-open", []).extend(r.offset for r in records)
        super().put(records)


TABLES: list[str] = ["t1"]


class MonitoringConnector(SinkConnector):
    """Like a JDBC source watching for new tables: one task per entry of TABLES, and a
    reconfiguration request when the test says TABLES changed (``poke``); ``fail`` makes
    the connector raise an error through its context."""

    config_model: ClassVar[type[ConnectorConfig]] = FlakyConfig
    instances: ClassVar[list[MonitoringConnector]] = []

    def start(self, config: ConnectorConfig) -> None:
        MonitoringConnector.instances.append(self)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"table": t} for t in TABLES[:max_tasks]]

    def poke(self) -> None:
        assert self.context is not None
        threading.Thread(target=self.context.request_task_reconfiguration).start()

    def fail(self) -> None:
        assert self.context is not None
        self.context.raise_error(RuntimeError("the table monitor died"))

    @classmethod
    def task_class(cls) -> type[SinkTask]:
        return IdleSinkTask


class IdleSinkTask(SinkTask):
    def start(self, config: Mapping[str, str]) -> None:
        pass

    def put(self, records: Sequence[SinkRecord]) -> None:
        pass


class GatedFlushConfig(ConnectorConfig):
    gate: str  # flush fails until this file exists
    hard: bool = False  # fail with a non-retriable error instead of a RetriableError


class GatedFlushSinkConnector(SinkConnector):
    """A sink whose ``flush`` fails (RetriableError, or RuntimeError with ``hard``) until
    the ``gate`` file exists: nothing it has been given may be committed before that."""

    config_model: ClassVar[type[ConnectorConfig]] = GatedFlushConfig

    def start(self, config: ConnectorConfig) -> None:
        self.config = config

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        assert isinstance(self.config, GatedFlushConfig)
        return [{"gate": self.config.gate, "hard": str(self.config.hard)}]

    @classmethod
    def task_class(cls) -> type[SinkTask]:
        return GatedFlushSinkTask


class GatedFlushSinkTask(SinkTask):
    def start(self, config: Mapping[str, str]) -> None:
        self.gate = Path(config["gate"])
        self.hard = config["hard"] == "True"
        self.name = f"gated-{self.gate.name}"

    def put(self, records: Sequence[SinkRecord]) -> None:
        with _LOCK:
            RECEIVED.setdefault(self.name, []).extend(r.value for r in records)

    def flush(self, offsets: Mapping[tuple[str, int], int]) -> None:
        with _LOCK:
            ATTEMPTS[self.name] = ATTEMPTS.get(self.name, 0) + 1
        if not self.gate.exists():
            if self.hard:
                raise RuntimeError("the disk is gone")
            raise RetriableError("the disk is not ready")
