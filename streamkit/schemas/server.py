"""A running registry: its store (the ``_schemas`` topic), its leader election and its
REST API, started and stopped together (``SchemaRegistryServer``), and the process entry
point ``run_schema_registry`` behind ``streamkit schema-registry``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from streamkit.http import HttpServer
from streamkit.schemas.config import RegistryConfig
from streamkit.schemas.election import LeaderElection
from streamkit.schemas.kafkastore import KafkaStore
from streamkit.schemas.rest import LEADER_WAIT_S, LeaderForwarder, create_app
from streamkit.schemas.service import Registry
from streamkit.schemas.state import RegistryState

__all__ = ["SchemaRegistryServer", "run_schema_registry"]

log = logging.getLogger(__name__)


class SchemaRegistryServer:
    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self.state = RegistryState()
        self.registry = Registry(self.state, config.compatibility_level)
        self.http: HttpServer | None = None
        self.store: KafkaStore | None = None
        self.election: LeaderElection | None = None
        self._forwarder: LeaderForwarder | None = None

    @property
    def url(self) -> str:
        assert self.http is not None
        return self.http.url

    async def start(self) -> None:
        config = self.config
        # bind first, so the URL the group learns is the one that answers (port 0 too)
        self.http = HttpServer(create_app(self.registry, self._forward), config.host, config.port,
                               what="the schema registry", security=config.security)
        host = config.advertised_host or ("127.0.0.1" if config.host in ("0.0.0.0", "") else config.host)
        url = f"{config.security.scheme}://{host}:{self.http.port}"
        client_id = f"schema-registry-{self.http.port}"
        self.store = KafkaStore(config.bootstrap, config.topic, config.replication, self.state.apply, client_id,
                                config.kafkastore_security)
        await self.store.start()
        self.registry.store = self.store
        self.election = LeaderElection(config.bootstrap, config.group_id, config.topic, url, config.leader_eligible,
                                       client_id, config.kafkastore_security)
        self._forwarder = LeaderForwarder(self.election, self.store.read_to_end, config.truststore)
        await self.election.start()
        # serve once a leader is known (with a process that died still in the group, that
        # is after its session times out)
        await self.election.leader(LEADER_WAIT_S)
        await self.http.start()
        log.info("schema registry listening on %s (store %s on %s)", url, config.topic, config.bootstrap)

    async def _forward(self, request: Request) -> Response | None:
        assert self._forwarder is not None
        return await self._forwarder(request)

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
        if self.election is not None:
            await self.election.stop()
        if self.store is not None:
            await self.store.stop()
        if self._forwarder is not None:
            await self._forwarder.aclose()


async def _serve(config: RegistryConfig, ready_file: Path | None) -> None:
    server = SchemaRegistryServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
        if ready_file is not None:
            assert server.http is not None
            ready_file.write_text(f"{server.http.port}\n")
        await stop.wait()
    finally:
        with contextlib.suppress(Exception):
            await server.stop()


def run_schema_registry(config: RegistryConfig, ready_file: Path | None = None) -> None:
    asyncio.run(_serve(config, ready_file))
