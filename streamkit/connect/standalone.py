"""Standalone mode: one worker, connectors from files (and REST), offsets in a local file.

``streamkit connect standalone worker.json conn1.json [...]``: the worker file holds
Kafka Connect's worker keys (``bootstrap.servers``, ``offset.storage.file.filename``,
``listeners`` or ``rest.port``, converters); each connector file is Kafka Connect's
``{"name": ..., "config": {...}}`` (or the flat ``.properties`` form).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from streamkit.connect import kafka_ops
from streamkit.connect.errors import ConfigError
from streamkit.connect.herder import Herder
from streamkit.connect.metrics import ConnectMetrics
from streamkit.connect.offsets import FileOffsetStore, MemoryOffsetStore, OffsetStore
from streamkit.connect.plugins import PluginRegistry
from streamkit.connect.rest import create_app
from streamkit.connect.worker_config import WorkerConfig, load_worker_config, read_config_file
from streamkit.http import HttpServer

__all__ = ["StandaloneWorker", "connector_config", "run_standalone"]

log = logging.getLogger(__name__)


def connector_config(data: Mapping[str, Any], source: str = "connector config") -> tuple[str, dict[str, Any]]:
    """(name, config) of ``{"name": ..., "config": {...}}`` or a flat map with ``name``."""
    config = data.get("config", data)
    if not isinstance(config, Mapping):
        raise ConfigError({source: ["'config' must be a JSON object"]})
    name = data.get("name") or config.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError({source: ["a connector config needs a 'name'"]})
    return name, {k: v for k, v in config.items()}


class StandaloneWorker:
    def __init__(self, worker: WorkerConfig, connectors: Sequence[tuple[str, Mapping[str, Any]]] = (),
                 registry: PluginRegistry | None = None, host: str | None = None, port: int | None = None) -> None:
        if worker.exactly_once_source_support != "disabled":
            # as Kafka: exactly-once sources are a distributed-mode feature
            raise ConfigError({"exactly.once.source.support": [
                f"exactly.once.source.support={worker.exactly_once_source_support} is not supported in "
                "standalone mode: standalone keeps source offsets in a local file "
                "(offset.storage.file.filename), which cannot be written in the same Kafka transaction "
                "as the records. Run `streamkit connect distributed` for exactly-once sources."]})
        self.worker = worker
        default_host, default_port = worker.rest_address()
        self._http_host = host if host is not None else default_host
        self._http_port = port if port is not None else default_port
        self._initial = list(connectors)
        self.registry = registry or PluginRegistry()
        path = worker.offset_storage_file_filename
        self.offsets: OffsetStore = FileOffsetStore(path) if path else MemoryOffsetStore()
        self.metrics = ConnectMetrics()
        self.herder: Herder | None = None
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
        herder = Herder(self.worker, self.registry, self.offsets, self.metrics)
        http = HttpServer(create_app(herder, lambda: kafka_ops.cluster_id(self.worker)),
                          self._http_host, self._http_port, security=self.worker.http_security())
        herder.worker_id = f"{self._http_host}:{http.port}"
        self.herder, self._http = herder, http
        try:
            # As Kafka's connect-standalone, which looks up the cluster id before it starts
            # anything: an unreachable broker is one error now, not a failed task per connector.
            await kafka_ops.cluster_id(self.worker)
            for name, config in self._initial:
                await herder.put_config(name, config)
            await http.start()
        except BaseException as exc:
            # a start cancelled by a signal is a stop; a failed one is reported by its error
            await (self.stop() if isinstance(exc, asyncio.CancelledError) else self._close())
            raise
        log.info("Connect standalone worker %s: REST API on %s", herder.worker_id, self.url)

    async def stop(self) -> None:
        await self._close()
        log.info("Connect standalone worker stopped")

    async def _close(self) -> None:
        if self.herder is not None:
            await self.herder.stop()
        if self._http is not None:
            await self._http.stop()

    async def __aenter__(self) -> StandaloneWorker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def load_files(worker_path: Path, connector_paths: Sequence[Path]) -> tuple[WorkerConfig, list[tuple[str, dict[str, Any]]]]:
    worker = load_worker_config(read_config_file(worker_path))
    connectors = [connector_config(read_config_file(p), str(p)) for p in connector_paths]
    names = [n for n, _ in connectors]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ConfigError({"name": [f"connector {n} is defined more than once" for n in duplicated]})
    return worker, connectors


class _Serving(Protocol):
    @property
    def port(self) -> int: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def serve_until_signalled(worker: _Serving, ready_file: Path | None) -> None:
    """Run a Connect worker (standalone or distributed) until SIGINT/SIGTERM; write its REST
    port to ``ready_file`` once it serves. A signal during the start (a distributed worker
    waiting to join its group) cancels the start, which stops what it had begun."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.ensure_future(worker.start())
    signalled = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return
        starting.result()  # a failed start has stopped itself
        try:
            if ready_file is not None:
                ready_file.write_text(str(worker.port))
            await signalled
        finally:
            await worker.stop()
    finally:
        signalled.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)


def run_standalone(worker_path: Path, connector_paths: Sequence[Path], ready_file: Path | None = None) -> None:
    worker, connectors = load_files(worker_path, connector_paths)
    asyncio.run(serve_until_signalled(StandaloneWorker(worker, connectors), ready_file))
