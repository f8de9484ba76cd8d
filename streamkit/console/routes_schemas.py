"""Schemas (with a Schema Registry): subjects, their versions and schema text, the
compatibility config; register a schema, delete a subject or a version."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from streamkit.console.errors import BadInput
from streamkit.console.pages import done, form, form_int, registry, render
from streamkit.console.registry import COMPATIBILITY_LEVELS, SCHEMA_TYPES

__all__ = ["router"]

router = APIRouter()


def _subject_url(subject: str) -> str:
    return f"/schemas/{quote(subject, safe='')}"


@router.get("/schemas")
async def subjects(request: Request, q: str = "") -> Response:
    client = registry(request)
    found, level = await asyncio.gather(client.subjects(), client.compatibility())
    shown = [s for s in found if q.lower() in s.lower()]
    return render(request, "schemas.html", {"subjects": shown, "q": q, "compatibility": level,
                                            "levels": COMPATIBILITY_LEVELS, "types": SCHEMA_TYPES})


@router.get("/schemas/{subject}")
async def subject(request: Request, subject: str, version: str = "latest") -> Response:
    client = registry(request)
    if version != "latest":
        form_int({"version": version}, "version", minimum=1)
    versions, shown, level = await asyncio.gather(client.versions(subject), client.version(subject, version),
                                                  client.compatibility(subject))
    return render(request, "schema.html", {
        "subject": subject, "versions": versions, "schema": shown, "compatibility": level,
        "levels": COMPATIBILITY_LEVELS, "types": SCHEMA_TYPES})


@router.post("/schemas")
async def register(request: Request) -> Response:
    """Register a schema under a subject (a new subject, or a new version of one)."""
    fields = await form(request)
    name = fields.get("subject", "").strip()
    text = fields.get("schema", "").strip()
    if not name:
        raise BadInput("subject is required")
    if not text:
        raise BadInput("schema is required")
    kind = fields.get("schema_type", "AVRO").strip().upper() or "AVRO"
    schema_id = await registry(request).register(name, text, kind)
    return done(request, _subject_url(name), f"registered schema {schema_id} under {name}", {"id": schema_id})


@router.post("/schemas/{subject}/delete")
async def delete(request: Request, subject: str) -> Response:
    fields = await form(request)
    client = registry(request)
    if fields.get("version", "").strip():
        version = form_int(fields, "version", minimum=1)
        await client.delete_version(subject, version)
        return done(request, _subject_url(subject), f"deleted version {version} of {subject}")
    deleted = await client.delete_subject(subject)
    return done(request, "/schemas", f"deleted subject {subject} (versions {', '.join(map(str, deleted))})", deleted)


@router.post("/schemas/{subject}/config")
async def config(request: Request, subject: str) -> Response:
    fields = await form(request)
    level = fields.get("compatibility", "").strip().upper()
    await registry(request).set_compatibility(level, subject)
    return done(request, _subject_url(subject), f"compatibility of {subject} set to {level}")


@router.post("/schemas-config")
async def global_config(request: Request) -> Response:
    fields = await form(request)
    level = fields.get("compatibility", "").strip().upper()
    await registry(request).set_compatibility(level)
    return done(request, "/schemas", f"global compatibility set to {level}")
