"""Worker metrics, exposed as Prometheus text on ``/metrics`` through prometheus-client.

The counters live here as plain integers on the hot path; each scrape turns them into
metric families (one registry per scrape, so workers in one process never share series).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["Metrics", "RestoreProgress"]

TP = tuple[str, int]


@dataclass(slots=True)
class RestoreProgress:
    restored: int = 0
    total: int = 0
    done: bool = False


@dataclass
class Metrics:
    started: float = field(default_factory=time.monotonic)
    consumed_total: dict[TP, int] = field(default_factory=dict)
    processed_total: int = 0
    late_records: int = 0
    late_by_operator: dict[str, int] = field(default_factory=dict)
    paused_for_alignment: int = 0
    alignment_pauses: int = 0
    deserialization_errors: int = 0
    commits: int = 0
    restore: dict[tuple[str, int], RestoreProgress] = field(default_factory=dict)
    _window: list[tuple[float, int]] = field(default_factory=list)

    def consumed(self, tp: TP, count: int) -> None:
        self.consumed_total[tp] = self.consumed_total.get(tp, 0) + count

    def processed(self, count: int) -> None:
        self.processed_total += count

    def records_per_second(self) -> float:
        """Rate over the last ~10 s, sampled whenever it is read."""
        now = time.monotonic()
        total = sum(self.consumed_total.values())
        self._window.append((now, total))
        self._window = [(t, n) for t, n in self._window if now - t <= 10] or [(now, total)]
        t0, n0 = self._window[0]
        return (total - n0) / (now - t0) if now > t0 else 0.0

    def render(self, app_id: str, lag: Callable[[], dict[TP, int]],
               standby_lag: Callable[[], dict[tuple[str, int], int]] = dict,
               stream_times: Callable[[], dict[tuple[str, int], tuple[int, int]]] = dict) -> str:
        """The Prometheus text exposition of these metrics, by prometheus-client."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(self.families(app_id, lag(), standby_lag(), stream_times())))
        return generate_latest(registry).decode()

    def families(self, app_id: str, lag: dict[TP, int], standby_lag: dict[tuple[str, int], int],
                 stream_times: dict[tuple[str, int], tuple[int, int]]) -> list[Metric]:
        def family(kind: type[CounterMetricFamily | GaugeMetricFamily], name: str, doc: str,
                   labels: tuple[str, ...], rows: Iterable[tuple[tuple[str, ...], float]]) -> Metric:
            out = kind(name, doc, labels=["app", *labels])
            for values, value in rows:
                out.add_metric([app_id, *values], value)
            return out

        counter, gauge = CounterMetricFamily, GaugeMetricFamily
        return [
            family(counter, "streamkit_records_consumed", "Records consumed per partition.",
                   ("topic", "partition"),
                   (((t, str(p)), n) for (t, p), n in sorted(self.consumed_total.items()))),
            family(gauge, "streamkit_consumer_lag",
                   "Records between the committed position and the end of the partition.",
                   ("topic", "partition"), (((t, str(p)), n) for (t, p), n in sorted(lag.items()))),
            family(gauge, "streamkit_records_per_second", "Records consumed per second over ~10 s.",
                   (), [((), round(self.records_per_second(), 1))]),
            family(counter, "streamkit_events_processed", "Events processed.", (),
                   [((), self.processed_total)]),
            family(counter, "streamkit_late_records",
                   "Records dropped because their window had closed (beyond grace).", (),
                   [((), self.late_records)]),
            family(counter, "streamkit_operator_late_records", "Late records per operator.",
                   ("operator",), (((op,), n) for op, n in sorted(self.late_by_operator.items()))),
            family(gauge, "streamkit_stream_time_ms",
                   "An operator's stream time (the minimum watermark of its inputs).",
                   ("operator", "partition"),
                   (((op, str(p)), now) for (op, p), (now, _) in sorted(stream_times.items()))),
            family(gauge, "streamkit_stream_time_lag_ms",
                   "How far an operator's stream time is behind its furthest input "
                   "(what its slowest input holds back).", ("operator", "partition"),
                   (((op, str(p)), behind) for (op, p), (_, behind) in sorted(stream_times.items()))),
            family(counter, "streamkit_deserialization_errors", "Records that could not be decoded.",
                   (), [((), self.deserialization_errors)]),
            family(gauge, "streamkit_paused_for_alignment",
                   "Input partitions paused because they run ahead of the slowest (max.task.idle.ms).",
                   (), [((), self.paused_for_alignment)]),
            family(counter, "streamkit_commits", "Commits.", (), [((), self.commits)]),
            family(gauge, "streamkit_restore_records",
                   "Changelog records restored / to restore per table partition.",
                   ("table", "partition", "kind"),
                   [row for (table, p), progress in sorted(self.restore.items())
                    for row in (((table, str(p), "restored"), progress.restored),
                                ((table, str(p), "total"), progress.total))]),
            family(gauge, "streamkit_standby_lag",
                   "Changelog records a standby table partition has not applied yet.",
                   ("table", "partition"),
                   (((t, str(p)), n) for (t, p), n in sorted(standby_lag.items()))),
        ]


class _Families(Collector):
    """A registry entry that reports metric families computed once per scrape."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)
