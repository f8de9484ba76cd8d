"""A distributed worker process: the REST API (uvicorn) over a ``DistributedHerder``.

``streamkit connect distributed worker.json`` runs ``run_distributed``; tests and embedders
use ``DistributedWorker`` with explicit ``start``/``stop``.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from streamkit.connect import kafka_ops
from streamkit.connect.distributed import DistributedHerder
from streamkit.connect.errors import ConfigError
from streamkit.connect.metrics import ConnectMetrics
from streamkit.connect.plugins import PluginRegistry
from streamkit.connect.rest import create_app
from streamkit.connect.standalone import serve_until_signalled
from streamkit.connect.worker_config import WorkerConfig, load_worker_config, read_config_file
from streamkit.http import HttpServer

__all__ = ["DistributedWorker", "run_distributed"]

log = logging.getLogger(__name__)


class DistributedWorker:
    """A distributed worker: the REST API over a ``DistributedHerder``."""

    def __init__(self, worker: WorkerConfig, registry: PluginRegistry | None = None) -> None:
        self.worker = worker
        self.registry = registry or PluginRegistry()
        self.metrics = ConnectMetrics()
        self.herder: DistributedHerder | None = None
        self._http: HttpServer | None = None

    @property
    def port(self) -> int:
        assert self._http is not None, "not started"
        return self._http.port

    @property
    def url(self) -> str:
        assert self._http is not None, "not started"
        return self._http.url

    async def start(self) -> None:
        host, port = self.worker.rest_address()
        holder: dict[str, DistributedHerder] = {}
        app = create_app(_Deferred(holder), lambda: kafka_ops.cluster_id(self.worker),  # type: ignore[arg-type]
                         self.metrics.render)
        self._http = HttpServer(app, host, port, security=self.worker.http_security())
        worker_id = f"{host}:{self._http.port}"
        self.herder = holder["herder"] = DistributedHerder(self.worker, self.registry, self.metrics, worker_id, self.url)
        try:
            # The broker first, as connect-standalone does: an unreachable one is the only
            # line, before the worker says where it serves.
            await kafka_ops.cluster_id(self.worker)
            log.info("Connect distributed worker %s: REST API on %s; joining group %s", worker_id, self.url,
                     self.worker.group_id)
            await self.herder.start()
            await self._http.start()
        except BaseException as exc:
            # a start cancelled by a signal is a stop; a failed one is reported by its error
            await (self.stop() if isinstance(exc, asyncio.CancelledError) else self._close())
            raise

    async def stop(self) -> None:
        await self._close()
        log.info("Connect distributed worker stopped")

    async def _close(self) -> None:
        if self.herder is not None:
            await self.herder.stop()
        if self._http is not None:
            await self._http.stop()


class _Deferred:
    """The herder, looked up when a request comes (the REST app is built before it)."""

    def __init__(self, holder: dict[str, DistributedHerder]) -> None:
        self._holder = holder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._holder["herder"], name)


def run_distributed(worker_path: Path, ready_file: Path | None = None) -> None:
    worker = load_worker_config(read_config_file(worker_path))
    missing = [k for k in ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic")
               if not worker.raw().get(k)]
    if missing:
        raise ConfigError({k: ["required in distributed mode"] for k in missing})
    asyncio.run(serve_until_signalled(DistributedWorker(worker), ready_file))
