"""What a broker answers Metadata with from its picture of the cluster, without a
cluster: a partition state not read again since a new ZooKeeper session began names no
leader (the broker may have missed leader changes while its session was gone)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from streamkit.broker.cluster.metadata import ClusterMetadata, MetadataSync
from streamkit.broker.cluster.zk import SessionEvent
from streamkit.broker.cluster.zkdata import BrokerRegistration, PartitionState, TopicAssignment
from streamkit.broker.errors import ErrorCode
from streamkit.broker.handlers.cluster import _cluster_topic


def _metadata() -> ClusterMetadata:
    md = ClusterMetadata()
    md.brokers = {b: BrokerRegistration(b, "127.0.0.1", 9092 + b) for b in range(3)}
    md.topics = {"t": TopicAssignment(uuid.uuid4(), {0: (0, 1, 2), 1: (1, 2, 0)})}
    md.states = {("t", 0): PartitionState(0, 0, (0, 1, 2), 1), ("t", 1): PartitionState(1, 0, (1, 2, 0), 1)}
    return md


def _answer(md: ClusterMetadata) -> dict[int, dict[str, Any]]:
    topic = _cluster_topic(SimpleNamespace(metadata=md), "t")  # type: ignore[arg-type]
    return {p["partition_index"]: p for p in topic["partitions"]}


class _Zk:
    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def on_session(self, listener: Any) -> None:
        self.listeners.append(listener)


def test_a_new_session_leaves_every_partition_without_a_leader_until_its_state_is_read_again() -> None:
    md = _metadata()
    zk = _Zk()
    MetadataSync(zk, md, SimpleNamespace())  # type: ignore[arg-type]
    assert {p: a["leader_id"] for p, a in _answer(md).items()} == {0: 0, 1: 1}
    for listener in zk.listeners:
        listener(SessionEvent("connected", new_session=True))
    answer = _answer(md)
    assert {p: (a["leader_id"], a["error_code"]) for p, a in answer.items()} == {
        0: (-1, ErrorCode.leader_not_available), 1: (-1, ErrorCode.leader_not_available)}
    md.unconfirmed.discard(("t", 1))  # what reading the state again does
    assert _answer(md)[1]["leader_id"] == 1
    assert _answer(md)[0]["leader_id"] == -1


def test_a_reconnect_within_the_session_keeps_the_leaders() -> None:
    md = _metadata()
    zk = _Zk()
    MetadataSync(zk, md, SimpleNamespace())  # type: ignore[arg-type]
    for listener in zk.listeners:
        listener(SessionEvent("connected", new_session=False))
    assert {p: a["leader_id"] for p, a in _answer(md).items()} == {0: 0, 1: 1}
