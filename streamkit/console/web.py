"""The console's ASGI app: its pages (one router per area), static assets, and one way to
answer any error: a page (or JSON) with its status and one line, never a traceback."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from streamkit.clients.security import client_config_scope
from streamkit.console import (
    broker,
    routes_apps,
    routes_connect,
    routes_groups,
    routes_pipeline,
    routes_schemas,
    routes_security,
    routes_topics,
)
from streamkit.console.broker import AdminPool
from streamkit.console.errors import ConsoleError
from streamkit.console.history import LagHistory, LagSampler, RateMeter
from streamkit.console.pages import render, templates
from streamkit.console.registry import RegistryClient, SchemaDecoder
from streamkit.console.rest import HttpClients
from streamkit.console.security import SecurityFeatures
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


def _pretty_json(text: str) -> str:
    """A schema's text: pretty-printed when it is JSON (Avro, JSON Schema), else as is."""
    try:
        return _pretty(json.loads(text))
    except (TypeError, ValueError):
        return text


templates.env.filters["pretty"] = _pretty
templates.env.filters["prettyjson"] = _pretty_json
templates.env.filters["time"] = _time


def _error_page(request: Request, status: int, message: str, detail: dict[str, Any] | None = None) -> Response:
    data: dict[str, Any] = {"error": message, "status": status}
    if detail:
        data["detail"] = detail
    return render(request, "error.html", data, status=status)


def _is_page(scope: Any) -> bool:
    """A full page (with the navigation), not an asset, JSON, an htmx fragment or an event stream."""
    if scope["path"].startswith("/static"):
        return False
    headers = dict(scope.get("headers") or [])
    accept = headers.get(b"accept", b"").decode("latin-1")
    wants_json = "application/json" in accept and "text/html" not in accept  # as pages.wants_json
    return b"hx-request" not in headers and "text/event-stream" not in accept and not wants_json


class _ClientSecurity:
    """ASGI middleware: every request (and what it starts) reaches the brokers with the
    console's client security settings, through ``streamkit.clients``' own clients too."""

    def __init__(self, app: Any, client_config: Mapping[str, str], features: SecurityFeatures) -> None:
        self.app = app
        self.client_config = dict(client_config)
        self.features = features

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        with client_config_scope(self.client_config):
            if scope["type"] == "http" and scope["method"] == "GET" and _is_page(scope):
                # The navigation links ACLs and Users only when the cluster has them.
                scope.setdefault("state", {})["features"] = await self.features.get()
            await self.app(scope, receive, send)


def create_app(settings: ConsoleSettings) -> FastAPI:
    app = FastAPI(title="streamkit console", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings = settings
    app.state.admin = AdminPool(settings.bootstrap_servers)  # closed by ConsoleServer.stop
    app.state.features = SecurityFeatures(app.state.admin)
    app.state.stopping = asyncio.Event()  # set by ConsoleServer.stop: live tails end
    app.state.lag_history = LagHistory()
    app.state.rates = RateMeter()

    async def total_lag(group_id: str) -> int:
        return sum(lag.lag for lag in (await broker.group(app.state.admin, group_id)).lags)

    app.state.lag_sampler = LagSampler(app.state.lag_history, total_lag)  # started by ConsoleServer.start
    app.add_middleware(_ClientSecurity, client_config=settings.client_config, features=app.state.features)
    app.mount("/static", StaticFiles(directory=str(Path(__file__).parent / "static")), name="static")
    for module in (routes_topics, routes_groups, routes_connect, routes_apps, routes_pipeline, routes_security):
        app.include_router(module.router)
    # The schema pages exist only with a registry: without one they are absent (404).
    # One client per service it calls, with the auth and SSL context built once (closed by ConsoleServer.stop).
    app.state.http = HttpClients(settings.http_options())
    app.state.registry = RegistryClient(settings.schema_registry_url, app.state.http) if settings.schema_registry_url else None
    app.state.schemas = SchemaDecoder(app.state.registry) if app.state.registry is not None else None
    if app.state.registry is not None:
        app.include_router(routes_schemas.router)

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
