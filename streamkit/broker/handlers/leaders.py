"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: moving leaders and
replicas (``kafka-leader-election.sh``, ``kafka-reassign-partitions.sh``).

In a cluster any broker takes them: it checks what it can (the partition exists, the
brokers are registered, an election is needed), hands the work to the controller through
ZooKeeper's ``/admin`` nodes as Kafka's ZooKeeper mode does, and for an election waits (up
to the request's timeout) until the metadata shows the new leader. A single broker has one
replica of everything: no election is ever needed, and the only assignment is itself.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from streamkit.broker.cluster.zkdata import PREFERRED_ELECTION, REASSIGN, decode_json
from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.handlers.common import Reply, field
from streamkit.broker.state import BrokerState, ClientInfo

if TYPE_CHECKING:
    from streamkit.broker.cluster.node import ClusterNode

__all__ = ["alter_partition_reassignments", "elect_leaders", "list_partition_reassignments"]

_PREFERRED, _UNCLEAN = 0, 1
TP = tuple[str, int]


# -- ElectLeaders -----------------------------------------------------------------------------


def _wanted(state: BrokerState, body: Any) -> list[TP]:
    requested = field(body, "topic_partitions")
    if requested is not None:
        return [(t.topic, int(p)) for t in requested for p in t.partitions]
    if state.cluster is not None:
        md = state.cluster.metadata
        return sorted((t, p) for t, a in md.topics.items() for p in a.partitions)
    return sorted((t, p) for t, info in state.topics.topics.items() for p in range(info.partitions))


def _election_check(cluster: ClusterNode | None, state: BrokerState, tp: TP, kind: int) -> tuple[ErrorCode, str | None]:
    """NONE when an election is to be made; else the answer for the partition."""
    topic, partition = tp
    if cluster is None:
        info = state.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return ErrorCode.unknown_topic_or_partition, None
        return ErrorCode.election_not_needed, "a single broker leads all its partitions"
    md = cluster.metadata
    replicas = md.replicas(topic, partition)
    s = md.states.get(tp)
    if not replicas or s is None:
        return ErrorCode.unknown_topic_or_partition, None
    if kind == _PREFERRED:
        preferred = replicas[0]
        if s.leader == preferred:
            return ErrorCode.election_not_needed, f"broker {preferred}, the preferred leader, leads it"
        if preferred not in md.brokers or preferred not in s.isr:
            return ErrorCode.preferred_leader_not_available, (
                f"the preferred leader, broker {preferred}, is {'down' if preferred not in md.brokers else 'not in sync'}")
        return ErrorCode.none, None
    if s.leader in md.brokers:
        return ErrorCode.election_not_needed, f"broker {s.leader} leads it"
    if not any(r in md.brokers for r in replicas):
        return ErrorCode.eligible_leaders_not_available, "none of its replicas is up"
    return ErrorCode.none, None


def _elected(cluster: ClusterNode, tp: TP, kind: int) -> bool:
    md = cluster.metadata
    s = md.states.get(tp)
    if s is None:
        return False
    replicas = md.replicas(*tp)
    return s.leader == replicas[0] if kind == _PREFERRED else s.leader in md.brokers


async def elect_leaders(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    kind = int(field(body, "election_type", _PREFERRED))
    timeout_ms = int(body.timeout.total_seconds() * 1000)
    cluster = state.cluster
    results: dict[TP, tuple[ErrorCode, str | None]] = {}
    pending: list[TP] = []
    if kind not in (_PREFERRED, _UNCLEAN):
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "replica_election_results": []}
    for tp in _wanted(state, body):
        results[tp] = _election_check(cluster, state, tp, kind)
        if results[tp][0] == ErrorCode.none:
            pending.append(tp)
    if pending:
        assert cluster is not None
        await _request_election(cluster, pending, kind)
        deadline = time.monotonic() + timeout_ms / 1000
        while time.monotonic() < deadline and not all(_elected(cluster, tp, kind) for tp in pending):
            await asyncio.sleep(0.02)
        for tp in pending:
            if not _elected(cluster, tp, kind):
                results[tp] = (ErrorCode.request_timed_out, "the election did not complete within the timeout")
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (code, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": partition, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}


async def _request_election(cluster: ClusterNode, partitions: list[TP], kind: int) -> None:
    """Add ``partitions`` to the controller's pending election request (Kafka's
    ``/admin/preferred_replica_election``; ``election_type`` 1 asks for an unclean one)."""
    entries = [{"topic": t, "partition": p, "election_type": kind} for t, p in partitions]
    await _merge_admin_node(cluster, PREFERRED_ELECTION, entries)


async def _merge_admin_node(cluster: ClusterNode, path: str, entries: list[dict[str, Any]]) -> None:
    """Create ``path`` with ``entries``, or add them to the request already there (one the
    controller has not taken yet), by compare-and-set."""
    zk = cluster.zk
    while True:
        got = await zk.get(path)
        if got is None:
            if await zk.create(path, json.dumps({"version": 1, "partitions": entries}).encode()):
                return
            continue
        current = decode_json(got[0]) or {}
        merged = {(e["topic"], e["partition"]): e for e in current.get("partitions", [])}
        merged.update({(e["topic"], e["partition"]): e for e in entries})
        if await zk.compare_and_set(path, json.dumps({"version": 1, "partitions": list(merged.values())}).encode(), got[1]):
            return


# -- reassignments ----------------------------------------------------------------------------


def _reassignment_error(state: BrokerState, topic: str, partition: int,
                        replicas: tuple[int, ...] | None) -> tuple[ErrorCode, str | None]:
    cluster = state.cluster
    if cluster is None:
        info = state.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return ErrorCode.unknown_topic_or_partition, None
        if replicas is None:
            return ErrorCode.no_reassignment_in_progress, None
        if replicas != (state.node_id,):
            return ErrorCode.invalid_replica_assignment, f"this single broker, {state.node_id}, holds every replica"
        return ErrorCode.none, None
    md = cluster.metadata
    assignment = md.topics.get(topic)
    if assignment is None or partition not in assignment.partitions:
        return ErrorCode.unknown_topic_or_partition, None
    if replicas is None:
        if partition not in assignment.adding and partition not in assignment.removing:
            return ErrorCode.no_reassignment_in_progress, None
        return ErrorCode.none, None
    if not replicas:
        return ErrorCode.invalid_replica_assignment, "a partition needs at least one replica"
    if len(set(replicas)) != len(replicas):
        return ErrorCode.invalid_replica_assignment, "a broker is listed twice"
    unknown = [r for r in replicas if r not in md.brokers]
    if unknown:
        return ErrorCode.invalid_replica_assignment, f"broker(s) {unknown} are not registered"
    return ErrorCode.none, None


async def alter_partition_reassignments(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    responses = []
    entries: list[dict[str, Any]] = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            replicas = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            code, message = _reassignment_error(state, topic.name, int(p.partition_index), replicas)
            partitions.append({"partition_index": p.partition_index, "error_code": code, "error_message": message})
            if code == ErrorCode.none and state.cluster is not None:
                entries.append({"topic": topic.name, "partition": int(p.partition_index),
                                "replicas": None if replicas is None else list(replicas)})
        responses.append({"name": topic.name, "partitions": partitions})
    if entries:
        assert state.cluster is not None
        await _merge_admin_node(state.cluster, REASSIGN, entries)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "responses": responses}


async def list_partition_reassignments(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    cluster = state.cluster
    topics: list[dict[str, Any]] = []
    if cluster is not None:
        requested = field(req.body, "topics")
        wanted = None if requested is None else {t.name: set(int(p) for p in t.partition_indexes) for t in requested}
        for name, assignment in sorted(cluster.metadata.topics.items()):
            if wanted is not None and name not in wanted:
                continue
            moving = sorted(set(assignment.adding) | set(assignment.removing))
            partitions = [{"partition_index": p, "replicas": list(assignment.partitions[p]),
                           "adding_replicas": list(assignment.adding.get(p, ())),
                           "removing_replicas": list(assignment.removing.get(p, ()))}
                          for p in moving if wanted is None or p in wanted[name]]
            if partitions:
                topics.append({"name": name, "partitions": partitions})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "topics": topics}
