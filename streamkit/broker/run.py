"""Run a broker until SIGINT/SIGTERM, then shut down cleanly (``streamkit broker``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from streamkit.broker.config import BrokerConfig
from streamkit.broker.server import Broker

if TYPE_CHECKING:
    from streamkit.console import ConsoleServer
    from streamkit.schemas import SchemaRegistryServer

__all__ = ["DEFAULT_DATA_DIR", "DEFAULT_HOST", "DEFAULT_PORT", "placement", "run_broker"]

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = Path("data/broker")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092


def placement(config: BrokerConfig, data_dir: Path | None, host: str | None,
              port: int | None) -> tuple[Path, str, int]:
    """Data directory, bind host and port: the command line's if given, else the config
    file's (log.dirs, listeners), else the defaults."""
    if data_dir is None:
        data_dir = config.data_dir or DEFAULT_DATA_DIR
    if host is None:
        host = config.listener_host or DEFAULT_HOST
    if port is None:
        port = config.listener_port if config.listener_port >= 0 else DEFAULT_PORT
    return data_dir, host, port


async def _main(data_dir: Path, config: BrokerConfig, host: str, port: int, ready_file: Path | None) -> None:
    broker = Broker(data_dir, config, host, port)
    await broker.start()
    registry = await _start_schema_registry(config, broker) if config.schema_registry_listeners else None
    console = await _start_console(config, broker, registry) if config.console_listeners else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if ready_file is not None:
        # Once the signals are ours: a SIGTERM right after the file appears stops cleanly.
        # The second line, when there is one, is the metrics port; with several listeners,
        # NAME=port for each follows, a registry's port as schema-registry=PORT and the
        # console's as console=PORT.
        metrics = "" if broker.metrics_port is None else f"{broker.metrics_port}\n"
        ports = broker.listener_ports
        listeners = "".join(f"{name}={port}\n" for name, port in ports.items()) if len(ports) > 1 else ""
        sr = "" if registry is None or registry.http is None else f"schema-registry={registry.http.port}\n"
        web = "" if console is None else f"console={console.port}\n"
        ready_file.write_text(f"{broker.port}\n{metrics}{listeners}{sr}{web}")
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        if console is not None:
            await console.stop()
        if registry is not None:
            await registry.stop()
        await broker.stop()


async def _start_schema_registry(config: BrokerConfig, broker: Broker) -> SchemaRegistryServer:
    """The Schema Registry in this process (``schema.registry.listeners``): a client of this
    broker like any other, over its own listener, so the broker's code knows nothing of it."""
    from streamkit.schemas import RegistryConfig, SchemaRegistryServer

    host = "127.0.0.1" if broker.host in ("0.0.0.0", "") else broker.host
    registry = SchemaRegistryServer(RegistryConfig.from_settings({
        "listeners": config.schema_registry_listeners, "kafkastore.bootstrap.servers": f"{host}:{broker.port}"}))
    await registry.start()
    return registry


async def _start_console(config: BrokerConfig, broker: Broker,
                         registry: SchemaRegistryServer | None) -> ConsoleServer:
    """The web console in this process (``console.listeners``): like the registry, a client
    of this broker over its first listener; it shows the registry when there is one."""
    from streamkit.console import ConsoleServer, ConsoleSettings, parse_listener

    host = "127.0.0.1" if broker.host in ("0.0.0.0", "") else broker.host
    registry_url = None if registry is None or registry.http is None else registry.http.url
    settings = ConsoleSettings(f"{host}:{broker.port}", schema_registry_url=registry_url)
    console_host, console_port = parse_listener(config.console_listeners, "console.listeners")
    console = ConsoleServer(settings, console_host, console_port)
    await console.start()
    log.info("console on %s", console.url)
    return console


def run_broker(data_dir: Path, config: BrokerConfig, host: str, port: int, ready_file: Path | None = None) -> None:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(data_dir, config, host, port, ready_file))
