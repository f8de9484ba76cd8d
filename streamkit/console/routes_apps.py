"""Stream apps: each worker's partitions, tables (with lookups by key) and per-operator
event time and late records."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from streamkit.console import apps
from streamkit.console.errors import BadInput, NotFound
from streamkit.console.pages import http_clients, render, settings

__all__ = ["router"]

router = APIRouter()


def _url(request: Request, address: str) -> str:
    for url in settings(request).app_urls:
        if apps.worker_address(url) == address:
            return url
    raise NotFound(f"no stream worker {address} (the console was started with "
                   f"{', '.join(apps.worker_address(u) for u in settings(request).app_urls) or 'none'})")


@router.get("/apps")
async def workers(request: Request) -> Response:
    found = [await apps.worker(url, http_clients(request)) for url in settings(request).app_urls]
    return render(request, "apps.html", {"workers": found})


@router.get("/apps/{address}")
async def worker(request: Request, address: str) -> Response:
    return render(request, "app.html", {"worker": await apps.worker(_url(request, address),
                                                                    http_clients(request))})


@router.get("/apps/{address}/tables/{table}")
async def table(request: Request, address: str, table: str, key: str = "", limit: str = "100") -> Response:
    url = _url(request, address)
    if not limit.isdigit() or not 1 <= int(limit) <= 10_000:
        raise BadInput(f"limit must be an integer from 1 to 10000, not {limit!r}")
    if key:
        found = await apps.query_table(url, table, key, http_clients(request))
        rows = [(found.get("key", key), found.get("value"))]
    else:
        found = await apps.query_table(url, table, None, http_clients(request), int(limit))
        rows = sorted(found.items()) if isinstance(found, dict) else []
    return render(request, "table.html", {"address": address, "table": table, "key": key, "rows": rows})
