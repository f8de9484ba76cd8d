"""The console's memory over time: bounded lag history and rates (pure), and the lag a
group's page charts, sampled in the background from a real broker."""

from __future__ import annotations

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition

from streamkit.console.history import LagHistory, RateMeter
from streamkit.testing import BrokerProcess
from tests.console.conftest import JSON, eventually


def test_lag_history_is_bounded_in_points_and_groups() -> None:
    history = LagHistory(max_points=3, max_groups=2)
    for i in range(5):
        history.record("a", i, at_ms=1000 + i)
    assert history.points("a") == [(1002, 2), (1003, 3), (1004, 4)]
    history.record("b", 7, at_ms=2000)
    history.record("a", 9, at_ms=2001)  # a was seen last: b is the one forgotten next
    history.record("c", 1, at_ms=2002)
    assert history.points("b") == [] and history.points("a")[-1] == (2001, 9) and history.points("c") == [(2002, 1)]


def test_rates_between_two_samples() -> None:
    meter = RateMeter(max_keys=2)
    assert meter.observe("t", 100, at_ms=1000) is None
    assert meter.observe("t", 150, at_ms=1500) == 100.0
    assert meter.observe("t", 150, at_ms=2500) == 0.0
    meter.observe("u", 1, at_ms=1000)
    meter.observe("v", 1, at_ms=1000)  # beyond max_keys: t is forgotten
    assert meter.observe("t", 500, at_ms=3000) is None


def test_a_watched_groups_lag_is_sampled_without_its_page(client: httpx.Client, broker: BrokerProcess) -> None:
    assert client.post("/topics", data={"name": "sampled", "partitions": "1"}, headers=JSON).status_code == 200
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "sampled-readers"})
    consumer.commit(offsets=[TopicPartition("sampled", 0, 0)], asynchronous=False)
    consumer.close()
    assert client.get("/groups/sampled-readers", headers=JSON).json()["total_lag"] == 0  # now watched
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(7):
        producer.produce("sampled", value=b"x")
    producer.flush(10)

    def sampled() -> list[list[int]]:
        points = client.get("/groups/sampled-readers/lag/history").json()["points"]
        return points if [p[1] for p in points][-1:] == [7] else []

    points = eventually(sampled, "the sampler to record the lag of 7", timeout=60)
    assert points[0][1] == 0 and [p[0] for p in points] == sorted(p[0] for p in points)
    assert client.get("/groups/nobody/lag/history").json()["points"] == []
