"""The broker's Prometheus metrics, served at ``/metrics`` on ``metrics.listener``.

Kafka exposes these through JMX (``kafka.server:type=ReplicaManager,...``,
``kafka.controller:type=KafkaController,...``); here they are Prometheus text, under names
that say the same: the partitions this broker leads and those of them short of in-sync
replicas, whether it is the active controller, and the cluster's offline and
under-replicated partitions as its metadata shows them. Gauges are computed when scraped
(nothing on the request path but two counters).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, make_asgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from streamkit.broker.cluster.replica import Role

if TYPE_CHECKING:
    from streamkit.broker.state import BrokerState

__all__ = ["BrokerMetrics"]


class BrokerMetrics:
    """One broker's registry (several brokers may share a process, as in tests)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.fetches = Counter("streamkit_broker_fetch_requests", "Fetch requests, by who sent them",
                               ["source"], registry=self.registry)
        self.produces = Counter("streamkit_broker_produce_requests", "Produce requests", registry=self.registry)
        self.state: BrokerState | None = None
        self.registry.register(_StateCollector(self))

    def app(self) -> object:
        return make_asgi_app(registry=self.registry)


class _StateCollector(Collector):
    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        state = self.metrics.state
        if state is None:
            return
        cluster = state.cluster
        hosted = leading = under = 0
        controller = 1
        if cluster is None:
            hosted = leading = sum(1 for _ in state.logs.items())
        else:
            controller = int(cluster.controller is not None)
            for replica in cluster.replicas.replicas.values():
                hosted += 1
                if replica.role is Role.LEADER:
                    leading += 1
                    under += len(replica.isr) < len(replica.replicas)
        yield _gauge("streamkit_broker_partitions", "Partition replicas on this broker", hosted)
        yield _gauge("streamkit_broker_leader_partitions", "Partitions this broker leads", leading)
        yield _gauge("streamkit_broker_under_replicated_partitions",
                     "Partitions this broker leads with fewer in-sync replicas than replicas", under)
        yield _gauge("streamkit_broker_active_controller", "1 on the controller", controller)
        if cluster is not None:
            status = cluster.describe()
            yield _gauge("streamkit_cluster_brokers", "Live brokers", len(status.brokers))
            yield _gauge("streamkit_cluster_under_replicated_partitions",
                         "Partitions of the cluster with fewer in-sync replicas than replicas",
                         len(status.under_replicated))
            yield _gauge("streamkit_cluster_offline_partitions", "Partitions of the cluster without a live leader",
                         len(status.offline))
            replicas = cluster.replicas
            yield _counter("streamkit_broker_isr_shrinks", "ISR shrinks this broker made as leader", replicas.isr_shrinks)
            yield _counter("streamkit_broker_isr_expands", "ISR expansions this broker made as leader",
                           replicas.isr_expands)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc)
    family.add_metric([], value)
    return family


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc)
    family.add_metric([], value)
    return family
