"""Replication quotas (``cluster/throttle.py``): a throttled replica waits while the bytes
sent under the quota exceed the rate, and goes on once the rate allows."""

from __future__ import annotations

from streamkit.broker.cluster.throttle import UNLIMITED, Throttle


def test_a_throttle_holds_back_once_a_second_of_its_rate_is_spent() -> None:
    now = [0.0]
    throttle = Throttle(1000, lambda: now[0])
    assert throttle.limited and not throttle.exceeded()
    throttle.record(600)
    assert not throttle.exceeded()
    throttle.record(600)  # 1200 bytes within the first instant: over a second's worth
    assert throttle.exceeded()
    now[0] = 0.1  # 100 bytes back: still 100 over
    assert throttle.exceeded()
    now[0] = 0.3
    assert not throttle.exceeded()
    now[0] = 100.0  # an idle while does not bank more than a second
    throttle.record(1000)
    assert throttle.exceeded()


def test_the_default_rate_throttles_nothing() -> None:
    throttle = Throttle(UNLIMITED, lambda: 0.0)
    throttle.record(10**12)
    assert not throttle.limited and not throttle.exceeded()
