"""Serving an ASGI app with uvicorn inside the caller's event loop, on a socket bound first
(so port 0 gives a known port before anything starts): Connect's REST API, the broker's
metrics. The process handles signals itself, so uvicorn's own signal capture is off."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

__all__ = ["HttpServer"]


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    def __init__(self, app: Any, host: str, port: int, what: str = "the REST API") -> None:
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
        except OSError as exc:
            self._sock.close()
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise OSError(exc.errno, f"{what} cannot listen on {where}: {exc.strerror}") from exc
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """Where a local client reaches it (a wildcard bind is reached on the loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]), name="http-server")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
        self._sock.close()
