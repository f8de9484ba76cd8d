"""What a broker knows of the cluster: ZooKeeper's state, kept current by watches.

``ClusterMetadata`` is the plain picture (live brokers, controller, topics, partition states)
that request handlers answer Metadata and route by. ``MetadataSync`` keeps it current: every
znode it reads it also watches, and a fired watch marks the znode dirty; one task re-reads
dirty znodes in order and tells the listener what changed. A new ZooKeeper session (the old
one expired, its watches with it) marks everything dirty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kazoo.exceptions import KazooException

from streamkit.broker.cluster.zk import SessionEvent, ZkClient
from streamkit.broker.cluster.zkdata import BrokerRegistration, PartitionState, TopicAssignment

__all__ = ["ClusterMetadata", "MetadataListener", "MetadataSync"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass
class ClusterMetadata:
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controller: int = -1
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[TP, PartitionState] = field(default_factory=dict)
    # Whether the whole picture has been read once (a fresh session's first read).
    synced: bool = False
    # Partition states not read again since a new session began: possibly stale (this
    # broker may have missed leader changes while its session was gone), so not served as
    # a partition's leader to clients, who would be sent to a broker that no longer leads.
    unconfirmed: set[TP] = field(default_factory=set)

    def partition_count(self, topic: str) -> int:
        assignment = self.topics.get(topic)
        return len(assignment.partitions) if assignment is not None else 0

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        assignment = self.topics.get(topic)
        if assignment is None:
            return ()
        return assignment.partitions.get(partition, ())

    def leader(self, topic: str, partition: int) -> int:
        state = self.states.get((topic, partition))
        return -1 if state is None else state.leader

    def offline_replicas(self, topic: str, partition: int) -> list[int]:
        return [r for r in self.replicas(topic, partition) if r not in self.brokers]

    def partitions_of(self, broker_id: int) -> Iterator[tuple[str, int, tuple[int, ...]]]:
        """Every partition ``broker_id`` has a replica of: (topic, partition, replicas)."""
        for topic, assignment in self.topics.items():
            for p, replicas in assignment.partitions.items():
                if broker_id in replicas:
                    yield topic, p, replicas


class MetadataListener(Protocol):
    def brokers_changed(self, before: dict[int, BrokerRegistration], after: dict[int, BrokerRegistration]) -> None: ...

    def topic_changed(self, topic: str, assignment: TopicAssignment | None) -> None: ...

    def state_changed(self, topic: str, partition: int, state: PartitionState | None) -> None: ...

    def controller_changed(self, controller: int) -> None: ...

    def config_changed(self, topic: str, configs: dict[str, str]) -> None: ...

    def resynced(self) -> None: ...


_BROKERS = ("brokers",)
_CONTROLLER = ("controller",)
_TOPICS = ("topics",)


class MetadataSync:
    """Keeps a ``ClusterMetadata`` current (see the module docstring)."""

    def __init__(self, zk: ZkClient, metadata: ClusterMetadata, listener: MetadataListener) -> None:
        self.zk = zk
        self.metadata = metadata
        self.listener = listener
        self._dirty: dict[tuple[object, ...], None] = {}  # ordered set
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._synced = asyncio.Event()
        zk.on_session(self._session)

    async def start(self) -> None:
        self._mark_all()
        self._task = asyncio.create_task(self._run(), name="streamkit-metadata-sync")
        await self._synced.wait()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def _session(self, event: SessionEvent) -> None:
        if event.state == "connected" and event.new_session:
            self._mark_all()

    def _mark_all(self) -> None:
        self.metadata.synced = False
        self.metadata.unconfirmed = set(self.metadata.states)
        self._synced.clear()
        for key in (_BROKERS, _CONTROLLER, _TOPICS):
            self._mark(key)

    def _mark(self, key: tuple[object, ...]) -> None:
        self._dirty[key] = None
        self._wake.set()

    def _watch(self, key: tuple[object, ...]) -> Callable[[], None]:
        return lambda: self._mark(key)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._dirty:
                key = next(iter(self._dirty))
                try:
                    await self._refresh(key)
                except KazooException as exc:
                    # Connection trouble: the key stays dirty; retried once the session is
                    # back (kazoo reconnects by itself).
                    log.info("metadata: ZooKeeper unavailable (%s); retrying", type(exc).__name__)
                    await asyncio.sleep(0.2)
                    continue
                except Exception:
                    log.exception("metadata: reading %s failed", key)
                    await asyncio.sleep(0.5)
                    continue
                # Not popped here: _refresh pops the key before it reads (so that a watch
                # firing during the read marks it dirty again, and it is read again).
            if not self.metadata.synced:
                self.metadata.synced = True
                self._synced.set()
                self.listener.resynced()

    async def _refresh(self, key: tuple[object, ...]) -> None:
        zk, md = self.zk, self.metadata
        kind = key[0]
        if kind == "brokers":
            # Pop before reading: a watch firing during the read marks it dirty again.
            self._dirty.pop(key, None)
            before = md.brokers
            md.brokers = await zk.brokers(self._watch(key))
            if before != md.brokers:
                self.listener.brokers_changed(before, md.brokers)
        elif kind == "controller":
            self._dirty.pop(key, None)
            controller = await zk.controller(self._watch(key))
            if controller != md.controller:
                md.controller = controller
                self.listener.controller_changed(controller)
        elif kind == "topics":
            self._dirty.pop(key, None)
            names = set(await zk.topic_names(self._watch(key)))
            for gone in sorted(set(md.topics) - names):
                self._forget_topic(gone)
            for name in sorted(names - set(md.topics)) if md.synced else sorted(names):
                self._mark(("topic", name))
                self._mark(("config", name))
        elif kind == "topic":
            name = str(key[1])
            self._dirty.pop(key, None)
            assignment = await zk.topic(name, self._watch(key))
            if assignment is None:
                self._forget_topic(name)
                return
            old = md.topics.get(name)
            md.topics[name] = assignment
            if old != assignment:
                self.listener.topic_changed(name, assignment)
            for p in assignment.partitions:
                if (name, p) not in md.states or not md.synced:
                    self._mark(("state", name, p))
        elif kind == "config":
            name = str(key[1])
            self._dirty.pop(key, None)
            configs = await zk.topic_configs(name, self._watch(key))
            if md.configs.get(name) != configs:
                md.configs[name] = configs
                if name in md.topics:
                    self.listener.config_changed(name, configs)
        elif kind == "state":
            name, p = str(key[1]), int(str(key[2]))
            self._dirty.pop(key, None)
            if name not in md.topics:
                return
            state = await zk.partition_state(name, p, self._watch(key))
            md.unconfirmed.discard((name, p))
            if state is None:
                return  # not created yet: the watch fires when the controller creates it
            if md.states.get((name, p)) != state:
                md.states[(name, p)] = state
                self.listener.state_changed(name, p, state)

    def _forget_topic(self, name: str) -> None:
        md = self.metadata
        assignment = md.topics.pop(name, None)
        md.configs.pop(name, None)
        if assignment is None:
            return
        for p in assignment.partitions:
            md.states.pop((name, p), None)
            md.unconfirmed.discard((name, p))
        self.listener.topic_changed(name, None)
