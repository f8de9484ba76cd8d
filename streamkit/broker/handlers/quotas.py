"""DescribeClientQuotas and AlterClientQuotas (KIP-546): the client quotas on the wire.

Entity types are ``user`` and ``client-id`` (a null name is the ``<default>`` entity); the
keys are ``producer_byte_rate``, ``consumer_byte_rate`` and ``request_percentage``.
Authorization (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster) is checked in
``streamkit.broker.security.enforce``.
"""

from __future__ import annotations

from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.handlers.common import Reply
from streamkit.broker.security.quotas import Entity, QuotaError, entity, matches
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = ["alter_client_quotas", "describe_client_quotas"]

_EXACT, _DEFAULT, _SPECIFIED = 0, 1, 2


def _entity_data(ent: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in ent]


async def describe_client_quotas(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    quotas = state.quotas
    assert quotas is not None
    filters: dict[str, tuple[int, str | None]] = {}
    for c in req.body.components:
        match_type = int(c.match_type)
        if match_type not in (_EXACT, _DEFAULT, _SPECIFIED) or c.entity_type in filters \
                or (match_type == _EXACT and c.match is None):
            return {"throttle_time": 0, "error_code": ErrorCode.invalid_request,
                    "error_message": f"bad filter component for {c.entity_type!r} (match type {match_type})",
                    "entries": None}
        filters[c.entity_type] = (match_type, c.match)
    entries = [{"entity": _entity_data(ent), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
               for ent, values in quotas.entries.items() if matches(ent, filters, bool(req.body.strict))]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "entries": entries}


async def alter_client_quotas(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    quotas = state.quotas
    assert quotas is not None
    results: list[dict[str, Any]] = []
    changes: list[tuple[Entity, list[tuple[str, float | None]]]] = []
    for e in req.body.entries:
        shown = [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in e.entity]
        try:
            ent = entity((c.entity_type, c.entity_name) for c in e.entity)
            ops: list[tuple[str, float | None]] = [(op.key, None if op.remove else float(op.value)) for op in e.ops]
            quotas.check(ops)
        except QuotaError as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc), "entity": shown})
            continue
        changes.append((ent, ops))
        results.append({"error_code": ErrorCode.none, "error_message": None, "entity": shown})
    if changes and not req.body.validate_only:
        await quotas.apply(changes)
    return {"throttle_time": 0, "entries": results}
