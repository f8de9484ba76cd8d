"""The broker process: opens the logs, serves the Kafka protocol over asyncio, runs the
periodic work, and shuts down cleanly.

Each connection is one loop around the sans-IO ``Connection``: bytes in, requests out,
handled one at a time in order (as Kafka does per connection, so responses stay in request
order), responses written back. A protocol violation closes only that connection. On the
fast path (the default; ``STREAMKIT_BROKER_FAST_PATH=0`` turns it off) a PLAINTEXT
connection is an :class:`~streamkit.broker.inline.InlineConnection` that runs the same
answers from the socket's read callback; TLS and SASL connections are tasks.

Every listener of ``listeners`` is bound; a TLS listener upgrades each connection with its
current certificates (reloaded when their files change), and a SASL listener accepts only
ApiVersions, SaslHandshake and SaslAuthenticate until the client has authenticated. The
principal (TLS client certificate or SASL user) goes to the handlers in ``ClientInfo``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import ssl
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from streamkit.broker.build import build
from streamkit.broker.cluster.markers import MarkerSender
from streamkit.broker.cluster.node import ClusterNode
from streamkit.broker.cluster.producer_ids import ZkProducerIds
from streamkit.broker.cluster.scram_sync import ScramSync
from streamkit.broker.cluster.settings import ClusterSettings
from streamkit.broker.codec import (
    MIN_REQUEST_SIZE,
    Disposition,
    FrameError,
    Request,
    disposition,
    response_type_for,
)
from streamkit.broker.config import BrokerConfig
from streamkit.broker.coordinators import Coordinators
from streamkit.broker.error_reply import error_response
from streamkit.broker.errors import ErrorCode
from streamkit.broker.framing import Connection
from streamkit.broker.group.consumer_group import ConsumerGroups, ConsumerSettings
from streamkit.broker.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
from streamkit.broker.group.group import GroupSettings
from streamkit.broker.group.runtime import GroupRuntime
from streamkit.broker.group_configs import GroupConfigStore
from streamkit.broker.handlers import HANDLERS
from streamkit.broker.inline import InlineConnection, Output
from streamkit.broker.internal_store import InternalStore
from streamkit.broker.markers import MarkerAppender
from streamkit.broker.memory import RequestMemory
from streamkit.broker.metrics import BrokerMetrics
from streamkit.broker.producers import ProducerIds
from streamkit.broker.security.authorizer import Authorizer, authorizer_enabled
from streamkit.broker.security.credentials import ScramCredentials
from streamkit.broker.security.jwks import JwksValidator
from streamkit.broker.security.quotas import ClientQuotas
from streamkit.broker.security.sasl import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    AuthenticationFailed,
    SaslSession,
)
from streamkit.broker.security.settings import ListenerSecurity
from streamkit.broker.security.throttling import MUTE_MS
from streamkit.broker.security.tls import TlsContext, ssl_principal
from streamkit.broker.security.zk_acls import ZkAclStore
from streamkit.broker.security.zk_quotas import ZkQuotaStore
from streamkit.broker.share.coordinator import ShareCoordinator, ShareSettings
from streamkit.broker.share.store import SHARE_STATE_TOPIC, ShareStateStore
from streamkit.broker.state import BrokerState, ClientInfo
from streamkit.broker.topics import TopicManager
from streamkit.broker.txn.coordinator import (
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinator,
    TxnSettings,
)
from streamkit.broker.waiters import AppendWaiters
from streamkit.dirlock import DirectoryLock
from streamkit.http import HttpServer
from streamkit.log.checkpoint import CHECKPOINT, CLEAN_SHUTDOWN, write_atomically
from streamkit.log.manager import LogManager
from streamkit.log.partition import wall_clock_ms
from streamkit.tasks import cancel_and_wait

__all__ = ["FAST_PATH_ENV", "Broker", "fast_path_enabled"]

log = logging.getLogger(__name__)

_READ_SIZE = 1 << 20
_PARTITION_DIR = re.compile(r"^.+-\d+$")
_YIELD_EVERY = 32
_SHARE_TICK_MS = 200
_TLS_HANDSHAKE_TIMEOUT_S = 10.0
_JWKS_CHECK_S = 1.0
# STREAMKIT_BROKER_FAST_PATH=0 answers every request through kio's generic codecs: the
# baseline broker_bench.py --latency measures the compiled codecs against, and the path the
# tests run both ways.
FAST_PATH_ENV = "STREAMKIT_BROKER_FAST_PATH"
# Answered inline without ever waiting (Metadata, ListOffsets, Heartbeat); their responses
# join the connection's pending output. A Fetch may long-poll and a Produce with acks=all
# may wait for replication, so the output is flushed before those and every other API.
_NEVER_WAIT = frozenset({2, 3, 12})


def fast_path_enabled() -> bool:
    """Whether the compiled codecs serve the hot APIs (``STREAMKIT_BROKER_FAST_PATH``)."""
    return os.environ.get(FAST_PATH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class _Peer:
    """One connection's identity: its listener, address and principal."""

    __slots__ = ("_client", "host", "listener", "principal", "session")

    def __init__(self, listener: ListenerSecurity, host: str, principal: str, session: SaslSession | None) -> None:
        self.listener = listener
        self.host = host
        self.principal = principal
        self.session = session
        self._client: ClientInfo | None = None

    def client(self, request: Request) -> ClientInfo:
        principal = self.session.principal if self.session is not None else self.principal
        client_id = request.client_id or ""
        known = self._client  # the same for every request of a connection, almost always
        if known is None or known.client_id != client_id or known.principal != principal:
            known = self._client = ClientInfo(client_id, self.host, principal, self.listener.name)
        return known


def _partitions(topics: TopicManager, topic: str, configured: int) -> int:
    """An internal topic's partition count: as it exists here, else as configured (a
    cluster member that has no replica of it yet)."""
    info = topics.get(topic)
    return info.partitions if info is not None else configured


def _cluster_id(meta_dir: Path) -> str:
    path = meta_dir / "cluster-id"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        cid = uuid.uuid4().hex[:22]
        meta_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(path, cid.encode())
        return cid


def _unclean_partitions(data_dir: Path) -> list[str]:
    """Partition directories without a clean-shutdown marker (or checkpoint): the ones the
    log recovers when it opens them. Checked before opening, which removes the markers."""
    if not data_dir.is_dir():
        return []
    return sorted(
        d.name for d in data_dir.iterdir()
        if d.is_dir() and _PARTITION_DIR.match(d.name) and any(d.glob("*.log"))
        and not ((d / CLEAN_SHUTDOWN).exists() and (d / CHECKPOINT).exists())
    )


class Broker:
    """A single-node Kafka-protocol broker over streamkit's partition log."""

    def __init__(self, data_dir: Path | str, config: BrokerConfig | None = None,
                 host: str = "127.0.0.1", port: int = 9092, fast_path: bool | None = None) -> None:
        """``fast_path``: compiled codecs and coalesced writes for the hot APIs (default:
        on unless ``STREAMKIT_BROKER_FAST_PATH=0``)."""
        self.data_dir = Path(data_dir)
        self.fast_path = fast_path_enabled() if fast_path is None else fast_path
        self.config = config or BrokerConfig()
        self.host = host
        self.requested_port = port
        self.state: BrokerState | None = None
        self._server: asyncio.Server | None = None  # the first listener's
        self._servers: dict[str, asyncio.Server] = {}
        self._tls: dict[str, TlsContext] = {}
        self._jwks: dict[str, JwksValidator] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._inline: set[InlineConnection] = set()  # PLAINTEXT connections on the fast path
        self.memory = RequestMemory(self.config.queued_max_request_bytes, _READ_SIZE)
        self._dir_lock = DirectoryLock(self.data_dir)
        self._metrics_http: HttpServer | None = None
        self._marker_sender: MarkerSender | None = None
        self._scram_sync: ScramSync | None = None
        self._acl_store: ZkAclStore | None = None
        self._quota_store: ZkQuotaStore | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the broker is not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def listener_ports(self) -> dict[str, int]:
        """Each listener's bound port, by listener name."""
        return {name: int(server.sockets[0].getsockname()[1]) for name, server in self._servers.items()}

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        # Bound first: a taken port must fail before the data directory is created or its
        # internal topics are. Serving starts only once the state below exists.
        try:
            self._tls = {sec.name: TlsContext(sec) for sec in self.config.listener_securities if sec.tls}
            self._jwks = {sec.name: JwksValidator(sec) for sec in self.config.listener_securities if sec.jwks}
            for validator in self._jwks.values():
                await asyncio.to_thread(validator.fetch)
            await self._bind()
        except BaseException:
            await self._close_servers()
            raise
        try:
            # Locked before anything is read: a second broker on the same directory would
            # "recover" partitions this one is appending to. DataDirectoryError names the path.
            self._dir_lock.acquire()
            await self._start()
        except BaseException:
            self._dir_lock.release()
            await self._close_servers()
            raise
        for server in self._servers.values():
            await server.start_serving()
        shown = ", ".join(f"{name}://{server.sockets[0].getsockname()[0]}:{port}"
                          for (name, port), server in zip(self.listener_ports.items(), self._servers.values(),
                                                          strict=True))
        log.info("streamkit broker %d listening on %s (data in %s)", self.config.node_id, shown, self.data_dir)

    async def _bind(self) -> None:
        """Bind every listener: the first on the broker's host and port (the command line
        wins over ``listeners`` there), the others where ``listeners`` says."""
        endpoints = {x.name: x for x in self.config.listener_endpoints}
        for i, sec in enumerate(self.config.listener_securities):
            if i == 0:
                host, port = self.host, self.requested_port
            else:
                host, port = endpoints[sec.name].host or "0.0.0.0", endpoints[sec.name].port
            if self.fast_path and not sec.tls and not sec.sasl:
                server = await asyncio.get_running_loop().create_server(
                    functools.partial(self._inline_connection, sec), host, port, reuse_address=True,
                    start_serving=False)
            else:
                server = await asyncio.start_server(functools.partial(self._serve, sec), host, port,
                                                    limit=_READ_SIZE, reuse_address=True, start_serving=False)
            self._servers[sec.name] = server
            if i == 0:
                self._server = server

    async def _close_servers(self) -> None:
        for server in self._servers.values():
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1)
        self._servers.clear()
        self._server = None

    def _advertised(self, state: BrokerState) -> dict[str, tuple[str, int]]:
        """Each listener's advertised address: the first one's as before (advertised host
        and port), the others' from advertised.listeners, else where they are bound."""
        out: dict[str, tuple[str, int]] = {}
        ports = self.listener_ports
        for i, sec in enumerate(self.config.listener_securities):
            if i == 0:
                out[sec.name] = (state.advertised_host, state.advertised_port)
                continue
            bound = next(x for x in self.config.listener_endpoints if x.name == sec.name)
            adv = self.config.advertised_for(sec.name)
            if adv is not None and adv.host:
                out[sec.name] = (adv.host, adv.port or ports[sec.name])
            else:
                out[sec.name] = (bound.host if bound.host not in ("", "0.0.0.0", "::") else self.host,
                                 ports[sec.name])
        return out

    async def _start(self) -> None:
        cfg = self.config
        clock = wall_clock_ms
        unclean = _unclean_partitions(self.data_dir)
        if unclean:
            shown = ", ".join(unclean[:5]) + (", ..." if len(unclean) > 5 else "")
            log.warning("unclean shutdown: recovering %d partitions (%s)", len(unclean), shown)
        elif any(_PARTITION_DIR.match(d.name) for d in self.data_dir.iterdir()):
            log.info("clean shutdown: no partition needs recovery")
        cluster_settings = ClusterSettings.from_config(cfg)
        # A cluster member's topics are the cluster's (in ZooKeeper); it opens the local
        # replicas it is assigned, and internal topics are created on first need. Its
        # partitions' high watermarks move with replication, not with appends.
        clustered = cluster_settings.enabled
        logs = LogManager(self.data_dir, clock, cfg.log_flush_offset_checkpoint_interval_ms,
                          cfg.log_cleaner_backoff_ms, replicated=clustered)
        topics = TopicManager(self.data_dir, cfg.topic_defaults, logs)
        topics.load(create_missing=not clustered)
        if not clustered and topics.get(OFFSETS_TOPIC) is None:
            topics.create(OFFSETS_TOPIC, cfg.offsets_topic_num_partitions, {
                "cleanup.policy": "compact", "segment.bytes": str(cfg.offsets_topic_segment_bytes)})
        settings = GroupSettings(cfg.group_initial_rebalance_delay_ms, cfg.group_min_session_timeout_ms,
                                 cfg.group_max_session_timeout_ms, cfg.group_max_size)
        if not clustered and topics.get(TRANSACTION_STATE_TOPIC) is None:
            topics.create(TRANSACTION_STATE_TOPIC, cfg.transaction_state_log_num_partitions, {
                "cleanup.policy": "compact",
                "segment.bytes": str(cfg.transaction_state_log_segment_bytes)})
        offsets_partitions = _partitions(topics, OFFSETS_TOPIC, cfg.offsets_topic_num_partitions)
        meta = self.data_dir / ".meta"
        group_configs = GroupConfigStore(meta, cfg)
        group_configs.load()
        consumer_groups = ConsumerGroups(
            ConsumerSettings(cfg.group_consumer_session_timeout_ms, cfg.group_consumer_heartbeat_interval_ms,
                             tuple(a.strip() for a in cfg.group_consumer_assignors.split(",") if a.strip()),
                             cfg.group_consumer_max_size, cfg.group_consumer_migration_policy),
            lambda: {name: info.partitions for name, info in topics.topics.items()}, clock,
            lambda g: (group_configs.get(g).consumer_session_timeout_ms,
                       group_configs.get(g).consumer_heartbeat_interval_ms))
        offsets_log = InternalStore(topics, OFFSETS_TOPIC)
        coordinator = GroupCoordinator(settings, offsets_partitions, offsets_log, clock, cfg.offset_metadata_max_bytes,
                                       consumer_groups,
                                       lambda: {name: info.topic_id for name, info in topics.topics.items()})
        groups = GroupRuntime(coordinator)
        # A cluster's brokers take their producer ids in blocks from ZooKeeper (``_join_cluster``).
        producer_ids: ProducerIds | ZkProducerIds = ZkProducerIds(cfg.node_id) if clustered else ProducerIds(meta)
        waiters = AppendWaiters()
        txn_log = InternalStore(topics, TRANSACTION_STATE_TOPIC)
        markers = MarkerAppender(topics, coordinator, waiters.notify, clock)
        txns = TransactionCoordinator(
            TxnSettings(cfg.transaction_max_timeout_ms, cfg.transactional_id_expiration_ms,
                        offsets_partitions, OFFSETS_TOPIC),
            _partitions(topics, TRANSACTION_STATE_TOPIC, cfg.transaction_state_log_num_partitions),
            txn_log, markers, producer_ids.next_id, clock)
        share_log = InternalStore(topics, SHARE_STATE_TOPIC)
        share = self._share_coordinator(topics, share_log, clock, group_configs.overrides, clustered)
        coordinators = Coordinators(groups, txns, share, offsets_log, txn_log, share_log,
                                    cfg.offsets_commit_timeout_ms, cfg.request_timeout_ms)
        if not clustered:
            coordinators.load_all()  # a single broker coordinates every partition
        self.state = BrokerState(cfg, _cluster_id(meta), self.host, self.port, logs, topics, groups,
                                 producer_ids, waiters, clock, txns, group_configs, share, coordinators, markers)
        self.state.listeners = self._advertised(self.state)
        self.state.scram = ScramCredentials(meta)
        self.state.scram.load()
        # A cluster's quotas are in ZooKeeper (loaded once it has joined), a broker's on disk.
        self.state.quotas = ClientQuotas(None if clustered else meta, cfg.quota_window_num,
                                         cfg.quota_window_size_seconds)
        self.state.quotas.load()
        if authorizer_enabled(cfg.authorizer_class_name):
            # A cluster's ACLs are in ZooKeeper (loaded once it has joined), a broker's on disk.
            self.state.authorizer = Authorizer(None if clustered else meta, cfg.super_users,
                                               cfg.allow_everyone_if_no_acl_found)
            self.state.authorizer.load()
        if cfg.metrics_listener:
            await self._serve_metrics(cfg.metrics_listener)
        if clustered:
            await self._join_cluster(cluster_settings)
            await self._cluster_security()
        groups.start()
        if cfg.log_cleaner_enable:
            logs.start_cleaner()
        self._tasks = [
            asyncio.create_task(self._every(cfg.log_retention_check_interval_ms, logs.apply_retention),
                                name="streamkit-retention"),
            asyncio.create_task(self._every(cfg.log_flush_scheduler_interval_ms, logs.flush_due),
                                name="streamkit-flush"),
            asyncio.create_task(self._every(cfg.producer_id_expiration_check_interval_ms,
                                            self._expire_producers),
                                name="streamkit-producer-expiration"),
            # On the event loop, not a thread: the coordinator is the handlers' too.
            asyncio.create_task(self._every_on_loop(
                cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms, txns.abort_timed_out),
                name="streamkit-txn-timeouts"),
            asyncio.create_task(self._every_on_loop(
                cfg.transaction_remove_expired_transaction_cleanup_interval_ms, txns.expire_ids),
                name="streamkit-txn-expiration"),
            # Lock expiry and member timeouts also run on every share request; this makes
            # them happen while nobody asks, so a dead member's records free up in time.
            asyncio.create_task(self._every_on_loop(_SHARE_TICK_MS, self._share_tick),
                                name="streamkit-share-expiry"),
        ]
        if self._jwks:
            self._tasks.append(asyncio.create_task(self._refresh_jwks(), name="streamkit-jwks"))

    async def _serve_metrics(self, listener: str) -> None:
        state = self.state
        assert state is not None
        match = re.fullmatch(r"(?:https?://)?\[?([^\]/]*)\]?:(\d+)/?", listener.strip())
        if match is None:
            raise ValueError(f"metrics.listener must be http://host:port, not {listener!r}")
        state.metrics = BrokerMetrics()
        state.metrics.state = state
        self._metrics_http = HttpServer(state.metrics.app(), match[1] or "0.0.0.0", int(match[2]), "the metrics")
        await self._metrics_http.start()
        log.info("metrics on %s/metrics", self._metrics_http.url)

    @property
    def metrics_port(self) -> int | None:
        return None if self._metrics_http is None else self._metrics_http.port

    async def _join_cluster(self, settings: ClusterSettings) -> None:
        state = self.state
        assert state is not None
        host, port = state.listeners.get(self.config.inter_broker_name) or (state.advertised_host,
                                                                             state.advertised_port)
        node = ClusterNode(settings, state.topics, host, port, state.clock, state.waiters.notify, state.cluster_id)
        node.endpoints = tuple(f"{name}://{h}:{p}" for name, (h, p) in state.listeners.items())
        state.cluster = node
        self._coordinate_leaders(state, node)
        try:
            await node.start()
            if isinstance(state.producer_ids, ZkProducerIds):
                await state.producer_ids.start(node.zk)
            if state.scram is not None:
                self._scram_sync = ScramSync(node.zk, state.scram)
                await self._scram_sync.start()
        except BaseException:
            await node.stop()
            raise
        state.cluster_id = node.cluster_id

    async def _cluster_security(self) -> None:
        """A cluster member's ACLs and client quotas are the cluster's, in ZooKeeper."""
        state = self.state
        assert state is not None and state.cluster is not None and state.quotas is not None
        self._quota_store = ZkQuotaStore(state.cluster.zk, state.quotas.replace)
        await self._quota_store.start()
        state.quotas.remote = self._quota_store
        if state.authorizer is None:
            return
        self._acl_store = ZkAclStore(state.cluster.zk, state.authorizer.replace)
        await self._acl_store.start()
        state.authorizer.remote = self._acl_store

    def _coordinate_leaders(self, state: BrokerState, node: ClusterNode) -> None:
        """A cluster member coordinates the internal-topic partitions it leads: their
        stores append as leader, transaction markers go to partition leaders, and each
        leadership change loads or drops a coordinator partition."""
        coordinators = state.coordinators
        for store in (coordinators.offsets_log, coordinators.txn_log, coordinators.share_log):
            store.attach(node.replicas, state.waiters.notify)
        state.markers.replicas = node.replicas
        sender = MarkerSender(node.broker_id, node.metadata, node.replicas, state.txns, coordinators.txn_log,
                              state.markers, self.config.request_timeout_ms)
        state.txns.send_markers = sender
        coordinators.txn_partition_dropped = sender.stop_partition
        self._marker_sender = sender

        def leadership(topic: str, partition: int, leading: bool) -> None:
            if leading and (count := node.metadata.partition_count(topic)):
                coordinators.partition_count(topic, count)
            coordinators.leadership(topic, partition, leading)

        node.replicas.leadership_listeners.append(leadership)

    def _share_coordinator(self, topics: TopicManager, share_log: InternalStore, clock: Callable[[], int],
                           group_configs: Callable[[str], Mapping[str, str]], clustered: bool) -> ShareCoordinator:
        cfg = self.config
        if not clustered and topics.get(SHARE_STATE_TOPIC) is None:
            topics.create(SHARE_STATE_TOPIC, cfg.share_coordinator_state_topic_num_partitions, {
                "cleanup.policy": "compact", "segment.bytes": str(cfg.offsets_topic_segment_bytes)})
        settings = ShareSettings(cfg.group_share_record_lock_duration_ms, cfg.group_share_delivery_count_limit,
                                 cfg.group_share_session_timeout_ms, cfg.group_share_heartbeat_interval_ms,
                                 cfg.group_share_partition_max_record_locks)
        store = ShareStateStore(share_log,
                                _partitions(topics, SHARE_STATE_TOPIC, cfg.share_coordinator_state_topic_num_partitions),
                                clock)
        return ShareCoordinator(settings, store, clock, group_configs)

    async def stop(self) -> None:
        """Stop serving, then close every log cleanly (flush, checkpoint, clean marker). A
        cluster member first hands its leaderships over (controlled shutdown) while it still
        serves, then leaves the cluster."""
        if self._scram_sync is not None:
            await self._scram_sync.stop()
        for store in (self._acl_store, self._quota_store):
            if store is not None:
                await store.stop()
        if self.state is not None and self.state.cluster is not None:
            await self.state.cluster.stop()
            if self._marker_sender is not None:
                await self._marker_sender.stop()
            if isinstance(self.state.producer_ids, ZkProducerIds):
                await self.state.producer_ids.stop()
        if self.state is not None:
            await self.state.coordinators.stop()
        for server in self._servers.values():
            server.close()
        if self._metrics_http is not None:
            await self._metrics_http.stop()
            self._metrics_http = None
        inline = list(self._inline)
        for connection in inline:
            connection.close()
        await cancel_and_wait([*self._tasks, *self._connections,
                               *(c.task for c in inline if c.task is not None)])
        self._tasks.clear()
        if self.state is not None:
            await self.state.groups.stop()
            self.state.logs.close()
        await self._close_servers()
        self._dir_lock.release()
        log.info("streamkit broker stopped")

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def _refresh_jwks(self) -> None:
        """Fetch each JWKS when due: every sasl.oauthbearer.jwks.endpoint.refresh.ms, and soon
        after a token named a key it does not have."""
        while True:
            await asyncio.sleep(_JWKS_CHECK_S)
            for validator in self._jwks.values():
                if validator.due_ms <= wall_clock_ms():
                    await asyncio.to_thread(validator.fetch)

    def _share_tick(self) -> None:
        assert self.state is not None
        self.state.share.expire_members()
        self.state.share.expire_locks()

    def _expire_producers(self) -> None:
        assert self.state is not None
        expiration_ms = self.config.producer_id_expiration_ms
        for (topic, partition), plog in self.state.logs.items():
            try:
                if removed := plog.expire_producers(expiration_ms):
                    log.info("expired %d idle producer(s) of %s-%d", removed, topic, partition)
            except ValueError:
                continue  # closed by a concurrent delete

    @staticmethod
    async def _every_on_loop(interval_ms: int, work: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                work()
            except Exception:
                log.exception("periodic %s failed", getattr(work, "__name__", work))

    @staticmethod
    async def _every(interval_ms: int, work: object) -> None:
        assert callable(work)
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await asyncio.to_thread(work)
            except Exception:
                log.exception("periodic %s failed", getattr(work, "__name__", work))

    # -- connections -----------------------------------------------------------------------

    def _inline_connection(self, listener: ListenerSecurity) -> InlineConnection:
        return InlineConnection(self._answer, lambda host: _Peer(listener, host, "User:ANONYMOUS", None),
                                self.memory, self.config.socket_request_max_bytes, self._inline, _YIELD_EVERY)

    async def _serve(self, listener: ListenerSecurity, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer_address = writer.get_extra_info("peername")
        host = str(peer_address[0]) if peer_address else ""
        max_request = self.config.socket_request_max_bytes
        # Before SASL authentication only small requests are read (sasl.server.max.receive.size):
        # an unauthenticated peer cannot make the broker buffer a huge frame.
        conn = Connection(max(min(max_request, listener.max_receive_size), MIN_REQUEST_SIZE)
                          if listener.sasl else max_request)
        conn.fast_path = self.fast_path
        memory = self.memory
        out = Output(writer, self.fast_path)
        try:
            peer = await self._peer(listener, host, writer)
            if peer is None:
                return
            while True:
                # Back-pressure: no read until the request memory budget has room.
                data = await reader.read(memory.try_reserve(conn) or await memory.reserve(conn))
                if not data:
                    return
                conn.receive_data(data)
                memory.hold(conn, conn.buffered)  # complete requests stay charged until answered
                handled = 0
                while True:
                    if peer.session is not None and peer.session.raw_tokens:
                        if (token := conn.next_frame()) is None:
                            break
                        if not await self._raw_token(conn, token, out, peer):
                            return
                        continue
                    if (request := conn.next_request()) is None:
                        break
                    if not await self._answer(conn, request, out, peer):
                        return
                    handled += 1
                    if handled % _YIELD_EVERY == 0:
                        # A client pipelining many small requests must not starve the other
                        # connections (or the long-polling fetches waiting for its appends).
                        await out.drain()
                        await asyncio.sleep(0)
                memory.hold(conn, conn.buffered, completed=handled > 0)
                await out.drain()
        except FrameError as exc:
            log.warning("closing connection from %s: %s", host, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Broker shutdown. This task is the connection's top level: ending normally keeps
            # asyncio's stream server from logging the cancellation as an error.
            pass
        finally:
            with contextlib.suppress(Exception):
                out.flush()  # what was answered before a close still goes out
            memory.release(conn)
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _peer(self, listener: ListenerSecurity, host: str, writer: asyncio.StreamWriter) -> _Peer | None:
        """The connection's TLS handshake (on a TLS listener) and its identity so far;
        None when the handshake failed (logged, the connection is closed)."""
        principal = "User:ANONYMOUS"
        if listener.tls:
            try:
                await writer.start_tls(self._tls[listener.name].current(),
                                       ssl_handshake_timeout=_TLS_HANDSHAKE_TIMEOUT_S)
            except (ssl.SSLError, ConnectionError, TimeoutError, OSError) as exc:
                log.info("TLS handshake with %s on listener %s failed: %s", host, listener.name, exc)
                return None
            principal = ssl_principal(writer.get_extra_info("ssl_object"))
        session = None
        if listener.sasl:
            assert self.state is not None
            session = SaslSession(listener, self.state.scram, jwks=self._jwks.get(listener.name))
        return _Peer(listener, host, principal, session)

    def _may_wait(self, request: Request) -> bool:
        """Whether this request's handler may suspend (long-poll, replication, a quota's
        mute): the output pending before it is flushed first, so that nothing answered
        waits behind it."""
        assert self.state is not None
        if self.state.quotas is not None and self.state.quotas.active:
            return True
        if request.api_key in _NEVER_WAIT:
            return False
        if request.api_key == 0:
            return self.state.cluster is not None and int(request.body.acks) == -1
        return True

    async def _answer(self, conn: Connection, request: Request, writer: Output, peer: _Peer) -> bool:
        """Handle one request; False means close the connection."""
        host = peer.host
        kind = disposition(request)
        if kind is Disposition.REJECT_API_VERSIONS:
            writer.write(conn.encode_unsupported_api_versions(request))
            return True
        if kind is Disposition.REJECT_PRODUCE:
            writer.write(conn.encode_unsupported_produce(request))
            return True
        if kind is Disposition.CLOSE:
            log.warning("closing connection from %s: unsupported api %d v%d", host,
                        request.api_key, request.api_version)
            return False
        if request.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return await self._sasl(conn, request, writer, peer)
        if peer.session is not None and not peer.session.allows(request.api_key):
            reason = ("its SASL session expired (connections.max.reauth.ms)" if peer.session.authenticated
                      else "before SASL authentication")
            log.warning("closing connection from %s: api %d %s on listener %s", host, request.api_key, reason,
                        peer.listener.name)
            return False
        handler = HANDLERS.get(request.api_key)
        assert self.state is not None
        if handler is None:
            log.warning("no handler for api %d; closing connection from %s", request.api_key, host)
            return False
        if not writer.coalesce or self._may_wait(request):
            writer.flush()
        try:
            reply = await handler(self.state, request, peer.client(request))
            if reply is None:
                conn.discard(request)
                return True
            writer.write(conn.encode_reply(request, reply))
            if mute_ms := reply.get(MUTE_MS, 0):
                # A client over its quota: answered, then nothing more is read from it for
                # the throttle time (Kafka mutes the channel, KIP-219).
                await writer.drain()
                await asyncio.sleep(mute_ms / 1000)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("api %d v%d (correlation id %d) from %s failed", request.api_key,
                          request.api_version, request.correlation_id, host)
            return self._answer_failure(conn, request, writer, host)
        return True

    async def _sasl(self, conn: Connection, request: Request, writer: Output, peer: _Peer) -> bool:
        """SaslHandshake / SaslAuthenticate. A refused mechanism or a failed login is
        answered with its error (after connection.failed.authentication.delay.ms for a
        failed login), then the connection closes, as in Kafka."""
        session = peer.session
        kind = response_type_for(request)
        if request.api_key == SASL_HANDSHAKE:
            code = (session.handshake(str(request.body.mechanism), request.api_version) if session is not None
                    else ErrorCode.illegal_sasl_state)
            mechanisms = list(session.sec.mechanisms) if session is not None else []
            writer.write(conn.encode_response(request, build(kind, {"error_code": code, "mechanisms": mechanisms})))
            if code is not ErrorCode.none:
                log.info("closing connection from %s: SaslHandshake %s refused (%s) on listener %s", peer.host,
                         request.body.mechanism, code.name, peer.listener.name)
            return code is ErrorCode.none
        if session is None:
            writer.write(conn.encode_response(request, build(kind, {
                "error_code": ErrorCode.illegal_sasl_state, "auth_bytes": b"",
                "error_message": f"listener {peer.listener.name} does not use SASL"})))
            return False
        try:
            answer = session.authenticate(bytes(request.body.auth_bytes))
        except AuthenticationFailed as exc:
            await self._failed_login(peer, exc)
            writer.write(conn.encode_response(request, build(kind, {
                "error_code": ErrorCode.sasl_authentication_failed, "error_message": str(exc), "auth_bytes": b""})))
            return False
        writer.write(conn.encode_response(request, build(kind, {
            "error_code": ErrorCode.none, "error_message": None, "auth_bytes": answer,
            "session_lifetime": session.lifetime_ms if session.authenticated and not session.reauthenticating
            else 0})))
        if session.authenticated:
            conn.max_request_size = self.config.socket_request_max_bytes
        return True

    async def _raw_token(self, conn: Connection, token: bytes, writer: Output, peer: _Peer) -> bool:
        """A bare SASL token (after SaslHandshake v0): its answer goes back bare; a failed
        login closes the connection (v0 has no way to carry the error)."""
        session = peer.session
        assert session is not None
        try:
            answer = session.authenticate(token)
        except AuthenticationFailed as exc:
            await self._failed_login(peer, exc)
            return False
        writer.write(Connection.encode_frame(answer))
        if session.authenticated:
            conn.max_request_size = self.config.socket_request_max_bytes
        return True

    @staticmethod
    async def _failed_login(peer: _Peer, exc: AuthenticationFailed) -> None:
        log.info("failed SASL authentication from %s on listener %s: %s", peer.host, peer.listener.name, exc)
        # Kafka's connection.failed.authentication.delay.ms: slows down password guessing.
        await asyncio.sleep(peer.listener.failed_authentication_delay_ms / 1000)

    @staticmethod
    def _answer_failure(conn: Connection, request: Request, writer: Output, host: str) -> bool:
        """A handler bug costs the client one request, not its connection: answer with
        UNKNOWN_SERVER_ERROR wherever the response has an error code (Kafka does the same)."""
        # A Produce with acks=0 expects no response at all: closing is the only signal left
        # (what Kafka does for any failed acks=0 produce).
        expects_reply = not (request.api_key == 0 and int(request.body.acks) == 0)
        try:
            body = error_response(request) if expects_reply else None
            if body is not None:
                writer.write(conn.encode_response(request, body))
                return True
        except Exception:
            log.exception("could not build an error response for api %d v%d", request.api_key,
                          request.api_version)
        log.warning("closing connection from %s: no error response for api %d v%d", host,
                    request.api_key, request.api_version)
        return False
