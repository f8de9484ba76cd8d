"""Share groups (KIP-932) against a real broker process with confluent-kafka's ShareConsumer
(librdkafka's share consumer), plus raw kio requests for the share-group offsets APIs that
no Python client exposes yet."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.static.primitive import i32, i64

from streamkit.broker.errors import ErrorCode
from streamkit.testing import BrokerProcess
from tests.integration.test_cli import table_rows
from tests.integration.util import admin, call, connect, create_topic, wait_until

BROKER_SETTINGS = {
    # long enough that a loaded machine acknowledges within it; the kill test waits for it
    "group.share.record.lock.duration.ms": "5000",
    "group.share.delivery.count.limit": "3",
    "group.share.heartbeat.interval.ms": "500",
}


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = -1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        producer.produce(topic, value=v, partition=partition)
    assert producer.flush(30) == 0


def _produce_batches(bootstrap: str, topic: str, batches: list[list[bytes]], partition: int = 0) -> None:
    """Each list as one batch in the log (flushed before the next). The linger is long so
    that only flush() sends (it does not wait for linger.ms): with a short one, a loaded
    machine's produce() loop outlasts it and the list goes out in several batches."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 60_000, "batch.num.messages": 100_000})
    for batch in batches:
        for v in batch:
            producer.produce(topic, value=v, partition=partition)
        assert producer.flush(30) == 0


def _consumer(bootstrap: str, group: str, explicit: bool = False) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    return consumer


def _start_from_earliest(bootstrap: str, group: str, topic: str, partitions: int = 1) -> None:
    with connect(bootstrap) as sock:
        reply = call(sock, AlterShareGroupOffsetsRequest(group_id=group, topics=(
            AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=tuple(
                AlterShareGroupOffsetsRequestPartition(partition_index=i32(p), start_offset=i64(0))
                for p in range(partitions))),)))
    assert reply.error_code == ErrorCode.none
    assert all(p.error_code == ErrorCode.none for t in reply.responses for p in t.partitions)


def _share_offsets(bootstrap: str, group: str, topic: str) -> list[tuple[int, int, int]]:
    with connect(bootstrap) as sock:
        reply = call(sock, DescribeShareGroupOffsetsRequest(groups=(DescribeShareGroupOffsetsRequestGroup(
            group_id=group, topics=(DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(i32(0),)),)),)))
    return [(int(p.partition_index), int(p.start_offset), int(p.lag))
            for t in reply.groups[0].topics for p in t.partitions]


def _members(bootstrap: str, group: str) -> int:
    with connect(bootstrap) as sock:
        reply = call(sock, ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False))
    return len(reply.groups[0].members)


class _Reader(threading.Thread):
    """One share consumer polling in its own thread (the client is not thread-safe)."""

    def __init__(self, bootstrap: str, group: str, topic: str,
                 ack: Callable[[Any], Any] | None = None) -> None:
        super().__init__(daemon=True)
        self.consumer = _consumer(bootstrap, group, explicit=ack is not None)
        self.consumer.subscribe([topic])
        self.ack = ack
        self.seen: list[bytes] = []
        self.running = True
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while self.running:
                for m in self.consumer.poll(0.2).records():
                    if m.error():
                        continue
                    self.seen.append(m.value())
                    if self.ack is not None:
                        self.consumer.acknowledge(m, self.ack(m))
                if self.ack is not None:
                    self.consumer.commit_sync()
        except BaseException as exc:  # reported by the test thread
            self.error = exc
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.running = False
        self.join(30)
        assert not self.is_alive()
        if self.error is not None:
            raise self.error


def test_consumers_sharing_one_partition_get_every_record_exactly_once(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    values = [b"r%04d" % i for i in range(600)]
    _produce(broker.bootstrap, topic_name, values)
    _start_from_earliest(broker.bootstrap, "g-once", topic_name)
    readers = [_Reader(broker.bootstrap, "g-once", topic_name) for _ in range(3)]
    for r in readers:
        r.start()
    try:
        wait_until(lambda: sum(len(r.seen) for r in readers) >= len(values), 60,
                   lambda: f"{sum(len(r.seen) for r in readers)} of {len(values)} delivered")
        wait_until(lambda: _share_offsets(broker.bootstrap, "g-once", topic_name) == [(0, 600, 0)], 30,
                   lambda: f"share offsets {_share_offsets(broker.bootstrap, 'g-once', topic_name)}")
        # Two readers can take all 600 records before the third's first heartbeat joins it:
        # wait for the join rather than expect it to come first.
        wait_until(lambda: _members(broker.bootstrap, "g-once") == 3, 30,
                   lambda: f"{_members(broker.bootstrap, 'g-once')} of 3 members")
    finally:
        for r in readers:
            r.stop()
    seen = Counter(v for r in readers for v in r.seen)
    assert sorted(seen) == values
    assert max(seen.values()) == 1
    assert _members(broker.bootstrap, "g-once") == 0  # close() left the group


_HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
while True:
    records = [m for m in c.poll(0.5).records() if not m.error()]
    if records:
        print(" ".join(m.value().decode() for m in records), flush=True)
        time.sleep(3600)  # holds its records, never acknowledges
"""


def test_a_killed_consumers_records_go_to_the_others_after_the_lock(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    values = [b"k%03d" % i for i in range(50)]
    _produce(broker.bootstrap, topic_name, values)
    _start_from_earliest(broker.bootstrap, "g-kill", topic_name)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, broker.bootstrap, "g-kill", topic_name],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        held = holder.stdout.readline().split()
        assert held, "the holder got no records"
    finally:
        holder.kill()
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
    killed_at = time.monotonic()
    reader = _Reader(broker.bootstrap, "g-kill", topic_name)
    reader.start()
    try:
        wait_until(lambda: len(set(reader.seen)) >= len(values), 60,
                   lambda: f"{len(set(reader.seen))} of {len(values)} delivered")
    finally:
        reader.stop()
    assert sorted(set(reader.seen)) == values
    assert {v.encode() for v in held} <= set(reader.seen)
    assert time.monotonic() - killed_at >= 3.0  # the held ones waited for their lock


def test_a_poison_record_is_archived_after_the_delivery_limit(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    values = [b"ok1", b"poison", b"ok2"]
    _produce(broker.bootstrap, topic_name, values)
    _start_from_earliest(broker.bootstrap, "g-poison", topic_name)

    def ack(m: Any) -> Any:
        return AcknowledgeType.RELEASE if m.value() == b"poison" else AcknowledgeType.ACCEPT

    reader = _Reader(broker.bootstrap, "g-poison", topic_name, ack=ack)
    reader.start()
    try:
        wait_until(lambda: _share_offsets(broker.bootstrap, "g-poison", topic_name) == [(0, 3, 0)], 60,
                   lambda: f"share offsets {_share_offsets(broker.bootstrap, 'g-poison', topic_name)}, "
                           f"seen {reader.seen}")
        time.sleep(1)  # nothing more may come
    finally:
        reader.stop()
    counts = Counter(reader.seen)
    assert counts == {b"ok1": 1, b"ok2": 1, b"poison": 3}


def test_share_state_survives_a_broker_sigkill(tmp_path: Path, topic_name: str) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, settings=BROKER_SETTINGS).start()
    try:
        create_topic(broker.bootstrap, topic_name, 1)
        values = [b"s%03d" % i for i in range(40)]
        _produce(broker.bootstrap, topic_name, values)
        _start_from_earliest(broker.bootstrap, "g-kill9", topic_name)
        accepted: list[bytes] = []
        held: list[bytes] = []
        consumer = _consumer(broker.bootstrap, "g-kill9", explicit=True)
        consumer.subscribe([topic_name])
        try:
            while len(accepted) < 20:
                for m in consumer.poll(0.5).records():
                    if m.error():
                        continue
                    if len(accepted) < 20:
                        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                        accepted.append(m.value())
                    else:
                        held.append(m.value())  # acquired, never acknowledged
                consumer.commit_sync()
            wait_until(lambda: _share_offsets(broker.bootstrap, "g-kill9", topic_name)[0][1] >= 20, 30,
                       "the accepted records settled")
            broker.kill()
        finally:
            consumer.close()
        broker = BrokerProcess(data, settings=BROKER_SETTINGS).start()
        assert _share_offsets(broker.bootstrap, "g-kill9", topic_name)[0][1] >= 20
        reader = _Reader(broker.bootstrap, "g-kill9", topic_name)
        reader.start()
        try:
            wait_until(lambda: len(reader.seen) >= len(values) - len(accepted), 60,
                       lambda: f"{len(reader.seen)} of {len(values) - len(accepted)} redelivered")
            time.sleep(0.5)
        finally:
            reader.stop()
        assert not set(reader.seen) & set(accepted)  # accepted ones never come back
        assert sorted(reader.seen) == sorted(set(values) - set(accepted))
    finally:
        broker.stop()


def test_max_poll_records_ends_a_poll_at_a_batch_boundary(broker: BrokerProcess, topic_name: str) -> None:
    """Records are acquired whole log batches at a time: with max.poll.records=5 over
    batches of 3, a poll gets two whole batches (6 records), never part of one."""
    create_topic(broker.bootstrap, topic_name, 1)
    _produce_batches(broker.bootstrap, topic_name, [[b"%02d" % (i + j) for j in range(3)] for i in range(0, 12, 3)])
    _start_from_earliest(broker.bootstrap, "g-batches", topic_name)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-batches", "max.poll.records": 5})
    consumer.subscribe([topic_name])
    polls: list[list[int]] = []
    try:
        deadline = time.monotonic() + 30
        while sum(map(len, polls)) < 12 and time.monotonic() < deadline:
            got = [m.offset() for m in consumer.poll(0.5).records() if not m.error()]
            if got:
                polls.append(got)
    finally:
        consumer.close()
    assert polls == [list(range(6)), list(range(6, 12))]


def test_records_an_acknowledgement_frees_go_to_a_waiting_member_first(broker: BrokerProcess, topic_name: str) -> None:
    """Batches bigger than group.share.partition.max.record.locks fill the in-flight window
    one at a time. A member that accepts its batch and fetches in one request must not take
    the next batch from a member already waiting for it (Kafka serves delayed share fetches
    first), or one busy member starves the others."""
    create_topic(broker.bootstrap, topic_name, 1)
    _produce_batches(broker.bootstrap, topic_name, [[b"w%04d" % i for i in range(2500)] for _ in range(2)])
    _start_from_earliest(broker.bootstrap, "g-fair", topic_name)
    with connect(broker.bootstrap) as sock1, connect(broker.bootstrap) as sock2:
        topic_id = _heartbeat(sock1, "g-fair", "m1", 0, (topic_name,)).assignment.topic_partitions[0].topic_id
        _heartbeat(sock2, "g-fair", "m2", 0, (topic_name,))
        first = _share_fetch(sock1, "g-fair", "m1", 0, topic_id, max_records=500)
        assert [(r.first_offset, r.last_offset) for r in first.responses[0].partitions[0].acquired_records] == [(0, 2499)]
        waiting: list[Any] = []
        waiter = threading.Thread(target=lambda: waiting.append(
            _share_fetch(sock2, "g-fair", "m2", 0, topic_id, max_records=500, max_wait_ms=10_000)))
        waiter.start()
        with connect(broker.bootstrap) as sock3:
            # m2's share session exists once its ShareFetch found the window full and parked
            # (one step on the broker's loop), which an empty ShareAcknowledge in it tells
            wait_until(lambda: _session_open(sock3, "g-fair", "m2"), 10, "m2's ShareFetch is parked")
        assert waiter.is_alive()
        second = _share_fetch(sock1, "g-fair", "m1", 1, topic_id, acks=((0, 2499, 1),), max_records=500)
        waiter.join(15)
        assert not waiter.is_alive()
    assert second.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
    assert not second.responses[0].partitions[0].acquired_records
    [got] = waiting
    assert [(r.first_offset, r.last_offset) for r in got.responses[0].partitions[0].acquired_records] == [(2500, 4999)]


def _session_open(sock: Any, group: str, member: str) -> bool:
    from kio.schema.share_acknowledge.v1.request import ShareAcknowledgeRequest

    reply = call(sock, ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=i32(1),
                                               topics=()))
    return bool(reply.error_code == ErrorCode.none)


def test_acknowledgements_in_a_share_fetch_are_never_redelivered_after_sigkill(tmp_path: Path, topic_name: str) -> None:
    """A ShareFetch that settles records and acquires more writes both in one batch to
    ``__share_group_state`` before its answer: after SIGKILL, what it accepted or rejected
    never comes back, and what was acquired but not settled comes back counted."""
    data = tmp_path / "data"
    broker = BrokerProcess(data, settings=BROKER_SETTINGS).start()
    try:
        create_topic(broker.bootstrap, topic_name, 1)
        _produce_batches(broker.bootstrap, topic_name, [[b"d%02d" % (i + j) for j in range(4)] for i in range(0, 12, 4)])
        _start_from_earliest(broker.bootstrap, "g-acks9", topic_name)
        with connect(broker.bootstrap) as sock:
            topic_id = _heartbeat(sock, "g-acks9", "m1", 0, (topic_name,)).assignment.topic_partitions[0].topic_id
            first = _share_fetch(sock, "g-acks9", "m1", 0, topic_id, max_records=4)
            assert [(r.first_offset, r.last_offset) for r in first.responses[0].partitions[0].acquired_records] == [(0, 3)]
            second = _share_fetch(sock, "g-acks9", "m1", 1, topic_id, acks=((0, 3, 1),), max_records=4)
            [part] = second.responses[0].partitions
            assert part.acknowledge_error_code == ErrorCode.none
            assert [(r.first_offset, r.last_offset) for r in part.acquired_records] == [(4, 7)]
            # accept 4-5, reject 6, keep 7; acquire 8-11 in the same request
            third = _share_fetch(sock, "g-acks9", "m1", 2, topic_id, acks=((4, 5, 1), (6, 6, 3)), max_records=4)
            [part] = third.responses[0].partitions
            assert part.acknowledge_error_code == ErrorCode.none
            assert [(r.first_offset, r.last_offset) for r in part.acquired_records] == [(8, 11)]
        broker.kill()
        broker = BrokerProcess(data, settings=BROKER_SETTINGS).start()
        assert _share_offsets(broker.bootstrap, "g-acks9", topic_name)[0][1] == 7
        with connect(broker.bootstrap) as sock:
            _heartbeat(sock, "g-acks9", "m2", 0, (topic_name,))
            again = _share_fetch(sock, "g-acks9", "m2", 0, topic_id, max_records=100)
            redelivered = [(r.first_offset, r.last_offset, r.delivery_count)
                           for r in again.responses[0].partitions[0].acquired_records]
            assert redelivered == [(7, 11, 2)]
            assert not _share_fetch(sock, "g-acks9", "m2", 1, topic_id, max_records=100).responses[0].partitions[0].acquired_records
    finally:
        broker.stop()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "streamkit", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    return done


def test_cli_lists_and_describes_a_share_group_with_its_lag(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    _produce(broker.bootstrap, topic_name, [b"a", b"b", b"c", b"d"])
    _start_from_earliest(broker.bootstrap, "g-cli", topic_name)
    assert _share_offsets(broker.bootstrap, "g-cli", topic_name) == [(0, 0, 4)]
    reader = _Reader(broker.bootstrap, "g-cli", topic_name)
    reader.start()
    try:
        wait_until(lambda: _members(broker.bootstrap, "g-cli") == 1, 30, "the member joined")
        listed = _cli("groups", "list", "--bootstrap-server", broker.bootstrap).stdout
        assert ["g-cli", "share", "share"] in table_rows(listed)
        wait_until(lambda: _share_offsets(broker.bootstrap, "g-cli", topic_name) == [(0, 4, 0)], 30,
                   "the records were accepted")
        described = _cli("groups", "describe", "g-cli", "--bootstrap-server", broker.bootstrap).stdout
    finally:
        reader.stop()
    assert "share group g-cli: Stable" in described and "1 members" in described
    assert f"{topic_name}-0" in described
    row = next(line for line in described.splitlines() if topic_name in line and "│" in line)
    assert [c.strip() for c in row.split("│")[2:5]] == ["0", "4", "0"]


def test_read_committed_share_group_skips_aborted_and_open_transactions(tmp_path: Path, topic_name: str) -> None:
    from confluent_kafka import Producer as TxnProducer

    from streamkit.testing import BrokerThread

    with BrokerThread(tmp_path / "data", settings=BROKER_SETTINGS) as thread:
        bootstrap = thread.bootstrap
        # share.isolation.level / share.auto.offset.reset as the group's own configs, set
        # with IncrementalAlterConfigs on the GROUP resource as Kafka 4's admin tools do
        resource = ConfigResource(ResourceType.GROUP, "g-rc", incremental_configs=[
            ConfigEntry("share.isolation.level", "read_committed",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)])
        client = admin(bootstrap)
        client.incremental_alter_configs([resource])[resource].result(30)
        create_topic(bootstrap, topic_name, 1)
        producer = TxnProducer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic_name}"})
        producer.init_transactions(30)
        for tag, commit in (("c1", True), ("a1", False), ("c2", True)):
            producer.begin_transaction()
            for i in range(3):
                producer.produce(topic_name, value=f"{tag}-{i}".encode())
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        producer.begin_transaction()
        producer.produce(topic_name, value=b"open-0")  # still open: beyond the LSO
        producer.flush(30)
        reader = _Reader(bootstrap, "g-rc", topic_name)
        reader.start()
        try:
            wait_until(lambda: len(reader.seen) >= 6, 60, lambda: f"seen {reader.seen}")
            time.sleep(1)
        finally:
            reader.stop()
        assert sorted(reader.seen) == sorted(f"{t}-{i}".encode() for t in ("c1", "c2") for i in range(3))
        producer.abort_transaction(30)


def _heartbeat(sock: Any, group: str, member: str, epoch: int, topics: tuple[str, ...] | None) -> Any:
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

    return call(sock, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=i32(epoch),
                                                 subscribed_topic_names=topics))


def _share_fetch(sock: Any, group: str, member: str, epoch: int, topic_id: Any,
                 acks: tuple[tuple[int, int, int], ...] = (), max_records: int = 2,
                 max_bytes: int = 2**31 - 1, max_wait_ms: int = 200) -> Any:
    from datetime import timedelta

    from kio.schema.share_fetch.v1.request import (
        AcknowledgementBatch,
        FetchPartition,
        FetchTopic,
        ShareFetchRequest,
    )
    from kio.static.primitive import i8

    batches = tuple(AcknowledgementBatch(first_offset=i64(f), last_offset=i64(last), acknowledge_types=(i8(t),))
                    for f, last, t in acks)
    return call(sock, ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=i32(epoch), max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(1), max_bytes=i32(max_bytes), max_records=i32(max_records), batch_size=i32(max_records),
        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(partition_index=i32(0),
                                                                         acknowledgement_batches=batches),)),),
        forgotten_topics_data=()))


def test_share_protocol_errors_on_the_wire(broker: BrokerProcess, topic_name: str) -> None:
    """Members, epochs, share sessions and acknowledgements, by raw requests: each mistake
    gets Kafka's error code and the state stays as it was."""
    create_topic(broker.bootstrap, topic_name, 2)
    _produce_batches(broker.bootstrap, topic_name, [[b"x%d" % i, b"x%d" % (i + 1)] for i in range(0, 8, 2)])
    _start_from_earliest(broker.bootstrap, "g-wire", topic_name, partitions=2)
    with connect(broker.bootstrap) as sock:
        assert _heartbeat(sock, "g-wire", "m1", 3, None).error_code == ErrorCode.unknown_member_id
        one = _heartbeat(sock, "g-wire", "m1", 0, (topic_name,))
        assert one.error_code == ErrorCode.none and one.member_epoch >= 1
        [tp] = one.assignment.topic_partitions
        assert sorted(tp.partitions) == [0, 1]
        two = _heartbeat(sock, "g-wire", "m2", 0, (topic_name,))
        assert sorted(two.assignment.topic_partitions[0].partitions) in ([0], [1])
        assert _heartbeat(sock, "g-wire", "m1", one.member_epoch + 5, None).error_code == ErrorCode.fenced_member_epoch
        again = _heartbeat(sock, "g-wire", "m1", one.member_epoch, None)
        assert again.member_epoch == two.member_epoch  # m1 catches up; it keeps one partition
        assert len(again.assignment.topic_partitions[0].partitions) == 1
        topic_id = tp.topic_id

        assert _share_fetch(sock, "g-wire", "nobody", 0, topic_id).error_code == ErrorCode.unknown_member_id
        assert _share_fetch(sock, "g-wire", "m1", 1, topic_id).error_code == ErrorCode.share_session_not_found
        first = _share_fetch(sock, "g-wire", "m1", 0, topic_id)
        assert first.error_code == ErrorCode.none
        [part] = first.responses[0].partitions
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in part.acquired_records] == [(0, 1, 1)]
        assert _share_fetch(sock, "g-wire", "m1", 5, topic_id).error_code == ErrorCode.invalid_share_session_epoch
        # m1 accepts 0-1 with its next fetch, which acquires 2-3
        good = _share_fetch(sock, "g-wire", "m1", 1, topic_id, acks=((0, 1, 1),))
        [part] = good.responses[0].partitions
        assert part.acknowledge_error_code == ErrorCode.none
        assert [(r.first_offset, r.last_offset) for r in part.acquired_records] == [(2, 3)]
        assert _share_offsets(broker.bootstrap, "g-wire", topic_name)[0][1] == 2
        # m2 may not settle m1's records
        assert _share_fetch(sock, "g-wire", "m2", 0, topic_id).error_code == ErrorCode.none  # acquires 4-5
        bad = _share_fetch(sock, "g-wire", "m2", 1, topic_id, acks=((2, 3, 1),))
        assert bad.responses[0].partitions[0].acknowledge_error_code == ErrorCode.invalid_record_state
        # leaving releases what m1 still holds; alters are refused while m2 remains
        assert _heartbeat(sock, "g-wire", "m1", -1, None).member_epoch == -1
        with pytest.raises(AssertionError):
            _start_from_earliest(broker.bootstrap, "g-wire", topic_name)
        fetched = _share_fetch(sock, "g-wire", "m2", 2, topic_id)
        redelivered = [(r.first_offset, r.last_offset, r.delivery_count)
                       for r in fetched.responses[0].partitions[0].acquired_records]
        assert redelivered == [(2, 3, 2)]


def test_a_classic_groups_id_is_refused_to_share_members(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, topic_name, 1)
    _produce(broker.bootstrap, topic_name, [b"c"])
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-classic"})
    try:
        classic.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    finally:
        classic.close()
    with connect(broker.bootstrap) as sock:
        reply = _heartbeat(sock, "g-classic", "m1", 0, (topic_name,))
    assert reply.error_code == ErrorCode.inconsistent_group_protocol
    assert "not a share group" in reply.error_message


def test_records_beyond_max_bytes_stay_available_and_uncounted(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(4):  # one batch each
        producer.produce(topic_name, value=bytes([65 + i]) * 1000, partition=0)
        assert producer.flush(30) == 0
    _start_from_earliest(broker.bootstrap, "g-bytes", topic_name)
    with connect(broker.bootstrap) as sock:
        one = _heartbeat(sock, "g-bytes", "m1", 0, (topic_name,))
        topic_id = one.assignment.topic_partitions[0].topic_id
        small = _share_fetch(sock, "g-bytes", "m1", 0, topic_id, max_records=10, max_bytes=1500)
        [part] = small.responses[0].partitions
        assert [(r.first_offset, r.last_offset) for r in part.acquired_records] == [(0, 0)]
        assert 1000 < len(part.records) < 1500
        rest = _share_fetch(sock, "g-bytes", "m1", 1, topic_id, max_records=10)
        acquired = [(r.first_offset, r.last_offset, r.delivery_count) for r in rest.responses[0].partitions[0].acquired_records]
        assert acquired == [(1, 3, 1)]  # first delivery: the records cut off before were not counted


def test_delete_groups_deletes_an_empty_share_group(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, topic_name, 1)
    _start_from_earliest(broker.bootstrap, "g-del", topic_name)
    assert _share_offsets(broker.bootstrap, "g-del", topic_name) == [(0, 0, 0)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_consumer_groups(["g-del"])["g-del"].result(30)
    assert _share_offsets(broker.bootstrap, "g-del", topic_name) == [(0, -1, -1)]


def test_a_topic_deleted_and_created_again_starts_fresh_for_an_existing_share_group(
        tmp_path: Path, topic_name: str) -> None:
    """Share-partition state and assignments belong to a topic id: a consumer subscribed
    while its topic is deleted and created again under the same name (between two of its
    heartbeats) gets the new topic's records, from the start, not the old topic's window."""
    group = "g-recreate"
    settings = {**BROKER_SETTINGS, "group.share.heartbeat.interval.ms": "5000"}
    broker = BrokerProcess(tmp_path / "data", settings=settings).start()
    try:
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        client = admin(broker.bootstrap)
        client.incremental_alter_configs([resource])[resource].result(30)
        create_topic(broker.bootstrap, topic_name, 1)
        _produce(broker.bootstrap, topic_name, [b"old%d" % i for i in range(6)])
        reader = _Reader(broker.bootstrap, group, topic_name)
        reader.start()
        try:
            wait_until(lambda: len(reader.seen) >= 6, 60, lambda: f"seen {reader.seen}")
            wait_until(lambda: _share_offsets(broker.bootstrap, group, topic_name) == [(0, 6, 0)], 30,
                       lambda: f"share offsets {_share_offsets(broker.bootstrap, group, topic_name)}")
            client.delete_topics([topic_name])[topic_name].result(30)
            create_topic(broker.bootstrap, topic_name, 1)
            new = [b"new%d" % i for i in range(3)]
            _produce(broker.bootstrap, topic_name, new)
            wait_until(lambda: len(reader.seen) >= 9, 30, lambda: f"seen {reader.seen} of the new topic's {new}")
            wait_until(lambda: _share_offsets(broker.bootstrap, group, topic_name) == [(0, 3, 0)], 30,
                       lambda: f"share offsets {_share_offsets(broker.bootstrap, group, topic_name)}")
        finally:
            reader.stop()
        assert sorted(reader.seen[6:]) == new
    finally:
        broker.stop()
