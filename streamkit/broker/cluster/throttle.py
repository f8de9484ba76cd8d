"""Replication quotas: ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` (bytes/s) for the replicas a topic's
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas`` name,
as Kafka's reassignment tool sets them so that moving a partition does not starve clients.

Kafka measures the rate over a window of samples and holds back throttled replicas while
it is over; this is a token bucket holding at most one second of the rate, which throttles
to the same average. Only throttled replicas' bytes count against it.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Throttle"]

UNLIMITED = 2**63 - 1


class Throttle:
    def __init__(self, rate: int, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.rate = rate
        self._tokens = float(rate)
        self._at = clock()

    @property
    def limited(self) -> bool:
        return 0 < self.rate < UNLIMITED

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
        self._at = now

    def exceeded(self) -> bool:
        """Whether throttled replicas must wait (the bucket is empty)."""
        if not self.limited:
            return False
        self._refill()
        return self._tokens <= 0

    def record(self, size: int) -> None:
        if self.limited:
            self._refill()
            self._tokens -= size
