"""Followers' fetching: one task per leader broker, fetching every partition this broker
follows on it with one Fetch request (``replica_id`` = this broker), as Kafka's replica
fetcher threads do.

Before a partition's first fetch from a new leader, the follower asks the leader where its
own latest leader epoch ended there (OffsetForLeaderEpoch, KIP-101/279) and truncates what
lies beyond: the tail an old leader wrote and never replicated, which the new leader does not
have. Only then does it fetch, so its log never diverges from the leader's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamkit.broker.cluster.client import BrokerUnavailable, PeerClient
from streamkit.broker.cluster.metadata import ClusterMetadata
from streamkit.broker.cluster.replica import Replica, Role
from streamkit.broker.cluster.settings import ClusterSettings
from streamkit.broker.cluster.throttle import Throttle
from streamkit.broker.errors import ErrorCode
from streamkit.log.errors import LogError

__all__ = ["FetcherManager"]

log = logging.getLogger(__name__)

TP = tuple[str, int]

_FETCH_VERSION = 12  # replica_id in the body (v15+ moves it to a tagged ReplicaState)
_EPOCH_VERSION = 3  # OffsetForLeaderEpoch with replica_id


@dataclass(eq=False)
class _Followed:
    replica: Replica
    leader_epoch: int
    truncated: bool = False  # the divergent tail is gone: fetching may start


class _LeaderFetcher:
    """Fetches, from one leader broker, every partition followed on it."""

    def __init__(self, manager: FetcherManager, leader: int) -> None:
        self.manager = manager
        self.leader = leader
        self.partitions: dict[TP, _Followed] = {}
        self.changed = asyncio.Event()
        self.client: PeerClient | None = None
        self._fetching = False  # a (long-polling) fetch is out
        self._interrupted = False
        self.task = asyncio.create_task(self._run(), name=f"replica-fetcher-{leader}")

    def interrupt(self) -> None:
        """A partition joined while a fetch long-polls (up to replica.fetch.wait.max.ms):
        start over at once, so that a new leader's followers catch up (and its high
        watermark moves) without waiting for the fetch of the others to time out."""
        if self._fetching and self.client is not None:
            self._interrupted = True
            self.client.abort("a partition to follow was added")

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task
        if self.client is not None:
            await self.client.close()

    async def _connect(self) -> PeerClient | None:
        registration = self.manager.metadata.brokers.get(self.leader)
        if registration is None:
            return None
        client = self.client
        if client is None or (client.host, client.port) != (registration.host, registration.port):
            if client is not None:
                await client.close()
            client = self.client = PeerClient(registration.host, registration.port,
                                              f"broker-{self.manager.broker_id}-fetcher",
                                              self.manager.settings.replica_socket_timeout_ms)
        return client

    async def _run(self) -> None:
        settings = self.manager.settings
        backoff = settings.replica_fetch_backoff_ms / 1000
        while True:
            if not self.partitions:
                self.changed.clear()
                await self.changed.wait()
                continue
            client = await self._connect()
            if client is None:
                await self._pause(backoff)
                continue
            try:
                await self._truncate(client)
                if not await self._fetch(client):
                    await self._pause(backoff)
            except BrokerUnavailable as exc:
                if self._interrupted:
                    self._interrupted = False
                    continue
                log.info("fetching from broker %d failed (%s); retrying", self.leader, exc)
                await self._pause(backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the replica fetcher for broker %d failed; retrying", self.leader)
                await self._pause(backoff)

    async def _pause(self, seconds: float) -> None:
        self.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), seconds)

    def _throttled(self, followed: _Followed) -> bool:
        replica = followed.replica
        return replica.plog.config.follower_throttled(replica.partition, self.manager.broker_id)

    # -- truncation ----------------------------------------------------------------------------

    async def _truncate(self, client: PeerClient) -> None:
        pending = [f for f in self.partitions.values() if not f.truncated]
        if not pending:
            return
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for f in pending:
            plog = f.replica.plog
            latest = plog.latest_epoch
            by_topic.setdefault(f.replica.topic, []).append(
                {"partition": f.replica.partition, "current_leader_epoch": f.leader_epoch, "leader_epoch": latest})
        response = await client.request(23, _EPOCH_VERSION, {
            "replica_id": self.manager.broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
        for topic in response.topics:
            for p in topic.partitions:
                followed = self.partitions.get((topic.topic, int(p.partition)))
                if followed is None or followed.truncated:
                    continue
                code = ErrorCode(int(p.error_code))
                if code != ErrorCode.none:
                    log.info("OffsetForLeaderEpoch for %s-%d from broker %d: %s; retrying", topic.topic,
                             int(p.partition), self.leader, code.name)
                    continue
                self._truncate_one(followed, int(p.leader_epoch), int(p.end_offset))

    def _truncate_one(self, followed: _Followed, leader_epoch: int, end_offset: int) -> None:
        """KIP-279: the leader answered the largest epoch it has at or below ours, and where
        that epoch ends on it. Ours ends no later than where the same epoch ends here."""
        plog = followed.replica.plog
        leo = plog.log_end_offset
        if end_offset < 0:
            target = min(plog.high_watermark, leo)  # the leader knows none of our epochs
        else:
            _epoch, ours = plog.end_offset_for_epoch(leader_epoch)
            target = min(end_offset, leo) if ours < 0 else min(end_offset, ours, leo)
        if target < leo:
            log.warning("truncating %s-%d from %d to %d (divergent from leader %d's log at epoch %d)",
                        followed.replica.topic, followed.replica.partition, leo, target, self.leader, leader_epoch)
            plog.truncate_to(target)
        followed.truncated = True

    # -- fetching ------------------------------------------------------------------------------

    async def _fetch(self, client: PeerClient) -> bool:
        """One fetch; False when nothing could be fetched (back off): no partition ready,
        or a partition answered with an error and none moved. An answer without records
        and without errors is the leader's long poll (replica.fetch.wait.max.ms) ending:
        the next fetch goes at once, as Kafka's fetcher does (replica.fetch.backoff.ms
        is for errors), or a write arriving just after it waits out a backoff before it
        is replicated (acks=all)."""
        settings = self.manager.settings
        throttle = self.manager.throttle
        held = throttle.limited and throttle.exceeded()
        ready = [f for f in self.partitions.values() if f.truncated
                 and not (held and self._throttled(f))]
        if not ready:
            return False
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for f in ready:
            plog = f.replica.plog
            by_topic.setdefault(f.replica.topic, []).append({
                "partition": f.replica.partition, "current_leader_epoch": f.leader_epoch,
                "fetch_offset": plog.log_end_offset, "last_fetched_epoch": -1,
                "log_start_offset": plog.log_start_offset,
                "partition_max_bytes": settings.replica_fetch_max_bytes})
        # A partition whose truncation failed (its leader did not lead it yet) is asked
        # again after replica.fetch.backoff.ms, not once the others' long poll ends.
        waiting = any(not f.truncated for f in self.partitions.values())
        max_wait_ms = settings.replica_fetch_wait_max_ms
        if waiting:
            max_wait_ms = min(max_wait_ms, settings.replica_fetch_backoff_ms)
        self._fetching, self._interrupted = True, False
        try:
            response = await self._fetch_request(client, by_topic, max_wait_ms)
        finally:
            self._fetching = False
        progressed = failed = False
        for topic in response.responses:
            for p in topic.partitions:
                followed = self.partitions.get((topic.topic, int(p.partition_index)))
                if followed is None or not followed.truncated:
                    continue  # unfollowed (or to truncate again) while the fetch was out
                failed = failed or int(p.error_code) != ErrorCode.none
                progressed = self._handle(followed, p) or progressed
        return progressed or not failed or not any(f.truncated for f in self.partitions.values())

    async def _fetch_request(self, client: PeerClient, by_topic: dict[str, list[dict[str, Any]]],
                             max_wait_ms: int) -> Any:
        settings = self.manager.settings
        return await client.request(1, _FETCH_VERSION, {
            "replica_id": self.manager.broker_id, "max_wait": max_wait_ms,
            "min_bytes": settings.replica_fetch_min_bytes, "max_bytes": settings.replica_fetch_response_max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "forgotten_topics_data": [], "rack_id": ""},
            timeout_ms=max_wait_ms + settings.replica_socket_timeout_ms)

    def _handle(self, followed: _Followed, p: Any) -> bool:
        replica = followed.replica
        plog = replica.plog
        code = ErrorCode(int(p.error_code))
        if code == ErrorCode.offset_out_of_range:
            leader_start = int(p.log_start_offset)
            if plog.log_end_offset < leader_start:
                log.info("%s-%d: the leader's log starts at %d, past ours: starting over from there",
                         replica.topic, replica.partition, leader_start)
                plog.truncate_fully_and_start_at(leader_start)
            else:
                followed.truncated = False  # ahead of the leader: truncate again
            return True
        if code != ErrorCode.none:
            log.debug("fetch of %s-%d from broker %d: %s", replica.topic, replica.partition, self.leader, code.name)
            return False
        if replica.role is not Role.FOLLOWER or replica.leader_epoch != followed.leader_epoch:
            return False
        records = p.records
        if records and self.manager.throttle.limited and self._throttled(followed):
            self.manager.throttle.record(len(records))
        if records:
            try:
                plog.append_replica(records)
            except LogError as exc:
                log.error("%s-%d: cannot append what broker %d sent (%s); fetching again", replica.topic,
                          replica.partition, self.leader, exc)
                followed.truncated = False
                return False
            self.manager.appended(replica)
        hw = min(int(p.high_watermark), plog.log_end_offset)
        if hw >= 0 and hw != plog.high_watermark:
            plog.set_high_watermark(hw)
            self.manager.notify(replica.tp)
        # The leader's retention and DeleteRecords, followed (never past what is replicated).
        leader_start = min(int(p.log_start_offset), plog.high_watermark)
        if leader_start > plog.log_start_offset:
            plog.delete_records_before(leader_start)
        return bool(records)


class FetcherManager:
    """The fetchers of this broker: ``follow`` and ``unfollow`` move a replica between
    them as its leader changes (``ReplicaManager`` calls them)."""

    def __init__(self, broker_id: int, metadata: ClusterMetadata, settings: ClusterSettings,
                 notify: Callable[[TP], None], throttle: Throttle | None = None) -> None:
        self.broker_id = broker_id
        self.throttle = throttle or Throttle(0, time.monotonic)
        self.metadata = metadata
        self.settings = settings
        self.notify = notify
        self._fetchers: dict[int, _LeaderFetcher] = {}
        self._where: dict[TP, int] = {}
        self.halted = False

    def halt(self) -> None:
        """Stop following anything (a controlled shutdown: a broker about to stop must leave
        the ISRs it is in, and a leader adds back a follower that keeps fetching)."""
        self.halted = True
        for fetcher in self._fetchers.values():
            fetcher.partitions.clear()
            fetcher.changed.set()
        self._where.clear()

    def follow(self, replica: Replica, leader: int) -> None:
        self.unfollow(replica)
        if self.halted:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = self._fetchers[leader] = _LeaderFetcher(self, leader)
        fetcher.partitions[replica.tp] = _Followed(replica, replica.leader_epoch)
        self._where[replica.tp] = leader
        fetcher.changed.set()
        fetcher.interrupt()

    def unfollow(self, replica: Replica) -> None:
        leader = self._where.pop(replica.tp, None)
        if leader is None:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is not None:
            fetcher.partitions.pop(replica.tp, None)
            fetcher.changed.set()

    def appended(self, replica: Replica) -> None:
        self.notify(replica.tp)

    def brokers_changed(self) -> None:
        """A leader's address may have changed (it restarted on another port)."""
        for fetcher in self._fetchers.values():
            fetcher.changed.set()

    async def stop(self) -> None:
        fetchers, self._fetchers = self._fetchers, {}
        self._where.clear()
        await asyncio.gather(*(f.stop() for f in fetchers.values()))
