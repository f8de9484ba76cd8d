"""ACLs (with a broker that has an authorizer) and SCRAM users (with a SASL listener): list,
create and delete. Without them the pages are absent: 404, and no link."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from streamkit.broker.security.acl import AclBinding, AclBindingFilter
from streamkit.clients import acls, users
from streamkit.console import security
from streamkit.console.broker import kafka_errors
from streamkit.console.errors import BadInput, NotFound
from streamkit.console.pages import done, form, form_int, render, settings

__all__ = ["router"]

router = APIRouter()

RESOURCE_TYPES = ("topic", "group", "transactional-id", "cluster")
OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
              "AlterConfigs", "IdempotentWrite")


async def _features(request: Request) -> security.Features:
    found: security.SecurityFeatures = request.app.state.features
    return await found.get()


async def _need_acls(request: Request) -> None:
    if not (await _features(request)).acls:
        raise NotFound("not found: the broker has no authorizer (authorizer.class.name), so there are no ACLs")


async def _need_users(request: Request) -> None:
    if not (await _features(request)).users:
        raise NotFound("not found: the broker has no SASL listener, so there are no SCRAM users")


def _row(b: AclBinding) -> dict[str, str]:
    return {"resource_type": b.resource_type.name, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permission": b.permission.name}


@router.get("/acls")
async def acl_page(request: Request) -> Response:
    await _need_acls(request)
    found = await security.acl_list(settings(request).bootstrap_servers)
    return render(request, "acls.html", {"acls": [_row(b) for b in found], "resource_types": RESOURCE_TYPES,
                                         "operations": OPERATIONS})


def _binding(fields: dict[str, str]) -> list[AclBinding]:
    kind = fields.get("resource_type", "").strip().lower().replace("_", "-")
    if kind not in RESOURCE_TYPES:
        raise BadInput(f"resource type must be one of {', '.join(RESOURCE_TYPES)}, not {kind!r}")
    name = fields.get("resource_name", "").strip()
    if kind != "cluster" and not name:
        raise BadInput("resource name is required")
    principal = fields.get("principal", "").strip()
    if not principal:
        raise BadInput("principal is required (User:alice, or User:* for everyone)")
    with kafka_errors():
        return security.binding_filter(kind, name, fields.get("pattern_type", "literal").strip().lower(), principal,
                                       fields.get("host", "*").strip() or "*", fields.get("operation", "All").strip(),
                                       fields.get("permission", "allow").strip())


@router.post("/acls")
async def acl_create(request: Request) -> Response:
    await _need_acls(request)
    wanted = _binding(await form(request))
    with kafka_errors():
        await acls.create_acls(settings(request).bootstrap_servers, wanted)
    return done(request, "/acls", f"added {len(wanted)} ACL(s)", [_row(b) for b in wanted])


@router.post("/acls/delete")
async def acl_delete(request: Request) -> Response:
    """Remove exactly the binding the form names (its row's delete button)."""
    await _need_acls(request)
    fields = await form(request)
    found = await security.acl_list(settings(request).bootstrap_servers)
    wanted = {k: fields.get(k, "") for k in ("resource_type", "resource_name", "pattern_type", "principal", "host",
                                              "operation", "permission")}
    matching = [b for b in found if _row(b) == wanted]
    if not matching:
        raise NotFound("no such ACL (removed meanwhile?)")
    with kafka_errors():
        removed = await acls.delete_acls(settings(request).bootstrap_servers,
                                         [_exact(b) for b in matching])
    return done(request, "/acls", f"removed {len(removed)} ACL(s)", [_row(b) for b in removed])


def _exact(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
                                 b.operation, b.permission)


@router.get("/users")
async def user_page(request: Request) -> Response:
    await _need_users(request)
    config = settings(request)
    found = await security.user_list(config.bootstrap_servers, config.client_config)
    return render(request, "users.html", {"users": found, "mechanisms": users.MECHANISMS})


@router.post("/users")
async def user_create(request: Request) -> Response:
    await _need_users(request)
    fields = await form(request)
    name = fields.get("user", "").strip()
    if not name:
        raise BadInput("user is required")
    mechanism = fields.get("mechanism", "SCRAM-SHA-256").strip().upper()
    iterations = form_int(fields, "iterations", 4096, minimum=4096)
    config = settings(request)
    with kafka_errors():
        await asyncio.to_thread(users.create_user, config.bootstrap_servers, name, fields.get("password", ""),
                                mechanism, iterations, config.client_config)
    return done(request, "/users", f"user {name}: {mechanism} set")


@router.post("/users/{name}/delete")
async def user_delete(request: Request, name: str) -> Response:
    await _need_users(request)
    config = settings(request)
    with kafka_errors():
        deleted = await asyncio.to_thread(users.delete_user, config.bootstrap_servers, name, None,
                                          config.client_config)
    return done(request, f"/users?deleted={quote(name)}", f"user {name}: {', '.join(deleted)} deleted", deleted)
