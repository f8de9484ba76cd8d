"""The cluster's settings, read once from the broker's (Kafka's names, Kafka's defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ClusterSettings"]


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    broker_id: int
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int = 18_000
    broker_rack: str | None = None
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    offsets_topic_replication_factor: int = 3
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    unclean_leader_election_enable: bool = False
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_ms: int = 1_000
    replica_socket_timeout_ms: int = 30_000
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    leader_replication_throttled_rate: int = 2**63 - 1
    follower_replication_throttled_rate: int = 2**63 - 1

    @classmethod
    def from_config(cls, config: Any) -> ClusterSettings:
        """From a ``BrokerConfig`` (its field of each setting, where it has one)."""
        values: dict[str, Any] = {"broker_id": int(config.node_id),
                                  "zookeeper_connect": str(getattr(config, "zookeeper_connect", "") or "")}
        for name in cls.__dataclass_fields__:
            if name in values:
                continue
            value = getattr(config, name, None)
            if value is not None:
                values[name] = value
        rack = values.get("broker_rack")
        values["broker_rack"] = rack or None
        values["zookeeper_connection_timeout_ms"] = int(config.zookeeper_connection_timeout)
        return cls(**values)

    @property
    def enabled(self) -> bool:
        return bool(self.zookeeper_connect)
