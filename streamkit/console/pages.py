"""What every page does alike: render a template, or the same data as JSON for a client
that asks for it (``Accept: application/json``); read a submitted form; answer an action with
a redirect back to the page it changed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import orjson
from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from streamkit.console.broker import AdminPool
from streamkit.console.errors import BadInput, NotFound
from streamkit.console.history import LagHistory, RateMeter
from streamkit.console.registry import RegistryClient, SchemaDecoder
from streamkit.console.rest import HttpClients
from streamkit.console.settings import ConsoleSettings

__all__ = ["admin_pool", "done", "form", "form_int", "http_clients", "json_response", "jsonable", "lag_history",
           "rate_meter", "registry", "render", "schema_decoder", "settings", "templates", "wants_json"]

_MAX_LONG = (1 << 63) - 1

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def settings(request: Request) -> ConsoleSettings:
    found: ConsoleSettings = request.app.state.settings
    return found


def admin_pool(request: Request) -> AdminPool:
    found: AdminPool = request.app.state.admin
    return found


def http_clients(request: Request) -> HttpClients:
    """The console's clients of Connect, the registry and the workers (one per service)."""
    found: HttpClients = request.app.state.http
    return found


def registry(request: Request) -> RegistryClient:
    """The Schema Registry; the schema routes are there only when the console has one."""
    found: RegistryClient | None = request.app.state.registry
    if found is None:
        raise NotFound("no Schema Registry is configured (--schema-registry-url)")
    return found


def schema_decoder(request: Request) -> SchemaDecoder | None:
    found: SchemaDecoder | None = request.app.state.schemas
    return found


def lag_history(request: Request) -> LagHistory:
    found: LagHistory = request.app.state.lag_history
    return found


def rate_meter(request: Request) -> RateMeter:
    found: RateMeter = request.app.state.rates
    return found


def wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a NamedTuple: TopicPartition
        return jsonable(value._asdict())
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in (sorted(value) if isinstance(value, set | frozenset) else value)]
    if isinstance(value, bytes):
        return value.hex()
    return value


def _json_default(value: Any) -> Any:
    """What orjson does not write itself, as ``jsonable`` writes it."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a NamedTuple: TopicPartition
        return value._asdict()
    if isinstance(value, set | frozenset):
        return sorted(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not JSON")


def json_response(data: Any, status: int = 200) -> Response:
    """``data`` as ``jsonable`` shows it, written by orjson (dataclasses natively, in C: a
    1,000-topic list in a millisecond rather than the tens a Python walk takes)."""
    body = orjson.dumps(data, default=_json_default, option=orjson.OPT_NON_STR_KEYS)
    return Response(body, status_code=status, media_type="application/json")


def render(request: Request, template: str, data: dict[str, Any], status: int = 200) -> Response:
    if wants_json(request):
        return json_response(data, status)
    context = {"request": request, "settings": settings(request), "notice": request.query_params.get("notice"),
               "features": getattr(request.state, "features", None), **data}
    return templates.TemplateResponse(request, template, context, status_code=status)


def done(request: Request, to: str, notice: str, result: Any = None) -> Response:
    """After an action: JSON clients get the result; browsers go back to ``to`` (303) with a
    notice of what happened, so a reload does not repeat the action."""
    if wants_json(request):
        return json_response({"notice": notice, "result": result})
    sep = "&" if "?" in to else "?"
    return RedirectResponse(f"{to}{sep}{urlencode({'notice': notice})}", status_code=303)


async def form(request: Request) -> dict[str, str]:
    """A submitted form (application/x-www-form-urlencoded): the last value of each field."""
    kind = request.headers.get("content-type", "")
    if kind and not kind.startswith("application/x-www-form-urlencoded"):
        raise BadInput(f"send the form as application/x-www-form-urlencoded, not {kind}")
    body = (await request.body()).decode("utf-8", errors="replace")
    return {key: values[-1] for key, values in parse_qs(body, keep_blank_values=True).items()}


def form_int(fields: dict[str, str], name: str, default: int | None = None, minimum: int | None = None) -> int:
    text = fields.get(name, "").strip()
    if not text:
        if default is None:
            raise BadInput(f"{name} is required")
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadInput(f"{name} must be an integer, not {text!r}") from None
    if minimum is not None and value < minimum:
        raise BadInput(f"{name} must be at least {minimum}, not {value}")
    if value > _MAX_LONG:  # nothing Kafka counts (offsets, partitions) goes beyond an int64
        raise BadInput(f"{name} must be at most {_MAX_LONG}, not {value}")
    return value
