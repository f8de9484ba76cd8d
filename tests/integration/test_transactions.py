"""Transactions against a real broker process with real clients: confluent-kafka, aiokafka
and kafka-python transactional producers, read_committed consumers, the last stable offset,
zombie fencing, transaction timeouts (also across a broker restart), and a transactional
copier (Kafka's TransactionalMessageCopier) that is SIGKILLed repeatedly, or whose broker is.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from streamkit.testing import BrokerProcess
from tests.integration.util import QUIET, admin, create_topic, wait_until

BROKER_SETTINGS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    "transaction.state.log.num.partitions": 4,
}
COPIER = Path(__file__).with_name("txn_copier.py")
ROOT = Path(__file__).parents[2]


# -- helpers ----------------------------------------------------------------------------------


def txn_producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1,
                         **QUIET, **extra})
    producer.init_transactions(30)
    return producer


def plain_producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, **QUIET})


def read_values(bootstrap: str, topic: str, partitions: Iterable[int], isolation: str,
                timeout: float = 30) -> dict[int, list[bytes]]:
    """Every value of the partitions up to their end (the LSO for read_committed)."""
    from confluent_kafka import Consumer

    wanted = set(partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": isolation, **QUIET})
    out: dict[int, list[bytes]] = {p: [] for p in wanted}
    done: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in wanted])
        deadline = time.monotonic() + timeout
        while done != wanted:
            assert time.monotonic() < deadline, f"reading {topic} timed out: {out}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    done.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            out[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return out


def end_offset(bootstrap: str, topic: str, partition: int, committed: bool) -> int:
    """ListOffsets latest: the LSO with read_committed, the high watermark without."""
    client = admin(bootstrap)
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    tp = TopicPartition(topic, partition)
    futures = client.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level, request_timeout=15)
    return int(futures[tp].result(15).offset)


def produce(producer: Producer, topic: str, values: Iterable[bytes], partition: int) -> None:
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    producer.flush(30)


# -- confluent-kafka -----------------------------------------------------------------------


def test_commits_visible_aborts_invisible_interleaved_with_plain_records(broker: BrokerProcess,
                                                                         topic_name: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    a, b, plain = txn_producer(bs, f"{topic_name}-a"), txn_producer(bs, f"{topic_name}-b"), plain_producer(bs)
    committed: set[bytes] = set()
    for p in (0, 1):
        a.begin_transaction()
        produce(a, topic_name, [b"a1-%d" % p, b"a2-%d" % p], p)
        produce(plain, topic_name, [b"plain1-%d" % p], p)
        b.begin_transaction()
        produce(b, topic_name, [b"b1-%d" % p], p)  # aborted below
        produce(a, topic_name, [b"a3-%d" % p], p)
        a.commit_transaction(30)
        produce(plain, topic_name, [b"plain2-%d" % p], p)
        produce(b, topic_name, [b"b2-%d" % p], p)
        b.abort_transaction(30)
        a.begin_transaction()
        produce(a, topic_name, [b"a4-%d" % p], p)
        b.begin_transaction()
        produce(b, topic_name, [b"b3-%d" % p], p)
        a.abort_transaction(30)
        b.commit_transaction(30)
        committed |= {v % p for v in (b"a1-%d", b"a2-%d", b"plain1-%d", b"a3-%d", b"plain2-%d", b"b3-%d")}

    everything = read_values(bs, topic_name, (0, 1), "read_uncommitted")
    visible = read_values(bs, topic_name, (0, 1), "read_committed")
    for p in (0, 1):
        assert len(everything[p]) == 9
        # read_committed: the committed and plain records, in log order, nothing aborted
        assert visible[p] == [v for v in everything[p] if v in committed]
        assert not {b"b1-%d" % p, b"b2-%d" % p, b"a4-%d" % p} & set(visible[p])
        assert end_offset(bs, topic_name, p, committed=True) == end_offset(bs, topic_name, p, committed=False)


def test_open_transaction_holds_back_read_committed_only(broker: BrokerProcess, topic_name: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    plain = plain_producer(bs)
    produce(plain, topic_name, [b"before"], 0)
    producer = txn_producer(bs, topic_name)
    producer.begin_transaction()
    produce(producer, topic_name, [b"pending"], 0)  # offset 1: the first unstable offset
    produce(plain, topic_name, [b"after"], 0)
    assert end_offset(bs, topic_name, 0, committed=False) == 3
    assert end_offset(bs, topic_name, 0, committed=True) == 1  # ListOffsets read_committed: the LSO
    assert read_values(bs, topic_name, [0], "read_committed")[0] == [b"before"]
    assert read_values(bs, topic_name, [0], "read_uncommitted")[0] == [b"before", b"pending", b"after"]
    producer.commit_transaction(30)
    assert end_offset(bs, topic_name, 0, committed=True) == 4  # past the marker
    assert read_values(bs, topic_name, [0], "read_committed")[0] == [b"before", b"pending", b"after"]


def test_zombie_instance_is_fenced(broker: BrokerProcess, topic_name: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    zombie = txn_producer(bs, topic_name)
    zombie.begin_transaction()
    produce(zombie, topic_name, [b"zombie"], 0)
    successor = txn_producer(bs, topic_name)  # same transactional.id: fences the zombie
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic_name, value=b"late", partition=0)
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal(), raised.value
    successor.begin_transaction()
    produce(successor, topic_name, [b"successor"], 0)
    successor.commit_transaction(30)
    assert read_values(bs, topic_name, [0], "read_committed")[0] == [b"successor"]


def test_hung_transaction_pins_lso_until_timeout_then_is_aborted(broker: BrokerProcess, topic_name: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    hung = txn_producer(bs, topic_name, **{"transaction.timeout.ms": 3000})
    hung.begin_transaction()
    started = time.monotonic()
    produce(hung, topic_name, [b"hung"], 0)
    produce(plain_producer(bs), topic_name, [b"plain"], 0)
    pinned = end_offset(bs, topic_name, 0, committed=True)
    if time.monotonic() - started < 2.5:  # the check only means something before the timeout
        assert pinned == 0
    wait_until(lambda: end_offset(bs, topic_name, 0, committed=True) == 3, 30, "the coordinator's abort")
    assert time.monotonic() - started >= 3.0
    assert read_values(bs, topic_name, [0], "read_committed")[0] == [b"plain"]
    with pytest.raises(KafkaException):  # the timed-out producer was fenced by the abort
        hung.commit_transaction(10)


def test_hung_transaction_is_aborted_after_a_broker_restart(broker_factory: Callable[..., BrokerProcess],
                                                           topic_name: str) -> None:
    broker = broker_factory({**BROKER_SETTINGS, "log.flush.interval.messages": 1})
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    hung = txn_producer(bs, topic_name, **{"transaction.timeout.ms": 10_000})
    hung.begin_transaction()
    started = time.monotonic()
    produce(hung, topic_name, [b"hung"], 0)
    produce(plain_producer(bs), topic_name, [b"plain"], 0)
    broker.kill()  # SIGKILL with the transaction open
    hung.purge()
    del hung
    broker.start()
    assert broker.bootstrap == bs
    if time.monotonic() - started < 8:
        assert end_offset(bs, topic_name, 0, committed=True) == 0  # reloaded: still open
    wait_until(lambda: end_offset(bs, topic_name, 0, committed=True) == 3, 60, "the abort after restart")
    assert time.monotonic() - started >= 10.0
    assert read_values(bs, topic_name, [0], "read_committed")[0] == [b"plain"]


# -- aiokafka and kafka-python ------------------------------------------------------------


async def _aiokafka_round(bs: str, topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTP

    producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"{topic}-aio")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"aio-committed", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aio-aborted", partition=0)
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(topic, b"aio-committed-2", partition=0)
            await producer.send_offsets_to_transaction({AioTP(topic, 0): 11}, f"{topic}-aio-g")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    out: list[bytes] = []
    try:
        tp = AioTP(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert (await consumer.end_offsets([tp]))[tp] == 6  # 3 records, 3 markers
        deadline = time.monotonic() + 20
        while len(out) < 2 and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out.extend(r.value for r in records)
        for records in (await consumer.getmany(timeout_ms=500)).values():  # nothing more
            out.extend(r.value for r in records)
    finally:
        await consumer.stop()
    return out


def test_aiokafka_transactions_and_read_committed(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    assert asyncio.run(_aiokafka_round(broker.bootstrap, topic_name)) == [b"aio-committed", b"aio-committed-2"]
    assert _offset_fetch(broker.bootstrap, f"{topic_name}-aio-g", topic_name, True) == ("none", 11)
    assert read_values(broker.bootstrap, topic_name, [0], "read_committed")[0] == [b"aio-committed",
                                                                                   b"aio-committed-2"]


def test_kafka_python_transactions_and_read_committed(broker: BrokerProcess, topic_name: str) -> None:
    import kafka

    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    producer = kafka.KafkaProducer(bootstrap_servers=bs, transactional_id=f"{topic_name}-kp")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"kp-committed", partition=0).get(30)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic_name, b"kp-aborted", partition=0).get(30)
        producer.send_offsets_to_transaction(
            {kafka.TopicPartition(topic_name, 0): kafka.OffsetAndMetadata(3, "", -1)}, f"{topic_name}-kp-g")
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            {kafka.TopicPartition(topic_name, 0): kafka.OffsetAndMetadata(9, "", -1)}, f"{topic_name}-kp-g")
        producer.commit_transaction()
    finally:
        producer.close(10)
    assert _offset_fetch(bs, f"{topic_name}-kp-g", topic_name, True) == ("none", 9)
    consumer = kafka.KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                                   enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tp = kafka.TopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(out) < 1:
            for records in consumer.poll(200).values():
                out.extend(r.value for r in records)
        for records in consumer.poll(500).values():
            out.extend(r.value for r in records)
    finally:
        consumer.close()
    assert out == [b"kp-committed"]


# -- the transactional copier, killed -------------------------------------------------------


class Copier:
    """txn_copier.py as a subprocess, restarted whenever it exits before it is done."""

    def __init__(self, bs: str, source: str, sink: str, log: Path, pause_ms: int = 20) -> None:
        self.args = [sys.executable, str(COPIER), bs, source, sink, f"{source}-copier", f"{source}-group", "25",
                     str(pause_ms)]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def ensure_running(self) -> bool:
        """Start it if it is not running; True once an instance finished the copy (exit 0)."""
        if self.process is not None and self.process.poll() is None:
            return False
        if self.process is not None and self.process.returncode == 0:
            return True
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.starts += 1
        return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def commits(self) -> int:
        """Transactions committed so far, by every instance (each prints a line)."""
        if not self.log.exists():
            return 0
        return sum(1 for line in self.log.read_text(errors="replace").splitlines() if line == "committed")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def run_to_completion(self, timeout: float) -> None:
        wait_until(self.ensure_running, timeout, lambda: f"the copier to finish (log: {self.log})", interval=0.2)


def _fill_input(bs: str, topic: str, partitions: int, count: int) -> dict[int, list[bytes]]:
    producer = plain_producer(bs)
    expected: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for i in range(count):
        p = i % partitions
        value = b"record-%06d" % i
        expected[p].append(value)
        producer.produce(topic, value=value, partition=p)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    return expected


def test_copier_sigkilled_repeatedly_copies_exactly_once(broker: BrokerProcess, topic_name: str,
                                                         tmp_path: Path) -> None:
    bs = broker.bootstrap
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bs, source, 3)
    create_topic(bs, sink, 3)
    expected = _fill_input(bs, source, 3, 6000)
    copier = Copier(bs, source, sink, tmp_path / "copier.log", pause_ms=40)
    rng = random.Random(7)
    kills = 0
    try:
        for _ in range(5):
            before = copier.commits()
            copier.ensure_running()
            # kill once it is making progress: after its first commits, at a random moment
            wait_until(lambda b=before: copier.commits() > b or copier.ensure_running(), 60,
                       "copier progress", interval=0.01)
            time.sleep(rng.uniform(0.0, 0.3))
            if copier.process is not None and copier.process.poll() is None:
                copier.kill()
                kills += 1
        copier.run_to_completion(120)
    finally:
        copier.kill()
    assert kills >= 3, f"only {kills} kills landed before the copy finished; copier log:\n{copier.tail()}"
    assert read_values(bs, sink, range(3), "read_committed") == expected
    # aborted copies (of the killed instances) are in the log but invisible
    assert sum(len(v) for v in read_values(bs, sink, range(3), "read_uncommitted").values()) >= 6000


def test_copier_survives_broker_sigkills_exactly_once(broker_factory: Callable[..., BrokerProcess],
                                                      topic_name: str, tmp_path: Path) -> None:
    broker = broker_factory({**BROKER_SETTINGS, "log.flush.interval.messages": 1})
    bs = broker.bootstrap
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bs, source, 3)
    create_topic(bs, sink, 3)
    expected = _fill_input(bs, source, 3, 3000)
    copier = Copier(bs, source, sink, tmp_path / "copier.log")
    kills = 0
    try:
        for _ in range(3):
            before = copier.commits()
            copier.ensure_running()
            wait_until(lambda b=before: copier.commits() > b or copier.ensure_running(), 60,
                       "copier progress", interval=0.01)
            if copier.process is not None and copier.process.poll() is None:
                broker.kill()
                kills += 1
                broker.start()
                assert broker.bootstrap == bs
        copier.run_to_completion(180)
    finally:
        copier.kill()
    assert kills >= 2, f"only {kills} broker kills landed; copier log:\n{copier.tail()}"
    assert read_values(bs, sink, range(3), "read_committed") == expected


def test_describe_and_list_transactions_raw(broker: BrokerProcess, topic_name: str) -> None:
    """DescribeTransactions and ListTransactions over the wire (no client library wraps them)."""
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest

    from tests.integration.util import call, connect

    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    producer = txn_producer(bs, topic_name)
    producer.begin_transaction()
    produce(producer, topic_name, [b"x"], 0)
    with connect(bs) as sock:
        described = call(sock, DescribeTransactionsRequest(transactional_ids=(topic_name, "missing")))
        listed = call(sock, ListTransactionsRequest(state_filters=("Ongoing",), producer_id_filters=(),
                                                    duration_filter=-1))
    first, missing = described.transaction_states
    assert first.transaction_state == "Ongoing"
    assert [(t.topic, tuple(t.partitions)) for t in first.topics] == [(topic_name, (0,))]
    assert missing.error_code.name == "transactional_id_not_found"
    assert topic_name in {t.transactional_id for t in listed.transaction_states}
    producer.abort_transaction(30)


def _offset_fetch(bs: str, group: str, topic: str, require_stable: bool) -> tuple[str, int]:
    from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
    from kio.static.primitive import i32

    from tests.integration.util import call, connect

    with connect(bs) as sock:
        response = call(sock, OffsetFetchRequest(
            group_id=group, topics=(OffsetFetchRequestTopic(name=topic, partition_indexes=(i32(0),)),),
            require_stable=require_stable))
    (partition,) = response.topics[0].partitions
    return partition.error_code.name, int(partition.committed_offset)


def test_offsets_sent_in_a_transaction_are_visible_only_on_commit(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import Consumer

    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    group = f"{topic_name}-g"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, **QUIET})
    try:
        metadata = consumer.consumer_group_metadata()
        producer = txn_producer(bs, topic_name)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic_name, 0, 5)], metadata, 30)
        # pending: a stable read is refused (retriable), a plain read does not see it
        assert _offset_fetch(bs, group, topic_name, True) == ("unstable_offset_commit", -1)
        assert _offset_fetch(bs, group, topic_name, False) == ("none", -1)
        producer.abort_transaction(30)
        assert _offset_fetch(bs, group, topic_name, True) == ("none", -1)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic_name, 0, 7)], metadata, 30)
        producer.commit_transaction(30)
        assert _offset_fetch(bs, group, topic_name, True) == ("none", 7)
        committed = consumer.committed([TopicPartition(topic_name, 0)], timeout=15)
        assert committed[0].offset == 7
    finally:
        consumer.close()
