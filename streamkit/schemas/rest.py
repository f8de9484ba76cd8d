"""Confluent Schema Registry's REST API on FastAPI. Errors are Confluent's bodies,
``{"error_code": 40401, "message": ...}``; a body that is not JSON is a 400. Writes
reaching a process that is not the leader are forwarded to the leader, and answered
with the leader's response once this process has read what the leader wrote.

Subjects are ``{subject:path}``: a subject may hold a slash, sent as ``%2F`` (the subjects of
Protobuf references are file names such as ``shop/common.proto``), which the server decodes
before routing; the more specific routes are declared first, so ``/versions`` suffixes still
route as they should."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from streamkit import __version__
from streamkit.schemas import errors
from streamkit.schemas.compatibility import SCHEMA_TYPES
from streamkit.schemas.errors import RegistryError
from streamkit.schemas.protobuf_descriptor import serialized
from streamkit.schemas.records import SchemaVersion, schema_fields
from streamkit.schemas.service import NewSchema, Registry

__all__ = ["LeaderForwarder", "create_app"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _error(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": code, "message": message}, status_code=status, media_type=CONTENT_TYPE)


def _ok(body: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status, media_type=CONTENT_TYPE)


def _version_json(sv: SchemaVersion) -> dict[str, Any]:
    return {"subject": sv.subject, "version": sv.version, "id": sv.id, **schema_fields(sv)}


def _schema_json(sv: SchemaVersion) -> dict[str, Any]:
    return schema_fields(sv)


def _formatted(sv: SchemaVersion, request: Request) -> SchemaVersion:
    """``?format=serialized`` gives a Protobuf schema as a base64 FileDescriptorProto (what
    confluent-kafka's Python deserializer asks for); other formats are served as stored."""
    if request.query_params.get("format") != "serialized" or sv.schema_type != "PROTOBUF":
        return sv
    try:
        return dataclasses.replace(sv, schema=serialized(sv.schema, f"{sv.subject}.proto"))
    except (ValueError, TypeError, KeyError):  # a construct the descriptor builder lacks
        return sv


def _version_id(text: str) -> int:
    if text == "latest":
        return -1
    try:
        version = int(text)
    except ValueError:
        version = 0
    if version == -1 or version >= 1:
        return version
    raise RegistryError(errors.INVALID_VERSION, f"The specified version '{text}' is not a valid version id. Allowed "
                                                "values are between [1, 2^31-1] and the string \"latest\"")


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise RegistryError(errors.BAD_REQUEST, "Request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise RegistryError(errors.BAD_REQUEST, "Request body must be a JSON object")
    return body


Forwarder = Callable[[Request], Awaitable[Response | None]]


def create_app(registry: Registry, forward: Forwarder) -> FastAPI:
    """The REST app over ``registry``; ``forward(request)`` answers a write this process
    must not do itself (not the leader), or returns None to go on here."""
    app = FastAPI(title="streamkit Schema Registry", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url=None)
    state = registry.state

    @app.exception_handler(RegistryError)
    async def _registry_error(_request: Request, exc: RegistryError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, 422, "; ".join(str(e.get("msg")) for e in exc.errors()))

    @app.exception_handler(Exception)
    async def _internal(_request: Request, exc: Exception) -> JSONResponse:
        log.error("registry request failed", exc_info=exc)
        return _error(500, errors.STORE_ERROR[1], f"{type(exc).__name__}: {exc}")

    @app.get("/")
    async def root() -> JSONResponse:
        return _ok({})

    @app.get("/schemas/types")
    async def schema_types() -> JSONResponse:
        return _ok(list(SCHEMA_TYPES))

    @app.get("/contexts")
    async def contexts() -> JSONResponse:
        return _ok(["."])

    @app.get("/subjects")
    async def subjects(request: Request) -> JSONResponse:
        return _ok(state.subject_names(_flag(request, "deleted"), request.query_params.get("subjectPrefix", "")))

    @app.get("/subjects/{subject:path}/versions")
    async def versions(subject: str, request: Request) -> JSONResponse:
        return _ok([sv.version for sv in state.versions(subject, _flag(request, "deleted"))])

    @app.get("/subjects/{subject:path}/versions/{version}")
    async def get_version(subject: str, version: str, request: Request) -> JSONResponse:
        sv = state.version(subject, _version_id(version), _flag(request, "deleted"))
        return _ok(_version_json(_formatted(sv, request)))

    @app.get("/subjects/{subject:path}/versions/{version}/schema")
    async def get_version_schema(subject: str, version: str, request: Request) -> Response:
        sv = state.version(subject, _version_id(version), _flag(request, "deleted"))
        return PlainTextResponse(sv.schema, media_type=CONTENT_TYPE)

    @app.get("/subjects/{subject:path}/versions/{version}/referencedby")
    async def referenced_by(subject: str, version: str) -> JSONResponse:
        sv = state.version(subject, _version_id(version))
        return _ok(state.referenced_by(subject, sv.version))

    @app.post("/subjects/{subject:path}/versions")
    async def register(subject: str, request: Request) -> Response:
        new = NewSchema.from_json(await _body(request))
        if (forwarded := await forward(request)) is not None:
            return forwarded
        sv = await registry.register(subject, new, _flag(request, "normalize"))
        return _ok({"id": sv.id, **_version_json(sv)})

    @app.post("/subjects/{subject:path}")
    async def lookup(subject: str, request: Request) -> JSONResponse:
        new = NewSchema.from_json(await _body(request))
        sv = registry.lookup(subject, new, _flag(request, "normalize"), _flag(request, "deleted"))
        return _ok(_version_json(sv))

    @app.delete("/subjects/{subject:path}/versions/{version}")
    async def delete_version(subject: str, version: str, request: Request) -> Response:
        vid = _version_id(version)
        if (forwarded := await forward(request)) is not None:
            return forwarded
        return _ok(await registry.delete_version(subject, vid, _flag(request, "permanent")))

    @app.delete("/subjects/{subject:path}")
    async def delete_subject(subject: str, request: Request) -> Response:
        if (forwarded := await forward(request)) is not None:
            return forwarded
        return _ok(await registry.delete_subject(subject, _flag(request, "permanent")))

    @app.get("/schemas")
    async def schemas(request: Request) -> JSONResponse:
        prefix = request.query_params.get("subjectPrefix", "")
        deleted = _flag(request, "deleted")
        latest_only = _flag(request, "latestOnly")
        out = []
        for subject in state.subject_names(deleted, prefix):
            found = state.versions(subject, deleted)
            out += [_version_json(sv) for sv in (found[-1:] if latest_only else found)]
        return _ok(out)

    @app.get("/schemas/ids/{schema_id}")
    async def by_id(schema_id: int, request: Request) -> JSONResponse:
        return _ok(_schema_json(_formatted(await _by_id(schema_id, request.query_params.get("subject")), request)))

    @app.get("/schemas/ids/{schema_id}/schema")
    async def by_id_schema(schema_id: int) -> Response:
        return PlainTextResponse((await _by_id(schema_id, None)).schema, media_type=CONTENT_TYPE)

    @app.get("/schemas/ids/{schema_id}/subjects")
    async def id_subjects(schema_id: int, request: Request) -> JSONResponse:
        await _by_id(schema_id, None)
        return _ok(sorted({sv.subject for sv in state.id_usages(schema_id, _flag(request, "deleted"))}))

    @app.get("/schemas/ids/{schema_id}/versions")
    async def id_versions(schema_id: int, request: Request) -> JSONResponse:
        await _by_id(schema_id, None)
        return _ok([{"subject": sv.subject, "version": sv.version}
                    for sv in state.id_usages(schema_id, _flag(request, "deleted"))])

    async def _by_id(schema_id: int, subject: str | None) -> SchemaVersion:
        try:
            return state.by_id(schema_id, subject)
        except RegistryError:
            # another process may have just registered it: catch up once before saying no
            if registry.store is not None:
                await registry.store.read_to_end()
            return state.by_id(schema_id, subject)

    async def _compatibility(subject: str, version: int | None, request: Request) -> JSONResponse:
        new = NewSchema.from_json(await _body(request))
        if version is not None and not state.live_versions(subject):
            if version == -1:
                return _ok({"is_compatible": True} if not _flag(request, "verbose")
                           else {"is_compatible": True, "messages": []})
            state.versions(subject)
        problems = registry.compatibility_problems(subject, new, version, _flag(request, "normalize"))
        body: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            body["messages"] = problems
        return _ok(body)

    @app.post("/compatibility/subjects/{subject:path}/versions/{version}")
    async def compatibility_version(subject: str, version: str, request: Request) -> JSONResponse:
        return await _compatibility(subject, _version_id(version), request)

    @app.post("/compatibility/subjects/{subject:path}/versions")
    async def compatibility_all(subject: str, request: Request) -> JSONResponse:
        return await _compatibility(subject, None, request)

    @app.get("/config")
    async def get_config() -> JSONResponse:
        return _ok({"compatibilityLevel": registry.level(None)})

    def _subject_setting(table: dict[str | None, str], subject: str, request: Request, default: str,
                         name: str, missing: tuple[int, int], what: str) -> JSONResponse:
        if subject in table:
            return _ok({name: table[subject]})
        if _flag(request, "defaultToGlobal"):
            return _ok({name: default})
        raise RegistryError(missing, f"Subject '{subject}' does not have subject-level {what} configured")

    @app.get("/config/{subject:path}")
    async def get_subject_config(subject: str, request: Request) -> JSONResponse:
        return _subject_setting(state.configs, subject, request, registry.level(None), "compatibilityLevel",
                                errors.SUBJECT_CONFIG_NOT_FOUND, "compatibility")

    async def _put_config(subject: str | None, request: Request) -> Response:
        body = await _body(request)
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str):
            raise RegistryError(errors.INVALID_COMPATIBILITY_LEVEL, "Invalid compatibility level: the body needs "
                                                                    "\"compatibility\"")
        level = level.upper()
        if (forwarded := await forward(request)) is not None:
            return forwarded
        await registry.set_level(subject, level)
        return _ok({"compatibility": level})

    @app.put("/config")
    async def put_config(request: Request) -> Response:
        return await _put_config(None, request)

    @app.put("/config/{subject:path}")
    async def put_subject_config(subject: str, request: Request) -> Response:
        return await _put_config(subject, request)

    async def _delete_config(subject: str | None, request: Request) -> Response:
        if (forwarded := await forward(request)) is not None:
            return forwarded
        return _ok({"compatibilityLevel": await registry.set_level(subject, None)})

    @app.delete("/config")
    async def delete_config(request: Request) -> Response:
        return await _delete_config(None, request)

    @app.delete("/config/{subject:path}")
    async def delete_subject_config(subject: str, request: Request) -> Response:
        return await _delete_config(subject, request)

    @app.get("/mode")
    async def get_mode() -> JSONResponse:
        return _ok({"mode": registry.mode(None)})

    @app.get("/mode/{subject:path}")
    async def get_subject_mode(subject: str, request: Request) -> JSONResponse:
        return _subject_setting(state.modes, subject, request, registry.mode(None), "mode",
                                errors.SUBJECT_MODE_NOT_FOUND, "mode")

    async def _put_mode(subject: str | None, request: Request) -> Response:
        body = await _body(request)
        mode = body.get("mode")
        if not isinstance(mode, str):
            raise RegistryError(errors.INVALID_MODE, "Invalid mode: the body needs \"mode\"")
        if (forwarded := await forward(request)) is not None:
            return forwarded
        await registry.set_mode(subject, mode.upper(), _flag(request, "force"))
        return _ok({"mode": mode.upper()})

    @app.put("/mode")
    async def put_mode(request: Request) -> Response:
        return await _put_mode(None, request)

    @app.put("/mode/{subject:path}")
    async def put_subject_mode(subject: str, request: Request) -> Response:
        return await _put_mode(subject, request)

    @app.delete("/mode/{subject:path}")
    async def delete_subject_mode(subject: str, request: Request) -> Response:
        if (forwarded := await forward(request)) is not None:
            return forwarded
        old = await registry.set_mode(subject, None, False)
        return _ok({"mode": old})

    return app


class Leadership(Protocol):
    url: str

    async def leader(self, timeout_s: float) -> str | None: ...


LEADER_WAIT_S = 30.0


class LeaderForwarder:
    """Forwards a request to the leader when this process is not it; ``after`` runs once the
    leader answered (catching up with what it wrote). While the group chooses a leader, or
    the one chosen cannot be reached (it just stopped), it waits up to LEADER_WAIT_S."""

    def __init__(self, election: Leadership, after: Callable[[], Awaitable[None]],
                 truststore: str | None = None) -> None:
        self._election = election
        self._after = after
        # a leader served over https is verified with the registry's truststore (else the system's CAs)
        self._client = httpx.AsyncClient(timeout=30, verify=ssl.create_default_context(cafile=truststore)
                                         if truststore else True)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __call__(self, request: Request) -> Response | None:
        election = self._election
        deadline = time.monotonic() + LEADER_WAIT_S
        while True:
            url = await election.leader(max(0.0, deadline - time.monotonic()))
            if url is None:
                raise RegistryError(errors.FORWARDING_ERROR, "Error while forwarding the request to the leader: no "
                                                             f"leader was elected within {LEADER_WAIT_S:.0f} s")
            if url == election.url:
                return None
            try:
                response = await self._client.request(
                    request.method, url + request.url.path, params=request.query_params, content=await request.body(),
                    # the caller's credentials go along: the leader authenticates the write too
                    headers={"Content-Type": request.headers.get("content-type", CONTENT_TYPE),
                             **({"Authorization": request.headers["authorization"]}
                                if "authorization" in request.headers else {})})
                break
            except httpx.ConnectError as exc:
                if time.monotonic() > deadline:
                    raise RegistryError(errors.FORWARDING_ERROR,
                                        f"Error while forwarding the request to the leader {url}: {exc}") from None
                await asyncio.sleep(0.2)  # a leader that stopped: the group is about to choose another
            except httpx.HTTPError as exc:
                raise RegistryError(errors.FORWARDING_ERROR,
                                    f"Error while forwarding the request to the leader {url}: {exc}") from None
        if response.status_code < 300:
            await self._after()
        return Response(response.content, status_code=response.status_code, media_type=CONTENT_TYPE)
