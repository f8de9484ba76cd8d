"""One broker's membership of a cluster: its ZooKeeper session, registration, metadata,
replicas, fetchers, and (when elected) the controller.

Start-up, as Kafka's: connect to ZooKeeper (creating the chroot), read the cluster's
metadata, open the local replicas of the partitions assigned here and act on their states
(followers start fetching), then register (``/brokers/ids/{id}``: from now on the controller
counts on this broker) and stand for controller. A registration left by this broker's
previous life is waited out (``ZkClient.register_broker``).

Session events: when the connection to ZooKeeper is suspended the broker stops leading
(``ReplicaManager.session_suspended``); back on the same session it resumes; on a new session
(the old one expired: its registration and any controller claim are gone) it registers again,
and each partition it led waits for the controller to confirm it with a new leader epoch.

Shutdown is controlled (``controlled.shutdown.enable``): the broker asks the controller to
move its leaderships away and waits for it, then closes its session, which ends its
registration at once, so the others react without waiting for a session timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kazoo.exceptions import KazooException

from streamkit.broker.cluster.assignment import AssignmentError, assign_replicas
from streamkit.broker.cluster.controller import Controller
from streamkit.broker.cluster.fetcher import FetcherManager
from streamkit.broker.cluster.metadata import ClusterMetadata, MetadataSync
from streamkit.broker.cluster.replica import Replica, ReplicaManager, Role
from streamkit.broker.cluster.settings import ClusterSettings
from streamkit.broker.cluster.throttle import Throttle
from streamkit.broker.cluster.zk import SessionEvent, StaleState, TopicExists, ZkClient
from streamkit.broker.cluster.zkdata import (
    CONTROLLED_SHUTDOWN,
    DELETE_TOPICS,
    BrokerRegistration,
    PartitionState,
    TopicAssignment,
    decode_json,
)
from streamkit.broker.errors import BrokerError, ErrorCode
from streamkit.broker.topics import check_partition_count, validate_topic_name
from streamkit.log.config import LogConfig
from streamkit.log.errors import ConfigError

if TYPE_CHECKING:
    from streamkit.broker.topics import TopicManager

__all__ = ["ClusterNode", "ClusterStatus"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


class ClusterNode:
    """See the module docstring."""

    def __init__(self, settings: ClusterSettings, topics: TopicManager, host: str, port: int,
                 clock: Callable[[], int], notify: Callable[[TP], None], cluster_id: str) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.topics = topics
        self.host = host
        self.port = port
        # Every advertised listener, "NAME://host:port" (registered; clients get the one
        # they are connected on); the inter-broker one is host:port.
        self.endpoints: tuple[str, ...] = (f"PLAINTEXT://{host}:{port}",)
        self.clock = clock
        self.notify = notify
        self.proposed_cluster_id = cluster_id
        self.cluster_id = cluster_id
        self.zk = ZkClient(settings.zookeeper_connect, settings.zookeeper_session_timeout_ms,
                           settings.zookeeper_connection_timeout_ms)
        self.metadata = ClusterMetadata()
        self.replicas = ReplicaManager(self.broker_id, self.zk, clock, notify, settings.replica_lag_time_max_ms)
        # Replication quotas (throttle.py): what this broker sends to throttled followers as
        # their leader, and what it fetches for its own throttled follower replicas.
        self.leader_throttle = Throttle(settings.leader_replication_throttled_rate, time.monotonic)
        self.follower_throttle = Throttle(settings.follower_replication_throttled_rate, time.monotonic)
        self.fetchers = FetcherManager(self.broker_id, self.metadata, settings, notify, self.follower_throttle)
        self.replicas.fetchers = self.fetchers
        self.sync = MetadataSync(self.zk, self.metadata, self)
        self.controller: Controller | None = None
        self.registered = False
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._electing: asyncio.Task[None] | None = None
        self._reregistering: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self.zk.start()
        self.zk.on_session(self._session)
        self.cluster_id = await self.zk.cluster_id(self.proposed_cluster_id)
        await self.sync.start()
        await self.zk.register_broker(self._registration(), stopping=lambda: self._stopping)
        self.registered = True
        log.info("broker %d registered in ZooKeeper at %s (cluster %s)", self.broker_id,
                 self.settings.zookeeper_connect, self.cluster_id)
        self._elect_soon()
        interval = max(self.settings.replica_lag_time_max_ms // 2, 100) / 1000
        self._tasks.append(asyncio.create_task(self._every(interval, self.replicas.shrink_isr), name="isr-shrink"))

    def _registration(self) -> BrokerRegistration:
        return BrokerRegistration(self.broker_id, self.host, self.port, self.settings.broker_rack,
                                  self.endpoints, int(time.time() * 1000))

    async def stop(self) -> None:
        """Controlled shutdown (when enabled and another broker is up), then leave."""
        self._stopping = True
        if self.settings.controlled_shutdown_enable and self.registered and self.zk.connected:
            with contextlib.suppress(KazooException, TimeoutError):
                await self._controlled_shutdown()
        for task in [*self._tasks, self._electing, self._reregistering]:
            if task is not None:
                task.cancel()
        for task in [*self._tasks, self._electing, self._reregistering]:
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self.fetchers.stop()
        if self.controller is not None:
            await self.controller.stop()
            with contextlib.suppress(KazooException):
                await self.zk.resign_controller(self.broker_id)
            self.controller = None
        await self.sync.stop()
        await self.zk.stop()  # closing the session removes the registration at once

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away, and wait until it says it is done
        (``controlled.shutdown.max.retries`` times ``controlled.shutdown.retry.backoff.ms``
        at most)."""
        if not any(b != self.broker_id for b in self.metadata.brokers):
            return  # alone: nobody to move anything to
        path = f"{CONTROLLED_SHUTDOWN}/{self.broker_id}"
        self.fetchers.halt()
        await self.zk.create(path, b"", ephemeral=True)
        settings = self.settings
        deadline = time.monotonic() + max(settings.controlled_shutdown_max_retries, 1) * \
            settings.controlled_shutdown_retry_backoff_ms / 1000
        changed = asyncio.Event()
        try:
            while time.monotonic() < deadline:
                changed.clear()
                got = await self.zk.get(path, changed.set)
                status = decode_json(got[0]) if got is not None and got[0] else None
                if status and status.get("done"):
                    log.info("controlled shutdown: leadership moved away")
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), max(deadline - time.monotonic(), 0.01))
            log.warning("controlled shutdown did not complete within %d ms; stopping anyway",
                        int(max(settings.controlled_shutdown_max_retries, 1) *
                            settings.controlled_shutdown_retry_backoff_ms))
        finally:
            await self.zk.delete(path)

    async def _every(self, seconds: float, work: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                work()
            except Exception:
                log.exception("periodic %s failed", getattr(work, "__name__", work))

    # -- controller election ---------------------------------------------------------------------

    def _elect_soon(self) -> None:
        if self._stopping or (self._electing is not None and not self._electing.done()):
            return
        self._electing = asyncio.create_task(self._elect(), name="controller-election")

    async def _elect(self) -> None:
        try:
            won = await self.zk.elect_controller(self.broker_id)
        except KazooException as exc:
            log.info("controller election: ZooKeeper unavailable (%s)", type(exc).__name__)
            return
        if won is None:
            return
        epoch, version = won
        if self.controller is not None:
            await self.controller.stop()
        self.controller = Controller(self.broker_id, self.zk, self.metadata, self.settings, epoch, version)
        self.controller.start()

    async def _drop_controller(self) -> None:
        controller, self.controller = self.controller, None
        if controller is not None:
            await controller.stop()
            log.info("broker %d is no longer the controller", self.broker_id)

    # -- ZooKeeper session -----------------------------------------------------------------------

    def _session(self, event: SessionEvent) -> None:
        if event.state == "suspended":
            self.replicas.session_suspended()
        elif event.state == "lost":
            self.registered = False
            self.replicas.session_suspended()
            if self.controller is not None:
                self._tasks.append(asyncio.create_task(self._drop_controller(), name="controller-drop"))
        elif event.new_session:
            self.replicas.session_resumed(new_session=True)
            if self.controller is not None:
                self._tasks.append(asyncio.create_task(self._drop_controller(), name="controller-drop"))
            if self._reregistering is None or self._reregistering.done():
                self._reregistering = asyncio.create_task(self._register_again(), name="re-register")
        else:
            self.replicas.session_resumed(new_session=False)

    async def _register_again(self) -> None:
        await self.zk.register_broker(self._registration(), stopping=lambda: self._stopping)
        self.registered = True
        log.info("broker %d registered again after its ZooKeeper session expired", self.broker_id)
        self._elect_soon()

    # -- metadata (MetadataListener) ------------------------------------------------------------

    def brokers_changed(self, before: dict[int, BrokerRegistration], after: dict[int, BrokerRegistration]) -> None:
        gone, came = sorted(set(before) - set(after)), sorted(set(after) - set(before))
        if gone or came:
            log.info("brokers: %s%s%s", sorted(after), f"; gone {gone}" if gone else "",
                     f"; new {came}" if came else "")
        self.fetchers.brokers_changed()
        if self.controller is not None:
            self.controller.brokers_changed()

    def controller_changed(self, controller: int) -> None:
        if controller < 0:
            self._elect_soon()
        elif controller != self.broker_id and self.controller is not None:
            self._tasks.append(asyncio.create_task(self._drop_controller(), name="controller-drop"))
        if self.controller is not None:
            self.controller.poke()

    def topic_changed(self, topic: str, assignment: TopicAssignment | None) -> None:
        self._host_topic(topic, assignment)
        if self.controller is not None:
            self.controller.poke()

    def state_changed(self, topic: str, partition: int, state: PartitionState | None) -> None:
        replica = self.replicas.replicas.get((topic, partition))
        if replica is not None and state is not None:
            self.replicas.apply(replica, state)
        if self.controller is not None:
            self.controller.poke()

    def config_changed(self, topic: str, configs: dict[str, str]) -> None:
        info = self.topics.get(topic)
        if info is not None and info.overrides != configs:
            self.topics.set_overrides(topic, configs)
        for (t, _p), replica in self.replicas.replicas.items():
            if t == topic:
                replica.min_isr = self.min_isr(topic)
        if self.controller is not None:
            self.controller.poke()

    def resynced(self) -> None:
        hosted = {tp for tp in self.replicas.replicas}
        assigned: set[TP] = set()
        for topic, assignment in list(self.metadata.topics.items()):
            self._host_topic(topic, assignment)
            assigned.update((topic, p) for p, r in assignment.partitions.items() if self.broker_id in r)
        for tp in sorted(hosted - assigned):
            self._unhost(*tp)
        for tp, replica in self.replicas.replicas.items():
            state = self.metadata.states.get(tp)
            if state is not None:
                self.replicas.apply(replica, state)
        if self.controller is not None:
            self.controller.poke()

    # -- local replicas --------------------------------------------------------------------------

    def min_isr(self, topic: str) -> int:
        raw = self.metadata.configs.get(topic, {}).get("min.insync.replicas")
        try:
            return max(int(raw), 1) if raw is not None else self.settings.min_insync_replicas
        except ValueError:
            return self.settings.min_insync_replicas

    def _host_topic(self, topic: str, assignment: TopicAssignment | None,
                    configs: dict[str, str] | None = None) -> None:
        """Open the local replicas ``assignment`` gives this broker; drop the ones it took
        away (or all of them: the topic was deleted)."""
        mine = set() if assignment is None else {p for p, r in assignment.partitions.items() if self.broker_id in r}
        for (t, p) in list(self.replicas.replicas):
            if t == topic and p not in mine:
                self._unhost(t, p)
        if assignment is None:
            return
        info = self.topics.get(topic)
        if info is not None and info.topic_id != assignment.topic_id:
            log.warning("topic %s was deleted and created again while this broker was away: dropping its old "
                        "local partitions", topic)
            for p in range(info.partitions):
                self._unhost(topic, p)
        if configs is None:
            configs = self.metadata.configs.get(topic, {})
        for p in sorted(mine):
            if (topic, p) in self.replicas.replicas:
                continue
            plog = self.topics.host(topic, assignment.topic_id, len(assignment.partitions), configs, p)
            replica = Replica(topic, p, plog, assignment.partitions[p], min_isr=self.min_isr(topic))
            self.replicas.add(replica)
            state = self.metadata.states.get((topic, p))
            if state is not None:
                self.replicas.apply(replica, state)
        for p in mine:
            self.replicas.reassigned(self.replicas.replicas[(topic, p)], assignment.partitions[p])

    def _unhost(self, topic: str, partition: int) -> None:
        replica = self.replicas.remove((topic, partition))
        if replica is not None:
            log.info("dropping the local replica of %s-%d (not assigned to broker %d any more)", topic, partition,
                     self.broker_id)
        self.topics.unhost(topic, partition)
        self.notify((topic, partition))

    # -- topics (any broker writes them; the controller carries them out) -------------------------

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                           assignment: dict[int, tuple[int, ...]] | None = None,
                           validate_only: bool = False) -> TopicAssignment:
        """Write a new topic's assignment and configs to ZooKeeper; the controller elects
        its leaders. Raises BrokerError with Kafka's codes."""
        validate_topic_name(name)
        if name in self.metadata.topics:
            raise BrokerError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        check_partition_count(partitions)
        try:
            LogConfig.from_kafka(configs, base=self.topics.defaults)
        except ConfigError as exc:
            raise BrokerError(ErrorCode.invalid_config, str(exc)) from exc
        if assignment is None:
            racks = await self._live_racks()
            try:
                assignment = assign_replicas(racks, partitions, replication_factor)
            except AssignmentError as exc:
                raise BrokerError(ErrorCode.invalid_replication_factor, str(exc)) from exc
        else:
            await self._check_assignment(assignment)
        created = TopicAssignment(uuid.uuid4(), assignment)
        if validate_only:
            return created
        try:
            await self.zk.create_topic(name, created, configs)
        except TopicExists:
            raise BrokerError(ErrorCode.topic_already_exists, f"topic {name!r} already exists") from None
        self._host_topic(name, created, configs)  # the metadata learns of it from ZooKeeper
        log.info("created topic %s: %d partition(s), replicas %s", name, len(assignment),
                 {p: list(r) for p, r in sorted(assignment.items())})
        return created

    async def _live_racks(self) -> dict[int, str | None]:
        """The live brokers and their racks, from ZooKeeper itself: this broker's metadata
        may not have heard yet of a broker that just registered (the controller's would)."""
        return {b: r.rack for b, r in (await self.zk.brokers()).items()}

    async def _check_assignment(self, assignment: dict[int, tuple[int, ...]]) -> None:
        if sorted(assignment) != list(range(len(assignment))):
            raise BrokerError(ErrorCode.invalid_replica_assignment, "partitions must be numbered 0..n-1")
        live = await self._live_racks()
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) != 1:
            raise BrokerError(ErrorCode.invalid_replica_assignment, "every partition needs as many replicas")
        for p, replicas in assignment.items():
            if len(set(replicas)) != len(replicas):
                raise BrokerError(ErrorCode.invalid_replica_assignment, f"partition {p} lists a broker twice")
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise BrokerError(ErrorCode.invalid_replica_assignment,
                                  f"partition {p} is assigned to broker(s) {unknown}, which are not registered")

    async def wait_for_leaders(self, name: str, timeout_ms: int) -> bool:
        """Wait until every partition of ``name`` has a live leader (what a client needs
        before it can produce): True, or False after ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        while time.monotonic() < deadline:
            md = self.metadata
            assignment = md.topics.get(name)
            if assignment is not None and all(
                    md.leader(name, p) in md.brokers for p in assignment.partitions):
                return True
            await asyncio.sleep(0.02)
        return False

    async def delete_topic(self, name: str) -> None:
        await self.zk.create(f"{DELETE_TOPICS}/{name}")

    async def add_partitions(self, name: str, count: int, assignment: list[tuple[int, ...]] | None = None,
                             validate_only: bool = False) -> None:
        current = await self.zk.topic_with_version(name)
        if current is None:
            raise BrokerError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        topic, version = current
        old = len(topic.partitions)
        if count <= old:
            raise BrokerError(ErrorCode.invalid_partitions,
                              f"topic {name!r} has {old} partitions; the new count must be larger")
        check_partition_count(count)
        replication = len(next(iter(topic.partitions.values()), ()))
        if assignment is not None:
            new = {old + i: tuple(r) for i, r in enumerate(assignment)}
            await self._check_assignment({**topic.partitions, **new})
        else:
            racks = await self._live_racks()
            try:
                new = assign_replicas(racks, count - old, replication, first_partition=old)
            except AssignmentError as exc:
                raise BrokerError(ErrorCode.invalid_replication_factor, str(exc)) from exc
        if validate_only:
            return
        updated = TopicAssignment(topic.topic_id, {**topic.partitions, **new}, topic.adding, topic.removing)
        try:
            await self.zk.set_assignment(name, updated, version)
        except StaleState:
            raise BrokerError(ErrorCode.reassignment_in_progress,
                              f"topic {name!r} changed meanwhile; try again") from None

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self.zk.set_topic_configs(name, configs)

    async def ensure_internal_topic(self, name: str, partitions: int, replication_factor: int,
                                    configs: dict[str, str]) -> bool:
        """Create an internal topic on first need, as Kafka does: False while fewer brokers
        are up than its replication factor."""
        if name in self.metadata.topics:
            return True
        if len(self.metadata.brokers) < replication_factor:
            return False
        with contextlib.suppress(BrokerError):
            await self.create_topic(name, partitions, replication_factor, configs)
        return name in self.metadata.topics

    # -- queries for the handlers ----------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.registered and self.metadata.synced

    def leads(self, topic: str, partition: int) -> bool:
        replica = self.replicas.replicas.get((topic, partition))
        return replica is not None and replica.role is Role.LEADER and not self.replicas.fenced

    def new_topic_id(self) -> uuid.UUID:
        return uuid.uuid4()

    def describe(self) -> ClusterStatus:
        """For /metrics: brokers, controller, partitions short of in-sync replicas and
        without a live leader, as this broker's metadata shows them."""
        md = self.metadata
        under, offline = [], []
        for topic, assignment in md.topics.items():
            for p, replicas in assignment.partitions.items():
                state = md.states.get((topic, p))
                if state is None or state.leader < 0 or state.leader not in md.brokers:
                    offline.append((topic, p))
                elif len(state.isr) < len(replicas):
                    under.append((topic, p))
        return ClusterStatus(sorted(md.brokers), md.controller, sorted(under), sorted(offline))


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    brokers: list[int]
    controller: int
    under_replicated: list[TP]
    offline: list[TP]
