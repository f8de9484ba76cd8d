"""The worker's HTTP endpoints (``--web-port``): an index, health, Prometheus metrics and
interactive table queries, served by FastAPI on uvicorn (the stack Connect's REST API uses).

    GET /                       what this worker serves: app, endpoints, tables, topics
    GET /health                 {"status": "ok", "app": ..., "partitions": [...]}
    GET /metrics                Prometheus text
    GET /tables/{name}          this worker's part of a table (JSON object, up to ?limit=, 1000)
    GET /tables/{name}/{key}    one key, from whichever worker owns it

Errors are JSON ``{"error": ...}``: 400 for a key or limit that does not parse, 404 for a
missing table, key or route, 405 for another method than GET. The key in the URL is parsed
with the table's key codec (``key_type=int`` tables take ``/tables/t/42``). A key owned by
another worker is fetched from that worker: each worker advertises its web address in its
consumer ``client_id`` (``{app}@host:port``), and the group's current assignment
(DescribeGroups) says which member is active for the key's task (its partition number).
Standby replicas never answer: their state may lag.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import httpx
import orjson
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from streamkit.http import HttpSecurity, HttpServer
from streamkit.streams.assignor import decode_user_data
from streamkit.streams.clients import start_client, stop_client
from streamkit.streams.codecs import CodecError
from streamkit.streams.table import TableNotOwned

if TYPE_CHECKING:
    from streamkit.streams.metrics import Metrics
    from streamkit.streams.settings import AppSettings
    from streamkit.streams.table import Table


class _App(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def tables(self) -> dict[str, Table]: ...

    @property
    def topics(self) -> Mapping[str, object]: ...


class Standbys(Protocol):
    """What the web API shows of a worker's standby tasks."""

    def standby_tasks(self) -> set[int]: ...

    def standby_lag(self) -> dict[tuple[str, int], int]: ...


class Runtime(Protocol):
    """What the web endpoints need of the worker: its app, state and metrics."""

    @property
    def app(self) -> _App: ...

    @property
    def bootstrap(self) -> str | None: ...

    @property
    def client_security(self) -> dict[str, Any]: ...

    @property
    def settings(self) -> AppSettings: ...

    @property
    def assigned(self) -> set[tuple[str, int]]: ...

    @property
    def metrics(self) -> Metrics: ...

    def lag(self) -> dict[tuple[str, int], int]: ...

    @property
    def tasks(self) -> Standbys: ...

    def stream_times(self) -> dict[tuple[str, int], tuple[int, int]]: ...

__all__ = ["WebServer", "advertised_client_id"]

log = logging.getLogger(__name__)

_DEFAULT_LIMIT = 1000
_ENDPOINTS = {
    "/health": "liveness and this worker's partitions",
    "/metrics": "Prometheus metrics",
    "/tables/{name}": f"this worker's part of a table, ?limit=N entries (default {_DEFAULT_LIMIT})",
    "/tables/{name}/{key}": "one key, answered by the worker that owns it",
}


def advertised_client_id(app_id: str, host: str, port: int) -> str:
    return f"{app_id}@{host}:{port}"


def _json_default(obj: Any) -> Any:
    # Values of tables with a pydantic value_type are models, which orjson cannot serialize;
    # with plain ``default=str`` they came out as their Python repr ("id='c-1' name=...").
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    return str(obj)


def _json(status: int, obj: Any) -> Response:
    body = orjson.dumps(obj, default=_json_default, option=orjson.OPT_NON_STR_KEYS)
    return Response(body, status, media_type="application/json")


class _Answer(Exception):
    """A finished response from a helper, returned by the route that called it."""

    def __init__(self, response: Response) -> None:
        self.response = response


class WebServer:
    def __init__(self, runtime: Runtime, port: int, host: str = "127.0.0.1") -> None:
        self.runtime = runtime
        self.host = host
        self.port = port
        self.security = HttpSecurity()
        self._http: HttpServer | None = None
        self._verify: Any = True

    async def start(self) -> None:
        settings = self.runtime.settings
        self.security = settings.web_security()
        # forwarded lookups verify the owner's certificate with web.ssl.truststore.location
        truststore = settings.web_ssl_truststore_location
        self._verify = ssl.create_default_context(cafile=truststore) if truststore else True
        # HttpServer binds now: a port in use is an OSError for the caller, and port 0
        # tells us the port chosen.
        self._http = HttpServer(self.asgi(), self.host, self.port, what="the web endpoints", security=self.security)
        self.port = self._http.port
        await self._http.start()
        log.info("web endpoints on %s", self._http.url)

    async def stop(self) -> None:
        if self._http is None:
            return
        http, self._http = self._http, None
        await http.stop()

    def asgi(self) -> FastAPI:
        api = FastAPI(title=f"streamkit worker: {self.runtime.app.id}", docs_url=None,
                      redoc_url=None, openapi_url=None)

        @api.exception_handler(HTTPException)
        async def _http_error(request: Request, exc: HTTPException) -> Response:
            if exc.status_code == 404:
                return _json(404, {"error": f"no route for {request.url.path}"})
            if exc.status_code == 405:
                return _json(405, {"error": "only GET is supported"})
            return _json(exc.status_code, {"error": str(exc.detail)})

        api.add_api_route("/", self.index, methods=["GET"])
        api.add_api_route("/health", self.health, methods=["GET"])
        api.add_api_route("/metrics", self.metrics, methods=["GET"])
        api.add_api_route("/tables/{name}", self.table, methods=["GET"])
        api.add_api_route("/tables/{name}/{key:path}", self.table_key, methods=["GET"])
        return api

    async def index(self) -> Response:
        """The app's id, these endpoints, and its tables (queryable or not, and their kind)."""
        rt = self.runtime
        tables = {name: {"queryable": t.queryable, "kind": t.definition()}
                  for name, t in sorted(rt.app.tables.items())}
        # topics: every topic the app declares (the web console draws its pipeline from them)
        return _json(200, {"app": rt.app.id, "endpoints": _ENDPOINTS, "tables": tables,
                           "topics": sorted(rt.app.topics)})

    async def health(self) -> Response:
        """`{"status": "ok"}` with the partitions and standby tasks this worker has."""
        rt = self.runtime
        return _json(200, {"status": "ok", "app": rt.app.id,
                           "partitions": sorted(f"{t}-{p}" for t, p in rt.assigned),
                           "standby_tasks": sorted(rt.tasks.standby_tasks())})

    async def metrics(self) -> Response:
        """Prometheus text: lag, records/s, late records, stream time, commits, restores."""
        rt = self.runtime
        text = rt.metrics.render(rt.app.id, rt.lag, rt.tasks.standby_lag, rt.stream_times)
        return Response(text, 200, media_type="text/plain; version=0.0.4")

    def _queryable(self, name: str) -> Any:
        table = self.runtime.app.tables.get(name)
        if table is None:
            raise _Answer(_json(404, {"error": f"no table named {name!r}"}))
        if not table.queryable:
            raise _Answer(_json(404, {"error": f"{name!r} is the internal state of a DSL operator, "
                                               "not a queryable table (use to_table for one)"}))
        return table

    async def table(self, name: str, request: Request) -> Response:
        """This worker's part of table `name` (the partitions it owns), at most `?limit=N` entries (1000)."""
        try:
            table = self._queryable(name)
        except _Answer as answer:
            return answer.response
        text = request.query_params.get("limit", str(_DEFAULT_LIMIT))
        if not text.isdigit() or int(text) < 1:
            return _json(400, {"error": f"limit must be a positive integer, not {text!r}"})
        return _json(200, table.snapshot(int(text)))

    async def table_key(self, name: str, key: str, request: Request) -> Response:
        """One key of table `name`, from whichever worker owns it; a windowed table's windows."""
        try:
            table = self._queryable(name)
        except _Answer as answer:
            return answer.response
        try:
            parsed = table.parse_key(key)
        except (CodecError, ValueError) as exc:
            return _json(400, {"error": f"{key!r} is not a key of table {table.name!r}: {exc}"})
        shown = parsed if isinstance(parsed, str | int | float | bool) else key
        try:
            return _json(200, {"key": shown, "value": table.query(parsed)})
        except TableNotOwned:
            if "local" in request.query_params:
                return _json(503, {"error": f"key {key!r} is not owned by this worker"})
            if table.partition_known():
                return await self._forward(table.name, key, table.partition_of(parsed), request)
            # The partitioner of the topic that updates the table is not known (yet):
            # whichever worker has the key answers.
            return await self._ask_all(table.name, key, request)
        except KeyError:
            return _json(404, {"error": f"key {key!r} not found in {table.name!r}"})


    async def _forward(self, table: str, key: str, partition: int, request: Request) -> Response:
        owner = await self._owner(partition)
        if owner is None:
            return _json(503, {"error": f"no worker owns partition {partition} right now (rebalancing?)"})
        return await self._get(owner, table, key, request)

    async def _get(self, owner: str, table: str, key: str, request: Request) -> Response:
        """``GET /tables/{table}/{key}?local=1`` from the worker at ``owner``, with the
        caller's credentials (the workers of an app share their users)."""
        url = f"{self.security.scheme}://{owner}/tables/{quote(table, safe='')}/{quote(key, safe='')}"
        auth = {"Authorization": request.headers["authorization"]} if "authorization" in request.headers else {}
        try:
            async with httpx.AsyncClient(timeout=10, verify=self._verify) as client:
                answer = await client.get(url, params={"local": "1"}, headers=auth)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            return _json(502, {"error": f"owner {owner} did not answer: {exc}"})
        return Response(answer.content, answer.status_code,
                        media_type=answer.headers.get("content-type", "application/json"))

    async def _ask_all(self, table: str, key: str, request: Request) -> Response:
        """Ask every other worker for a key (``?local=1``): the first that has it answers."""
        me = f"{self.host}:{self.port}"
        for address, _active in await self._members():
            if address == me:
                continue
            answer = await self._get(address, table, key, request)
            if answer.status_code == 200:
                return answer
        return _json(404, {"error": f"key {key!r} not found in {table!r}"})

    async def _owner(self, partition: int) -> str | None:
        """The web address of the member active for task ``partition``."""
        for address, active in await self._members():
            if partition in active:
                return address
        return None

    async def _members(self) -> list[tuple[str, set[int]]]:
        """The web address and active tasks of each member of the app's group."""
        rt = self.runtime
        admin = AIOKafkaAdminClient(bootstrap_servers=rt.bootstrap, **rt.client_security)
        try:
            await start_client(admin)
            described = await admin.describe_consumer_groups([rt.app.id])
        finally:
            await stop_client(admin)
        out = []
        for response in described:
            for group in response.groups:
                # DescribeGroups v0-v2 / v3+ (authorized_operations appended) group fields.
                _error, _group_id, _state, _protocol_type, _protocol, members, *_ = group
                for member in members:
                    # member_id, [group_instance_id (v4+)], client_id, client_host, metadata, assignment
                    *_, client_id, _client_host, _metadata, assignment = member
                    if "@" not in client_id or not assignment:
                        continue
                    decoded: Any = ConsumerProtocolMemberAssignment.decode(assignment)
                    active = set(decode_user_data(decoded.user_data)["active"])
                    out.append((str(client_id.split("@", 1)[1]), active))
        return out
