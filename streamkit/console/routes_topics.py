"""The start page, topics, the message browser and the producer form."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from streamkit.clients import admin
from streamkit.console import broker, messages
from streamkit.console.broker import kafka_errors
from streamkit.console.errors import BadInput, ConsoleError
from streamkit.console.pages import (
    admin_pool,
    done,
    form,
    form_int,
    render,
    schema_decoder,
    settings,
)

__all__ = ["router"]

router = APIRouter()


def _pairs(text: str, what: str) -> dict[str, str]:
    """``key=value`` lines (blank lines skipped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"{what} must be key=value lines, not {line.strip()!r}")
        out[key.strip()] = value.strip()
    return out


def _topic_url(name: str) -> str:
    return f"/topics/{quote(name, safe='')}"


@router.get("/")
async def overview(request: Request) -> Response:
    found = await broker.overview(admin_pool(request))
    return render(request, "overview.html", {"overview": found})


@router.get("/throughput")
async def throughput(request: Request) -> Response:
    """``{"time_ms", "records"}``: records written to all topics so far; the overview's chart
    polls it and plots the rate between two samples."""
    import time

    records = await broker.records_written(admin_pool(request))
    return JSONResponse({"time_ms": int(time.time() * 1000), "records": records})


@router.get("/topics")
async def topics(request: Request, q: str = "", internal: bool = False) -> Response:
    found = await broker.overview(admin_pool(request))
    shown = [t for t in found.topics if (internal or not t.internal) and q.lower() in t.name.lower()]
    return render(request, "topics.html", {"topics": shown, "q": q, "internal": internal, "total": len(found.topics)})


@router.post("/topics")
async def create_topic(request: Request) -> Response:
    fields = await form(request)
    name = fields.get("name", "").strip()
    partitions = form_int(fields, "partitions", 1, minimum=1)
    replication = form_int(fields, "replication_factor", -1)
    configs = _pairs(fields.get("configs", ""), "configs")
    await broker.create_topic(settings(request).bootstrap_servers, name, partitions, replication, configs)
    admin_pool(request).forget()  # the list shows it at once
    return done(request, _topic_url(name), f"created topic {name}")


@router.get("/topics/{name}")
async def topic(request: Request, name: str) -> Response:
    found = await broker.topic(settings(request).bootstrap_servers, name)
    return render(request, "topic.html", {"topic": found})


@router.post("/topics/{name}/delete")
async def delete_topic(request: Request, name: str) -> Response:
    await broker.delete_topic(settings(request).bootstrap_servers, name)
    admin_pool(request).forget()
    return done(request, "/topics", f"deleted topic {name}")


@router.post("/topics/{name}/config")
async def alter_config(request: Request, name: str) -> Response:
    """Set ``key`` to ``value``, or with ``delete`` remove the override of ``key``."""
    fields = await form(request)
    key = fields.get("key", "").strip()
    if not key:
        raise BadInput("config name (key) is required")
    if fields.get("delete"):
        await broker.alter_topic(settings(request).bootstrap_servers, name, {}, [key])
        notice = f"removed the override of {key}"
    else:
        value = fields.get("value", "").strip()
        await broker.alter_topic(settings(request).bootstrap_servers, name, {key: value}, [])
        notice = f"set {key}={value}"
    return done(request, _topic_url(name), notice)


def _browse_request(params: dict[str, str]) -> messages.Browse:
    start = params.get("start", "beginning") or "beginning"
    partition = params.get("partition", "").strip()
    offset = params.get("offset", "").strip()
    timestamp = params.get("timestamp", "").strip()
    fields = {"partition": partition, "offset": offset, "limit": params.get("limit", "")}
    return messages.Browse(
        start=start,
        partition=form_int(fields, "partition", minimum=0) if partition else None,
        offset=form_int(fields, "offset", minimum=0) if offset else None,
        timestamp=messages.parse_timestamp(timestamp) if timestamp else None,
        limit=form_int(fields, "limit", 50, minimum=1),
        key=params.get("key") or None,
        contains=params.get("contains") or None,
    )


@router.get("/topics/{name}/messages")
async def browse(request: Request, name: str) -> Response:
    params = dict(request.query_params)
    want = _browse_request(params)
    with kafka_errors():
        admin.topic_name(name)
    known = await broker.partitions_of(admin_pool(request), name)  # 404 before a consumer starts
    page = await messages.browse(settings(request).bootstrap_servers, name, want, schemas=schema_decoder(request),
                                 partitions=known)
    next_url = None
    if want.partition is not None and page.next_offsets.get(want.partition, 0) < page.ends.get(want.partition, 0):
        following = {**params, "start": "offset", "offset": str(page.next_offsets[want.partition])}
        following.pop("notice", None)
        next_url = f"{_topic_url(name)}/messages?" + "&".join(f"{quote(k)}={quote(v)}" for k, v in following.items())
    return render(request, "messages.html", {"topic": {"name": name, "partitions": page.partitions}, "want": want,
                                              "params": params, "page": page, "next_url": next_url})


@router.get("/topics/{name}/tail")
async def live_tail(request: Request, name: str) -> Response:
    """Server-sent events: ``ready`` once the consumer stands at the end, then one message (a
    record as JSON) per new matching record; ``error`` if the broker fails meanwhile."""
    want = _browse_request({k: v for k, v in request.query_params.items() if k in ("partition", "key", "contains")})
    bootstrap = settings(request).bootstrap_servers
    found = await broker.topic(bootstrap, name)  # 404 or 400 before the stream begins
    if want.partition is not None and want.partition >= found.partitions:
        raise BadInput(f"topic {name} has no partition {want.partition} (it has {found.partitions})")

    stopping: asyncio.Event = request.app.state.stopping

    async def stopped() -> bool:
        """The page left, or the console is shutting down (it does not wait for open tails)."""
        return stopping.is_set() or await request.is_disconnected()

    async def events() -> AsyncIterator[bytes]:
        try:
            async for message in messages.tail(bootstrap, name, want, stopped, schemas=schema_decoder(request)):
                if message is None:  # at the end: what is written from now on arrives
                    yield b"event: ready\ndata: {}\n\n"
                elif isinstance(message, messages.Idle):
                    yield b": idle\n\n"
                elif isinstance(message, messages.Skipped):
                    yield b"event: skipped\ndata: " + json.dumps({"partition": message.partition,
                                                                  "records": message.records}).encode() + b"\n\n"
                else:
                    yield b"data: " + json.dumps(messages.message_json(message)).encode() + b"\n\n"
                # Let the event loop run: a page that left is noticed after the write that
                # failed, not after a whole batch of writes into a closed connection.
                await asyncio.sleep(0)
        except ConsoleError as exc:  # the stream has begun: the reader gets the error as an event
            yield b"event: error\ndata: " + json.dumps({"error": exc.message}).encode() + b"\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


@router.post("/topics/{name}/produce")
async def produce(request: Request, name: str) -> Response:
    fields = await form(request)
    bootstrap = settings(request).bootstrap_servers
    found = await broker.topic(bootstrap, name)
    partition_text = fields.get("partition", "").strip()
    partition = form_int(fields, "partition", minimum=0) if partition_text else None
    if partition is not None and partition >= found.partitions:
        raise BadInput(f"topic {name} has no partition {partition} (it has {found.partitions})")
    key = fields.get("key", "")
    value = fields.get("value", "")
    headers = [(k, v.encode()) for k, v in _pairs(fields.get("headers", ""), "headers").items()]
    where = await messages.produce(bootstrap, name, partition, key.encode() if key else None,
                                   value.encode() if "null_value" not in fields else None, headers)
    return done(request, f"{_topic_url(name)}/messages?partition={where[0]}&start=offset&offset={where[1]}",
                f"produced to partition {where[0]} at offset {where[1]}", {"partition": where[0], "offset": where[1]})
