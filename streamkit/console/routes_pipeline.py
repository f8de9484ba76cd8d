"""The pipeline view: source connectors -> topics -> stream apps -> topics -> sinks."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from streamkit.console import apps, broker
from streamkit.console.connect import ConnectClient
from streamkit.console.errors import ConsoleError
from streamkit.console.history import now_ms
from streamkit.console.pages import admin_pool, http_clients, jsonable, rate_meter, render, settings
from streamkit.console.pipeline import Pipeline, build_pipeline

__all__ = ["router"]

router = APIRouter()


async def _graph(request: Request) -> Pipeline:
    config = settings(request)
    connectors: dict[str, Any] = {}
    active: dict[str, list[str]] = {}
    notes: list[str] = []
    if config.connect_url is None:
        notes.append("no Connect REST API is configured (--connect-url): no connectors are drawn")
    else:
        client = ConnectClient(config.connect_url, http_clients(request))
        try:
            connectors = await client.connectors()
            found = await asyncio.gather(*(client.active_topics(name) for name in connectors))
            active = dict(zip(connectors, found, strict=True))
        except ConsoleError as exc:
            notes.append(f"connectors are not drawn: {exc.message}")
    workers = await asyncio.gather(*(apps.worker(url, http_clients(request)) for url in config.app_urls))
    graph = build_pipeline(connectors, active, list(workers))
    graph.notes[:0] = notes
    return graph


@router.get("/pipeline")
async def pipeline(request: Request) -> Response:
    graph = await _graph(request)
    return render(request, "pipeline.html", {"pipeline": graph, "elements": jsonable(graph)})


@router.get("/pipeline/rates")
async def rates(request: Request) -> Response:
    """Records per second on each edge, between this call and the one before (the page
    asks every few seconds): into a topic, the records written to it; out of a topic, the
    offsets its reader (the sink's connect-NAME group, the app's group) commits on it.
    ``rate`` is null until there are two samples."""
    graph = await _graph(request)
    pool = admin_pool(request)
    topics = sorted({n.label for n in graph.nodes if n.kind == "topic"})
    readers = {e.target for e in graph.edges if e.source.startswith("topic:")}
    groups = {node: _reader_group(node) for node in readers}
    written, committed = await asyncio.gather(broker.topic_ends(pool, topics),
                                              broker.committed_totals(pool, sorted(set(groups.values()))))
    meter = rate_meter(request)
    at = now_ms()
    topic_rates = {t: meter.observe(f"topic:{t}", count, at) for t, count in written.items()}
    out = []
    for e in graph.edges:
        if e.source.startswith("topic:"):
            name, group = e.source.removeprefix("topic:"), groups[e.target]
            count = committed.get((group, name))
            rate = None if count is None else meter.observe(f"group:{group}:{name}", count, at)
        else:
            rate = topic_rates.get(e.target.removeprefix("topic:"))
        out.append({"source": e.source, "target": e.target, "rate": rate})
    return JSONResponse({"edges": out, "at": at})


def _reader_group(node_id: str) -> str:
    """The consumer group a sink connector (Kafka Connect's connect-NAME) or a stream app
    (its application id) reads with."""
    kind, _, name = node_id.partition(":")
    return f"connect-{name}" if kind == "sink" else name
