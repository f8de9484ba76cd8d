"""The console's ASGI app: its pages (one router per area), static assets, and one way to
answer any error: a page (or JSON) with its status and one line, never a traceback."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from streamkit.console import (
    routes_apps,
    routes_connect,
    routes_groups,
    routes_pipeline,
    routes_topics,
)
from streamkit.console.broker import AdminPool
from streamkit.console.errors import ConsoleError
from streamkit.console.pages import render, templates
from streamkit.console.settings import ConsoleSettings

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _time(ms: int) -> str:
    """Epoch milliseconds as UTC, to the millisecond."""
    if ms < 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


templates.env.filters["pretty"] = _pretty
templates.env.filters["time"] = _time


def _error_page(request: Request, status: int, message: str, detail: dict[str, Any] | None = None) -> Response:
    data: dict[str, Any] = {"error": message, "status": status}
    if detail:
        data["detail"] = detail
    return render(request, "error.html", data, status=status)


def create_app(settings: ConsoleSettings) -> FastAPI:
    app = FastAPI(title="streamkit console", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings = settings
    app.state.admin = AdminPool(settings.bootstrap_servers)  # closed by ConsoleServer.stop
    app.mount("/static", StaticFiles(directory=str(Path(__file__).parent / "static")), name="static")
    for module in (routes_topics, routes_groups, routes_connect, routes_apps, routes_pipeline):
        app.include_router(module.router)

    @app.exception_handler(ConsoleError)
    async def _console_error(request: Request, exc: ConsoleError) -> Response:
        return _error_page(request, exc.status, exc.message, exc.detail)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = "not found" if exc.status_code == 404 else str(exc.detail)
        return _error_page(request, exc.status_code, message)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:])}: {e.get('msg')}" for e in exc.errors())
        return _error_page(request, 400, problems or "bad request")

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        log.error("console request %s failed", request.url.path, exc_info=exc)
        return _error_page(request, 500, f"internal error ({type(exc).__name__}); see the console's log")

    return app
