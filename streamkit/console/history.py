"""What the console remembers over time, in its own process and bounded: each consumer
group's total lag (for the lag chart), and counters turned into rates (the pipeline's edges).

Groups whose page was looked at recently are sampled in the background (``LagSampler``), so a
chart opened later shows the lag from before; a group not looked at for ``watch_ms`` is no
longer sampled, and the least recently seen groups are forgotten beyond ``max_groups``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable

__all__ = ["LagHistory", "LagSampler", "RateMeter", "now_ms"]

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class LagHistory:
    """Per group, the last ``max_points`` (epoch ms, total lag) samples."""

    def __init__(self, max_points: int = 720, max_groups: int = 200) -> None:
        self.max_points = max_points
        self.max_groups = max_groups
        self._points: OrderedDict[str, deque[tuple[int, int]]] = OrderedDict()
        self._watched: dict[str, int] = {}  # group -> when its page was last asked for (ms)

    def record(self, group: str, total: int, at_ms: int | None = None) -> None:
        points = self._points.get(group)
        if points is None:
            points = self._points[group] = deque(maxlen=self.max_points)
            while len(self._points) > self.max_groups:
                forgotten, _ = self._points.popitem(last=False)
                self._watched.pop(forgotten, None)
        self._points.move_to_end(group)
        points.append((now_ms() if at_ms is None else at_ms, total))

    def points(self, group: str) -> list[tuple[int, int]]:
        return list(self._points.get(group, ()))

    def watch(self, group: str) -> None:
        self._watched[group] = now_ms()

    def watched(self, watch_ms: int) -> list[str]:
        cutoff = now_ms() - watch_ms
        for group in [g for g, at in self._watched.items() if at < cutoff]:
            del self._watched[group]
        return sorted(self._watched)


class LagSampler:
    """Every ``interval_ms``, the total lag of each group watched within ``watch_ms``
    (``total_lag(group)``), into ``history``. A group that fails (deleted, broker down) is
    skipped for that round."""

    def __init__(self, history: LagHistory, total_lag: Callable[[str], Awaitable[int]], interval_ms: int = 5000,
                 watch_ms: int = 600_000) -> None:
        self.history = history
        self.total_lag = total_lag
        self.interval_ms = interval_ms
        self.watch_ms = watch_ms
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="console-lag-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            for group in self.history.watched(self.watch_ms):
                try:
                    self.history.record(group, await self.total_lag(group))
                except Exception as exc:  # the next round tries again
                    log.debug("lag of %s not sampled: %s", group, exc)


class RateMeter:
    """Counters (records written, offsets committed) sampled when asked, as per-second rates
    between the last two samples; at most ``max_keys`` counters kept."""

    def __init__(self, max_keys: int = 10_000) -> None:
        self.max_keys = max_keys
        self._last: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._rates: dict[str, float] = {}

    def observe(self, key: str, count: int, at_ms: int | None = None) -> float | None:
        """The rate of ``key`` after this sample; None before it has two samples."""
        at = now_ms() if at_ms is None else at_ms
        previous = self._last.get(key)
        if previous is not None and at > previous[0]:
            self._rates[key] = max(count - previous[1], 0) * 1000 / (at - previous[0])
        if previous is None or at > previous[0]:
            self._last[key] = (at, count)
        self._last.move_to_end(key)
        while len(self._last) > self.max_keys:
            forgotten, _ = self._last.popitem(last=False)
            self._rates.pop(forgotten, None)
        return self._rates.get(key)
