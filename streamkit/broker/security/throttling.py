"""Client quotas applied to requests, as Kafka's ClientQuotaManager does (KIP-219).

After a request is handled, its usage is recorded against the quotas that apply to the
connection's user (its principal's name) and client id: the request's bytes for Produce
(``producer_byte_rate``), the records returned for a consumer's Fetch
(``consumer_byte_rate``; a throttled Fetch returns no records, as Kafka's does), and the
time spent handling it for every API (``request_percentage``: percent of one second per
second; the long-polling Fetch and ShareFetch count no time, their wait is not work; the
brokers' own requests, by the inter-broker APIs or a principal with CLUSTER_ACTION, are
exempt, KIP-124). A client over a quota gets the response at once with
``throttle_time_ms`` set, then its connection is muted for that long: the server reads
nothing more from it until the time is up (``MUTE_MS``), so a noisy client slows down
while the other connections are served as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from collections.abc import Mapping
from typing import Any, Final

from streamkit.broker.codec import Request
from streamkit.broker.handlers.common import Handler, Reply, field
from streamkit.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from streamkit.broker.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from streamkit.broker.state import BrokerState, ClientInfo

__all__ = ["MUTE_MS", "throttled"]

# The reply key that tells the server how long to mute the connection after answering.
MUTE_MS: Final = "__mute_ms__"

_PRODUCE, _FETCH, _SHARE_FETCH = 0, 1, 78
_LONG_POLLS = frozenset({_FETCH, _SHARE_FETCH})
_INTER_BROKER = frozenset({27})  # WriteTxnMarkers
_NANOS_TO_PERCENT = 100 / 1e9  # Kafka's ClientQuotaManagerConfig.NanosToPercentagePerSecond


def _exempt(state: BrokerState, api_key: int, client: ClientInfo) -> bool:
    """Kafka exempts the brokers' own requests from request quotas (KIP-124): the
    inter-broker APIs, and every request of a principal with CLUSTER_ACTION."""
    if api_key in _INTER_BROKER:
        return True
    authorizer = state.authorizer
    return authorizer is not None and authorizer.authorize(client.principal, client.host, Operation.CLUSTER_ACTION,
                                                           ResourceType.CLUSTER, CLUSTER_NAME)


def _user(principal: str) -> str:
    return principal.partition(":")[2]


def _records_size(reply: Mapping[str, Any]) -> int:
    body = reply.get("__body__")
    if body is not None:
        return sum(len(p.records or b"") for t in body.responses for p in t.partitions)
    return sum(len(p.get("records") or b"") for t in reply["responses"] for p in t["partitions"])


def _without_records(reply: Mapping[str, Any]) -> dict[str, Any]:
    body = reply.get("__body__")
    if body is not None:
        return {**reply, "__body__": dataclasses.replace(body, responses=())}
    return {**reply, "responses": []}


def _is_consumer_fetch(req: Request) -> bool:
    replica_state = field(req.body, "replica_state")
    replica = int(replica_state.replica_id) if replica_state is not None else int(field(req.body, "replica_id", -1))
    return replica < 0


def _with_throttle(reply: Mapping[str, Any], throttle_ms: int) -> dict[str, Any]:
    body = reply.get("__body__")
    if body is None:
        return {**reply, "throttle_time": throttle_ms, MUTE_MS: throttle_ms}
    if any(f.name == "throttle_time" for f in dataclasses.fields(body)):
        body = dataclasses.replace(body, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return {**reply, "__body__": body, MUTE_MS: throttle_ms}


def _throttle(api_key: int, inner: Handler) -> Handler:
    async def handle(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
        quotas = state.quotas
        if quotas is None or not quotas.active:
            return await inner(state, req, client)
        started = time.perf_counter_ns()
        reply = await inner(state, req, client)
        spent = time.perf_counter_ns() - started
        user, client_id, now = _user(client.principal), client.client_id, state.clock()
        throttle_ms = 0
        if api_key == _PRODUCE:
            throttle_ms = quotas.record(user, client_id, PRODUCER_BYTE_RATE, req.raw_size, now)
        elif api_key == _FETCH and reply is not None and _is_consumer_fetch(req):
            size = _records_size(reply)
            throttle_ms = quotas.record(user, client_id, CONSUMER_BYTE_RATE, size, now)
            if throttle_ms > 0:
                # Kafka's throttled fetch: nothing is returned (and so nothing counted); the
                # client fetches the same offsets again once the throttle time is over.
                quotas.record(user, client_id, CONSUMER_BYTE_RATE, -size, now)
                reply = _without_records(reply)
        if api_key not in _LONG_POLLS and not _exempt(state, api_key, client):
            throttle_ms = max(throttle_ms, quotas.record(user, client_id, REQUEST_PERCENTAGE,
                                                         spent * _NANOS_TO_PERCENT, now))
        if throttle_ms <= 0:
            return reply
        if reply is None:  # acks=0: no response to carry it; mute all the same
            await asyncio.sleep(throttle_ms / 1000)
            return None
        return _with_throttle(reply, throttle_ms)
    return handle


def throttled(handlers: Mapping[int, Handler]) -> dict[int, Handler]:
    """``handlers`` with the client quotas applied to each."""
    return {api_key: _throttle(api_key, inner) for api_key, inner in handlers.items()}
