"""Distributed mode: workers sharing configs, offsets and statuses through compacted topics,
with connectors and tasks spread over the members of a group.

``streamkit connect distributed worker.json`` (``distributed_worker``). Each worker:

1. reads ``config.storage.topic``, ``status.storage.topic`` and ``offset.storage.topic``
   to their ends (``KafkaLog``), and keeps following them;
2. joins the group ``group.id`` with ``ConnectAssignor``: every member learns the sorted
   member list at each rebalance, and deals the units (connectors, then their tasks)
   round-robin over it (``cluster_state.assign_units``), so all agree on who runs what;
3. reconciles what it runs with what it owns whenever a config, a target state or the
   membership changes (and every second, to publish status changes): it starts and stops
   connectors and task runners, writes the task configs of the connectors it owns to the
   config topic, and publishes their statuses to the status topic.

A worker that dies stops heartbeating; after ``session.timeout.ms`` the group rebalances
and the survivors take its units over, sources resuming from the offsets in the offset
topic, sinks from their group's committed offsets. Any worker answers every REST call: a
change is written to the config topic, and the call returns once this worker has read it
back. A brief overlap while units move is possible (delivery is at-least-once); sink
tasks never overlap on a partition, their consumer group sees to that.

With ``exactly.once.source.support=enabled`` source tasks write records and offsets in one
transaction (``source_runner.ExactlyOnce``), so the overlap cannot duplicate: the new
instance of a task fences the old one by their common ``transactional.id``. When a
connector gets fewer tasks than before, the worker that writes the new task configs first
fences the ids of the tasks that no longer exist, so none of them can commit again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError

from streamkit.connect import kafka_ops
from streamkit.connect.client_config import security_kwargs
from streamkit.connect.cluster_state import (
    ClusterState,
    ConnectAssignor,
    Restart,
    Unit,
    assign_units,
    config_hash,
)
from streamkit.connect.config import (
    ValidConfig,
    log_warnings,
    patched,
    validate_config,
    validation_report,
)
from streamkit.connect.connector import Connector, SinkConnector, SourceConnector
from streamkit.connect.errors import ConfigError
from streamkit.connect.herder import HerderError, _entry, _sink_partition, source_offset_changes
from streamkit.connect.kafka_log import KafkaLog, KafkaOffsetStore
from streamkit.connect.metrics import ConnectMetrics
from streamkit.connect.offsets import offset_key
from streamkit.connect.plugins import PluginError, PluginRegistry, plugin_type
from streamkit.connect.runner import GROUP_STOP_WAIT_S, RunnerSettings, start_client, stop_client
from streamkit.connect.sink_runner import SinkTaskRunner, sink_group
from streamkit.connect.source_runner import ExactlyOnce, SourceTaskRunner, transactional_id
from streamkit.connect.status import State, Status, TargetState, log_failure, trace_of
from streamkit.connect.worker_config import WorkerConfig

__all__ = ["DistributedHerder"]

log = logging.getLogger(__name__)

Runner = SourceTaskRunner | SinkTaskRunner
_RECONCILE_EVERY_S = 1.0
_REPUBLISH_AFTER_S = 3.0


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@dataclass
class _LocalConnector:
    instance: Connector
    hash: str
    state: State
    trace: str | None = None


class DistributedHerder:
    def __init__(self, worker: WorkerConfig, registry: PluginRegistry, metrics: ConnectMetrics,
                 worker_id: str, url: str) -> None:
        missing = [k for k, v in (("group.id", worker.group_id), ("config.storage.topic", worker.config_storage_topic),
                                  ("offset.storage.topic", worker.offset_storage_topic),
                                  ("status.storage.topic", worker.status_storage_topic)) if not v]
        if missing:
            raise ConfigError({k: ["required in distributed mode"] for k in missing})
        self.worker = worker
        self.registry = registry
        self.metrics = metrics
        self.worker_id = worker_id
        self.url = url
        self.state = ClusterState()
        self.members: dict[str, str] = {}
        self.offsets = KafkaOffsetStore()
        self._worker_settings = worker.raw()
        bootstrap = worker.bootstrap_servers
        security = worker.client_security()
        assert worker.config_storage_topic and worker.status_storage_topic and worker.offset_storage_topic
        self._config_log = KafkaLog(bootstrap, worker.config_storage_topic, 1, worker.config_storage_replication_factor,
                                    self._on_config, f"connect-{worker_id}-configs", security)
        self._status_log = KafkaLog(bootstrap, worker.status_storage_topic, worker.status_storage_partitions,
                                    worker.status_storage_replication_factor, self._on_status,
                                    f"connect-{worker_id}-statuses", security)
        self.offsets.log = KafkaLog(bootstrap, worker.offset_storage_topic, worker.offset_storage_partitions,
                                    worker.offset_storage_replication_factor, self.offsets.on_record,
                                    f"connect-{worker_id}-offsets", security, isolation_level="read_committed")
        self._caught_up = False
        self._restarts: list[Restart] = []
        self._wake = asyncio.Event()
        self._joined = asyncio.Event()
        self._connectors: dict[str, _LocalConnector] = {}
        self._runners: dict[Unit, tuple[tuple[str, dict[str, str]], Runner]] = {}
        self._published: dict[str, tuple[dict[str, Any], float]] = {}
        self._topics_published: set[tuple[str, str]] = set()
        self._group: AIOKafkaConsumer | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- topics and membership -------------------------------------------------------------

    def _on_config(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            restart = self.state.apply_config(key.decode(), orjson.loads(value) if value is not None else None)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            log.warning("ignoring a malformed config record %r", key)
            return
        if restart is not None and self._caught_up:
            self._restarts.append(restart)
        self._wake.set()

    def _on_status(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        text = key.decode(errors="replace")
        with contextlib.suppress(orjson.JSONDecodeError, ValueError):
            self.state.apply_status(text, orjson.loads(value) if value is not None else None)
        if value is None and text.startswith(_TOPIC_PREFIX):
            # a topics reset: forget them here too, so that the next use reports them again
            topic, _, name = text[len(_TOPIC_PREFIX):].rpartition(_TOPIC_SEPARATOR)
            self._topics_published.discard((name, topic))
            for (connector, _index), (_key, runner) in self._runners.items():
                if connector == name:
                    runner.topics.discard(topic)

    def _on_members(self, members: dict[str, str]) -> None:
        log.info("worker group members: %s", ", ".join(sorted(members)))
        self.members = members
        self._wake.set()
        if self.worker_id in members:
            self._joined.set()

    async def start(self) -> None:
        await self._config_log.start()
        await self._status_log.start()
        assert self.offsets.log is not None
        await self.offsets.log.start()
        self._caught_up = True
        assert self.worker.group_id and self.worker.config_storage_topic
        self._group = AIOKafkaConsumer(
            bootstrap_servers=self.worker.bootstrap_servers, group_id=self.worker.group_id,
            client_id=f"connect-worker-{self.worker_id}", enable_auto_commit=False,
            partition_assignment_strategy=(ConnectAssignor(self.worker_id, self.url, self._on_members),),
            session_timeout_ms=self.worker.session_timeout_ms, heartbeat_interval_ms=self.worker.heartbeat_interval_ms,
            **self.worker.client_security())
        await start_client(self._group)
        self._group.subscribe([self.worker.config_storage_topic])
        self._tasks = [asyncio.create_task(self._membership(), name="connect-membership"),
                       asyncio.create_task(self._reconciler(), name="connect-reconcile")]
        async with asyncio.timeout(max(60, 3 * self.worker.session_timeout_ms / 1000)):
            await self._joined.wait()

    async def _membership(self) -> None:
        assert self._group is not None
        while True:
            # nothing to read here: polling keeps this worker a live member of the group
            try:
                await self._group.getmany(timeout_ms=1000)
            except KafkaError as exc:
                log.warning("worker group %s: %s; retrying", self.worker.group_id, exc)
                await asyncio.sleep(1)

    async def _reconciler(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), _RECONCILE_EVERY_S)
            self._wake.clear()
            try:
                await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconciling this worker's connectors failed; retrying")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await asyncio.gather(*(runner.stop() for _key, runner in self._runners.values()))
        for unit in list(self._runners):
            await self._publish(_task_key(*unit), {"state": State.UNASSIGNED.value, "worker_id": self.worker_id})
        self._runners.clear()
        for name in list(self._connectors):
            await self._stop_local_connector(name)
        with contextlib.suppress(Exception):
            await self.offsets.flush()
        if self._group is not None:
            await stop_client(self._group, GROUP_STOP_WAIT_S)  # leave the group: the others rebalance at once
        for kafka_log in (self.offsets.log, self._status_log, self._config_log):
            if kafka_log is not None:
                await kafka_log.stop()

    # -- reconciliation --------------------------------------------------------------------

    def _owned(self) -> list[Unit]:
        if self.worker_id not in self.members:
            return []
        return assign_units(self.state.units(), list(self.members)).get(self.worker_id, [])

    def _validated(self, name: str) -> ValidConfig:
        return validate_config({**self.state.connectors[name], "name": name}, self.registry, self._worker_settings)

    async def _reconcile(self) -> None:
        owned = self._owned()
        mine = set(owned)
        restarts, self._restarts = self._restarts, []
        restart_tasks: set[Unit] = set()
        for r in restarts:
            if r.task is not None:
                restart_tasks.add((r.connector, r.task))
                continue
            local = self._connectors.get(r.connector)
            if local is not None and (not r.only_failed or local.state == State.FAILED):
                await self._stop_local_connector(r.connector)
            if r.include_tasks:
                for unit, (_key, runner) in self._runners.items():
                    if unit[0] == r.connector and (not r.only_failed or runner.status().state == State.FAILED):
                        restart_tasks.add(unit)

        for name in list(self._connectors):
            config = self.state.connectors.get(name)
            if ((name, -1) not in mine or config is None or config_hash(config) != self._connectors[name].hash
                    or self.state.targets.get(name) == TargetState.STOPPED):
                await self._stop_local_connector(name)
        for name, index in owned:
            if index >= 0:
                continue
            target = self.state.targets.get(name, TargetState.STARTED)
            if target == TargetState.STOPPED:
                await self._publish(_connector_key(name), {"state": State.STOPPED.value, "worker_id": self.worker_id})
                continue
            if name not in self._connectors:
                await self._start_local_connector(name)
            local = self._connectors[name]
            if local.state != State.FAILED:
                local.state = State.PAUSED if target == TargetState.PAUSED else State.RUNNING
            await self._publish(_connector_key(name), _status(local.state, self.worker_id, local.trace))

        desired: dict[Unit, tuple[str, dict[str, str]]] = {}
        for name, index in owned:
            tasks = self.state.tasks.get(name, [])
            if index >= 0 and index < len(tasks) and self.state.targets.get(name) != TargetState.STOPPED:
                desired[(name, index)] = (self.state.task_hashes.get(name, ""), tasks[index])
        for unit, (key, runner) in list(self._runners.items()):
            if unit not in desired or desired[unit] != key or unit in restart_tasks:
                await runner.stop()
                del self._runners[unit]
                if unit not in desired:
                    self._published.pop(_task_key(*unit), None)
        for unit, key in desired.items():
            if unit not in self._runners:
                await self._start_runner(unit, key)
            _key, runner = self._runners[unit]
            if self.state.targets.get(unit[0]) == TargetState.PAUSED:
                runner.pause()
            else:
                runner.resume()
            await self._publish(_task_key(*unit), runner.status().as_json())
            for topic in sorted(runner.topics):
                if (unit[0], topic) not in self._topics_published:
                    self._topics_published.add((unit[0], topic))
                    value = {"topic": {"name": topic, "connector": unit[0], "task": unit[1],
                                       "discoverTimestamp": int(time.time() * 1000)}}
                    await self._status_log.send(_topic_key(unit[0], topic).encode(), _json(value))

    async def _start_local_connector(self, name: str) -> None:
        config = self.state.connectors[name]
        try:
            valid = self._validated(name)
            instance = valid.connector_class()
            instance.initialize(_Context(self, name))
            await asyncio.to_thread(instance.start, valid.connector)
            fresh = await asyncio.to_thread(instance.task_configs, valid.common.tasks_max)
        except Exception as exc:
            log_failure(log, f"connector {name}", exc)
            self._connectors[name] = _LocalConnector(_Failed(), config_hash(config), State.FAILED, trace_of(exc))
            return
        self._connectors[name] = _LocalConnector(instance, config_hash(config), State.RUNNING)
        await self._write_task_configs(name, config, fresh[: valid.common.tasks_max])

    async def _write_task_configs(self, name: str, config: Mapping[str, str], fresh: list[dict[str, str]]) -> None:
        tasks = [{str(k): str(v) for k, v in t.items()} for t in fresh]
        digest = config_hash(config)
        if self.state.tasks.get(name) == tasks and self.state.task_hashes.get(name) == digest:
            return
        before = len(self.state.tasks.get(name, []))
        if (len(tasks) < before and self.worker.exactly_once_source_support == "enabled"
                and self._type(config) == "source"):
            await self._fence(name, range(len(tasks), before))
        records: list[tuple[bytes, bytes | None]] = [
            (f"task-{name}-{i}".encode(), _json({"properties": t})) for i, t in enumerate(tasks)]
        records.append((f"commit-{name}".encode(), _json({"tasks": len(tasks), "config_hash": digest})))
        await self._config_log.send_many(records)

    async def reconfigure(self, name: str) -> None:
        local = self._connectors.get(name)
        config = self.state.connectors.get(name)
        if local is None or config is None or local.state == State.FAILED:
            return
        valid = self._validated(name)
        fresh = await asyncio.to_thread(local.instance.task_configs, valid.common.tasks_max)
        await self._write_task_configs(name, config, fresh[: valid.common.tasks_max])

    async def _stop_local_connector(self, name: str) -> None:
        local = self._connectors.pop(name, None)
        if local is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(local.instance.stop)
        self._published.pop(_connector_key(name), None)

    async def _start_runner(self, unit: Unit, key: tuple[str, dict[str, str]]) -> None:
        name, index = unit
        try:
            valid = self._validated(name)
        except (ConfigError, PluginError) as exc:
            runner: Runner = _FailedRunner(unit, self.worker_id, exc)  # type: ignore[assignment]
            self._runners[unit] = (key, runner)
            return
        settings = RunnerSettings(
            connector=name, task_id=index, task_config=dict(key[1]), valid=valid,
            bootstrap=self.worker.bootstrap_servers, worker_id=self.worker_id,
            offset_flush_interval_ms=valid.common.offset_flush_interval_ms or self.worker.offset_flush_interval_ms,
            shutdown_timeout_ms=self.worker.task_shutdown_graceful_timeout_ms, metrics=self.metrics,
            worker_settings=self._worker_settings)
        cls = valid.connector_class
        if issubclass(cls, SourceConnector):
            runner = SourceTaskRunner(settings, cls.task_class(), self.offsets, self._exactly_once(name, index, valid))
        elif issubclass(cls, SinkConnector):
            runner = SinkTaskRunner(settings, cls.task_class())
        else:
            return
        self._runners[unit] = (key, runner)
        await runner.start(paused=self.state.targets.get(name) == TargetState.PAUSED)

    def _exactly_once(self, name: str, index: int, valid: ValidConfig) -> ExactlyOnce | None:
        if self.worker.exactly_once_source_support != "enabled":
            return None
        assert self.worker.group_id and self.worker.offset_storage_topic
        common = valid.common
        interval = common.transaction_boundary_interval_ms
        if interval is None:
            interval = common.offset_flush_interval_ms or self.worker.offset_flush_interval_ms
        boundary: Literal["poll", "interval"] = (
            "interval" if common.transaction_boundary == "interval" else "poll")
        return ExactlyOnce(transactional_id(self.worker.group_id, name, index), self.worker.offset_storage_topic,
                           boundary, interval)

    async def _fence(self, name: str, indexes: range) -> None:
        """Fence the transactional ids of tasks ``indexes`` of ``name``: starting a producer
        with an id bumps its epoch, so an older instance can no longer write or commit."""
        assert self.worker.group_id
        for index in indexes:
            producer = AIOKafkaProducer(bootstrap_servers=self.worker.bootstrap_servers,
                                        transactional_id=transactional_id(self.worker.group_id, name, index),
                                        client_id=f"connect-{self.worker_id}-fencer",
                                        **security_kwargs("producer", self._worker_settings, {}))
            await start_client(producer)
            await stop_client(producer)

    async def _publish(self, key: str, status: dict[str, Any]) -> None:
        """Write a unit's status when it changed, or when the topic says otherwise (a worker
        that ran the unit before the last rebalance wrote last) once our write had time to
        come back."""
        now = time.monotonic()
        published = self._published.get(key)
        settled = published is not None and (self.state.statuses.get(key) == status
                                              or now - published[1] < _REPUBLISH_AFTER_S)
        if published is not None and published[0] == status and settled:
            return
        self._published[key] = (status, now)
        await self._status_log.send(key.encode(), _json(status))

    # -- REST: queries ---------------------------------------------------------------------

    def _require(self, name: str) -> dict[str, str]:
        config = self.state.connectors.get(name)
        if config is None:
            raise HerderError(404, f"Connector {name} not found")
        return config

    def _require_member(self) -> None:
        if not self._caught_up or self.worker_id not in self.members:
            raise HerderError(409, "Cannot complete request momentarily due to no known leader URL, "
                                   "likely because a rebalance was underway.")

    def names(self) -> list[str]:
        return sorted(self.state.connectors)

    def config(self, name: str) -> dict[str, str]:
        return dict(self._require(name))

    def _type(self, config: Mapping[str, str]) -> str:
        try:
            return plugin_type(self.registry.connector_class(config.get("connector.class", "")))
        except PluginError:
            return "unknown"

    def info(self, name: str) -> dict[str, Any]:
        config = self._require(name)
        tasks = [] if self.state.targets.get(name) == TargetState.STOPPED else self.state.tasks.get(name, [])
        return {"name": name, "config": dict(config),
                "tasks": [{"connector": name, "task": i} for i in range(len(tasks))], "type": self._type(config)}

    def _owner(self, unit: Unit) -> str:
        for worker, units in assign_units(self.state.units(), list(self.members)).items():
            if unit in units:
                return worker
        return ""

    def _stored_status(self, key: str, unit: Unit, task_id: int | None = None) -> dict[str, Any]:
        stored = self.state.statuses.get(key)
        if stored is None:
            stored = {"state": State.UNASSIGNED.value, "worker_id": self._owner(unit)}
        out = {"state": stored.get("state"), "worker_id": stored.get("worker_id")}
        if stored.get("trace"):
            out["trace"] = stored["trace"]
        return out if task_id is None else {"id": task_id, **out}

    def status(self, name: str) -> dict[str, Any]:
        config = self._require(name)
        stopped = self.state.targets.get(name) == TargetState.STOPPED
        tasks = [] if stopped else [self._stored_status(_task_key(name, i), (name, i), i)
                                    for i in range(len(self.state.tasks.get(name, [])))]
        return {"name": name, "connector": self._stored_status(_connector_key(name), (name, -1)),
                "tasks": tasks, "type": self._type(config)}

    def tasks(self, name: str) -> list[dict[str, Any]]:
        self._require(name)
        return [{"id": {"connector": name, "task": i}, "config": dict(cfg)}
                for i, cfg in enumerate(self.state.tasks.get(name, []))]

    def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        self._require(name)
        if not 0 <= task_id < len(self.state.tasks.get(name, [])):
            raise HerderError(404, f"Task {name}-{task_id} not found")
        return self._stored_status(_task_key(name, task_id), (name, task_id), task_id)

    def _topic_keys(self, name: str) -> list[tuple[str, str]]:
        suffix = _TOPIC_SEPARATOR + name
        return [(key, key[len(_TOPIC_PREFIX):-len(suffix)]) for key in self.state.statuses
                if key.startswith(_TOPIC_PREFIX) and key.endswith(suffix)]

    def topics(self, name: str) -> dict[str, Any]:
        self._require(name)
        return {name: {"topics": sorted(topic for _key, topic in self._topic_keys(name))}}

    async def reset_topics(self, name: str) -> None:
        self._require(name)
        keys = [key for key, _topic in self._topic_keys(name)]
        if keys:
            await self._status_log.send_many([(key.encode(), None) for key in keys])
            await self._status_log.read_to_end()

    def validate(self, plugin: str, config: Mapping[str, Any]) -> dict[str, Any]:
        try:
            self.registry.connector_class(plugin)
        except PluginError as exc:
            raise HerderError(400, str(exc)) from None
        return validation_report({"connector.class": plugin, **config}, self.registry, self._worker_settings)

    # -- REST: changes ---------------------------------------------------------------------

    async def _write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        await self._config_log.send_many(records)
        await self._config_log.read_to_end()
        self._wake.set()

    async def put_config(self, name: str, config: Mapping[str, Any], *, create_only: bool = False,
                         target: TargetState = TargetState.STARTED) -> tuple[bool, dict[str, Any]]:
        given = config.get("name")
        if given is not None and given != name:
            raise HerderError(400, f"Connector name configuration ({given}) doesn't match connector name "
                                   f"in the URL ({name})")
        valid = validate_config({**config, "name": name}, self.registry, self._worker_settings)
        log_warnings(valid)
        self._require_member()
        exists = name in self.state.connectors
        if exists and create_only:
            raise HerderError(409, f"Connector {name} already exists")
        records: list[tuple[bytes, bytes | None]] = []
        if not exists:
            records.append((f"target-state-{name}".encode(), _json({"state": target.value})))
        records.append((f"connector-{name}".encode(), _json({"properties": valid.raw})))
        await self._write(records)
        return not exists, self.info(name)

    async def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return (await self.put_config(name, patched(self.config(name), patch)))[1]

    async def delete(self, name: str) -> None:
        self._require(name)
        self._require_member()
        count = len(self.state.tasks.get(name, []))
        await self._write([(f"connector-{name}".encode(), None), (f"target-state-{name}".encode(), None),
                           (f"commit-{name}".encode(), None)])
        tombstones: list[tuple[bytes, bytes | None]] = [
            (_connector_key(name).encode(), None), *((_task_key(name, i).encode(), None) for i in range(count))]
        await self._status_log.send_many(tombstones)

    async def set_target(self, name: str, target: TargetState) -> None:
        self._require(name)
        self._require_member()
        await self._write([(f"target-state-{name}".encode(), _json({"state": target.value}))])

    async def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]:
        self._require(name)
        self._require_member()
        await self._write([(f"restart-{name}".encode(), _json({"include_tasks": include_tasks,
                                                                "only_failed": only_failed,
                                                                "nonce": uuid.uuid4().hex}))])
        return self.status(name)

    async def restart_task(self, name: str, task_id: int) -> None:
        self.task_status(name, task_id)
        self._require_member()
        await self._write([(f"restart-task-{name}-{task_id}".encode(), _json({"nonce": uuid.uuid4().hex}))])

    # -- REST: offsets ---------------------------------------------------------------------

    async def get_offsets(self, name: str) -> dict[str, Any]:
        config = self._require(name)
        if self._type(config) == "source":
            await self.offsets.sync()
            return {"offsets": [{"partition": p, "offset": o} for p, o in self.offsets.connector_offsets(name)]}
        committed = await kafka_ops.group_offsets(self.worker, sink_group(name))
        return {"offsets": [{"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                            for (t, p), o in sorted(committed.items())]}

    def _require_stopped(self, name: str) -> dict[str, str]:
        config = self._require(name)
        stored = self.state.statuses.get(_connector_key(name), {})
        if self.state.targets.get(name) != TargetState.STOPPED or stored.get("state") != State.STOPPED.value:
            raise HerderError(400, "Connectors must be in the STOPPED state before their offsets can be "
                                   "modified. This can be done for the specified connector by issuing a 'PUT' "
                                   f"request to the '/connectors/{name}/stop' endpoint")
        return config

    async def alter_offsets(self, name: str, body: Mapping[str, Any]) -> dict[str, str]:
        config = self._require_stopped(name)
        entries = body.get("offsets") if isinstance(body, Mapping) else None
        if not isinstance(entries, list) or not entries:
            raise HerderError(400, "The request body must contain a non-empty 'offsets' list")
        if self._type(config) == "source":
            self.offsets.put(name, source_offset_changes(name, entries))
            await self.offsets.flush()
        else:
            commits = {}
            for entry in entries:
                partition, offset = _entry(entry)
                value = offset.get("kafka_offset") if isinstance(offset, Mapping) else None
                if not isinstance(value, int) or value < 0:
                    raise HerderError(400, "A sink offset must be {\"kafka_offset\": <non-negative integer>}")
                commits[_sink_partition(partition)] = value
            await kafka_ops.alter_group_offsets(self.worker, sink_group(name), commits)
        return {"message": "The offsets for this connector have been altered successfully"}

    async def reset_offsets(self, name: str) -> dict[str, str]:
        config = self._require_stopped(name)
        if self._type(config) == "source":
            await self.offsets.sync()
            rows = self.offsets.connector_offsets(name)
            self.offsets.put(name, {offset_key(name, p): (p, None) for p, _o in rows})
            await self.offsets.flush()
        else:
            await kafka_ops.delete_group(self.worker, sink_group(name))
        return {"message": "The offsets for this connector have been reset successfully"}


def _connector_key(name: str) -> str:
    return f"status-connector-{name}"


def _task_key(name: str, index: int) -> str:
    return f"status-task-{name}-{index}"


_TOPIC_PREFIX = "status-topic-"
_TOPIC_SEPARATOR = ":connector-"


def _topic_key(name: str, topic: str) -> str:
    """Kafka Connect's key of a connector's active topic in the status topic."""
    return f"{_TOPIC_PREFIX}{topic}{_TOPIC_SEPARATOR}{name}"


def _status(state: State, worker_id: str, trace: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"state": state.value, "worker_id": worker_id}
    if trace:
        out["trace"] = trace
    return out


class _Failed(Connector):
    """Stands in for a connector whose start failed (so its status can say so)."""

    def start(self, config: Any) -> None:
        pass

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    @classmethod
    def task_class(cls) -> Any:
        raise TypeError("a failed connector has no tasks")


class _FailedRunner:
    """A task this worker cannot run (its connector's class or config fails here): it
    reports FAILED with the reason."""

    def __init__(self, unit: Unit, worker_id: str, error: BaseException) -> None:
        self.id = unit[1]
        self._status = Status(State.FAILED, worker_id, trace_of(error))

    def status(self) -> Status:
        return self._status

    @property
    def topics(self) -> set[str]:
        return set()

    async def stop(self) -> None:
        pass

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass


class _Context:
    def __init__(self, herder: DistributedHerder, name: str) -> None:
        self._herder = herder
        self._name = name
        self._loop = asyncio.get_running_loop()

    def request_task_reconfiguration(self) -> None:
        self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._herder.reconfigure(self._name)))

    def raise_error(self, error: BaseException) -> None:
        def fail() -> None:
            local = self._herder._connectors.get(self._name)
            if local is not None:
                local.state, local.trace = State.FAILED, trace_of(error)
                self._herder._wake.set()

        self._loop.call_soon_threadsafe(fail)
