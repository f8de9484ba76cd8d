"""Kafka Connect's REST API on FastAPI, so existing Connect clients and CLIs work unchanged.

Paths, status codes and bodies follow Kafka Connect's (``ConnectorsResource``,
``ConnectorPluginsResource``, ``RootResource``): 201 for a created connector, 202 for pause,
resume, stop and restarts that report status, 204 for deletes and plain restarts. Every
error is ``{"error_code": <http status>, "message": ...}``; a bad config is a 400 whose
message lists each problem, with the same problems per key in ``problems``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from streamkit import __version__
from streamkit.connect.converters import CONVERTERS
from streamkit.connect.errors import ConfigError
from streamkit.connect.herder import Herder, HerderError
from streamkit.connect.status import TargetState
from streamkit.connect.transforms import PREDICATES, TRANSFORMS

__all__ = ["create_app"]

log = logging.getLogger(__name__)


# Java's log levels (Kafka Connect's /admin/loggers) on Python's
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


def _java_level(level: int) -> str:
    if level <= logging.DEBUG:
        return "DEBUG"
    for name in ("INFO", "WARN", "ERROR", "FATAL"):
        if level <= _LEVELS[name]:
            return name
    return "OFF"


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": message, **extra}, status_code=status)


def _config_error(exc: ConfigError) -> JSONResponse:
    lines = [f"{key}: {msg}" for key, msgs in exc.problems.items() for msg in msgs]
    message = (f"Connector configuration is invalid and contains the following {len(lines)} error(s):\n"
               + "\n".join(lines)
               + "\nYou can also find the above list of errors at the endpoint "
                 "`/connector-plugins/{connectorType}/config/validate`")
    return _error(400, message, problems=exc.problems)


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise HerderError(400, "Request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise HerderError(400, "Request body must be a JSON object")
    return body


def _flag(value: str | None, name: str) -> bool:
    if value is None:
        return False
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise HerderError(400, f"Query parameter {name} must be true or false, got {value!r}")


def create_app(herder: Herder, cluster_id: Any = None, metrics_render: Any = None) -> FastAPI:
    """The REST app over ``herder``. ``cluster_id`` is an async callable giving the Kafka
    cluster id for ``GET /``."""
    app = FastAPI(title="streamkit Connect", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url=None)

    @app.exception_handler(HerderError)
    async def _herder_error(_request: Request, exc: HerderError) -> JSONResponse:
        return _error(exc.status, exc.message)

    @app.exception_handler(ConfigError)
    async def _bad_config(_request: Request, exc: ConfigError) -> JSONResponse:
        return _config_error(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, "; ".join(str(e.get("msg")) for e in exc.errors()))

    @app.exception_handler(Exception)
    async def _internal(_request: Request, exc: Exception) -> JSONResponse:
        log.error("REST request failed", exc_info=exc)
        return _error(500, f"{type(exc).__name__}: {exc}")

    @app.get("/")
    async def root() -> dict[str, Any]:
        cid = None
        if cluster_id is not None:
            try:
                cid = await cluster_id()
            except Exception:
                cid = None
        return {"version": __version__, "commit": "streamkit", "kafka_cluster_id": cid}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}

    @app.get("/metrics")
    async def metrics() -> Response:
        body = metrics_render() if metrics_render is not None else herder.metrics.render()
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/connectors")
    async def list_connectors(request: Request) -> Any:
        expand = request.query_params.getlist("expand")
        wanted = {part for item in expand for part in item.split(",") if part}
        names = herder.names()
        if not wanted:
            return names
        unknown = wanted - {"status", "info"}
        if unknown:
            raise HerderError(400, f"Unknown expand value(s): {', '.join(sorted(unknown))}")
        out: dict[str, Any] = {}
        for name in names:
            entry: dict[str, Any] = {}
            if "status" in wanted:
                entry["status"] = herder.status(name)
            if "info" in wanted:
                entry["info"] = herder.info(name)
            out[name] = entry
        return out

    @app.post("/connectors", status_code=201)
    async def create_connector(request: Request) -> Any:
        body = await _json_object(request)
        name, config = body.get("name"), body.get("config")
        if not isinstance(config, dict):
            raise HerderError(400, "Request body must hold a 'config' object")
        name = name or config.get("name")
        if not isinstance(name, str) or not name:
            raise HerderError(400, "Connector name must be a non-empty string ('name')")
        state = str(body.get("initial_state", "RUNNING")).upper()
        targets = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED, "STOPPED": TargetState.STOPPED}
        if state not in targets:
            raise HerderError(400, f"initial_state must be RUNNING, PAUSED or STOPPED, got {state}")
        _created, info = await herder.put_config(name, config, create_only=True, target=targets[state])
        return JSONResponse(info, status_code=201, headers={"Location": f"/connectors/{name}"})

    @app.get("/connectors/{name}")
    async def get_connector(name: str) -> Any:
        return herder.info(name)

    @app.get("/connectors/{name}/config")
    async def get_config(name: str) -> Any:
        return herder.config(name)

    @app.put("/connectors/{name}/config")
    async def put_config(name: str, request: Request) -> Any:
        config = await _json_object(request)
        created, info = await herder.put_config(name, config)
        if created:
            return JSONResponse(info, status_code=201, headers={"Location": f"/connectors/{name}"})
        return info

    @app.patch("/connectors/{name}/config")
    async def patch_config(name: str, request: Request) -> Any:
        return await herder.patch_config(name, await _json_object(request))

    @app.get("/connectors/{name}/status")
    async def connector_status(name: str) -> Any:
        return herder.status(name)

    @app.get("/connectors/{name}/tasks")
    async def connector_tasks(name: str) -> Any:
        return herder.tasks(name)

    @app.get("/connectors/{name}/tasks/{task_id}/status")
    async def task_status(name: str, task_id: int) -> Any:
        return herder.task_status(name, task_id)

    @app.post("/connectors/{name}/restart")
    async def restart(name: str, includeTasks: str | None = None, onlyFailed: str | None = None) -> Any:
        include, only = _flag(includeTasks, "includeTasks"), _flag(onlyFailed, "onlyFailed")
        status = await herder.restart(name, include, only)
        if not include and not only:
            return Response(status_code=204)
        return JSONResponse(status, status_code=202)

    @app.post("/connectors/{name}/tasks/{task_id}/restart")
    async def restart_task(name: str, task_id: int) -> Response:
        await herder.restart_task(name, task_id)
        return Response(status_code=204)

    async def _target(name: str, target: TargetState) -> Response:
        await herder.set_target(name, target)
        return Response(status_code=202)

    @app.put("/connectors/{name}/pause")
    async def pause(name: str) -> Response:
        return await _target(name, TargetState.PAUSED)

    @app.put("/connectors/{name}/resume")
    async def resume(name: str) -> Response:
        return await _target(name, TargetState.STARTED)

    @app.put("/connectors/{name}/stop")
    async def stop(name: str) -> Response:
        return await _target(name, TargetState.STOPPED)

    @app.delete("/connectors/{name}")
    async def delete(name: str) -> Response:
        await herder.delete(name)
        return Response(status_code=204)

    @app.get("/connectors/{name}/topics")
    async def active_topics(name: str) -> Any:
        return herder.topics(name)

    @app.put("/connectors/{name}/topics/reset")
    async def reset_topics(name: str) -> Response:
        await herder.reset_topics(name)
        return Response(status_code=202)

    @app.get("/connectors/{name}/offsets")
    async def get_offsets(name: str) -> Any:
        return await herder.get_offsets(name)

    @app.patch("/connectors/{name}/offsets")
    async def alter_offsets(name: str, request: Request) -> Any:
        return await herder.alter_offsets(name, await _json_object(request))

    @app.delete("/connectors/{name}/offsets")
    async def reset_offsets(name: str) -> Any:
        return await herder.reset_offsets(name)

    @app.get("/admin/loggers")
    async def loggers() -> Any:
        out = {"root": {"level": _java_level(logging.getLogger().level)}}
        for name, found in sorted(logging.root.manager.loggerDict.items()):
            if isinstance(found, logging.Logger) and found.level != logging.NOTSET:
                out[name] = {"level": _java_level(found.level)}
        return out

    @app.get("/admin/loggers/{name}")
    async def get_logger(name: str) -> Any:
        if name != "root" and name not in logging.root.manager.loggerDict:
            raise HerderError(404, f"Logger {name} not found.")
        found = logging.getLogger(None if name == "root" else name)
        return {"level": _java_level(found.getEffectiveLevel())}

    @app.put("/admin/loggers/{name}")
    async def set_logger(name: str, request: Request) -> Any:
        body = await _json_object(request)
        level = _LEVELS.get(str(body.get("level", "")).upper())
        if level is None:
            raise HerderError(400, f"Invalid log level '{body.get('level')}'; one of {', '.join(_LEVELS)}")
        target = logging.getLogger(None if name == "root" else name)
        target.setLevel(level)
        prefix = name + "."
        below = sorted(n for n, found in logging.root.manager.loggerDict.items()
                       if isinstance(found, logging.Logger) and (name == "root" or n.startswith(prefix)))
        return [name, *below]

    @app.get("/connector-plugins")
    async def plugins(connectorsOnly: str | None = None) -> Any:
        out = herder.registry.connectors()
        if connectorsOnly is not None and not _flag(connectorsOnly, "connectorsOnly"):
            for table, kind in ((TRANSFORMS, "transformation"), (PREDICATES, "predicate"),
                                (CONVERTERS, "converter")):
                out += [{"class": name, "type": kind, "version": __version__}
                        for name in sorted(table) if name.startswith("org.apache.")]
        return out

    @app.put("/connector-plugins/{plugin}/config/validate")
    async def validate(plugin: str, request: Request) -> Any:
        return herder.validate(plugin, await _json_object(request))

    return app
