"""CreateAcls, DescribeAcls, DeleteAcls: the authorizer's bindings on the wire.

Without an authorizer (``authorizer.class.name`` unset) they answer SECURITY_DISABLED, as
Kafka does. Creating and deleting need ALTER on the cluster, describing needs DESCRIBE
(checked in ``streamkit.broker.security.enforce``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.handlers.common import Reply, field
from streamkit.broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    check_binding,
)
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = ["create_acls", "delete_acls", "describe_acls"]

_DISABLED = "no authorizer is configured on this broker (authorizer.class.name)"


def _enum(kind: Any, code: int) -> Any:
    try:
        return kind(code)
    except ValueError as exc:
        raise AclError(f"unknown {kind.__name__} code {code}") from exc


def _filter(f: Any) -> AclBindingFilter:
    flt = AclBindingFilter(
        _enum(ResourceType, int(f.resource_type_filter)), f.resource_name_filter,
        _enum(PatternType, int(field(f, "pattern_type_filter", PatternType.LITERAL))),
        f.principal_filter, f.host_filter, _enum(Operation, int(f.operation)),
        _enum(Permission, int(f.permission_type)))
    flt.check()
    return flt


def _binding(c: Any) -> AclBinding:
    binding = AclBinding(
        _enum(ResourceType, int(c.resource_type)), c.resource_name,
        _enum(PatternType, int(field(c, "resource_pattern_type", PatternType.LITERAL))),
        c.principal, c.host, _enum(Operation, int(c.operation)), _enum(Permission, int(c.permission_type)))
    check_binding(binding)
    return binding


async def create_acls(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    creations = req.body.creations
    if state.authorizer is None:
        return {"throttle_time": 0, "results": [
            {"error_code": ErrorCode.security_disabled, "error_message": _DISABLED} for _ in creations]}
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for c in creations:
        try:
            valid.append(_binding(c))
            results.append({"error_code": ErrorCode.none, "error_message": None})
        except AclError as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
    if valid:
        await state.authorizer.create(valid)
    return {"throttle_time": 0, "results": results}


def _by_resource(bindings: Iterable[AclBinding]) -> list[dict[str, Any]]:
    grouped: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in bindings:
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            {"principal": b.principal, "host": b.host, "operation": int(b.operation),
             "permission_type": int(b.permission)})
    return [{"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
            for (rt, name, pt), acls in grouped.items()]


async def describe_acls(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    if state.authorizer is None:
        return {"throttle_time": 0, "error_code": ErrorCode.security_disabled, "error_message": _DISABLED,
                "resources": []}
    try:
        flt = _filter(req.body)
    except AclError as exc:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "error_message": str(exc),
                "resources": []}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "resources": _by_resource(state.authorizer.describe(flt))}


def _matching(b: AclBinding) -> dict[str, Any]:
    return {"error_code": ErrorCode.none, "error_message": None, "resource_type": int(b.resource_type),
            "resource_name": b.resource_name, "pattern_type": int(b.pattern_type), "principal": b.principal,
            "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission)}


async def delete_acls(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    filters = req.body.filters
    if state.authorizer is None:
        return {"throttle_time": 0, "filter_results": [
            {"error_code": ErrorCode.security_disabled, "error_message": _DISABLED, "matching_acls": []}
            for _ in filters]}
    parsed: list[AclBindingFilter | AclError] = []
    for f in filters:
        try:
            parsed.append(_filter(f))
        except AclError as exc:
            parsed.append(exc)
    removed = await state.authorizer.remove([f for f in parsed if isinstance(f, AclBindingFilter)])
    results: list[dict[str, Any]] = []
    for f in parsed:
        if isinstance(f, AclError):
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(f), "matching_acls": []})
        else:
            results.append({"error_code": ErrorCode.none, "error_message": None,
                            "matching_acls": [_matching(b) for b in removed.pop(0)]})
    return {"throttle_time": 0, "filter_results": results}
