"""Crash durability with a real producer: with log.flush.interval.messages=1, acks=all and
an idempotent producer (librdkafka's enable.idempotence), SIGKILL mid-production loses no
acknowledged record and stores every record exactly once, in order: the requests that were
in flight at the kill are retried with the same producer id and sequence numbers, and the
restarted broker recognises those it had already stored (producer state rebuilt from its
snapshot and the batch headers past it). Recovery leaves contiguous offsets and no garbage.

(SIGKILL leaves the page cache intact, so this checks acknowledgement, recovery and the
restart path, not the fsync itself: only a power cut could show a missing fsync.)"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from streamkit.testing import BrokerProcess
from tests.integration.util import QUIET, create_topic, read_partition, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 3
PADDING = "x" * 60


class LoopProducer:
    """Produces ``{partition}:{seq}:{padding}`` round-robin over the partitions from a thread
    until stopped; records every successful delivery report (partition, offset, value)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            # up to five requests in flight (idempotence's limit): more to retry at a kill
            "max.in.flight.requests.per.connection": 5, "linger.ms": 2,
            "message.timeout.ms": 60000, "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200, **QUIET})
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loop-producer", daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), msg.value()))
            else:
                self.failed += 1

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            partition = seq % PARTITIONS
            try:
                self.producer.produce(self.topic, f"{partition}:{seq}:{PADDING}".encode(), partition=partition,
                                      on_delivery=self._delivered)
                seq += 1
                self.sent = seq
            except BufferError:  # local queue full (e.g. while the broker is down)
                self.producer.poll(0.05)
            self.producer.poll(0)
        self.producer.flush(90)

    def start(self) -> LoopProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the producer did not finish flushing"


def test_acknowledged_records_survive_sigkill(broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    broker = broker_factory({"log.flush.interval.messages": 1})
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    producer = LoopProducer(broker.bootstrap, topic_name).start()
    kills_with_requests_in_flight = 0
    try:
        target = 0
        for _round in range(3):
            target += 3000
            wait_until(lambda t=target: producer.acked_count() >= t, 60, f"{target} acknowledged records")
            in_flight = len(producer.producer)
            broker.kill()  # SIGKILL mid-production: requests are in flight
            kills_with_requests_in_flight += in_flight > 0
            bootstrap = broker.bootstrap
            broker.start()  # same port: the producer reconnects and retries what was pending
            assert broker.bootstrap == bootstrap, "the restarted broker listens elsewhere"
    finally:
        producer.stop()

    assert kills_with_requests_in_flight, "nothing was in flight at any kill"
    assert producer.failed == 0, "the idempotent producer gave up on records"
    assert producer.acked_count() >= 9000
    acked: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    for p, offset, value in producer.acked:
        assert offset not in acked[p], f"two acknowledgements for offset {offset} of partition {p}"
        acked[p][offset] = value

    for p in range(PARTITIONS):
        stored = read_partition(broker.bootstrap, topic_name, p, timeout=60)
        # contiguous offsets from 0, nothing torn, nothing foreign
        assert [r.offset for r in stored] == list(range(len(stored)))
        seqs = []
        for r in stored:
            assert r.value is not None
            part, seq, pad = r.value.decode().split(":")
            assert (int(part), pad) == (p, PADDING), r.value
            seqs.append(int(seq))
        # every acknowledged record is stored at the offset its delivery report gave...
        for offset, value in acked[p].items():
            assert offset < len(stored), f"acknowledged offset {offset} of partition {p} is gone"
            assert stored[offset].value == value, (p, offset)
        # ...exactly once and in order: the stored records are the acknowledged ones
        acked_seqs = sorted(int(v.split(b":")[1]) for v in acked[p].values())
        assert seqs == acked_seqs, f"partition {p}: stored records differ from the acknowledged ones"
        assert seqs == list(range(p, PARTITIONS * len(seqs), PARTITIONS)), f"partition {p}: a record is missing"
