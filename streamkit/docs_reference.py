"""The documentation site's reference pages, made from the definitions the code runs on.

Each function returns one Markdown page: the broker, topic and group settings from the
tables that validate them (``BROKER_CONFIGS``, ``TOPIC_CONFIGS``, ``GROUP_CONFIG_DEFS``), the
app, worker and connector settings from their pydantic models, the CLI from its Typer app,
the Connect REST API from its FastAPI app's OpenAPI, and the Kafka APIs from the versions the
broker advertises. ``docs/gen_reference.py`` writes them while ``mkdocs build`` runs, so a
reference page cannot drift from the code.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

__all__ = ["PAGES", "app_settings", "broker_settings", "cli", "connect_rest", "connector_settings",
           "group_settings", "kafka_apis", "python_api", "registry", "topic_settings", "worker_rest", "worker_settings"]

LONG_MAX = 2**63 - 1


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    if value is None or value == "":
        return "(none)"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if value == LONG_MAX:
        return "2^63-1"
    if isinstance(value, list | tuple):
        return f"`{','.join(map(str, value))}`" if value else "(empty)"
    return f"`{value}`"


def _config_defs_table(defs: Iterable[Any]) -> str:
    rows = ["| setting | type | default | valid values | description |", "|---|---|---|---|---|"]
    for d in sorted(defs, key=lambda d: d.name):
        allowed = ", ".join(f"`{a}`" for a in d.allowed) if d.allowed else ""
        doc = d.doc + (f": **{d.effect}**" if getattr(d, "effect", "") else "")
        if getattr(d, "synonym", None):
            doc += f" (broker: `{d.synonym}`)"
        rows.append(f"| `{d.name}` | {d.kind} | {_value(d.default)} | {allowed} | {_cell(doc)} |")
    return "\n".join(rows) + "\n"


def broker_settings() -> str:
    from streamkit.broker.config_defs import BROKER_CONFIGS, CLUSTER_ONLY

    single = [d for d in BROKER_CONFIGS if d.name not in CLUSTER_ONLY]
    cluster = [d for d in BROKER_CONFIGS if d.name in CLUSTER_ONLY]
    return (
        "# Broker settings\n\n"
        "Set in a `server.properties` file (`streamkit broker --config FILE`) or with "
        "`--set key=value`, which wins. These are the settings the broker acts on; every other "
        "Kafka broker setting is accepted and reported at start as having no effect, and any "
        "other name is an error with the closest Kafka name.\n\n"
        "## Every broker\n\n" + _config_defs_table(single) +
        "\n## Cluster (with `zookeeper.connect`)\n\n"
        "Read only when `zookeeper.connect` is set; a single broker checks and keeps them.\n\n"
        + _config_defs_table(cluster))


def topic_settings() -> str:
    from streamkit.log.config import TOPIC_CONFIGS

    return ("# Topic settings\n\n"
            "Kafka's topic configs, with Kafka's names, types, ranges and defaults: set at creation, "
            "changed with `streamkit topics alter-config` or any Kafka admin client. A setting marked "
            "**stored** is validated and reported but has no effect yet.\n\n" + _config_defs_table(TOPIC_CONFIGS))


def group_settings() -> str:
    from streamkit.broker.group_configs import GROUP_CONFIG_DEFS

    rows = ["| setting | type | default | valid values | description |", "|---|---|---|---|---|"]
    for d in GROUP_CONFIG_DEFS:
        default = _value(d.default) + (f" (broker: `{d.broker_default}`)" if d.broker_default else "")
        low, high = d.bounds or (None, None)
        valid = ", ".join(f"`{a}`" for a in d.allowed) if d.allowed else (
            f"from `{low}` to `{high}`" if low or high else "")
        rows.append(f"| `{d.name}` | {d.kind} | {default} | {valid} | {_cell(d.doc)} |")
    return ("# Group settings\n\n"
            "Kafka 4's GROUP config resource (DescribeConfigs, IncrementalAlterConfigs): per-group "
            "overrides of the broker's group settings.\n\n" + "\n".join(rows) + "\n")


def _kind(annotation: Any) -> tuple[str, str]:
    """(type, valid values) of a pydantic field's annotation, in Kafka's words."""
    import types
    import typing

    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return "string", ", ".join(f"`{a}`" for a in typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _kind(args[0])
    names = {bool: "boolean", int: "int", float: "double", str: "string"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)).lower()), ""


def _model_table(model: Any) -> str:
    """A pydantic settings model as a reference table: setting, type, default, valid
    values (choices and bounds from its validation), description."""
    from streamkit.connect.settings_doc import _default, _internal

    rows = ["| setting | type | default | valid values | description |", "|---|---|---|---|---|"]
    for name, info in model.model_fields.items():
        if _internal(info):
            continue
        kind, valid = _kind(info.annotation)
        bounds = [f"{op} {getattr(m, attr)}" for m in info.metadata
                  for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")) if hasattr(m, attr)]
        valid = valid or ", ".join(bounds)
        rows.append(f"| `{info.alias or name}` | {kind} | {_default(info)} | {valid} | {_cell(info.description or '')} |")
    return "\n".join(rows) + "\n"


def _model_page(title: str, intro: str, model: Any) -> str:
    return f"# {title}\n\n{intro}\n\n" + _model_table(model)


def app_settings() -> str:
    from streamkit.streams.settings import AppSettings

    return _model_page(
        "App settings",
        "An app's settings (`App(id, config={...})`, or `streamkit worker --set key=value`), under "
        "Kafka Streams' and the Kafka clients' names. An unknown name or a bad value raises "
        "`SettingsError` naming the setting.", AppSettings)


def worker_settings() -> str:
    from streamkit.connect.worker_config import WorkerConfig

    return _model_page(
        "Connect worker settings",
        "A Connect worker's properties file (`streamkit connect standalone worker.properties ...` "
        "or `streamkit connect distributed worker.properties`), under Kafka Connect's names.",
        WorkerConfig)


def connector_settings() -> str:
    from streamkit.connect.config import CommonConfig
    from streamkit.connect.plugins import BUILTIN_CONNECTORS, import_class

    parts = ["# Connector settings\n",
             "Every built-in connector's own settings, beside the common ones (`name`, "
             "`connector.class`, `tasks.max`, `topics`, converters, transforms, `errors.*`). "
             "`connector.class` takes the Python path, the class name or Kafka Connect's and "
             "Confluent's Java class names.\n",
             "## Common settings\n\nEvery connector takes these (Kafka Connect's names).\n\n" + _model_table(CommonConfig)]
    for path in BUILTIN_CONNECTORS:
        try:
            cls = import_class(path)
        except Exception:  # an optional extra that is not installed
            continue
        aliases = ", ".join(f"`{a}`" for a in getattr(cls, "aliases", ()))
        parts.append(f"## {cls.__name__}\n\n`connector.class`: `{path.replace(':', '.')}`"
                     + (f" (also {aliases})" if aliases else "") + "\n\n" + _model_table(cls.config_model))
    return "\n".join(parts)


def cli() -> str:
    import typer

    from streamkit.cli import app

    out = ["# CLI\n", "Every `streamkit` command, with its arguments and options (from `--help`).\n"]

    def walk(command: Any, path: list[str]) -> None:
        # Typer ships its own copy of click: look at the objects, not at click's classes.
        if path:
            out.append(f"{'#' * min(len(path) + 1, 4)} `{' '.join(['streamkit', *path])}`\n")
            if command.help:
                out.append(command.help.strip().split("\n\n")[0] + "\n")
            params = [p for p in command.params if not getattr(p, "hidden", False)]
            if params:
                out.append("| argument / option | description |\n|---|---|")
                for p in params:
                    if p.param_type_name == "option":
                        flag = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
                    else:
                        flag = f"`{p.metavar or (p.name or '').upper()}`"
                    out.append(f"| {flag} | {_cell(getattr(p, 'help', None) or '')} |")
                out.append("")
        if hasattr(command, "list_commands"):
            ctx = typer.Context(command)
            for sub in command.list_commands(ctx):
                found = command.get_command(ctx, sub)
                if found is not None and not found.hidden:
                    walk(found, [*path, sub])

    walk(typer.main.get_command(app), [])
    return "\n".join(out) + "\n"


def connect_rest() -> str:
    from streamkit.connect.rest import create_app

    spec = create_app(None).openapi()  # type: ignore[arg-type]  # routes only; no herder is called
    return ("# Connect REST API\n\n"
            "Kafka Connect's REST API, served by every Connect worker (`rest.port`, default 8083). "
            "Errors are JSON bodies `{\"error_code\": ..., \"message\": ...}` with 4xx codes for bad "
            "input.\n\n" + _openapi_table(spec))


def worker_rest() -> str:
    from types import SimpleNamespace

    from streamkit.streams.web import WebServer

    runtime = SimpleNamespace(app=SimpleNamespace(id="APP"))  # routes only; no handler runs
    spec = WebServer(runtime, 0).asgi().openapi()
    return ("# Stream app REST API\n\n"
            "Each worker serves it with `streamkit worker --web-port PORT` (`web.port`): interactive "
            "queries of its tables, health and metrics. Only GET; errors are JSON `{\"error\": ...}` "
            "with 400 for a key or limit that does not parse and 404 for a missing table, key or "
            "route.\n\n" + _openapi_table(spec))


def _openapi_table(spec: dict[str, Any]) -> str:
    rows = ["| method | path | what it does |", "|---|---|---|"]
    for path, methods in spec.get("paths", {}).items():
        for method, op in methods.items():
            text = (op.get("description") or op.get("summary") or "").strip()
            rows.append(f"| {method.upper()} | `{path}` | {_cell(text.splitlines()[0] if text else '')} |")
    return "\n".join(rows) + "\n"


def registry() -> str:
    from streamkit.schemas.config import SETTINGS, SETTINGS_DOC
    from streamkit.schemas.rest import create_app

    rows = ["| setting | default | description |", "|---|---|---|"]
    rows += [f"| `{name}` | {_value(default)} | {_cell(SETTINGS_DOC[name])} |" for name, default in SETTINGS.items()]
    from types import SimpleNamespace

    spec = create_app(SimpleNamespace(state=None), None).openapi()  # type: ignore[arg-type]  # routes only
    return ("# Schema Registry\n\n"
            "`streamkit schema-registry --config FILE` (or `--set key=value`, or "
            "`schema.registry.listeners` on `streamkit broker`) serves Confluent's Schema Registry "
            "API with Confluent's setting names and error codes.\n\n## Settings\n\n"
            + "\n".join(rows) + "\n\n## REST API\n\n" + _openapi_table(spec))


def _kio_api_names() -> dict[int, str]:
    """API key -> Kafka's name (``Produce``, ``Fetch``...), from kio's request schemas."""
    import pkgutil

    import kio.schema

    names: dict[int, str] = {}
    for module in pkgutil.iter_modules(kio.schema.__path__):
        package = importlib.import_module(f"kio.schema.{module.name}")
        versions = [v.name for v in pkgutil.iter_modules(getattr(package, "__path__", []))
                    if v.name.startswith("v")]
        if not versions:
            continue
        try:
            request = importlib.import_module(f"kio.schema.{module.name}.{versions[0]}.request")
        except ImportError:
            continue
        for value in vars(request).values():
            key = getattr(value, "__api_key__", None)
            if isinstance(value, type) and key is not None:
                names[int(key)] = "".join(part.capitalize() for part in module.name.split("_"))
    return names


def kafka_apis() -> str:
    from streamkit.broker.codec import ADVERTISED_VERSIONS

    names = _kio_api_names()
    rows = ["| API key | API | versions |", "|---|---|---|"]
    for key, (low, high) in sorted(ADVERTISED_VERSIONS.items()):
        rows.append(f"| {key} | {names.get(key, str(key))} | {low} to {high} |")
    return ("# Kafka APIs\n\n"
            "The Kafka protocol APIs the broker serves, with the versions it advertises in "
            "ApiVersions. Clients negotiate the highest version both sides know.\n\n" + "\n".join(rows) + "\n")


PUBLIC_PACKAGES = ("streamkit", "streamkit.streams", "streamkit.connect", "streamkit.spark", "streamkit.dask",
                   "streamkit.testing")

# Packages whose ``__init__`` exports nothing itself: the names of their modules that users
# call (``app.stream(...)`` returns a StreamNode, ``app.Table(...)`` a Table, an agent is given
# an AgentStream), and the test helpers' modules that ``streamkit.testing`` does not import.
PUBLIC_MODULE_NAMES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "streamkit.streams": (
        ("streamkit.streams.agent", ("AgentStream", "Batch")),
        ("streamkit.streams.dsl", ("StreamNode", "WindowedStream", "WindowedAggregation", "TableNode")),
        ("streamkit.streams.table", ("Table", "WindowedTable", "WindowSet", "GlobalTable")),
        ("streamkit.streams.processing", ("WindowResult",)),
        # streamkit.streams.columnar: the DSL's column expressions and aggregations
        ("streamkit.streams.columnar.expr", ("col", "lit", "Expr")),
        ("streamkit.streams.columnar.aggs", ("count", "sum", "min", "max", "AggExpr")),
    ),
    "streamkit.testing": (
        ("streamkit.testing.strategies", ("timestamped_records",)),
        ("streamkit.testing.conformance", ("Scenario", "Send", "run_in_driver", "run_on_broker")),
    ),
}


def _block(target: str) -> str:
    return f"::: {target}\n    options:\n      heading_level: 3\n"


def python_api() -> str:
    """One mkdocstrings block per public name, at the module that defines it (the packages
    import some names lazily, which static analysis cannot follow)."""
    out = ["# Python API\n", "The public names (`__all__`) of each package, from their docstrings.\n"]
    for package in PUBLIC_PACKAGES:
        try:
            module = importlib.import_module(package)
        except ImportError:  # an optional extra that is not installed
            continue
        out.append(f"## {package}\n")
        for name in getattr(module, "__all__", ()):
            if name.startswith("__"):
                continue
            obj = getattr(module, name)
            home = getattr(obj, "__module__", None) if callable(obj) or isinstance(obj, type) else None
            target = f"{home}.{getattr(obj, '__qualname__', name)}" if home else f"{package}.{name}"
            out.append(_block(target))
        for home, names in PUBLIC_MODULE_NAMES.get(package, ()):
            out += [_block(f"{home}.{name}") for name in names]
    return "\n".join(out) + "\n"


PAGES: dict[str, Any] = {
    "reference/broker-settings.md": broker_settings,
    "reference/topic-settings.md": topic_settings,
    "reference/group-settings.md": group_settings,
    "reference/app-settings.md": app_settings,
    "reference/connect-worker-settings.md": worker_settings,
    "reference/connector-settings.md": connector_settings,
    "reference/cli.md": cli,
    "reference/connect-rest.md": connect_rest,
    "reference/worker-rest.md": worker_rest,
    "reference/schema-registry.md": registry,
    "reference/kafka-apis.md": kafka_apis,
    "reference/python-api.md": python_api,
}
