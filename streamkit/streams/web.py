"""The worker's HTTP endpoints (``--web-port``): health, Prometheus metrics, interactive
table queries.

    GET /health                 {"status": "ok", "app": ..., "partitions": [...]}
    GET /metrics                Prometheus text
    GET /tables/{name}          this worker's part of a table (JSON object, up to ?limit=)
    GET /tables/{name}/{key}    one key, from whichever worker owns it

The key in the URL is parsed with the table's key codec (``key_type=int`` tables take
``/tables/t/42``); one that does not parse is a 400. A key owned by another worker is
fetched from that worker: each worker advertises its web address in its consumer
``client_id`` (``{app}@host:port``), and the group's current assignment (DescribeGroups)
says which member is active for the key's task (its partition number). Standby replicas
never answer: their state may lag. A small HTTP/1.1 server on
asyncio streams: GET only, one request per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, quote, unquote, urlsplit

import orjson
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from pydantic import BaseModel

from streamkit.streams.assignor import decode_user_data
from streamkit.streams.clients import start_client, stop_client
from streamkit.streams.codecs import CodecError
from streamkit.streams.table import TableNotOwned

if TYPE_CHECKING:
    from streamkit.streams.metrics import Metrics
    from streamkit.streams.table import Table


class _App(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def tables(self) -> dict[str, Table]: ...


class Runtime(Protocol):
    """What the web endpoints need of the worker: its app, state and metrics."""

    @property
    def app(self) -> _App: ...

    @property
    def bootstrap(self) -> str | None: ...

    @property
    def assigned(self) -> set[tuple[str, int]]: ...

    @property
    def metrics(self) -> Metrics: ...

    def lag(self) -> dict[tuple[str, int], int]: ...

    def standby_tasks(self) -> set[int]: ...

    def standby_lag(self) -> dict[tuple[str, int], int]: ...

    def stream_times(self) -> dict[tuple[str, int], tuple[int, int]]: ...

__all__ = ["WebServer", "advertised_client_id"]

log = logging.getLogger(__name__)

_MAX_REQUEST = 8192
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            502: "Bad Gateway", 503: "Service Unavailable"}


def advertised_client_id(app_id: str, host: str, port: int) -> str:
    return f"{app_id}@{host}:{port}"


def _response(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


def _json_default(obj: Any) -> Any:
    # Values of tables with a pydantic value_type are models, which orjson cannot serialize;
    # with plain ``default=str`` they came out as their Python repr ("id='c-1' name=...").
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    return str(obj)


def _json(status: int, obj: Any) -> bytes:
    return _response(status, orjson.dumps(obj, default=_json_default, option=orjson.OPT_NON_STR_KEYS))


class WebServer:
    def __init__(self, runtime: Runtime, port: int, host: str = "127.0.0.1") -> None:
        self.runtime = runtime
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("web endpoints on http://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            if len(head) > _MAX_REQUEST:
                writer.write(_json(400, {"error": "request too large"}))
                return
            method, _, rest = head.decode("latin-1").partition(" ")
            target = rest.split(" ", 1)[0]
            if method != "GET":
                writer.write(_json(405, {"error": "only GET is supported"}))
                return
            writer.write(await self.handle(target))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            return
        except Exception:
            log.exception("web request failed")
            with contextlib.suppress(Exception):
                writer.write(_json(503, {"error": "internal error"}))
        finally:
            with contextlib.suppress(Exception):
                await writer.drain()
            writer.close()

    async def handle(self, target: str) -> bytes:
        url = urlsplit(target)
        parts = [unquote(p) for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        rt = self.runtime
        if parts == ["health"]:
            return _json(200, {"status": "ok", "app": rt.app.id,
                               "partitions": sorted(f"{t}-{p}" for t, p in rt.assigned),
                               "standby_tasks": sorted(rt.standby_tasks())})
        if parts == ["metrics"]:
            return _response(200, rt.metrics.render(rt.app.id, rt.lag, rt.standby_lag, rt.stream_times).encode(), "text/plain; version=0.0.4")
        if len(parts) in (2, 3) and parts[0] == "tables":
            table = rt.app.tables.get(parts[1])
            if table is None:
                return _json(404, {"error": f"no table named {parts[1]!r}"})
            if not table.queryable:
                return _json(404, {"error": f"{parts[1]!r} is the internal state of a DSL operator, "
                                            "not a queryable table (use to_table for one)"})
            if len(parts) == 2:
                limit = int(query.get("limit", ["1000"])[0]) if query.get("limit", ["1"])[0].isdigit() else 1000
                return _json(200, table.snapshot(limit))
            text = parts[2]
            try:
                key = table.parse_key(text)
            except (CodecError, ValueError) as exc:
                return _json(400, {"error": f"{text!r} is not a key of table {table.name!r}: {exc}"})
            shown = key if isinstance(key, str | int | float | bool) else text
            try:
                return _json(200, {"key": shown, "value": table.query(key)})
            except TableNotOwned:
                if "local" in query:
                    return _json(503, {"error": f"key {text!r} is not owned by this worker"})
                if table.partition_known():
                    return await self._forward(table.name, text, table.partition_of(key))
                # The partitioner of the topic that updates the table is not known (yet):
                # whichever worker has the key answers.
                return await self._ask_all(table.name, text)
            except KeyError:
                return _json(404, {"error": f"key {text!r} not found in {table.name!r}"})
        return _json(404, {"error": f"no route for {url.path}"})

    async def _forward(self, table: str, key: str, partition: int) -> bytes:
        owner = await self._owner(partition)
        if owner is None:
            return _json(503, {"error": f"no worker owns partition {partition} right now (rebalancing?)"})
        return await self._get(owner, table, key)

    async def _get(self, owner: str, table: str, key: str) -> bytes:
        """``GET /tables/{table}/{key}?local=1`` from the worker at ``owner``."""
        host, _, port = owner.rpartition(":")
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 5)
            path = f"/tables/{quote(table, safe='')}/{quote(key, safe='')}?local=1"
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {owner}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return data
        except (OSError, TimeoutError, ValueError) as exc:
            return _json(502, {"error": f"owner {owner} did not answer: {exc}"})

    async def _ask_all(self, table: str, key: str) -> bytes:
        """Ask every other worker for a key (``?local=1``): the first that has it answers."""
        me = f"{self.host}:{self.port}"
        for address, _active in await self._members():
            if address == me:
                continue
            answer = await self._get(address, table, key)
            if answer.startswith(b"HTTP/1.1 200"):
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
        admin = AIOKafkaAdminClient(bootstrap_servers=rt.bootstrap)
        try:
            await start_client(admin)
            described = await admin.describe_consumer_groups([rt.app.id])
        finally:
            await stop_client(admin)
        out = []
        for response in described:
            for group in response.groups:
                for member in group[5]:
                    client_id, assignment = member[-4] if len(member) > 5 else member[1], member[-1]
                    if "@" not in client_id or not assignment:
                        continue
                    decoded: Any = ConsumerProtocolMemberAssignment.decode(assignment)
                    active = set(decode_user_data(decoded.user_data)["active"])
                    out.append((str(client_id.split("@", 1)[1]), active))
        return out
