"""ListOffsets on a leader elected a moment ago (KIP-207): until its high watermark reaches
the first offset of its leader epoch it answers OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE
to ListOffsets before v5), not the high watermark it had as a follower, which may be far
behind what the previous leader had committed; and the Spark and Dask readers' planning asks
again until it gets an answer, so a read right after a failover covers the whole log. The
aiokafka-based users of end offsets (the console, Connect, the streams changelog restore)
send ListOffsets v3 or older: they get LEADER_NOT_AVAILABLE, which they ask again on too
(aiokafka's end_offsets, beginning_offsets and offsets_for_times retry every retriable
error until their timeout; the changelog reader is shown doing so here).

The stale state is made, not raced for. With one follower paused (SIGSTOP, still in the
ISR) the leader's high watermark cannot pass what that follower has, so the other follower
replicates every record but learns a high watermark of 0. The leader then stops (a
controlled shutdown: the election does not wait for its session to expire) and the other
follower leads with log end offset RECORDS and high watermark 0. It stays so until the
paused follower resumes and fetches from it: the module's ZooKeeper session and
replica.lag.time.max.ms keep the paused broker in the ISR meanwhile."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from streamkit.analytics.options import read_options
from streamkit.analytics.planning import OffsetRange, plan_ranges
from streamkit.broker.cluster.client import PeerClient
from streamkit.broker.errors import ErrorCode
from streamkit.broker.group.records import partition_for_group
from streamkit.clients.lifecycle import start_client, stop_client
from streamkit.log.inspect import summarize_partition
from streamkit.streams.changelog import ChangelogReader
from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster
from tests.integration.test_share_groups import _heartbeat, _share_fetch
from tests.integration.util import call, connect

from .workload import eventually, leader_of, partitions_of, wait_for_leaders

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_MS = 60_000
SHARE_STATE_PARTITIONS = 6
CLUSTER_CONFIG = {
    "zookeeper.session.timeout.ms": str(SESSION_MS), "replica.lag.time.max.ms": str(SESSION_MS),
    # One replica per partition of __share_group_state, so that a share group coordinated by
    # the new leader can write its state while the paused broker is still in every ISR.
    "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": str(SHARE_STATE_PARTITIONS),
}
RECORDS = 90
LATEST, EARLIEST = -1, -2


@pytest.fixture(scope="module")
def zookeeper(need_zookeeper: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """This module's ZooKeeper grants the long sessions that keep a paused broker registered."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), settings={"maxSessionTimeout": SESSION_MS}) as server:
        yield server


def _roles(cluster: BrokerCluster) -> tuple[int, int, int]:
    """(leader, next leader, follower to pause): the controller leads next, so that the
    controller's work goes on while one broker stops and another is paused."""
    controller = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).controller_id
    others = [b for b in range(len(cluster)) if b != controller]
    return others[0], controller, others[1]


def _log_end(cluster: BrokerCluster, broker: int, topic: str) -> int:
    """The log end offset of ``topic``-0 in ``broker``'s data directory."""
    directory = cluster[broker].data_dir / f"{topic}-0"
    return summarize_partition(directory)[-1].next_offset if directory.is_dir() else -1


def _stale_leader(cluster: BrokerCluster, topic: str) -> tuple[int, int]:
    """Make the state of the module docstring: (the new leader, the paused follower)."""
    leader, successor, paused = _roles(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader, successor, paused]])],
                        request_timeout=30)[topic].result()
    wait_for_leaders(cluster.bootstrap, topic, 1)
    cluster.pause(paused)
    # Not the paused broker's address: a request to it would hang until it resumes.
    producer = Producer({"bootstrap.servers": f"{cluster[leader].bootstrap},{cluster[successor].bootstrap}",
                         "acks": 1, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    eventually(lambda: _log_end(cluster, successor, topic) == RECORDS, f"broker {successor} to replicate it all")
    assert cluster.stop(leader) == 0
    eventually(lambda: leader_of(cluster[successor].bootstrap, topic) == successor, f"broker {successor} to lead")
    return successor, paused


def _list_offset(cluster: BrokerCluster, broker: int, topic: str, timestamp: int,
                 version: int = 7) -> tuple[ErrorCode, int]:
    """(error code, offset) of one ListOffsets, as a consumer sends it, to ``broker``."""
    async def ask() -> tuple[ErrorCode, int]:
        client = PeerClient(cluster[broker].host, cluster[broker].port, "test-list-offsets")
        try:
            response = await client.request(2, version, {
                "replica_id": -1, "isolation_level": 0,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
        finally:
            await client.close()
        (answer,) = response.topics[0].partitions
        return ErrorCode(int(answer.error_code)), int(answer.offset)

    return asyncio.run(ask())


def test_a_new_leader_below_its_epoch_start_answers_offset_not_available(cluster: BrokerCluster) -> None:
    topic = "stale-high-watermark"
    leader, paused = _stale_leader(cluster, topic)
    assert _list_offset(cluster, leader, topic, LATEST) == (ErrorCode.offset_not_available, -1)
    assert _list_offset(cluster, leader, topic, LATEST, version=4) == (ErrorCode.leader_not_available, -1)
    # A lookup by time finds only records below the high watermark: none yet.
    assert _list_offset(cluster, leader, topic, 0) == (ErrorCode.offset_not_available, -1)
    assert _list_offset(cluster, leader, topic, EARLIEST) == (ErrorCode.none, 0)

    cluster.resume(paused)  # it fetches from the new leader, whose high watermark moves up
    eventually(lambda: _list_offset(cluster, leader, topic, LATEST) == (ErrorCode.none, RECORDS),
               "the end offset once the high watermark caught up")
    assert _list_offset(cluster, leader, topic, 0) == (ErrorCode.none, 0)


def test_the_readers_planning_asks_again_until_the_new_leader_can_answer(
        cluster: BrokerCluster, caplog: pytest.LogCaptureFixture) -> None:
    topic = "stale-high-watermark-plan"
    leader, paused = _stale_leader(cluster, topic)
    caplog.set_level(logging.INFO, logger="streamkit.analytics.planning")
    options = read_options({"kafka.bootstrap.servers": cluster[leader].bootstrap, "subscribe": topic})
    with ThreadPoolExecutor(1) as pool:
        planned = pool.submit(plan_ranges, options)
        eventually(lambda: "OFFSET_NOT_AVAILABLE" in caplog.text or planned.done(),
                   "the planning to be told to ask again")
        cluster.resume(paused)
        ranges = planned.result(timeout=60)
    assert ranges == [OffsetRange(topic, 0, 0, RECORDS)]


async def _changelog_offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    # A request to the paused broker (aiokafka picks any for metadata) hangs until it times
    # out: soon, so that the reader asks another meanwhile.
    reader = ChangelogReader(bootstrap, topic, 0, request_timeout_ms=3_000)
    try:
        await start_client(reader)
        return await reader.offsets()
    finally:
        await stop_client(reader)


def test_the_changelog_restore_asks_again_on_leader_not_available(
        cluster: BrokerCluster, caplog: pytest.LogCaptureFixture) -> None:
    """A restore reads its changelog up to the end it lists first: a short end would leave
    the store behind its changelog."""
    topic = "stale-high-watermark-changelog"
    leader, paused = _stale_leader(cluster, topic)
    caplog.set_level(logging.DEBUG, logger="streamkit.streams.changelog")
    with ThreadPoolExecutor(1) as pool:
        asked = pool.submit(asyncio.run, _changelog_offsets(cluster[leader].bootstrap, topic))
        eventually(lambda: "LeaderNotAvailableError" in caplog.text or asked.done(), "the reader to be told to ask again")
        cluster.resume(paused)
        offsets = asked.result(timeout=60)
    assert offsets == (0, RECORDS)


def _led_share_group(cluster: BrokerCluster, broker: int) -> str:
    """A share group coordinated by ``broker``: one whose partition of __share_group_state it leads."""
    led = {p for p, info in partitions_of(cluster[broker].bootstrap, "__share_group_state").items()
           if info["leader"] == broker}
    return next(g for g in (f"share-stale-{i}" for i in range(1000))
                if partition_for_group(g, SHARE_STATE_PARTITIONS) in led)


def test_a_share_partition_is_not_started_from_a_stale_high_watermark(cluster: BrokerCluster) -> None:
    """share.auto.offset.reset=latest (the default) on the new leader: its first ShareFetch
    gets OFFSET_NOT_AVAILABLE for the partition (Kafka's SharePartition fails to initialize
    with OffsetNotAvailableException; librdkafka and Kafka's client refresh metadata and
    fetch again), not a start at the stale high watermark 0, which would deliver the RECORDS
    records produced before the group asked for the latest ones; AlterShareGroupOffsets to
    the latest offset gets OFFSET_NOT_AVAILABLE too. Once the high watermark
    caught up the share-partition starts at the end, and a record produced then is the
    first delivered."""
    topic = "stale-high-watermark-share"
    with connect(cluster.bootstrap.split(",")[0]) as sock:  # any broker creates __share_group_state
        _heartbeat(sock, "share-stale-setup", "m0", 0, ("nosuch",))
    wait_for_leaders(cluster.bootstrap, "__share_group_state", SHARE_STATE_PARTITIONS)
    leader, paused = _stale_leader(cluster, topic)
    group = _led_share_group(cluster, leader)
    with connect(cluster[leader].bootstrap) as sock:
        # Nor does a reset of the (empty) group to the latest offset start it there.
        altered = call(sock, AlterShareGroupOffsetsRequest(group_id=GroupId(group), topics=(
            AlterShareGroupOffsetsRequestTopic(topic_name=TopicName(topic), partitions=(
                AlterShareGroupOffsetsRequestPartition(partition_index=i32(0), start_offset=i64(LATEST)),)),)))
        assert altered.error_code == ErrorCode.none
        assert ErrorCode(int(altered.responses[0].partitions[0].error_code)) == ErrorCode.offset_not_available

        def joined() -> object:
            reply = _heartbeat(sock, group, "m1", 0, (topic,))
            return reply.error_code == ErrorCode.none and reply.assignment is not None \
                and reply.assignment.topic_partitions and reply.assignment
        topic_id = eventually(joined, f"member m1 of {group} to be assigned {topic}").topic_partitions[0].topic_id
        epoch = 0

        def fetch() -> Any:
            nonlocal epoch
            reply = _share_fetch(sock, group, "m1", epoch, topic_id, max_records=RECORDS)
            epoch += 1
            assert reply.error_code == ErrorCode.none
            return reply.responses[0].partitions[0]

        first = fetch()
        assert (ErrorCode(int(first.error_code)), list(first.acquired_records)) == (ErrorCode.offset_not_available, [])

        cluster.resume(paused)
        eventually(lambda: _list_offset(cluster, leader, topic, LATEST) == (ErrorCode.none, RECORDS),
                   "the end offset once the high watermark caught up")
        started = fetch()  # initializes the share-partition at the end
        assert (ErrorCode(int(started.error_code)), list(started.acquired_records)) == (ErrorCode.none, [])

        producer = Producer({"bootstrap.servers": cluster[leader].bootstrap, "acks": 1})
        producer.produce(topic, b"after")
        assert producer.flush(30) == 0
        delivered = eventually(lambda: fetch().acquired_records, "the record produced after the start")
        assert [(r.first_offset, r.last_offset) for r in delivered] == [(RECORDS, RECORDS)]
