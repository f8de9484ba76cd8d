"""Leader election among registry processes through a Kafka consumer group
(``schema.registry.group.id``), as Confluent's registry does it: each member states its
URL and whether it may lead (``leader.eligibility``) in its join metadata; the group's
assignor picks one eligible member and tells every member that leader's URL in its
assignment. No partitions are assigned: the group only carries the choice. When a member
joins or leaves (or stops heartbeating), the group rebalances and all learn the new one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from streamkit.clients.lifecycle import start_client, stop_client

__all__ = ["LeaderElection", "choose_leader"]

log = logging.getLogger(__name__)


def choose_leader(members: Mapping[str, dict[str, Any]]) -> str | None:
    """The URL of the leader among ``members`` (member id -> {"url", "eligible"}): the
    eligible one with the lowest URL, so every member's choice would agree."""
    urls = sorted(str(m["url"]) for m in members.values() if m.get("eligible"))
    return urls[0] if urls else None


class _LeaderAssignor:
    """An aiokafka partition assignor (an instance, so it holds this member's view)."""

    name = "streamkit-schema-registry"
    version = 0

    def __init__(self, election: LeaderElection) -> None:
        self._election = election

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        me = {"url": self._election.url, "eligible": self._election.eligible}
        return ConsumerProtocolMemberMetadata(self.version, list(topics), orjson.dumps(me))

    def assign(self, _cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
               ) -> dict[str, ConsumerProtocolMemberAssignment]:
        seen: dict[str, dict[str, Any]] = {}
        for member_id, meta in members.items():
            try:
                seen[member_id] = orjson.loads(meta.user_data)
            except orjson.JSONDecodeError:
                log.warning("member %s sent no registry metadata", member_id)
        leader = orjson.dumps({"leader": choose_leader(seen)})
        return {member_id: ConsumerProtocolMemberAssignment(self.version, [], leader) for member_id in members}

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        try:
            leader = orjson.loads(assignment.user_data).get("leader")
        except (orjson.JSONDecodeError, AttributeError):
            leader = None
        self._election.set_leader(leader)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, election: LeaderElection) -> None:
        self._election = election

    def on_partitions_revoked(self, _revoked: object) -> None:
        # a rebalance started: until it ends, no member may act as the leader
        self._election.set_leader(None)

    def on_partitions_assigned(self, _assigned: object) -> None:
        pass


class LeaderElection:
    def __init__(self, bootstrap: str, group_id: str, topic: str, url: str, eligible: bool, client_id: str,
                 security: Mapping[str, Any]) -> None:
        self.bootstrap = bootstrap
        self.security = dict(security)
        self.group_id = group_id
        self.topic = topic
        self.url = url
        self.eligible = eligible
        self.client_id = client_id
        self.leader_url: str | None = None
        self._known = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None

    @property
    def is_leader(self) -> bool:
        return self.leader_url is not None and self.leader_url == self.url

    def set_leader(self, url: str | None) -> None:
        if url is not None and url != self.leader_url:
            log.info("schema registry leader is now %s%s", url, " (this process)" if url == self.url else "")
        self.leader_url = url
        if url is None:
            self._known.clear()
        else:
            self._known.set()

    async def leader(self, timeout_s: float) -> str | None:
        """The leader's URL, waiting up to ``timeout_s`` while a rebalance chooses one."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._known.wait(), timeout_s)
        return self.leader_url

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group_id, client_id=self.client_id,
            enable_auto_commit=False, partition_assignment_strategy=(_LeaderAssignor(self),),
            session_timeout_ms=10_000, heartbeat_interval_ms=1_000, **self.security)
        await start_client(consumer)
        consumer.subscribe([self.topic], listener=_Rebalance(self))
        self._consumer = consumer

    async def stop(self) -> None:
        if self._consumer is not None:
            await stop_client(self._consumer)
            self._consumer = None
