"""Real clients against the broker's two request paths: the default fast path (compiled
codecs for Produce, Fetch, ListOffsets, Metadata and Heartbeat, coalesced writes) and kio's
generic path (``STREAMKIT_BROKER_FAST_PATH=0``). confluent-kafka, aiokafka and kafka-python
each speak their own versions of those APIs: produce with keys, headers and timestamps,
consume them back, ListOffsets by timestamp, and a consumer group whose members heartbeat.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from streamkit.broker.server import FAST_PATH_ENV
from streamkit.testing import BrokerProcess
from tests.integration.clients import CLIENTS
from tests.integration.util import QUIET, Rec, create_topic, wait_until

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000
PATHS = {"fast": "1", "generic": "0"}


@pytest.fixture(scope="module", params=sorted(PATHS))
def path_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker process serving on one request path (the environment it starts with)."""
    saved = os.environ.get(FAST_PATH_ENV)
    os.environ[FAST_PATH_ENV] = PATHS[request.param]
    try:
        broker = BrokerProcess(Path(tmp_path_factory.mktemp(f"path-{request.param}")) / "data").start()
    finally:
        if saved is None:
            os.environ.pop(FAST_PATH_ENV, None)
        else:
            os.environ[FAST_PATH_ENV] = saved
    try:
        yield broker
    finally:
        assert broker.stop(timeout_s=30) == 0, broker.log_tail()


def records(n: int = 30) -> list[Rec]:
    return [Rec(None if i % 7 == 3 else f"k{i % 5}".encode(), f"value-{i}".encode() * (1 + i % 4),
                (("h", f"{i}".encode()),) if i % 2 else (), BASE_TS + i * 1000) for i in range(n)]


@pytest.mark.parametrize("client_name", list(CLIENTS))
def test_produce_consume_list_offsets(path_broker: BrokerProcess, client_name: str, topic_name: str) -> None:
    client = CLIENTS[client_name](path_broker.bootstrap)
    create_topic(path_broker.bootstrap, topic_name, 1)
    sent = records()
    reports = client.produce(topic_name, sent, flush_every=10)
    assert reports == [(0, i) for i in range(len(sent))]
    got = client.consume(topic_name, {0: 0}, len(sent))
    assert [r.offset for r in got] == list(range(len(sent)))
    assert [r.content() for r in got] == [r.content() for r in sent]
    # ListOffsets by timestamp: the first record at or after each time.
    assert client.offsets_for_times(topic_name, 0, [BASE_TS, BASE_TS + 10_500]) == [0, 11]


def test_consumer_group_heartbeats(path_broker: BrokerProcess, topic_name: str) -> None:
    """Two members of a classic group: JoinGroup, SyncGroup, then Heartbeats (every 100 ms)
    that keep both in the group while they consume."""
    create_topic(path_broker.bootstrap, topic_name, 2)
    CLIENTS["confluent"](path_broker.bootstrap).produce(topic_name, records(20), partition=0)
    config = {"bootstrap.servers": path_broker.bootstrap, "group.id": f"g-{topic_name}",
              "auto.offset.reset": "earliest", "heartbeat.interval.ms": 100, "session.timeout.ms": 6000,
              **QUIET}
    members = [Consumer(config), Consumer(config)]
    try:
        for member in members:
            member.subscribe([topic_name])
        seen: list[bytes] = []

        def settled() -> bool:
            for member in members:
                msg = member.poll(0.1)
                if msg is not None and msg.error() is None:
                    seen.append(msg.value())
            assignments = [member.assignment() for member in members]
            return len(seen) == 20 and all(len(a) == 1 for a in assignments)

        wait_until(settled, 60, "both members assigned one partition and every record read")
        # Still both members after several heartbeat intervals.
        for _ in range(10):
            for member in members:
                member.poll(0.05)
        assert sorted(p.partition for m in members for p in m.assignment()) == [0, 1]
    finally:
        for member in members:
            member.close()
