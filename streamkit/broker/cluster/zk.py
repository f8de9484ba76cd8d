"""ZooKeeper for the broker's asyncio loop: kazoo (threads) at the edge, coroutines inside.

kazoo is a blocking, thread-safe client: each call runs in a worker thread; watches and
session changes, which kazoo delivers on its own thread, are handed to the loop with
``call_soon_threadsafe``. Watches are one-shot, as in ZooKeeper: whoever sets one re-reads
(and so re-arms it) when it fires, and re-reads everything after a new session, since a lost
session takes its watches with it.

Session states, as kazoo reports them: ``suspended`` (the connection is gone; the session
may still be alive), ``connected`` (back, on the same session or a new one: ``new_session``
says which), ``lost`` (the session expired: its ephemeral nodes, the broker's registration
and the controller's claim, are gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import WatchedEvent
from kazoo.retry import KazooRetry

from streamkit.broker.cluster.zkdata import (
    CLUSTER_ID,
    CONTROLLER,
    CONTROLLER_EPOCH,
    PERSISTENT_PATHS,
    BrokerRegistration,
    PartitionState,
    TopicAssignment,
    broker_path,
    decode_controller,
    decode_json,
    decode_topic_configs,
    encode_controller,
    encode_topic_configs,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)

__all__ = [
    "ControllerFenced",
    "SessionEvent",
    "StaleState",
    "TopicExists",
    "Watch",
    "ZkClient",
    "ZkConnectError",
    "kazoo_client",
    "split_connect",
    "with_retries",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
Watch = Callable[[], None]  # called on the loop when a watched znode changes


class ZkConnectError(ConnectionError):
    """ZooKeeper did not answer within zookeeper.connection.timeout.ms."""


class StaleState(Exception):
    """A compare-and-set lost: the znode changed since it was read."""


class ControllerFenced(Exception):
    """A controller write was refused because another controller was elected since."""


class TopicExists(Exception):
    pass


@dataclass(frozen=True, slots=True)
class SessionEvent:
    state: str  # "suspended" | "connected" | "lost"
    new_session: bool = False


def kazoo_client(hosts: str, session_timeout_ms: int) -> KazooClient:
    """A kazoo client that tries an unreachable ZooKeeper again at least once a second.

    kazoo's default doubles its wait between connection attempts up to an hour: after an
    outage of D seconds it tries again only up to about 2D later, long after a session it
    could have kept has expired. ZooKeeper's own client waits at most a second; so does this.
    """
    retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)
    return KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000, connection_retry=retry)


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port[,host:port...][/chroot]`` -> (hosts, chroot or "")."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    chroot = connect[slash:].rstrip("/")
    return connect[:slash], chroot


class ZkClient:
    """One ZooKeeper session of a broker (see the module docstring)."""

    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: KazooClient | None = None
        self._session_listeners: list[Callable[[SessionEvent], None]] = []
        self._session_id: int | None = None
        self._lost = False

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (within zookeeper.connection.timeout.ms), creating the chroot and the
        persistent paths when missing, as Kafka does."""
        self._loop = asyncio.get_running_loop()
        timeout = self.connection_timeout_ms / 1000
        if self.chroot:
            root = kazoo_client(self.hosts, self.session_timeout_ms)
            try:
                await self._blocking(root.start, timeout)
                await self._blocking(root.ensure_path, self.chroot)
            except (KazooException, KazooTimeoutError) as exc:
                raise ZkConnectError(f"cannot reach ZooKeeper at {self.hosts} ({exc or type(exc).__name__})") from exc
            finally:
                with contextlib.suppress(Exception):
                    await self._blocking(root.stop)
                    await self._blocking(root.close)
        client = kazoo_client(self.connect, self.session_timeout_ms)
        client.add_listener(self._on_state)
        try:
            await self._blocking(client.start, timeout)
        except (KazooException, KazooTimeoutError) as exc:
            # kazoo's "Connection time-out" (zookeeper.connection.timeout.ms) is not a KazooException
            with contextlib.suppress(Exception):
                await self._blocking(client.stop)
            raise ZkConnectError(f"cannot reach ZooKeeper at {self.hosts} "
                                 f"({str(exc) or type(exc).__name__})") from exc
        self._client = client
        self._session_id = self._current_session()
        for path in PERSISTENT_PATHS:
            await self._blocking(client.ensure_path, path)

    async def stop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await self._blocking(client.stop)
                await self._blocking(client.close)

    @property
    def client(self) -> KazooClient:
        assert self._client is not None, "ZooKeeper client not started"
        return self._client

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.connected

    def on_session(self, listener: Callable[[SessionEvent], None]) -> None:
        """``listener(event)`` is called on the loop at each session change."""
        self._session_listeners.append(listener)

    def _current_session(self) -> int | None:
        client = self._client
        if client is None:
            return None
        session = client.client_id
        return None if session is None else int(session[0])

    def _on_state(self, state: str) -> None:
        # kazoo's thread: nothing blocking here (no ZooKeeper call from a listener).
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._session_changed, state)

    def _session_changed(self, state: str) -> None:
        if self._client is None:
            return
        if state == KazooState.LOST:
            self._lost = True
            event = SessionEvent("lost")
        elif state == KazooState.SUSPENDED:
            event = SessionEvent("suspended")
        else:
            session = self._current_session()
            new = self._lost or (session is not None and session != self._session_id)
            self._session_id, self._lost = session, False
            event = SessionEvent("connected", new_session=new)
        log.info("ZooKeeper session %s%s", event.state, " (a new session)" if event.new_session else "")
        for listener in list(self._session_listeners):
            try:
                listener(event)
            except Exception:
                log.exception("a ZooKeeper session listener failed")

    async def _blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _watcher(self, watch: Watch | None) -> Callable[[WatchedEvent], None] | None:
        if watch is None:
            return None
        loop = self._loop
        assert loop is not None

        def fire(_event: WatchedEvent) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody to tell
                loop.call_soon_threadsafe(watch)

        return fire

    # -- reads -----------------------------------------------------------------------------

    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, int] | None:
        """(data, version), or None when the znode does not exist (a watch is then set on
        its creation)."""
        client = self.client
        watcher = self._watcher(watch)
        try:
            data, stat = await self._blocking(client.get, path, watcher)
        except NoNodeError:
            if watcher is not None:
                stat = await self._blocking(client.exists, path, watcher)
                if stat is not None:  # created in between: read it
                    return await self.get(path)
            return None
        return bytes(data or b""), int(stat.version)

    async def children(self, path: str, watch: Watch | None = None) -> list[str]:
        try:
            return list(await self._blocking(self.client.get_children, path, self._watcher(watch)))
        except NoNodeError:
            return []

    # -- cluster id ------------------------------------------------------------------------

    async def cluster_id(self, proposed: str) -> str:
        """The cluster's id: ``proposed`` if this broker is the first to set one."""
        try:
            await self._blocking(self.client.create, CLUSTER_ID,
                                 json.dumps({"version": "1", "id": proposed}).encode(), makepath=True)
            return proposed
        except NodeExistsError:
            got = await self.get(CLUSTER_ID)
            assert got is not None
            return str(decode_json(got[0])["id"])

    # -- brokers ---------------------------------------------------------------------------

    async def register_broker(self, registration: BrokerRegistration, retry_ms: int = 1000,
                              stopping: Callable[[], bool] = lambda: False) -> None:
        """Create this broker's ephemeral ``/brokers/ids/{id}``. A node left by this broker's
        previous life (a session not yet expired: a restart faster than
        zookeeper.session.timeout.ms) is waited out, not fought: it goes when that session
        expires. Another live broker with the same id is waited out the same way, with a
        warning each time."""
        path = broker_path(registration.broker_id)
        data = registration.to_bytes()
        while not stopping():
            try:
                await self._blocking(self.client.create, path, data, ephemeral=True)
                return
            except NodeExistsError:
                owner = await self._ephemeral_owner(path)
                if owner is not None and owner == self._current_session():
                    return  # ours already (a retry after a lost reply)
                log.warning("broker id %d is still registered in ZooKeeper (%s, by a previous or another "
                            "broker's session); retrying in %d ms", registration.broker_id, path, retry_ms)
                await asyncio.sleep(retry_ms / 1000)

    async def _ephemeral_owner(self, path: str) -> int | None:
        stat = await self._blocking(self.client.exists, path)
        return None if stat is None else int(stat.ephemeralOwner)

    async def brokers(self, watch: Watch | None = None) -> dict[int, BrokerRegistration]:
        """The live brokers (a watch fires when one comes or goes)."""
        ids = await self.children("/brokers/ids", watch)
        found: dict[int, BrokerRegistration] = {}
        for name in ids:
            registration = await self.broker(int(name))
            if registration is not None:
                found[registration.broker_id] = registration
        return found

    async def broker(self, broker_id: int) -> BrokerRegistration | None:
        try:
            data, stat = await self._blocking(self.client.get, broker_path(broker_id))
        except NoNodeError:
            return None
        return BrokerRegistration.from_bytes(broker_id, bytes(data or b""), int(stat.czxid))

    # -- controller ------------------------------------------------------------------------

    async def controller(self, watch: Watch | None = None) -> int:
        """The controller's broker id, or -1 (a watch also fires on its election)."""
        got = await self.get(CONTROLLER, watch)
        return -1 if got is None else decode_controller(got[0])

    async def elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Try to become the controller: on success (controller epoch, the epoch znode's
        version, which every controller write checks), else None."""
        try:
            await self._blocking(self.client.create, CONTROLLER,
                                 encode_controller(broker_id, int(time.time() * 1000)), ephemeral=True)
        except NodeExistsError:
            return None
        while True:
            got = await self.get(CONTROLLER_EPOCH)
            try:
                if got is None:
                    await self._blocking(self.client.create, CONTROLLER_EPOCH, b"1")
                    return 1, 0
                epoch = int(got[0] or b"0") + 1
                stat = await self._blocking(self.client.set, CONTROLLER_EPOCH, str(epoch).encode(), got[1])
                return epoch, int(stat.version)
            except (NodeExistsError, BadVersionError):
                continue  # a concurrent bump (a resigned controller's): read again

    async def resign_controller(self, broker_id: int) -> None:
        got = await self.get(CONTROLLER)
        if got is not None and decode_controller(got[0]) == broker_id:
            with contextlib.suppress(NoNodeError, BadVersionError):
                await self._blocking(self.client.delete, CONTROLLER, got[1])

    # -- topics ----------------------------------------------------------------------------

    async def topic_names(self, watch: Watch | None = None) -> list[str]:
        return await self.children("/brokers/topics", watch)

    async def topic(self, name: str, watch: Watch | None = None) -> TopicAssignment | None:
        got = await self.get(topic_path(name), watch)
        return None if got is None else TopicAssignment.from_bytes(got[0])

    async def topic_with_version(self, name: str) -> tuple[TopicAssignment, int] | None:
        got = await self.get(topic_path(name))
        return None if got is None else (TopicAssignment.from_bytes(got[0]), got[1])

    async def create_topic(self, name: str, assignment: TopicAssignment, configs: dict[str, str]) -> None:
        """The configs first, then the assignment (what the controller watches): the
        controller never sees a topic whose configs are not there yet."""
        client = self.client
        try:
            await self._blocking(client.create, topic_config_path(name), encode_topic_configs(configs))
        except NodeExistsError:
            if await self.get(topic_path(name)) is not None:
                raise TopicExists(name) from None
            await self._blocking(client.set, topic_config_path(name), encode_topic_configs(configs))
        try:
            await self._blocking(client.create, topic_path(name), assignment.to_bytes())
        except NodeExistsError:
            raise TopicExists(name) from None

    async def set_assignment(self, name: str, assignment: TopicAssignment, version: int) -> None:
        try:
            await self._blocking(self.client.set, topic_path(name), assignment.to_bytes(), version)
        except (BadVersionError, NoNodeError) as exc:
            raise StaleState(topic_path(name)) from exc

    async def topic_configs(self, name: str, watch: Watch | None = None) -> dict[str, str]:
        got = await self.get(topic_config_path(name), watch)
        return {} if got is None else decode_topic_configs(got[0])

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        data = encode_topic_configs(configs)
        try:
            await self._blocking(self.client.set, topic_config_path(name), data)
        except NoNodeError:
            await self._blocking(self.client.create, topic_config_path(name), data, makepath=True)

    async def delete_topic_nodes(self, name: str) -> None:
        for path in (topic_path(name), topic_config_path(name)):
            with contextlib.suppress(NoNodeError, NotEmptyError):
                await self._blocking(self.client.delete, path, recursive=True)

    # -- partition states --------------------------------------------------------------------

    async def partition_state(self, topic: str, partition: int, watch: Watch | None = None) -> PartitionState | None:
        got = await self.get(partition_state_path(topic, partition), watch)
        return None if got is None else PartitionState.from_bytes(got[0], got[1])

    async def partition_ids(self, topic: str, watch: Watch | None = None) -> list[int]:
        return sorted(int(p) for p in await self.children(partitions_path(topic), watch))

    async def create_partition_state(self, topic: str, partition: int, state: PartitionState,
                                     controller_epoch_version: int) -> PartitionState:
        """A new partition's first state, written by the controller (fenced by its epoch)."""
        path = partition_state_path(topic, partition)
        await self._blocking(self.client.ensure_path, path.rsplit("/", 1)[0])
        txn = self.client.transaction()
        txn.check(CONTROLLER_EPOCH, controller_epoch_version)
        txn.create(path, state.to_bytes())
        results = await self._blocking(txn.commit)
        self._raise_failed(results, path)
        return PartitionState(state.leader, state.leader_epoch, state.isr, state.controller_epoch, 0)

    async def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                                     controller_epoch_version: int | None = None) -> PartitionState:
        """Compare-and-set ``state`` over the version it was derived from (``state.version``);
        a controller's write also checks its epoch. Returns the state with its new version."""
        path = partition_state_path(topic, partition)
        client = self.client
        if controller_epoch_version is None:
            try:
                stat = await self._blocking(client.set, path, state.to_bytes(), state.version)
            except (BadVersionError, NoNodeError) as exc:
                raise StaleState(path) from exc
            return PartitionState(state.leader, state.leader_epoch, state.isr, state.controller_epoch,
                                  int(stat.version))
        txn = client.transaction()
        txn.check(CONTROLLER_EPOCH, controller_epoch_version)
        txn.set_data(path, state.to_bytes(), state.version)
        results = await self._blocking(txn.commit)
        self._raise_failed(results, path)
        return PartitionState(state.leader, state.leader_epoch, state.isr, state.controller_epoch,
                              int(results[1].version))

    @staticmethod
    def _raise_failed(results: list[Any], path: str) -> None:
        """A multi-op's results: the epoch check first, then the write."""
        check, write = results[0], results[1]
        if isinstance(check, BadVersionError | NoNodeError):
            raise ControllerFenced(f"another controller was elected (writing {path})")
        if isinstance(write, BadVersionError | NoNodeError | NodeExistsError):
            raise StaleState(path)
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise result

    # -- admin requests --------------------------------------------------------------------

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False) -> bool:
        """Create ``path`` (parents too); False when it exists."""
        try:
            await self._blocking(self.client.create, path, data, ephemeral=ephemeral, makepath=True)
            return True
        except NodeExistsError:
            return False

    async def compare_and_set(self, path: str, data: bytes, version: int) -> bool:
        """Write ``data`` over version ``version`` of ``path``; False when it changed since."""
        try:
            await self._blocking(self.client.set, path, data, version)
        except (BadVersionError, NoNodeError):
            return False
        return True

    async def set(self, path: str, data: bytes) -> None:
        try:
            await self._blocking(self.client.set, path, data)
        except NoNodeError:
            await self.create(path, data)

    async def delete(self, path: str, *, recursive: bool = False) -> None:
        with contextlib.suppress(NoNodeError):
            await self._blocking(self.client.delete, path, recursive=recursive)


async def with_retries(what: str, attempt: Callable[[], Awaitable[T]], *, backoff_ms: int = 200,
                       stopping: Callable[[], bool] = lambda: False) -> T | None:
    """Run ``attempt`` until it does not fail on a ZooKeeper connection problem (the session
    comes back, or a new one does); None when ``stopping``."""
    while not stopping():
        try:
            return await attempt()
        except KazooException as exc:
            log.info("%s: ZooKeeper unavailable (%s); retrying", what, type(exc).__name__)
            await asyncio.sleep(backoff_ms / 1000)
    return None

