"""Stream workers, as their web endpoints show them (``streamkit worker --web-port``): what
each serves (``/``), its partitions (``/health``), its per-operator event time and late
records (``/metrics``) and its tables (``/tables/...``). A worker that does not answer shows
as down, never as an error page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from prometheus_client.parser import text_string_to_metric_families

from streamkit.console.errors import BadInput, ConsoleError, NotFound, Unavailable
from streamkit.console.rest import HttpClients

__all__ = ["OperatorTime", "Worker", "internal_topic", "query_table", "read_metrics", "worker", "worker_address"]

_TIMEOUT_S = 5.0


def internal_topic(app: str, topic: str) -> bool:
    """An app's own changelog or repartition topic (``APP-...-changelog``)."""
    return topic.startswith(f"{app}-") and topic.endswith(("-changelog", "-repartition"))


def worker_address(url: str) -> str:
    """A worker's name in the console's URLs: its ``host:port``."""
    return url.split("://", 1)[-1].rstrip("/")


@dataclass(frozen=True, slots=True)
class OperatorTime:
    operator: str
    partition: int
    stream_time_ms: int
    behind_ms: int


@dataclass(slots=True)
class Worker:
    url: str
    address: str
    up: bool
    error: str | None = None
    app: str | None = None
    tables: dict[str, Any] = field(default_factory=dict)
    topics: list[str] = field(default_factory=list)  # every topic the app declares
    partitions: list[str] = field(default_factory=list)
    standby_tasks: list[int] = field(default_factory=list)
    records_per_second: float = 0.0
    events_processed: int = 0
    late_records: int = 0
    late_by_operator: dict[str, int] = field(default_factory=dict)
    operators: list[OperatorTime] = field(default_factory=list)
    lag: dict[str, int] = field(default_factory=dict)

    @property
    def inputs(self) -> list[str]:
        """The topics it reads: those of the partitions it holds."""
        return sorted({p.rpartition("-")[0] for p in self.partitions})

    @property
    def outputs(self) -> list[str]:
        """The topics its app declares and does not read (its own internal ones left out)."""
        read = set(self.inputs)
        return sorted(t for t in self.topics if t not in read and not internal_topic(self.app or "", t))


async def worker(url: str, http: HttpClients) -> Worker:
    out = Worker(url, worker_address(url), up=False)
    client = http.get(url)
    try:
        index = (await client.get("/", timeout=_TIMEOUT_S)).json()
        health = (await client.get("/health", timeout=_TIMEOUT_S)).json()
        metrics = (await client.get("/metrics", timeout=_TIMEOUT_S)).text
    except (httpx.HTTPError, ValueError) as exc:
        out.error = f"{type(exc).__name__}: {exc or 'no answer'}"
        return out
    out.up = True
    out.app = index.get("app")
    out.tables = dict(index.get("tables") or {})
    out.topics = list(index.get("topics") or [])
    out.partitions = list(health.get("partitions") or [])
    out.standby_tasks = list(health.get("standby_tasks") or [])
    read_metrics(metrics, out)
    return out


def read_metrics(text: str, out: Worker) -> None:
    """Fill ``out`` from a worker's /metrics text (Prometheus exposition format)."""
    times: dict[tuple[str, int], list[int]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = s.labels
            if s.name == "streamkit_records_per_second":
                out.records_per_second = float(s.value)
            elif s.name == "streamkit_events_processed_total":
                out.events_processed = int(s.value)
            elif s.name == "streamkit_late_records_total":
                out.late_records = int(s.value)
            elif s.name == "streamkit_operator_late_records_total":
                out.late_by_operator[labels["operator"]] = int(s.value)
            elif s.name == "streamkit_consumer_lag":
                out.lag[f"{labels['topic']}-{labels['partition']}"] = int(s.value)
            elif s.name in ("streamkit_stream_time_ms", "streamkit_stream_time_lag_ms"):
                slot = times.setdefault((labels["operator"], int(labels["partition"])), [0, 0])
                slot[0 if s.name == "streamkit_stream_time_ms" else 1] = int(s.value)
    out.operators = [OperatorTime(op, p, now, behind) for (op, p), (now, behind) in sorted(times.items())]


async def query_table(url: str, table: str, key: str | None, http: HttpClients, limit: int = 100) -> Any:
    """A table's contents on that worker (up to ``limit``) or one key's value (from
    whichever worker owns it: the worker forwards)."""
    path = f"/tables/{quote(table, safe='')}"
    if key is not None:
        path += f"/{quote(key, safe='')}"
    try:
        response = await http.get(url).get(path, params=None if key is not None else {"limit": str(limit)},
                                        timeout=_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise Unavailable(f"the worker at {worker_address(url)} does not answer ({type(exc).__name__})") from None
    try:
        body = response.json()
    except ValueError:
        body = {"error": response.text[:300]}
    if response.status_code == 404:
        raise NotFound(str(body.get("error", "not found")))
    if response.status_code == 400:
        raise BadInput(str(body.get("error", "bad request")))
    if response.status_code >= 400:
        raise ConsoleError(str(body.get("error", response.reason_phrase)), 503 if response.status_code == 503 else 502)
    return body
