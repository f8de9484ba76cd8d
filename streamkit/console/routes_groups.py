"""Consumer groups: their members and assignments, lag per partition, and offset resets."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from streamkit.console import broker, messages
from streamkit.console.pages import admin_pool, done, form, form_int, lag_history, render

__all__ = ["router"]

router = APIRouter()


@router.get("/groups")
async def groups(request: Request, q: str = "") -> Response:
    found = await broker.groups(admin_pool(request))
    shown = [g for g in found if q.lower() in g.group_id.lower()]
    return render(request, "groups.html", {"groups": shown, "q": q})


async def _group(request: Request, group_id: str) -> dict[str, Any]:
    found = await broker.group(admin_pool(request), group_id)
    total = sum(lag.lag for lag in found.lags)
    history = lag_history(request)
    history.record(group_id, total)
    history.watch(group_id)  # sampled in the background from now on, for its chart
    return {"group_id": group_id, "state": found.state, "protocol": found.protocol, "members": found.members,
            "lags": found.lags, "total_lag": total, "topics": sorted({lag.topic for lag in found.lags})}


@router.get("/groups/{group_id}")
async def group(request: Request, group_id: str) -> Response:
    return render(request, "group.html", await _group(request, group_id))


@router.get("/groups/{group_id}/lag")
async def group_lag(request: Request, group_id: str) -> Response:
    """The lag table alone: the group page refreshes it (htmx) and charts its total."""
    return render(request, "group_lag.html", await _group(request, group_id))


@router.get("/groups/{group_id}/lag/history")
async def group_lag_history(request: Request, group_id: str) -> Response:
    """The group's total lag over time as the console sampled it: ``points`` are
    [epoch ms, total lag], oldest first (JSON only; the group page charts it)."""
    return JSONResponse({"group_id": group_id, "points": lag_history(request).points(group_id)})


@router.post("/groups/{group_id}/reset")
async def reset(request: Request, group_id: str) -> Response:
    """Reset the group's offsets on one topic to earliest, latest, an offset or a timestamp."""
    fields = await form(request)
    to = fields.get("to", "").strip()
    value: int | None = None
    if to == "offset":
        value = form_int(fields, "value", minimum=0)
    elif to == "timestamp":
        value = messages.parse_timestamp(fields.get("value", "") or "")
    rows = await broker.reset_group(admin_pool(request), group_id, fields.get("topic", "").strip(), to, value)
    moved = ", ".join(f"{r.topic}-{r.partition}: {r.current} -> {r.new}" for r in rows)
    return done(request, f"/groups/{quote(group_id, safe='')}", f"reset offsets ({moved})", rows)
