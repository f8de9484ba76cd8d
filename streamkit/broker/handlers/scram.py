"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), as Kafka answers
them: one result per user, each user's changes applied all or none, the errors Kafka gives
(RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL).

The client sends the salted password (PBKDF2 done client side); the broker keeps only the
salt, StoredKey, ServerKey and iterations (streamkit.broker.security.credentials)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.handlers.common import Reply
from streamkit.broker.security.credentials import ScramCredentials
from streamkit.broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = ["alter_user_scram_credentials", "describe_user_scram_credentials"]

_IDS = {name: i for i, name in MECHANISM_IDS.items()}


def _store(state: BrokerState) -> ScramCredentials:
    assert state.scram is not None, "the broker loads its SCRAM credentials at start"
    return state.scram


def _result(user: str, code: ErrorCode = ErrorCode.none, message: str | None = None) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


async def describe_user_scram_credentials(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    store = _store(state)
    asked = req.body.users
    names = [str(u.name) for u in asked] if asked else store.users()
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(_result(name, ErrorCode.duplicate_resource,
                                    "Cannot describe SCRAM credentials for the same user twice in a single request"))
            continue
        mechanisms = store.mechanisms(name)
        if not mechanisms:
            results.append(_result(name, ErrorCode.resource_not_found,
                                   f"Attempt to describe a user credential that does not exist: {name}"))
            continue
        out = _result(name)
        out["credential_infos"] = [{"mechanism": _IDS[m], "iterations": i} for m, i in mechanisms.items()]
        results.append(out)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": results}


def _check(user: str, mechanism: int, iterations: int | None) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_IDS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, f"Too few iterations (at least {MIN_ITERATIONS})"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, f"Too many iterations (at most {MAX_ITERATIONS})"
    return None


async def alter_user_scram_credentials(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    store = _store(state)
    body = req.body
    changes: list[tuple[str, int, int | None, Any]] = [(str(d.name), int(d.mechanism), None, d)
                                                       for d in body.deletions]
    changes += [(str(u.name), int(u.mechanism), int(u.iterations), u) for u in body.upsertions]
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: Counter[tuple[str, int]] = Counter((user, mech) for user, mech, _, _ in changes)
    for user, mech, iterations, _ in changes:
        if user in errors:
            continue
        problem = _check(user, mech, iterations)
        if problem is None and seen[(user, mech)] > 1:
            problem = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
        if problem is None and iterations is None and store.get(user, MECHANISM_IDS[mech]) is None:
            problem = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        if problem is not None:
            errors[user] = problem
    upserts: list[tuple[str, str, ScramCredential]] = []
    deletes: list[tuple[str, str]] = []
    for user, mech, iterations, entry in changes:
        if user in errors:
            continue
        name = MECHANISM_IDS[mech]
        if iterations is None:
            deletes.append((user, name))
        else:
            upserts.append((user, name, credential_from_salted(name, bytes(entry.salt), bytes(entry.salted_password),
                                                               iterations)))
    if upserts or deletes:
        store.apply(upserts, deletes)
        if store.publisher is not None:  # a cluster: every broker learns them from ZooKeeper
            await store.publisher(list(dict.fromkeys([u for u, _, _ in upserts] + [u for u, _ in deletes])))
    results = []
    for user in dict.fromkeys(user for user, _, _, _ in changes):
        code, message = errors.get(user, (ErrorCode.none, None))
        results.append({"user": user, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "results": results}
