"""The pipeline view: source connectors -> topics -> stream apps -> topics -> sinks."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from streamkit.console import apps
from streamkit.console.connect import ConnectClient
from streamkit.console.errors import ConsoleError
from streamkit.console.pages import jsonable, render, settings
from streamkit.console.pipeline import build_pipeline

__all__ = ["router"]

router = APIRouter()


@router.get("/pipeline")
async def pipeline(request: Request) -> Response:
    config = settings(request)
    connectors: dict[str, Any] = {}
    active: dict[str, list[str]] = {}
    notes: list[str] = []
    if config.connect_url is None:
        notes.append("no Connect REST API is configured (--connect-url): no connectors are drawn")
    else:
        client = ConnectClient(config.connect_url, config.http_options())
        try:
            connectors = await client.connectors()
            found = await asyncio.gather(*(client.active_topics(name) for name in connectors))
            active = dict(zip(connectors, found, strict=True))
        except ConsoleError as exc:
            notes.append(f"connectors are not drawn: {exc.message}")
    workers = await asyncio.gather(*(apps.worker(url, config.http_options()) for url in config.app_urls))
    graph = build_pipeline(connectors, active, list(workers))
    graph.notes[:0] = notes
    return render(request, "pipeline.html", {"pipeline": graph, "elements": jsonable(graph)})
