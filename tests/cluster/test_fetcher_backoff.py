"""A follower's replica fetcher backs off (replica.fetch.backoff.ms) after errors only: a
fetch the leader answered empty after its long poll (replica.fetch.wait.max.ms) is followed
by the next one at once, as in Kafka. Otherwise a write arriving just after an empty poll
waits out the backoff before it is replicated, and acks=all with it (the pause a controlled
shutdown measured: the long poll plus the backoff)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from streamkit.testing_cluster import BrokerCluster

from .test_fetcher import _create, _write_all
from .workload import eventually, isr

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLUSTER_SIZE = 2
# Empty polls end after 100 ms; a backoff after one would last 30 s, past the writes' 5 s.
CLUSTER_CONFIG = {"replica.fetch.wait.max.ms": "100", "replica.fetch.backoff.ms": "30000"}


def test_an_empty_fetch_is_not_followed_by_a_backoff(cluster: BrokerCluster) -> None:
    _create(cluster, "quiet")
    # The first write may wait out one backoff: broker 1 can ask broker 0 for the new
    # partition before broker 0 knows it leads it (an error, NOT_LEADER_OR_FOLLOWER).
    first = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 90_000})
    errors: list[object] = []
    first.produce("quiet", b"first", on_delivery=lambda err, _msg: errors.append(err))
    assert first.flush(120) == 0 and errors == [None], errors
    eventually(lambda: isr(cluster.bootstrap, "quiet") == [0, 1], "both replicas in sync")
    for _ in range(3):
        time.sleep(1)  # several empty polls of broker 1 have ended meanwhile
        assert _write_all(cluster, "quiet", 10) == []
