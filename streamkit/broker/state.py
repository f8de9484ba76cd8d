"""Everything a request handler may touch, in one object passed explicitly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamkit.broker.config import BrokerConfig
from streamkit.broker.coordinators import Coordinators
from streamkit.broker.group.coordinator import GroupCoordinator
from streamkit.broker.group.runtime import GroupRuntime
from streamkit.broker.group_configs import GroupConfigStore
from streamkit.broker.markers import MarkerAppender
from streamkit.broker.producers import ProducerIdSource
from streamkit.broker.security.credentials import ScramCredentials
from streamkit.broker.share.coordinator import ShareCoordinator
from streamkit.broker.topics import TopicManager
from streamkit.broker.txn.coordinator import TransactionCoordinator
from streamkit.broker.waiters import AppendWaiters
from streamkit.log.manager import LogManager

if TYPE_CHECKING:
    from streamkit.broker.cluster.node import ClusterNode
    from streamkit.broker.metrics import BrokerMetrics
    from streamkit.broker.security.authorizer import Authorizer
    from streamkit.broker.security.quotas import ClientQuotas

__all__ = ["BrokerState", "ClientInfo"]


@dataclass(slots=True)
class BrokerState:
    config: BrokerConfig
    cluster_id: str
    host: str
    port: int
    logs: LogManager
    topics: TopicManager
    groups: GroupRuntime
    producer_ids: ProducerIdSource
    waiters: AppendWaiters
    clock: Callable[[], int]
    txns: TransactionCoordinator
    # per-group configs (GROUP resource): group_configs.get(group_id) gives the effective ones
    group_configs: GroupConfigStore
    share: ShareCoordinator
    # Which internal-topic partitions the coordinators own, and their durable writes.
    coordinators: Coordinators
    # Writes transaction markers into this broker's partitions (WriteTxnMarkers).
    markers: MarkerAppender
    # This broker's cluster membership (zookeeper.connect); None for a single broker.
    cluster: ClusterNode | None = None
    metrics: BrokerMetrics | None = None
    # Each listener's advertised (host, port), for Metadata and FindCoordinator answers
    # to a client connected on it; the SCRAM credentials (AlterUserScramCredentials).
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)
    scram: ScramCredentials | None = None
    # The ACL authorizer (authorizer.class.name); None: every request is allowed.
    authorizer: Authorizer | None = None
    # Client quotas (AlterClientQuotas), durable; None only in tests that build a bare state.
    quotas: ClientQuotas | None = None

    @property
    def coordinator(self) -> GroupCoordinator:
        return self.groups.coordinator

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def advertised_host(self) -> str:
        return self.config.advertised_host or self.host

    @property
    def advertised_port(self) -> int:
        return self.config.advertised_port or self.port

    def address_for(self, listener: str) -> tuple[str, int]:
        """The advertised address of ``listener`` (the first listener's for an unknown one)."""
        return self.listeners.get(listener) or (self.advertised_host, self.advertised_port)


@dataclass(frozen=True, slots=True)
class ClientInfo:
    client_id: str
    host: str
    # Who the connection authenticated as (Kafka's KafkaPrincipal, "User:alice").
    principal: str = "User:ANONYMOUS"
    # The listener it connected on (Metadata answers with that listener's addresses).
    listener: str = ""
