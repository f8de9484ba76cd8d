"""Running the console: its app on uvicorn in the caller's event loop."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Callable

from streamkit.clients.security import client_config_scope
from streamkit.console.settings import ConsoleSettings
from streamkit.console.web import create_app
from streamkit.http import HttpSecurity, HttpServer

__all__ = ["ConsoleServer", "parse_listener", "serve"]


def parse_listener(listener: str, what: str = "the console's listener") -> tuple[str, int]:
    """``http://host:port`` (or ``host:port``; an empty host is every interface) as (host, port)."""
    match = re.fullmatch(r"(?:https?://)?\[?([^\]/]*)\]?:(\d+)/?", listener.strip())
    if match is None:
        raise ValueError(f"{what} must be http://host:port, not {listener!r}")
    return match[1] or "0.0.0.0", int(match[2])


class ConsoleServer:
    """``await start()`` binds ``host:port`` (0: a free port) and serves; ``url`` says where."""

    def __init__(self, settings: ConsoleSettings, host: str = "127.0.0.1", port: int = 8088,
                 security: HttpSecurity | None = None) -> None:
        """``security``: its pages over https, with basic authentication when it has users."""
        self.settings = settings
        self.app = create_app(settings)
        self._http = HttpServer(self.app, host, port, what="the console", security=security)

    @property
    def url(self) -> str:
        return self._http.url

    @property
    def port(self) -> int:
        return self._http.port

    async def start(self) -> None:
        await self._http.start()
        # The sampler's requests carry the console's client security settings, as a page's do.
        with client_config_scope(self.settings.client_config):
            self.app.state.lag_sampler.start()

    async def stop(self) -> None:
        self.app.state.stopping.set()
        await self._http.stop()
        await self.app.state.lag_sampler.stop()
        await self.app.state.admin.close()
        await self.app.state.http.close()


async def serve(settings: ConsoleSettings, host: str, port: int, announce: Callable[[str], None],
                security: HttpSecurity | None = None) -> None:
    """Serve until SIGINT or SIGTERM; ``announce`` is told the URL once it listens."""
    server = ConsoleServer(settings, host, port, security)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    announce(server.url)
    try:
        await stop.wait()
    finally:
        await server.stop()
