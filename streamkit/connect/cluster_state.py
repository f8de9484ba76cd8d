"""What a distributed worker knows, as pure state built from the internal topics' records,
and the assignment of connectors and tasks to workers.

Config topic (``config.storage.topic``), keys as Kafka Connect's:

    connector-{name}              {"properties": {...}}            null: deleted
    target-state-{name}           {"state": "STARTED"|"PAUSED"|"STOPPED"}
    task-{name}-{i}               {"properties": {...}}            a task config, pending ...
    commit-{name}                 {"tasks": n, "config_hash": h}   ... until committed
    restart-{name}                {"include_tasks": b, "only_failed": b, "nonce": ...}
    restart-task-{name}-{i}       {"nonce": ...}

Status topic (``status.storage.topic``): ``status-connector-{name}`` and
``status-task-{name}-{i}`` -> ``{"state", "trace", "worker_id"}``.

Assignment is leader-less and deterministic: every member of the worker group receives the
same sorted member list from the group's sync (``ConnectAssignor``), and ``assign_units``
deals each connector's units (the connector, then its committed tasks) round-robin over it,
so every worker computes the same owner for every unit without asking anyone.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from streamkit.connect.status import TargetState

__all__ = ["ClusterState", "ConnectAssignor", "Restart", "Unit", "assign_units", "config_hash"]

Unit = tuple[str, int]  # (connector, -1) is the connector itself, (connector, i) its task i


def config_hash(config: Mapping[str, str]) -> str:
    return hashlib.sha1(orjson.dumps(dict(config), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


@dataclass(frozen=True)
class Restart:
    connector: str
    task: int | None  # None: the connector (and maybe its tasks)
    include_tasks: bool = False
    only_failed: bool = False


@dataclass
class ClusterState:
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    targets: dict[str, TargetState] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    task_hashes: dict[str, str] = field(default_factory=dict)
    pending: dict[str, dict[int, dict[str, str]]] = field(default_factory=dict)
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)

    def apply_config(self, key: str, value: Mapping[str, Any] | None) -> Restart | None:
        if key.startswith("connector-"):
            name = key[len("connector-"):]
            if value is None:
                for table in (self.connectors, self.targets, self.tasks, self.task_hashes, self.pending):
                    table.pop(name, None)
            else:
                self.connectors[name] = {str(k): str(v) for k, v in value.get("properties", {}).items()}
                self.targets.setdefault(name, TargetState.STARTED)
        elif key.startswith("target-state-"):
            name = key[len("target-state-"):]
            if value is None:
                self.targets.pop(name, None)
            else:  # may come before its connector's config (a connector created stopped)
                self.targets[name] = TargetState(value.get("state", "STARTED"))
        elif key.startswith("task-"):
            name, _, index = key[len("task-"):].rpartition("-")
            if value is not None and index.isdigit():
                self.pending.setdefault(name, {})[int(index)] = {
                    str(k): str(v) for k, v in value.get("properties", {}).items()}
        elif key.startswith("commit-"):
            name = key[len("commit-"):]
            if value is not None and name in self.connectors:
                pending = self.pending.pop(name, {})
                count = int(value.get("tasks", 0))
                self.tasks[name] = [pending.get(i, {}) for i in range(count)]
                self.task_hashes[name] = str(value.get("config_hash", ""))
        elif key.startswith("restart-task-"):
            name, _, index = key[len("restart-task-"):].rpartition("-")
            if value is not None and index.isdigit():
                return Restart(name, int(index))
        elif key.startswith("restart-") and value is not None:
            return Restart(key[len("restart-"):], None, bool(value.get("include_tasks")),
                               bool(value.get("only_failed")))
        return None

    def apply_status(self, key: str, value: Mapping[str, Any] | None) -> None:
        if value is None:
            self.statuses.pop(key, None)
        else:
            self.statuses[key] = dict(value)

    def units(self) -> list[Unit]:
        out: list[Unit] = []
        for name in sorted(self.connectors):
            if self.targets.get(name) == TargetState.STOPPED:
                out.append((name, -1))  # the owner reports it STOPPED
                continue
            out.append((name, -1))
            out.extend((name, i) for i in range(len(self.tasks.get(name, []))))
        return out


def assign_units(units: Sequence[Unit], members: Sequence[str]) -> dict[str, list[Unit]]:
    """Each connector's units go round-robin over the sorted members, starting at a member
    chosen by the connector's name (CRC-32): the connector on one worker, its task 0 on the
    next, and so on. A connector's placement never depends on the other connectors, so adding
    or removing one moves nothing else; with more connectors than workers the starting points
    spread over the workers."""
    ordered = sorted(members)
    out: dict[str, list[Unit]] = {m: [] for m in ordered}
    if not ordered:
        return out
    for name, index in units:
        start = zlib.crc32(name.encode())
        out[ordered[(start + index + 1) % len(ordered)]].append((name, index))
    return out


class ConnectAssignor(AbstractPartitionAssignor):  # type: ignore[misc]  # aiokafka is untyped
    """Group assignor of the worker group: it hands every member the full, sorted member
    list (worker ids and REST URLs); the units follow from it by ``assign_units``."""

    name = "streamkit-connect"
    version = 0

    def __init__(self, worker_id: str, url: str, on_members: Any) -> None:
        self.worker_id = worker_id
        self.url = url
        self._on_members = on_members

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        data = orjson.dumps({"worker_id": self.worker_id, "url": self.url})
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), data)

    def assign(self, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
               ) -> dict[str, ConsumerProtocolMemberAssignment]:
        workers = {}
        for member_id, meta in members.items():
            try:
                info = orjson.loads(meta.user_data)
            except orjson.JSONDecodeError:
                info = {}
            workers[str(info.get("worker_id") or member_id)] = str(info.get("url", ""))
        data = orjson.dumps({"members": dict(sorted(workers.items()))})
        return {m: ConsumerProtocolMemberAssignment(self.version, [], data) for m in members}

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        try:
            members = orjson.loads(assignment.user_data).get("members", {})
        except (orjson.JSONDecodeError, AttributeError):
            members = {}
        self._on_members(dict(members))
