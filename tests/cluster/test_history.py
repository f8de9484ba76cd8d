"""The history checker: each anomaly on a hand-made history, and a history recorded
against a real broker that is clean until records really disappear."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.testing import BrokerThread
from streamkit.testing_history import History, Read, Record, Reordering, UnstableRead, full_read


def acked(history: History, producer: str, value: str, partition: int, offset: int) -> None:
    history.ack(history.produce(producer, value), partition, offset)


def test_a_clean_history_has_no_anomaly() -> None:
    history = History()
    acked(history, "p1", "a", 0, 0)
    acked(history, "p2", "x", 0, 1)
    acked(history, "p1", "b", 0, 2)
    history.produce("p1", "never-sent")  # unknown, absent: allowed
    history.fail(history.produce("p2", "refused"))  # failed, absent: allowed
    history.read([(0, 0, "a")])
    history.read([(0, 0, "a"), (0, 1, "x"), (0, 2, "b")], final=True)
    report = history.check()
    assert report.ok, report
    assert (report.acknowledged, report.final_read) == (3, 3)
    assert str(report) == "3 acknowledged, 3 in the final read: no anomaly"


def test_a_history_needs_a_final_read() -> None:
    history = History()
    history.read([(0, 0, "a")])
    with pytest.raises(ValueError, match="no final read"):
        history.check()


def test_an_acknowledged_record_missing_from_the_final_read_is_lost() -> None:
    history = History()
    acked(history, "p1", "a", 0, 0)
    acked(history, "p1", "b", 0, 1)
    history.read([(0, 0, "a"), (0, 1, "b")])
    history.read([(0, 0, "a")], ranges={("", 0): (0, 1)}, final=True)
    report = history.check()
    assert [op.value for op in report.lost] == ["b"]
    assert not report.ok and "lost: 'b'" in str(report)


def test_a_value_at_two_offsets_is_a_duplicate_whatever_its_outcome() -> None:
    history = History()
    acked(history, "p1", "a", 0, 0)
    history.produce("p1", "retried")  # unknown: may appear, but once
    history.read([(0, 0, "a"), (0, 1, "retried"), (0, 2, "a"), (0, 3, "retried")], final=True)
    report = history.check()
    assert report.duplicates == {"a": [("", 0, 0), ("", 0, 2)], "retried": [("", 0, 1), ("", 0, 3)]}
    assert not report.ok


def test_a_duplicate_across_partitions_and_across_reads() -> None:
    history = History()
    acked(history, "p1", "a", 0, 0)
    history.read([(1, 7, "a")])  # an earlier read of partition 1 only
    history.read([(0, 0, "a")], ranges={("", 0): (0, 1)}, final=True)
    assert history.check().duplicates == {"a": [("", 0, 0), ("", 1, 7)]}


def test_failed_and_unknown_records_that_appear_once_are_no_anomaly() -> None:
    history = History()
    failed = history.produce("p1", "failed")
    history.fail(failed)
    history.produce("p1", "unknown")
    history.read([(0, 0, "failed"), (0, 1, "unknown")], final=True)
    report = history.check()
    assert report.ok, report
    assert report.failed_present == [failed]


def test_one_producers_records_in_another_order_than_acknowledged_are_reordered() -> None:
    history = History()
    acked(history, "p1", "a", 0, 1)
    acked(history, "p1", "b", 0, 0)
    acked(history, "p1", "c", 0, 2)
    history.read([(0, 0, "b"), (0, 1, "a"), (0, 2, "c")], final=True)
    report = history.check()
    assert report.reordered == [Reordering("p1", "a", "b", ("", 0, 1), ("", 0, 0))]
    assert report.misplaced == []  # each sits where its acknowledgement said


def test_order_is_only_per_producer_and_partition() -> None:
    history = History()
    acked(history, "p1", "a", 0, 1)
    acked(history, "p2", "x", 0, 0)  # another producer: any order
    acked(history, "p1", "b", 1, 0)  # another partition: any order
    history.read([(0, 0, "x"), (0, 1, "a"), (1, 0, "b")], final=True)
    assert history.check().ok


def test_acknowledgement_order_counts_not_the_order_of_sends() -> None:
    history = History()
    first, second = history.produce("p1", "a"), history.produce("p1", "b")
    history.ack(second, 0, 0)  # acknowledged first
    history.ack(first, 0, 1)
    history.read([(0, 0, "b"), (0, 1, "a")], final=True)
    assert history.check().ok


def test_a_read_value_replaced_later_is_an_unstable_read() -> None:
    history = History()
    acked(history, "p1", "a", 0, 0)
    history.produce("p1", "b")  # unknown: read once, then truncated away
    history.produce("p1", "c")
    history.read([(0, 0, "a"), (0, 1, "b")])
    history.read([(0, 0, "a"), (0, 1, "c")], final=True)
    report = history.check()
    assert report.unstable == [UnstableRead(("", 0, 1), "b", "c")]
    assert report.duplicates == {} and report.lost == []


def test_a_read_value_gone_later_is_an_unstable_read_only_where_the_later_read_looked() -> None:
    history = History()
    for value in "abc":
        history.produce("p1", value)
    history.read([(0, 0, "a"), (0, 1, "b"), (0, 2, "c")])
    # Reads offsets 0 and 1 only: b vanished; c at offset 2 was not looked at.
    history.read([(0, 0, "a")], ranges={("", 0): (0, 2)})
    history.read([(0, 2, "c")], final=True)
    assert history.check().unstable == [UnstableRead(("", 0, 1), "b", None)]


def test_an_acknowledged_record_elsewhere_than_acknowledged_is_misplaced() -> None:
    history = History()
    acked(history, "p1", "a", 0, 0)
    history.read([(0, 3, "a")], final=True)
    report = history.check()
    assert [(op.value, at) for op, at in report.misplaced] == [("a", ("", 0, 3))]
    assert not report.ok


def test_a_value_nobody_produced_is_unexpected() -> None:
    history = History()
    acked(history, "p1", "a", 0, 0)
    history.read([(0, 0, "a"), (0, 1, "garbage")], final=True)
    assert history.check().unexpected == [(("", 0, 1), "garbage")]


def test_a_reads_default_range_runs_from_its_lowest_to_its_highest_offset() -> None:
    read = Read.of([(0, 4, "a"), (0, 2, "b"), Record(1, 9, "c", "t")])
    assert read.ranges == {("", 0): (2, 5), ("t", 1): (9, 10)}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    with BrokerThread(tmp_path / "broker") as running:
        yield running


def _record_produces(history: History, bootstrap: str, topic: str, producer_name: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "log_level": 0})

    def delivered(op: object) -> object:
        def report(err: object, msg: object) -> None:
            if err is None:
                history.ack(op, msg.partition(), msg.offset())  # type: ignore[arg-type, attr-defined]
            else:
                history.fail(op)  # type: ignore[arg-type]
        return report

    for i in range(count):
        value = f"{producer_name}-{i}"
        op = history.produce(producer_name, value, key=f"k{i % 7}", topic=topic)
        producer.produce(topic, value.encode(), key=op.key.encode() if op.key else None, on_delivery=delivered(op))
        producer.poll(0)
    assert producer.flush(30) == 0


@pytest.mark.integration
def test_a_history_recorded_against_a_real_broker(broker: BrokerThread) -> None:
    topic = "history"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)

    history = History()
    _record_produces(history, broker.bootstrap, topic, "p1", 150)
    history.add_read(full_read(broker.bootstrap, topic, final=False))  # a read along the way
    _record_produces(history, broker.bootstrap, topic, "p2", 150)

    # A transaction leaves a marker at the end of each partition's log: the full read ends
    # there too. Its records are read once committed.
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "history-txn", "log_level": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(6):
        op = history.produce("txn", f"txn-{i}", topic=topic)  # unknown: transactional, never acked one by one
        txn.produce(topic, op.value.encode(), partition=i % 3)
    txn.commit_transaction(30)

    final = history.add_read(full_read(broker.bootstrap, topic))
    report = history.check()
    assert report.ok, report
    assert report.acknowledged == 300 and report.final_read == 306
    assert all(start == 0 and end > 0 for start, end in final.ranges.values())

    # Records that really disappear are found: delete partition 0's first records.
    first = min(r.offset for r in final.records if r.partition == 0 and r.value.startswith("p1-"))
    admin.delete_records([TopicPartition(topic, 0, first + 2)])[TopicPartition(topic, 0, first + 2)].result(30)
    history.add_read(full_read(broker.bootstrap, topic))
    gone = {r.value for r in final.records if r.partition == 0 and r.offset < first + 2}
    assert {op.value for op in history.check().lost} == gone and len(gone) == 2
