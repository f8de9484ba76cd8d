"""Group and transaction coordinators on a real cluster: ZooKeeper and three ``streamkit
broker`` processes, real clients (librdkafka; raw Kafka requests where a test needs one
exact answer). A broker coordinates the partitions of ``__consumer_offsets`` and
``__transaction_state`` it leads: the tests kill that broker and check that clients find the
new coordinator, which loaded the state, and that nothing a client was told is lost."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import time
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.types import GroupId, ProducerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from streamkit.broker.cluster.producer_ids import BLOCK_SIZE, ZkProducerIds
from streamkit.broker.cluster.zk import ZkClient
from streamkit.broker.cluster.zkdata import PRODUCER_ID_BLOCK, ProducerIdBlock
from streamkit.broker.group.records import partition_for_group
from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster
from streamkit.testing_history import History, full_read
from tests.integration.util import call, connect

from .workload import create_topic, eventually, isr, partitions_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

INTERNAL_PARTITIONS = 6
CLUSTER_CONFIG = {
    "replica.lag.time.max.ms": "2000",
    "min.insync.replicas": "2",
    "offsets.topic.num.partitions": str(INTERNAL_PARTITIONS),
    "transaction.state.log.num.partitions": str(INTERNAL_PARTITIONS),
    "group.initial.rebalance.delay.ms": "0",
}
QUIET = {"log_level": 0}


GROUP, TRANSACTION = 0, 1  # FindCoordinator's key types


def _find_coordinator(cluster: BrokerCluster, key: str, key_type: int) -> int | None:
    request = FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(key,))
    for broker in cluster.brokers:
        if broker.alive and not broker.paused:
            with connect(broker.bootstrap) as sock:
                [found] = call(sock, request).coordinators
            return int(found.node_id) if found.error_code == ErrorCode.none else None
    return None


def _coordinator(cluster: BrokerCluster, key: str, key_type: int = GROUP) -> int:
    """The coordinator of ``key`` (FindCoordinator, as clients ask it; the first one asked
    creates the internal topic): the leader of the key's partition of the topic."""
    found: list[int] = []

    def ask() -> bool:
        coordinator = _find_coordinator(cluster, key, key_type)
        if coordinator is not None:
            found.append(coordinator)
        return coordinator is not None

    eventually(ask, f"the coordinator of {key}")
    return found[-1]


def _produce(bootstrap: str, topic: str, count: int) -> dict[int, int]:
    """``count`` records (acks=all); the log end offset of each partition after them."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
    ends: dict[int, int] = {}

    def delivered(err: KafkaError | None, msg: Any) -> None:
        assert err is None, err
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), key=str(i).encode(), on_delivery=delivered)
    assert producer.flush(30) == 0
    return ends


def _consume(consumer: Consumer, count: int, timeout: float = 60) -> list[tuple[int, int]]:
    """The (partition, offset) of the next ``count`` records the consumer returns."""
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records in {timeout}s"
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        got.append((message.partition(), message.offset()))
    return got


def _commit(consumer: Consumer) -> dict[int, int]:
    """Commit the consumer's positions, retrying what a coordinator failover makes
    retriable; the offsets committed."""
    def attempt() -> list[TopicPartition] | None:
        try:
            return consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].retriable() or exc.args[0].code() in (KafkaError.NOT_COORDINATOR,
                                                                  KafkaError.COORDINATOR_NOT_AVAILABLE):
                return None
            raise

    done = eventually(attempt, "a successful commit", timeout=60, interval=0.5)
    return {tp.partition: tp.offset for tp in done if tp.offset >= 0}  # a partition not read yet: -1001


def _committed(consumer: Consumer, topic: str, partitions: int) -> dict[int, int] | None:
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=5)
    except KafkaException:
        return None
    return {tp.partition: tp.offset for tp in found if tp.error is None and tp.offset >= 0}


def test_a_consumer_group_finds_its_new_coordinator_and_its_offsets(cluster: BrokerCluster) -> None:
    topic, group = "group-failover", "failover-group"
    create_topic(cluster.bootstrap, topic, partitions=2, replication=3)
    ends = _produce(cluster.bootstrap, topic, 300)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 30_000, **QUIET})
    consumer.subscribe([topic])
    read = _consume(consumer, 100)
    first = _commit(consumer)
    assert sum(first.values()) == 100

    coordinator = _coordinator(cluster, group)
    cluster.kill(coordinator)
    # The new coordinator loaded the group's partition: the commit made before the kill is
    # there (asked of the new coordinator: the client finds it again).
    assert eventually(lambda: _committed(consumer, topic, 2) == first, "the offsets on the new coordinator")
    read += _consume(consumer, 100)
    last = _commit(consumer)
    assert sum(last.values()) == 200
    consumer.close()

    # A new member resumes exactly at the last commit: no record read again, none skipped.
    again = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", **QUIET})
    again.subscribe([topic])
    rest = _consume(again, 100)
    again.close()
    for p, end in ends.items():
        assert sorted(o for q, o in read if q == p) == list(range(last.get(p, 0)))
        assert sorted(o for q, o in rest if q == p) == list(range(last.get(p, 0), end))


def _txn_producer(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "acks": "all",
                         "linger.ms": 5, "transaction.timeout.ms": 60_000, **QUIET})
    producer.init_transactions(60)
    return producer


class Transactions:
    """Transactions of one producer, each recorded in a ``History``: the values of a
    committed one acknowledged (with their offsets), an aborted one's failed, one whose
    outcome the client never learned left unknown."""

    def __init__(self, producer: Producer, topic: str, history: History) -> None:
        self.producer = producer
        self.topic = topic
        self.history = history
        self.aborted: list[list[str]] = []
        self.unknown: list[list[str]] = []
        self.committed = 0
        self._n = 0

    def produce(self, size: int = 6) -> tuple[list[Any], list[tuple[int, int] | None]]:
        """Begin a transaction and send ``size`` values in it (flushed)."""
        self.producer.begin_transaction()
        ops, reports = [], [None] * size
        n = self._n
        self._n += 1
        for j in range(size):
            value = f"t{n}-{j}"
            ops.append(self.history.produce("txn", value, topic=self.topic))

            def delivered(err: KafkaError | None, msg: Any, j: int = j) -> None:
                if err is None:
                    reports[j] = (msg.partition(), msg.offset())

            self.producer.produce(self.topic, value.encode(), key=str(j).encode(), on_delivery=delivered)
        self.producer.flush(60)
        return ops, reports  # type: ignore[return-value]

    def end(self, ops: list[Any], reports: list[tuple[int, int] | None], commit: bool) -> None:
        values = [op.value for op in ops]
        while True:
            try:
                if commit:
                    self.producer.commit_transaction(60)
                else:
                    self.producer.abort_transaction(60)
                break
            except KafkaException as exc:
                error = exc.args[0]
                if error.retriable():
                    continue  # librdkafka's rule: the same call again
                if not error.txn_requires_abort():
                    self.unknown.append(values)
                    raise
                self.producer.abort_transaction(60)
                commit = False
                break
        if commit:
            self.committed += 1
            for op, report in zip(ops, reports, strict=True):
                assert report is not None
                self.history.ack(op, *report)
        else:
            self.aborted.append(values)
            for op in ops:
                self.history.fail(op)

    def run(self, commit: bool = True) -> None:
        ops, reports = self.produce()
        self.end(ops, reports, commit)

    def check(self, bootstrap: str) -> None:
        """Every committed transaction read exactly once (read_committed), no aborted one."""
        final = self.history.add_read(full_read(bootstrap, self.topic, final=True, isolation_level="read_committed"))
        report = self.history.check()
        assert report.ok, str(report)
        seen = {record.value for record in final.records}
        for values in self.aborted:
            assert not seen & set(values), f"an aborted transaction is visible: {sorted(seen & set(values))}"
        for values in self.unknown:
            assert len(seen & set(values)) in (0, len(values)), f"half a transaction is visible: {values}"


def test_transactions_survive_the_loss_of_their_coordinator(cluster: BrokerCluster) -> None:
    topic, txn_id = "txn-failover", "txn-failover-1"
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    txns = Transactions(_txn_producer(cluster.bootstrap, txn_id), topic, History())
    for i in range(6):
        txns.run(commit=i % 3 != 2)

    # Killed while a transaction is open: the new coordinator loads it (Ongoing) and
    # commits it when EndTxn reaches it.
    coordinator = _coordinator(cluster, txn_id, TRANSACTION)
    ops, reports = txns.produce()
    cluster.kill(coordinator)
    txns.end(ops, reports, commit=True)
    for i in range(4):
        txns.run(commit=i % 2 == 0)
    cluster.start(coordinator)
    eventually(lambda: len(isr(cluster.bootstrap, "__transaction_state", partition_for_group(txn_id, INTERNAL_PARTITIONS))) == 3,
               "the restarted broker back in the transaction log's ISR")

    # Killed right after EndTxn was answered: the commit is decided (PrepareCommit is
    # replicated) but its markers may still be on their way; the next coordinator writes them.
    coordinator = _coordinator(cluster, txn_id, TRANSACTION)
    ops, reports = txns.produce()
    txns.end(ops, reports, commit=True)
    cluster.kill(coordinator)
    for _ in range(3):
        txns.run()
    assert txns.committed >= 8
    txns.check(cluster.bootstrap)


def _leaders(cluster: BrokerCluster, topic: str, partitions: int) -> dict[int, int]:
    """Every partition's leader, once the metadata names one for each (a partition just
    created, or one whose leader is not yet confirmed, has leader -1 for a while)."""
    def known() -> dict[int, int]:
        leaders = {p: s["leader"] for p, s in partitions_of(cluster.bootstrap, topic).items() if s["leader"] >= 0}
        return leaders if len(leaders) == partitions else {}
    return dict(eventually(known, f"{topic}'s leaders"))


def _lead_as_assigned(cluster: BrokerCluster, topic: str, partitions: int) -> dict[int, int]:
    """Every partition led by its preferred replica again (ElectLeaders, as
    kafka-leader-election does): the brokers this module's earlier tests killed came back
    as followers, so their partitions may all be led by one broker until the controller's
    leader rebalance (leader.imbalance.check.interval.seconds) runs."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})

    def as_assigned() -> dict[int, int]:
        states = partitions_of(cluster.bootstrap, topic)
        if len(states) == partitions and all(s["leader"] == s["replicas"][0] for s in states.values()):
            return {p: s["leader"] for p, s in states.items()}
        with contextlib.suppress(KafkaException):  # a preferred replica not yet back in the ISR
            admin.elect_leaders(ElectionType.PREFERRED,
                                [TopicPartition(topic, p) for p in range(partitions)]).result(timeout=30)
        return {}
    return dict(eventually(as_assigned, f"{topic}'s preferred leaders"))


def test_a_transaction_over_partitions_led_by_different_brokers(cluster: BrokerCluster) -> None:
    """Its markers go to three leaders (WriteTxnMarkers to the two that are not the
    coordinator), and its offsets to a group coordinated by another broker than the
    transaction: that broker writes the marker into __consumer_offsets and settles them."""
    topic, source, txn_id = "txn-spread", "txn-source", "txn-spread-1"
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    create_topic(cluster.bootstrap, source, partitions=1, replication=3)
    leaders = _leaders(cluster, topic, 3)
    assert len(set(leaders.values())) == 3, leaders
    producer = _txn_producer(cluster.bootstrap, txn_id)
    txn_coordinator = _coordinator(cluster, txn_id, TRANSACTION)
    _coordinator(cluster, "any-group")  # __consumer_offsets exists
    offsets_leaders = _lead_as_assigned(cluster, "__consumer_offsets", INTERNAL_PARTITIONS)
    group = next(g for g in (f"spread-group-{i}" for i in range(200))
                 if offsets_leaders[partition_for_group(g, INTERNAL_PARTITIONS)] != txn_coordinator)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                         **QUIET})
    txns = Transactions(producer, topic, History())
    for commit in (True, False, True):
        ops, reports = txns.produce(size=9)
        assert {r[0] for r in reports if r is not None} == {0, 1, 2}
        offset = 10 if commit else 99
        producer.send_offsets_to_transaction([TopicPartition(source, 0, offset)], consumer.consumer_group_metadata(),
                                             30)
        txns.end(ops, reports, commit)
    txns.check(cluster.bootstrap)
    assert eventually(lambda: _committed(consumer, source, 1), "the group's offsets") == {0: 10}
    consumer.close()


def _init_producer_id(bootstrap: str) -> int:
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout=i32Timedelta.parse(
        datetime.timedelta(seconds=60)), producer_id=ProducerId(-1), producer_epoch=i16(-1))
    with connect(bootstrap) as sock:
        response = call(sock, request)
    assert response.error_code == ErrorCode.none, response
    return int(response.producer_id)


def test_producer_ids_are_unique_across_brokers(cluster: BrokerCluster) -> None:
    """Each broker hands out ids from blocks it took in ZooKeeper: none is handed out twice,
    also by a broker restarted (it takes a new block)."""
    ids = [_init_producer_id(cluster[b].bootstrap) for _ in range(5) for b in range(3)]
    cluster.restart(1)
    ids += [_init_producer_id(cluster[1].bootstrap) for _ in range(5)]
    assert len(set(ids)) == len(ids), sorted(ids)
    by_broker = {b: {i // 1000 for i in ids[b::3][:5]} for b in range(3)}
    assert all(len(blocks) == 1 for blocks in by_broker.values()), by_broker
    assert len({next(iter(blocks)) for blocks in by_broker.values()}) == 3  # one block each


def test_brokers_taking_producer_id_blocks_at_once_never_share_one(zookeeper: ZooKeeperServer) -> None:
    """Many blocks taken concurrently by several brokers through one znode: each
    compare-and-set that loses reads again, so every block is distinct, and they follow each
    other without a gap; the znode holds Kafka's JSON."""
    async def scenario() -> tuple[list[ProducerIdBlock], bytes]:
        clients = [ZkClient(f"{zookeeper.address}/pid-blocks", 4000, 10_000) for _ in range(3)]
        for client in clients:
            await client.start()
        try:
            allocators = [ZkProducerIds(broker) for broker in range(3)]
            for allocator, client in zip(allocators, clients, strict=True):
                allocator.zk = client
            blocks = await asyncio.gather(*(a.take() for a in allocators for _ in range(8)))
            stored = await clients[0].get(PRODUCER_ID_BLOCK)
            assert stored is not None
            return list(blocks), stored[0]
        finally:
            for client in clients:
                await client.stop()

    blocks, stored = asyncio.run(scenario())
    starts = sorted(b.start for b in blocks)
    assert starts == [i * BLOCK_SIZE for i in range(24)]
    assert all(b.end == b.start + BLOCK_SIZE - 1 for b in blocks)
    last = json.loads(stored)
    assert last["version"] == 1 and last["block_start"] == str(23 * BLOCK_SIZE)
    assert last["block_end"] == str(24 * BLOCK_SIZE - 1) and last["broker"] in (0, 1, 2)


def _commit_raw(bootstrap: str, group: str, topic: str, offset: int) -> ErrorCode:
    request = OffsetCommitRequest(
        group_id=GroupId(group), generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=TopicName(topic), partitions=(OffsetCommitRequestPartition(
            partition_index=i32(0), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
            committed_metadata=""),)),))
    with connect(bootstrap, timeout=30) as sock:
        [answer] = call(sock, request).topics
    return ErrorCode(answer.partitions[0].error_code)


def test_an_offset_commit_is_answered_once_replicated(cluster: BrokerCluster) -> None:
    """Only the coordinator takes the group's commits. With both followers of the group's __consumer_offsets partition stalled, no commit is
    acknowledged: the coordinator waits for them, the ISR shrinks below
    min.insync.replicas, and the commit fails (COORDINATOR_NOT_AVAILABLE, retriable)."""
    topic, group = "durable-commits", "durable-group"
    create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
    coordinator = _coordinator(cluster, group)
    # FindCoordinator created __consumer_offsets; the first commit makes sure the
    # coordinator has loaded the partition.
    eventually(lambda: _commit_raw(cluster[coordinator].bootstrap, group, topic, 1) == ErrorCode.none,
               "a first commit")
    followers = [b for b in range(3) if b != coordinator]
    # The others do not coordinate the group: the client is sent to find its coordinator.
    assert _commit_raw(cluster[followers[0]].bootstrap, group, topic, 1) == ErrorCode.not_coordinator
    for b in followers:
        cluster.pause(b)
    try:
        assert _commit_raw(cluster[coordinator].bootstrap, group, topic, 2) == ErrorCode.coordinator_not_available
    finally:
        for b in followers:
            cluster.resume(b)
    partition = partition_for_group(group, INTERNAL_PARTITIONS)
    eventually(lambda: len(isr(cluster[coordinator].bootstrap, "__consumer_offsets", partition)) >= 2,
               "the followers back in the ISR")
    eventually(lambda: _commit_raw(cluster[coordinator].bootstrap, group, topic, 3) == ErrorCode.none,
               "a commit once replicated again")
