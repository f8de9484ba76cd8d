"""LogManager: every partition log under one data directory (Kafka's ``log.dirs``).

Partition directories are named ``{topic}-{partition}`` as in Kafka. The manager opens them
all at start, creates and deletes them, and runs the periodic work: retention
(``log.retention.check.interval.ms``), time-based flushes (``flush.ms``) and the compaction
cleaner thread. It knows nothing about topics beyond their names: partition counts and
per-topic configs are the broker's metadata. ``replicated`` (the cluster broker) opens every
partition in replicated mode (see ``PartitionLog``).
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from streamkit.log.cleaner import LogCleaner
from streamkit.log.config import LogConfig
from streamkit.log.partition import PartitionLog, wall_clock_ms

__all__ = ["LogManager", "TopicPartition", "partition_dir_name"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_DIR_RE = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_DELETED_SUFFIX = ".deleted"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogManager:
    def __init__(
        self,
        data_dir: Path | str,
        clock: Callable[[], int] = wall_clock_ms,
        checkpoint_interval_ms: int = 60_000,
        cleaner_backoff_ms: int = 15_000,
        replicated: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.replicated = replicated
        self.clock = clock
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._lock = threading.Lock()
        self._cleaner = LogCleaner(self.all_logs, backoff_ms=cleaner_backoff_ms)

    def open_all(self, config_for: Callable[[str], LogConfig]) -> list[TopicPartition]:
        """Open every partition directory found, recovering as needed; returns their names."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.data_dir.glob(f"*{_DELETED_SUFFIX}"):
            shutil.rmtree(leftover, ignore_errors=True)  # a delete interrupted by a crash
        opened = []
        for path in sorted(self.data_dir.iterdir()):
            match = _DIR_RE.match(path.name)
            if not path.is_dir() or match is None:
                continue
            tp = (match["topic"], int(match["partition"]))
            self._logs[tp] = PartitionLog.open(
                path, config_for(tp[0]), self.clock, self.checkpoint_interval_ms, self.replicated
            )
            opened.append(tp)
        return opened

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        with self._lock:
            return list(self._logs.values())

    def items(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        with self._lock:
            items = list(self._logs.items())
        return iter(items)

    def create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        with self._lock:
            tp = (topic, partition)
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            path = self.data_dir / partition_dir_name(topic, partition)
            plog = PartitionLog.open(path, config, self.clock, self.checkpoint_interval_ms,
                                     self.replicated)
            self._logs[tp] = plog
            return plog

    def delete(self, topic: str, partition: int) -> None:
        """Remove a partition: rename its directory first so a crash cannot resurrect it."""
        with self._lock:
            plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return
        plog.abandon()
        doomed = plog.directory.with_name(plog.directory.name + _DELETED_SUFFIX)
        plog.directory.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (t, _p), plog in self.items():
            if t == topic:
                plog.update_config(config)

    # -- periodic work -------------------------------------------------------------------

    def apply_retention(self) -> int:
        deleted = 0
        for _tp, plog in self.items():
            try:
                deleted += plog.apply_retention()
            except ValueError:
                continue  # closed by a concurrent delete
        return deleted

    def flush_due(self) -> int:
        flushed = 0
        for _tp, plog in self.items():
            try:
                flushed += plog.maybe_flush()
            except ValueError:
                continue
        return flushed

    def checkpoint_high_watermarks(self) -> int:
        """Save each partition's high watermark that moved (replicated partitions; the
        broker's timer: replica.high.watermark.checkpoint.interval.ms)."""
        saved = 0
        for _tp, plog in self.items():
            saved += plog.checkpoint_high_watermark()
        return saved

    def start_cleaner(self) -> None:
        self._cleaner.start()

    def close(self) -> None:
        """Stop the cleaner, then close every partition cleanly."""
        self._cleaner.stop()
        with self._lock:
            logs = list(self._logs.values())
            self._logs.clear()
        for plog in logs:
            plog.close()
