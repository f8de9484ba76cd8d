"""A follower's fetcher asks again, after replica.fetch.backoff.ms, where a partition's epoch
ends when its leader could not say yet (the follower heard of the new partition before the
leader did: NOT_LEADER_OR_FOLLOWER). The fetch of the partitions already followed long-polls
(replica.fetch.wait.max.ms) meanwhile; it must not hold the new partition back for the whole
poll, or the new leader's acks=all writes time out (a CI failure of test_fetcher.py).

The leader here is a scripted peer that answers as a broker does, so that the race is the
same every run; the cluster tests run the same fetcher against real brokers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from streamkit.broker.cluster.client import BrokerUnavailable
from streamkit.broker.cluster.fetcher import FetcherManager
from streamkit.broker.cluster.metadata import ClusterMetadata
from streamkit.broker.cluster.replica import Replica, Role
from streamkit.broker.cluster.settings import ClusterSettings
from streamkit.broker.cluster.zkdata import BrokerRegistration, PartitionState
from streamkit.broker.errors import ErrorCode
from streamkit.log import PartitionLog
from tests.log.conftest import T0, FakeClock, config

WAIT_MAX_MS = 20_000
BACKOFF_MS = 50


class ScriptedLeader:
    """Broker 0 as the follower sees it: it leads "idle" and has nothing new for it (a
    fetch of it long-polls), and learns that it leads "joined" only after its first
    OffsetForLeaderEpoch for it."""

    host, port = "127.0.0.1", 9092

    def __init__(self) -> None:
        self.leads_joined = False
        self.fetch_waits: list[tuple[list[str], int]] = []
        self._poll: asyncio.Future[None] | None = None

    async def request(self, api_key: int, _version: int, body: dict[str, Any], timeout_ms: int = 0) -> Any:
        topics = [t["topic"] for t in body["topics"]]
        if api_key == 23:  # OffsetForLeaderEpoch
            answers = []
            for topic in body["topics"]:
                known = topic["topic"] == "idle" or self.leads_joined
                code = ErrorCode.none if known else ErrorCode.not_leader_or_follower
                answers.append(SimpleNamespace(topic=topic["topic"], partitions=[
                    SimpleNamespace(partition=0, error_code=int(code), leader_epoch=0 if known else -1,
                                    end_offset=0 if known else -1)]))
            self.leads_joined = self.leads_joined or "joined" in topics
            return SimpleNamespace(topics=answers)
        assert api_key == 1
        self.fetch_waits.append((sorted(topics), int(body["max_wait"])))
        # Nothing new anywhere: the fetch long-polls until max_wait, or until it is cut.
        self._poll = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._poll, body["max_wait"] / 1000)
        return SimpleNamespace(responses=[SimpleNamespace(topic=t, partitions=[SimpleNamespace(
            partition_index=0, error_code=0, records=None, high_watermark=0, log_start_offset=0)])
            for t in topics])

    def abort(self, reason: str) -> None:
        """As PeerClient.abort: the request in flight fails with BrokerUnavailable."""
        if self._poll is not None and not self._poll.done():
            self._poll.set_exception(BrokerUnavailable(reason))

    async def close(self) -> None:
        pass


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[dict[str, PartitionLog]]:
    opened = {t: PartitionLog.open(tmp_path / f"{t}-0", config(), clock=FakeClock(T0), replicated=True)
              for t in ("idle", "joined")}
    yield opened
    for plog in opened.values():
        plog.close()


def _follower(topic: str, plog: PartitionLog) -> Replica:
    return Replica(topic, 0, plog, (0, 1), state=PartitionState(0, 0, (0, 1), 1), role=Role.FOLLOWER)


async def test_a_partition_its_leader_did_not_know_yet_is_fetched_after_a_backoff_not_a_long_poll(
        logs: dict[str, PartitionLog]) -> None:
    leader = ScriptedLeader()
    metadata = ClusterMetadata(brokers={0: BrokerRegistration(0, leader.host, leader.port)})
    settings = ClusterSettings(broker_id=1, zookeeper_connect="unused:2181", replica_fetch_wait_max_ms=WAIT_MAX_MS,
                               replica_fetch_backoff_ms=BACKOFF_MS)
    manager = FetcherManager(1, metadata, settings, notify=lambda _tp: None)
    manager.follow(_follower("idle", logs["idle"]), 0)
    fetcher = manager._fetchers[0]
    fetcher.client = leader  # type: ignore[assignment]
    try:
        await asyncio.sleep(0.1)  # "idle" is long-polled now
        manager.follow(_follower("joined", logs["joined"]), 0)
        async with asyncio.timeout(5):  # far less than the 20 s long poll
            while not any("joined" in topics for topics, _ in leader.fetch_waits):
                await asyncio.sleep(0.01)
    finally:
        await manager.stop()
    # The fetch that went out while "joined" waited to be asked again was bounded by the
    # backoff; the ones with every partition ready long-poll as configured.
    assert (["idle"], BACKOFF_MS) in leader.fetch_waits
    assert leader.fetch_waits[0] == (["idle"], WAIT_MAX_MS)
