"""The Connect worker's Prometheus metrics (``/metrics``), in a registry of its own so two
workers in one process (tests) do not collide."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest

__all__ = ["ConnectMetrics"]

_TASK = ("connector", "task")


class ConnectMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.source_records_polled = Counter(
            "connect_source_record_poll", "Records returned by source tasks' poll.", _TASK, registry=self.registry)
        self.source_records_written = Counter(
            "connect_source_record_write", "Source records acknowledged by Kafka.", _TASK, registry=self.registry)
        self.sink_records_read = Counter(
            "connect_sink_record_read", "Records consumed by sink tasks.", _TASK, registry=self.registry)
        self.sink_records_sent = Counter(
            "connect_sink_record_send", "Records handed to sink tasks' put.", _TASK, registry=self.registry)
        self.offset_commits = Counter(
            "connect_offset_commit", "Offset commits.", _TASK, registry=self.registry)
        self.errors = Counter(
            "connect_task_error", "Records that failed, by stage.", (*_TASK, "stage"), registry=self.registry)
        self.deadletterqueue_produce = Counter(
            "connect_deadletterqueue_produce_requests", "Records written to the dead-letter topic.", _TASK,
            registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
