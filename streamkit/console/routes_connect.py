"""Kafka Connect: connectors and their tasks, failed tasks' traces, create (with Connect's
validation per field), pause, resume, restart, delete, and the plugins."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from streamkit.console.connect import ConnectClient, field_errors
from streamkit.console.errors import BadInput, ConsoleError, NotFound
from streamkit.console.pages import done, form, http_clients, render, settings

__all__ = ["router"]

router = APIRouter()

_ACTIONS = ("pause", "resume", "restart", "stop", "delete")


def _client(request: Request) -> ConnectClient:
    url = settings(request).connect_url
    if url is None:
        raise NotFound("no Connect REST API is configured (start the console with --connect-url)")
    return ConnectClient(url, http_clients(request))


@router.get("/connect")
async def connectors(request: Request) -> Response:
    client = _client(request)
    found = await client.connectors()
    plugins = await client.plugins()
    return render(request, "connect.html", {"connect_url": client.url, "connectors": found, "plugins": plugins,
                                             "draft": "", "problems": {}, "error": None})


def _parse_connector(text: str) -> tuple[str, dict[str, Any]]:
    """``{"name": ..., "config": {...}}`` (as POST /connectors takes) or a flat config with
    a ``name`` (as connector files hold)."""
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"the connector is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadInput("the connector must be a JSON object")
    config = body.get("config", body)
    if not isinstance(config, dict):
        raise BadInput("'config' must be a JSON object")
    name = body.get("name") or config.get("name")
    if not isinstance(name, str) or not name:
        raise BadInput("the connector needs a 'name'")
    return name, dict(config)


async def _problems(client: ConnectClient, exc: ConsoleError, config: dict[str, Any]) -> dict[str, list[str]]:
    """Connect's errors per field: from its 400 (streamkit's ``problems``), else from
    config/validate (Apache Kafka's Connect answers a 400 with one message)."""
    problems = {str(k): [str(m) for m in v] for k, v in dict(exc.detail.get("problems") or {}).items()}
    if not problems and "connector.class" in config:
        try:
            problems = field_errors(await client.validate(config))
        except ConsoleError:
            problems = {}
    return problems


@router.post("/connect/connectors")
async def create(request: Request) -> Response:
    """Create a connector; an invalid config shows Connect's errors next to each field."""
    client = _client(request)
    draft = (await form(request)).get("connector", "")
    name, config = _parse_connector(draft)
    try:
        await client.create(name, config)
    except ConsoleError as exc:
        if exc.status != 400:
            raise
        problems = await _problems(client, exc, config)
        found = await client.connectors()
        return render(request, "connect.html", {"connect_url": client.url, "connectors": found,
                                                 "plugins": await client.plugins(), "draft": draft,
                                                 "problems": problems, "error": exc.message}, status=400)
    return done(request, f"/connect/connectors/{quote(name, safe='')}", f"created connector {name}")


@router.post("/connect/connectors/{name}/config")
async def update(request: Request, name: str) -> Response:
    """Replace a connector's config (JSON object); Connect restarts its tasks."""
    client = _client(request)
    draft = (await form(request)).get("config", "")
    try:
        config = json.loads(draft)
    except ValueError as exc:
        raise BadInput(f"the config is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise BadInput("the config must be a JSON object")
    try:
        await client.update(name, config)
    except ConsoleError as exc:
        if exc.status != 400:
            raise
        found = await client.connector(name)
        return render(request, "connector.html", {"name": name, **found, "topics": await client.active_topics(name),
                                                   "draft": draft, "error": exc.message,
                                                   "problems": await _problems(client, exc, config)}, status=400)
    return done(request, f"/connect/connectors/{quote(name, safe='')}", f"updated the config of {name}")


@router.get("/connect/connectors/{name}")
async def connector(request: Request, name: str) -> Response:
    client = _client(request)
    found = await client.connector(name)
    topics = await client.active_topics(name)
    return render(request, "connector.html", {"name": name, **found, "topics": topics, "draft": None,
                                               "error": None, "problems": {}})


@router.get("/connect/connectors/{name}/status")
async def connector_status(request: Request, name: str) -> Response:
    """The state and tasks alone: the connector page refreshes them (htmx)."""
    found = await _client(request).connector(name)
    return render(request, "connector_status.html", {"name": name, **found})


@router.post("/connect/connectors/{name}/tasks/{task}/restart")
async def restart_task(request: Request, name: str, task: int) -> Response:
    await _client(request).action(name, "restart", task)
    return done(request, f"/connect/connectors/{quote(name, safe='')}", f"restarted task {task} of {name}")


@router.post("/connect/connectors/{name}/{action}")
async def action(request: Request, name: str, action: str) -> Response:
    if action not in _ACTIONS:
        raise NotFound(f"no connector action {action!r} (one of {', '.join(_ACTIONS)})")
    await _client(request).action(name, action)
    if action == "delete":
        return done(request, "/connect", f"deleted connector {name}")
    return done(request, f"/connect/connectors/{quote(name, safe='')}", f"{action} sent to {name}")
