"""Worker metrics, rendered as Prometheus text on ``/metrics``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

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
        lines = [
            "# HELP streamkit_records_consumed_total Records consumed per partition.",
            "# TYPE streamkit_records_consumed_total counter",
        ]
        for (topic, partition), n in sorted(self.consumed_total.items()):
            lines.append(f'streamkit_records_consumed_total{{app="{app_id}",topic="{topic}",partition="{partition}"}} {n}')
        lines += [
            "# HELP streamkit_consumer_lag Records between the committed position and the end of the partition.",
            "# TYPE streamkit_consumer_lag gauge",
        ]
        for (topic, partition), n in sorted(lag().items()):
            lines.append(f'streamkit_consumer_lag{{app="{app_id}",topic="{topic}",partition="{partition}"}} {n}')
        lines += [
            "# TYPE streamkit_records_per_second gauge",
            f'streamkit_records_per_second{{app="{app_id}"}} {self.records_per_second():.1f}',
            "# TYPE streamkit_events_processed_total counter",
            f'streamkit_events_processed_total{{app="{app_id}"}} {self.processed_total}',
            "# HELP streamkit_late_records_total Records dropped because their window had closed (beyond grace).",
            "# TYPE streamkit_late_records_total counter",
            f'streamkit_late_records_total{{app="{app_id}"}} {self.late_records}',
        ]
        for operator, n in sorted(self.late_by_operator.items()):
            lines.append(f'streamkit_late_records_total{{app="{app_id}",operator="{operator}"}} {n}')
        lines += [
            "# HELP streamkit_stream_time_ms An operator's stream time (the minimum watermark of its inputs).",
            "# TYPE streamkit_stream_time_ms gauge",
        ]
        times = stream_times()
        for (operator, partition), (now, _lag) in sorted(times.items()):
            lines.append(f'streamkit_stream_time_ms{{app="{app_id}",operator="{operator}",partition="{partition}"}} '
                         f'{now}')
        lines += [
            "# HELP streamkit_stream_time_lag_ms How far an operator's stream time is behind its furthest input "
            "(what its slowest input holds back).",
            "# TYPE streamkit_stream_time_lag_ms gauge",
        ]
        for (operator, partition), (_now, behind) in sorted(times.items()):
            lines.append(f'streamkit_stream_time_lag_ms{{app="{app_id}",operator="{operator}",partition="{partition}"}} '
                         f'{behind}')
        lines += [
            "# TYPE streamkit_deserialization_errors_total counter",
            f'streamkit_deserialization_errors_total{{app="{app_id}"}} {self.deserialization_errors}',
            "# HELP streamkit_paused_for_alignment Input partitions paused because they run ahead of the slowest "
            "(max.task.idle.ms).",
            "# TYPE streamkit_paused_for_alignment gauge",
            f'streamkit_paused_for_alignment{{app="{app_id}"}} {self.paused_for_alignment}',
            "# TYPE streamkit_commits_total counter",
            f'streamkit_commits_total{{app="{app_id}"}} {self.commits}',
            "# HELP streamkit_restore_records Changelog records restored / to restore per table partition.",
            "# TYPE streamkit_restore_records gauge",
        ]
        for (table, partition), progress in sorted(self.restore.items()):
            labels = f'app="{app_id}",table="{table}",partition="{partition}"'
            lines.append(f'streamkit_restore_records{{{labels},kind="restored"}} {progress.restored}')
            lines.append(f'streamkit_restore_records{{{labels},kind="total"}} {progress.total}')
        lines += [
            "# HELP streamkit_standby_lag Changelog records a standby table partition has not applied yet.",
            "# TYPE streamkit_standby_lag gauge",
        ]
        for (table, partition), n in sorted(standby_lag().items()):
            lines.append(f'streamkit_standby_lag{{app="{app_id}",table="{table}",partition="{partition}"}} {n}')
        return "\n".join(lines) + "\n"
