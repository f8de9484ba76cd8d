"""The herder: the connectors of a worker and every operation the REST API offers on them.

It owns each connector's config, target state (started, paused, stopped), the connector
instance and its task runners. A config change stops the connector's tasks and the
connector, then starts them again with the new config (Kafka Connect's behaviour). All
operations run in the event loop, one at a time (a lock), so a restart never races a
delete. Failures to reach a connector name become ``HerderError``s with the HTTP status
Kafka Connect answers with (404 unknown connector, 409 conflict, 400 bad request).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamkit.connect import kafka_ops
from streamkit.connect.config import (
    ValidConfig,
    log_warnings,
    patched,
    validate_config,
    validation_report,
)
from streamkit.connect.connector import Connector, SinkConnector, SourceConnector
from streamkit.connect.errors import ConfigError
from streamkit.connect.metrics import ConnectMetrics
from streamkit.connect.offsets import OffsetStore, offset_key
from streamkit.connect.plugins import PluginError, PluginRegistry
from streamkit.connect.runner import RunnerSettings
from streamkit.connect.sink_runner import SinkTaskRunner, sink_group
from streamkit.connect.source_runner import SourceTaskRunner
from streamkit.connect.status import State, Status, TargetState, log_failure, trace_of
from streamkit.connect.worker_config import WorkerConfig

__all__ = ["Herder", "HerderError"]

log = logging.getLogger(__name__)

Runner = SourceTaskRunner | SinkTaskRunner


class HerderError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _not_found(name: str) -> HerderError:
    return HerderError(404, f"Connector {name} not found")


@dataclass
class _Connector:
    valid: ValidConfig
    target: TargetState
    state: State = State.UNASSIGNED
    trace: str | None = None
    instance: Connector | None = None
    task_configs: list[dict[str, str]] = field(default_factory=list)
    runners: list[Runner] = field(default_factory=list)
    topics: set[str] = field(default_factory=set)  # of tasks stopped since the last reset


class _ConnectorContext:
    def __init__(self, herder: Herder, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self._herder = herder
        self._name = name
        self._loop = loop

    def request_task_reconfiguration(self) -> None:
        self._loop.call_soon_threadsafe(self._herder._spawn, self._herder.reconfigure(self._name))

    def raise_error(self, error: BaseException) -> None:
        self._loop.call_soon_threadsafe(self._herder._connector_failed, self._name, error)


class Herder:
    def __init__(self, worker: WorkerConfig, registry: PluginRegistry, offsets: OffsetStore,
                 metrics: ConnectMetrics | None = None, worker_id: str = "localhost:8083",
                 on_change: Callable[[str, dict[str, str] | None, TargetState | None], None] | None = None) -> None:
        self.worker = worker
        self.registry = registry
        self.offsets = offsets
        self.metrics = metrics or ConnectMetrics()
        self.worker_id = worker_id
        self._on_change = on_change
        self._connectors: dict[str, _Connector] = {}
        self._lock = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self._worker_settings = worker.raw()

    # -- queries ---------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self._connectors)

    def _get(self, name: str) -> _Connector:
        found = self._connectors.get(name)
        if found is None:
            raise _not_found(name)
        return found

    def config(self, name: str) -> dict[str, str]:
        return dict(self._get(name).valid.raw)

    def info(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        return {"name": name, "config": dict(c.valid.raw),
                "tasks": [{"connector": name, "task": i} for i in range(len(c.task_configs))],
                "type": c.valid.type}

    def status(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        connector = Status(c.state, self.worker_id, c.trace).as_json()
        tasks = [{"id": r.id, **r.status().as_json()} for r in c.runners]
        return {"name": name, "connector": connector, "tasks": tasks, "type": c.valid.type}

    def tasks(self, name: str) -> list[dict[str, Any]]:
        c = self._get(name)
        return [{"id": {"connector": name, "task": i}, "config": dict(cfg)} for i, cfg in enumerate(c.task_configs)]

    def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        runner = self._runner(name, task_id)
        return {"id": task_id, **runner.status().as_json()}

    def _runner(self, name: str, task_id: int) -> Runner:
        c = self._get(name)
        for runner in c.runners:
            if runner.id == task_id:
                return runner
        raise HerderError(404, f"Task {name}-{task_id} not found")

    def topics(self, name: str) -> dict[str, Any]:
        """Kafka's active topics (KIP-558): what the connector's tasks read or wrote."""
        c = self._get(name)
        seen = set(c.topics).union(*(r.topics for r in c.runners))
        return {name: {"topics": sorted(seen)}}

    async def reset_topics(self, name: str) -> None:
        c = self._get(name)
        c.topics.clear()
        for runner in c.runners:
            runner.topics.clear()

    def validate(self, plugin: str, config: Mapping[str, Any]) -> dict[str, Any]:
        try:
            cls = self.registry.connector_class(plugin)
        except PluginError as exc:
            raise HerderError(400, str(exc)) from None
        merged = {"connector.class": plugin, **config}
        named = str(merged["connector.class"])
        try:
            same = named == plugin or self.registry.connector_class(named) is cls
        except PluginError:
            same = False
        if not same:
            raise HerderError(400, f"Connector class in the config ({named}) does not match "
                                   f"the plugin in the URL ({plugin})")
        return validation_report(merged, self.registry, self._worker_settings)

    def state_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self._connectors.values():
            counts[c.state.value] = counts.get(c.state.value, 0) + 1
        return counts

    # -- config changes --------------------------------------------------------------------

    def _validated(self, name: str, config: Mapping[str, Any]) -> ValidConfig:
        given = config.get("name")
        if given is not None and given != name:
            raise HerderError(400, f"Connector name configuration ({given}) doesn't match connector name "
                                   f"in the URL ({name})")
        if not name or "/" in name:
            raise HerderError(400, f"Connector name {name!r} is invalid: it must be non-empty and contain no '/'")
        return validate_config({**config, "name": name}, self.registry, self._worker_settings)

    async def put_config(self, name: str, config: Mapping[str, Any], *, create_only: bool = False,
                         target: TargetState = TargetState.STARTED) -> tuple[bool, dict[str, Any]]:
        """Create or replace a connector's config; (created, info). ConfigError when invalid."""
        valid = self._validated(name, config)
        log_warnings(valid)
        async with self._lock:
            existing = self._connectors.get(name)
            if existing is not None and create_only:
                raise HerderError(409, f"Connector {name} already exists")
            if existing is not None:
                target = existing.target
                await self._stop_connector(existing)
            c = _Connector(valid, target)
            self._connectors[name] = c
            self._notify(name, valid.raw, target)
            await self._start_connector(name, c)
        return existing is None, self.info(name)

    async def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        _created, info = await self.put_config(name, patched(self.config(name), patch))
        return info

    async def delete(self, name: str) -> None:
        async with self._lock:
            c = self._get(name)
            await self._stop_connector(c)
            del self._connectors[name]
            self._notify(name, None, None)

    def _notify(self, name: str, config: dict[str, str] | None, target: TargetState | None) -> None:
        if self._on_change is not None:
            self._on_change(name, config, target)

    # -- lifecycle -------------------------------------------------------------------------

    async def _start_connector(self, name: str, c: _Connector) -> None:
        c.trace = None
        if c.target == TargetState.STOPPED:
            c.state = State.STOPPED
            c.task_configs = []
            return
        instance = c.valid.connector_class()
        instance.initialize(_ConnectorContext(self, name, asyncio.get_running_loop()))
        c.instance = instance
        try:
            await asyncio.to_thread(instance.start, c.valid.connector)
            configs = await asyncio.to_thread(instance.task_configs, c.valid.common.tasks_max)
        except Exception as exc:
            log_failure(log, f"connector {name}", exc)
            c.state, c.trace = State.FAILED, trace_of(exc)
            await asyncio.to_thread(_quietly, instance.stop)
            c.instance = None
            return
        c.task_configs = [{str(k): str(v) for k, v in cfg.items()} for cfg in configs[: c.valid.common.tasks_max]]
        c.state = State.PAUSED if c.target == TargetState.PAUSED else State.RUNNING
        c.runners = [self._make_runner(name, c, i, cfg) for i, cfg in enumerate(c.task_configs)]
        for runner in c.runners:
            await runner.start(paused=c.target == TargetState.PAUSED)

    def _make_runner(self, name: str, c: _Connector, task_id: int, task_config: dict[str, str]) -> Runner:
        settings = RunnerSettings(
            connector=name, task_id=task_id, task_config=task_config, valid=c.valid,
            bootstrap=self.worker.bootstrap_servers, worker_id=self.worker_id,
            offset_flush_interval_ms=c.valid.common.offset_flush_interval_ms or self.worker.offset_flush_interval_ms,
            shutdown_timeout_ms=self.worker.task_shutdown_graceful_timeout_ms, metrics=self.metrics,
            worker_settings=self._worker_settings)
        cls = c.valid.connector_class
        if issubclass(cls, SourceConnector):
            return SourceTaskRunner(settings, cls.task_class(), self.offsets)
        if issubclass(cls, SinkConnector):
            return SinkTaskRunner(settings, cls.task_class())
        raise ConfigError({"connector.class": [f"{cls.__name__} is neither a source nor a sink connector"]})

    async def _stop_tasks(self, c: _Connector) -> None:
        runners, c.runners = c.runners, []
        await asyncio.gather(*(r.stop() for r in runners))
        for runner in runners:
            c.topics |= runner.topics

    async def _stop_connector(self, c: _Connector) -> None:
        await self._stop_tasks(c)
        if c.instance is not None:
            await asyncio.to_thread(_quietly, c.instance.stop)
            c.instance = None
        c.state = State.UNASSIGNED

    def _connector_failed(self, name: str, error: BaseException) -> None:
        c = self._connectors.get(name)
        if c is not None:
            c.state, c.trace = State.FAILED, trace_of(error)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def reconfigure(self, name: str) -> None:
        """The connector asked for new task configs: restart the tasks if they changed."""
        async with self._lock:
            c = self._connectors.get(name)
            if c is None or c.instance is None or c.state != State.RUNNING:
                return
            configs = await asyncio.to_thread(c.instance.task_configs, c.valid.common.tasks_max)
            fresh = [{str(k): str(v) for k, v in cfg.items()} for cfg in configs[: c.valid.common.tasks_max]]
            if fresh == c.task_configs:
                return
            await self._stop_tasks(c)
            c.task_configs = fresh
            c.runners = [self._make_runner(name, c, i, cfg) for i, cfg in enumerate(fresh)]
            for runner in c.runners:
                await runner.start()

    async def set_target(self, name: str, target: TargetState) -> None:
        async with self._lock:
            c = self._get(name)
            previous = c.target
            c.target = target
            self._notify(name, c.valid.raw, target)
            if target == TargetState.PAUSED and previous == TargetState.STARTED:
                for runner in c.runners:
                    runner.pause()
                if c.state == State.RUNNING:
                    c.state = State.PAUSED
            elif target == TargetState.STARTED and previous == TargetState.PAUSED:
                for runner in c.runners:
                    runner.resume()
                if c.state == State.PAUSED:
                    c.state = State.RUNNING
            elif target == TargetState.STOPPED and previous != TargetState.STOPPED:
                await self._stop_connector(c)
                c.task_configs = []
                c.state = State.STOPPED
            elif previous == TargetState.STOPPED and target != TargetState.STOPPED:
                await self._start_connector(name, c)

    async def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]:
        async with self._lock:
            c = self._get(name)
            restart_connector = not only_failed or c.state == State.FAILED
            if c.target == TargetState.STOPPED:
                return self.status(name)
            if include_tasks and restart_connector:
                await self._stop_connector(c)
                await self._start_connector(name, c)
            elif restart_connector:
                # the connector alone: its tasks keep running
                if c.instance is not None:
                    await asyncio.to_thread(_quietly, c.instance.stop)
                    c.instance = None
                await self._restart_connector_only(name, c)
            if include_tasks and not restart_connector:
                for runner in list(c.runners):
                    if runner.status().state == State.FAILED:
                        await self._restart_runner(name, c, runner)
            return self.status(name)

    async def _restart_connector_only(self, name: str, c: _Connector) -> None:
        instance = c.valid.connector_class()
        instance.initialize(_ConnectorContext(self, name, asyncio.get_running_loop()))
        try:
            await asyncio.to_thread(instance.start, c.valid.connector)
        except Exception as exc:
            c.state, c.trace = State.FAILED, trace_of(exc)
            return
        c.instance = instance
        c.trace = None
        c.state = State.PAUSED if c.target == TargetState.PAUSED else State.RUNNING

    async def _restart_runner(self, name: str, c: _Connector, runner: Runner) -> None:
        await runner.stop()
        fresh = self._make_runner(name, c, runner.id, c.task_configs[runner.id])
        c.runners[c.runners.index(runner)] = fresh
        await fresh.start(paused=c.target == TargetState.PAUSED)

    async def restart_task(self, name: str, task_id: int) -> None:
        async with self._lock:
            c = self._get(name)
            await self._restart_runner(name, c, self._runner(name, task_id))

    async def stop(self) -> None:
        """Stop every connector (the worker shuts down); configs stay as they are."""
        async with self._lock:
            await asyncio.gather(*(self._stop_connector(c) for c in self._connectors.values()))
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.offsets.flush()

    # -- offsets (KIP-875) -----------------------------------------------------------------

    async def get_offsets(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        if c.valid.type == "source":
            rows = self.offsets.connector_offsets(name)
            return {"offsets": [{"partition": p, "offset": o} for p, o in rows]}
        committed = await kafka_ops.group_offsets(self.worker, sink_group(name))
        return {"offsets": [{"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                            for (t, p), o in sorted(committed.items())]}

    def _require_stopped(self, name: str) -> _Connector:
        c = self._get(name)
        if c.target != TargetState.STOPPED or c.state != State.STOPPED:
            raise HerderError(400, "Connectors must be in the STOPPED state before their offsets can be "
                                   "modified. This can be done for the specified connector by issuing a 'PUT' "
                                   f"request to the '/connectors/{name}/stop' endpoint")
        return c

    async def alter_offsets(self, name: str, body: Mapping[str, Any]) -> dict[str, str]:
        async with self._lock:
            c = self._require_stopped(name)
            entries = body.get("offsets") if isinstance(body, Mapping) else None
            if not isinstance(entries, list) or not entries:
                raise HerderError(400, "The request body must contain a non-empty 'offsets' list")
            if c.valid.type == "source":
                self.offsets.put(name, source_offset_changes(name, entries))
                await self.offsets.flush()
            else:
                commits, resets = {}, []
                for entry in entries:
                    partition, offset = _entry(entry)
                    tp = _sink_partition(partition)
                    if offset is None:
                        resets.append(tp)
                        continue
                    value = offset.get("kafka_offset") if isinstance(offset, Mapping) else None
                    if not isinstance(value, int) or value < 0:
                        raise HerderError(400, "A sink offset must be {\"kafka_offset\": <non-negative integer>}")
                    commits[tp] = value
                if resets:
                    raise HerderError(400, "Resetting single partitions of a sink connector is not supported; "
                                           "use DELETE /connectors/{name}/offsets to reset them all")
                await kafka_ops.alter_group_offsets(self.worker, sink_group(name), commits)
        return {"message": "The offsets for this connector have been altered successfully"}

    async def reset_offsets(self, name: str) -> dict[str, str]:
        async with self._lock:
            c = self._require_stopped(name)
            if c.valid.type == "source":
                rows = self.offsets.connector_offsets(name)
                self.offsets.put(name, {offset_key(name, p): (p, None) for p, _o in rows})
                await self.offsets.flush()
            else:
                await kafka_ops.delete_group(self.worker, sink_group(name))
        return {"message": "The offsets for this connector have been reset successfully"}


def source_offset_changes(name: str, entries: list[Any]) -> dict[Any, tuple[dict[str, Any], Any]]:
    """A PATCH /offsets body's entries for source connector ``name``, keyed for the offset
    store (a null offset resets that source partition)."""
    changes = {}
    for entry in entries:
        partition, offset = _entry(entry)
        if offset is not None and not isinstance(offset, Mapping):
            raise HerderError(400, "A source offset must be a JSON object or null")
        changes[offset_key(name, partition)] = (partition, offset)
    return changes


def _entry(entry: Any) -> tuple[dict[str, Any], Any]:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("partition"), Mapping):
        raise HerderError(400, "Each offset needs a 'partition' object and an 'offset' (object or null)")
    return dict(entry["partition"]), entry.get("offset")


def _sink_partition(partition: Mapping[str, Any]) -> tuple[str, int]:
    topic, number = partition.get("kafka_topic"), partition.get("kafka_partition")
    if not isinstance(topic, str) or not isinstance(number, int):
        raise HerderError(400, "A sink partition must be {\"kafka_topic\": ..., \"kafka_partition\": ...}")
    return topic, number


def _quietly(call: Callable[[], None]) -> None:
    try:
        call()
    except Exception:
        log.warning("stopping a connector failed", exc_info=True)
