"""Connector configs: the runtime's common keys, the connector's own, and validation.

A connector config is a flat string map, as Kafka Connect's REST API and files carry it
(``{"name": ..., "config": {...}}``). ``validate_config`` checks it against two pydantic
models, ``CommonConfig`` (the keys the runtime owns, under Kafka Connect's names) and the
connector's ``config_model``, then builds the converters and the transform chain; every
problem of all of them is collected and raised in one ``ConfigError`` keyed by config key.
``validation_report`` gives the same result in the shape of Kafka Connect's
``PUT /connector-plugins/{type}/config/validate`` answer.

A key that nothing reads (a typo, most often) is not an error, as in Kafka Connect, but a
warning: Kafka's "was supplied but isn't a known config", with the known key it is most like.
A required key that is missing names the supplied key it was probably mistyped as.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic import Field as PField

from streamkit.connect.client_config import client_problems
from streamkit.connect.connector import Connector, ConnectorConfig, SinkConnector, SourceConnector
from streamkit.connect.converters import Converter, make_converter
from streamkit.connect.errors import ConfigError
from streamkit.connect.plugins import PluginError, PluginRegistry
from streamkit.connect.transforms import TransformChain, config_problems
from streamkit.hints import did_you_mean, nearest

__all__ = [
    "CommonConfig",
    "ValidConfig",
    "converter_settings",
    "log_warnings",
    "patched",
    "validate_config",
    "validation_report",
]

log = logging.getLogger(__name__)

_DEFAULT_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
# Keys under these prefixes are read by the converters and the Kafka clients (which check them).
_RUNTIME_PREFIXES = ("key.converter.", "value.converter.", "header.converter.",
                     "consumer.override.", "producer.override.", "admin.override.")


def _csv(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class CommonConfig(BaseModel):
    """The keys every connector config may hold, owned by the runtime (Kafka Connect's
    ConnectorConfig, SinkConnectorConfig and SourceConnectorConfig)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    name: str = PField(min_length=1, description="Globally unique name to use for this connector.")
    connector_class: str = PField(alias="connector.class", min_length=1,
                                  description="Name or alias of the class for this connector.")
    tasks_max: int = PField(1, alias="tasks.max", ge=1, description="Maximum number of tasks to use for this connector.")
    key_converter: str | None = PField(None, alias="key.converter",
                                       description="Converter class for keys (default: the worker's).")
    value_converter: str | None = PField(None, alias="value.converter",
                                         description="Converter class for values (default: the worker's).")
    header_converter: str | None = PField(None, alias="header.converter",
                                          description="Accepted for compatibility; headers are passed as bytes.")
    transforms: list[str] = PField(default_factory=list, description="Aliases for the transformations, in order.")
    predicates: list[str] = PField(default_factory=list, description="Aliases for the predicates used by transformations.")
    topics: list[str] = PField(default_factory=list, description="Sinks: the topics to consume.")
    topics_regex: str | None = PField(None, alias="topics.regex", description="Sinks: a regex of topics to consume.")
    errors_tolerance: Literal["none", "all"] = PField(
        "none", alias="errors.tolerance",
        description="'none' fails the task on a record that cannot be converted or transformed; 'all' skips it.")
    errors_retry_timeout: int = PField(0, alias="errors.retry.timeout", ge=-1,
                                       description="How long (ms) to retry a failed operation; -1 forever.")
    errors_retry_delay_max_ms: int = PField(60000, alias="errors.retry.delay.max.ms", ge=1,
                                            description="Longest backoff (ms) between retries.")
    errors_log_enable: bool = PField(False, alias="errors.log.enable", description="Log every tolerated error.")
    errors_log_include_messages: bool = PField(False, alias="errors.log.include.messages",
                                               description="Include the record in the error log.")
    errors_deadletterqueue_topic_name: str = PField(
        "", alias="errors.deadletterqueue.topic.name",
        description="Sinks: the topic that receives records that failed (with errors.tolerance=all).")
    errors_deadletterqueue_topic_replication_factor: int = PField(
        3, alias="errors.deadletterqueue.topic.replication.factor", ge=-1,
        description="Replication factor of the dead-letter topic when created.")
    errors_deadletterqueue_context_headers_enable: bool = PField(
        False, alias="errors.deadletterqueue.context.headers.enable",
        description="Add __connect.errors.* headers to dead-letter records.")
    exactly_once_support: Literal["requested", "required"] = PField(
        "requested", alias="exactly.once.support", description="Sources: whether exactly-once is required.")
    transaction_boundary: Literal["poll", "interval", "connector"] = PField(
        "poll", alias="transaction.boundary",
        description="Sources with exactly-once: commit a transaction after every poll, or every "
                    "transaction.boundary.interval.ms ('connector' is refused: no connector defines boundaries).")
    transaction_boundary_interval_ms: int | None = PField(
        None, alias="transaction.boundary.interval.ms", ge=0,
        description="With transaction.boundary=interval: how often (ms) to commit; default offset.flush.interval.ms.")
    offsets_storage_topic: str | None = PField(
        None, alias="offsets.storage.topic",
        description="Accepted only when equal to the worker's offset.storage.topic (no per-connector offset topics).")
    offset_flush_interval_ms: int | None = PField(
        None, alias="offset.flush.interval.ms", ge=1,
        description="Override of the worker's offset commit interval for this connector.")

    _lists = field_validator("transforms", "predicates", "topics", mode="before")(lambda cls, v: _csv(v))

    @field_validator("topics_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"Invalid regex: {exc}") from None
        return value


@dataclass(frozen=True)
class ValidConfig:
    """A config that passed validation, with what was built from it."""

    raw: dict[str, str]
    common: CommonConfig
    connector_class: type[Connector]
    connector: ConnectorConfig
    key_converter: Converter
    value_converter: Converter
    transforms: TransformChain
    # Kafka's "was supplied but isn't a known config", per key
    warnings: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.common.name

    @property
    def type(self) -> str:
        return "source" if issubclass(self.connector_class, SourceConnector) else "sink"


def converter_settings(config: Mapping[str, Any], worker: Mapping[str, Any], prefix: str) -> tuple[str, dict[str, str]]:
    """The converter class and its settings for ``prefix`` (``key.converter``): the
    connector's when it names a converter, else the worker's (as Kafka Connect does)."""
    source = config if config.get(prefix) else worker
    name = str(source.get(prefix) or _DEFAULT_CONVERTER)
    dot = prefix + "."
    return name, {k[len(dot):]: str(v) for k, v in source.items() if k.startswith(dot)}


def _merge(problems: dict[str, list[str]], more: Mapping[str, list[str]]) -> None:
    for key, msgs in more.items():
        problems.setdefault(key, []).extend(m for m in msgs if m not in problems.get(key, []))


def _stringify(config: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in config.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[str(key)] = "true" if value else "false"
        else:
            out[str(key)] = str(value)
    return out


def _check(config: dict[str, str], registry: PluginRegistry, worker: Mapping[str, Any]
           ) -> tuple[dict[str, list[str]], dict[str, Any]]:
    problems: dict[str, list[str]] = {}
    built: dict[str, Any] = {}
    try:
        common = CommonConfig.model_validate(config)
        built["common"] = common
    except ValidationError as exc:
        _merge(problems, _aliased(config_problems(exc), CommonConfig))
        common = None
    cls: type[Connector] | None = None
    class_name = config.get("connector.class")
    if class_name:
        try:
            cls = registry.connector_class(class_name)
            built["class"] = cls
        except PluginError as exc:
            problems.setdefault("connector.class", []).append(str(exc))
    if cls is not None:
        try:
            built["connector"] = cls.config_model.model_validate(config)
        except ValidationError as exc:
            _merge(problems, _aliased(config_problems(exc), cls.config_model))
        has_topics = bool(_csv(config.get("topics", "")))
        if issubclass(cls, SinkConnector) and has_topics == bool(config.get("topics.regex")):
            msg = ("Must configure one of topics or topics.regex" if not has_topics
                   else "topics and topics.regex are mutually exclusive options, but both are set.")
            problems.setdefault("topics", []).append(msg)
            problems.setdefault("topics.regex", []).append(msg)
        if issubclass(cls, SourceConnector):
            _merge(problems, _exactly_once_problems(config, cls, built.get("connector"), worker))
        if issubclass(cls, SourceConnector) and config.get("errors.deadletterqueue.topic.name"):
            problems.setdefault("errors.deadletterqueue.topic.name", []).append(
                "Dead-letter queues are only supported for sink connectors (as in Kafka Connect).")
    if common is not None and common.errors_deadletterqueue_topic_name in common.topics:
        problems.setdefault("errors.deadletterqueue.topic.name", []).append(
            "The dead-letter topic cannot be one of the topics the connector consumes.")
    for side in ("key", "value"):
        prefix = f"{side}.converter"
        name, settings = converter_settings(config, worker, prefix)
        try:
            built[prefix] = make_converter(name, settings, is_key=side == "key")
        except PluginError as exc:
            problems.setdefault(prefix, []).append(str(exc))
        except ConfigError as exc:
            _merge(problems, {f"{prefix}.{k}": v for k, v in exc.problems.items()})
    _merge(problems, client_problems(config))
    try:
        built["transforms"] = TransformChain(config)
    except ConfigError as exc:
        _merge(problems, exc.problems)
    built["warnings"] = _unknown_keys(config, cls, problems) if cls is not None else {}
    return problems, built


def _known_keys(models: Iterable[type[BaseModel]]) -> tuple[set[str], tuple[str, ...]]:
    """The keys the models read, and the prefixes of their ``prefix.*`` fields."""
    names: set[str] = set()
    prefixes: list[str] = []
    for model in models:
        for name, info in model.model_fields.items():
            key = info.alias or name
            if key.endswith(".*"):
                prefixes.append(key[:-1])
            else:
                names.add(key)
    return names, tuple(prefixes)


def _unknown_keys(config: Mapping[str, str], cls: type[Connector],
                  problems: dict[str, list[str]]) -> dict[str, list[str]]:
    """A warning for each key that nothing reads; a problem of a key that was not given
    (a missing required key) names the supplied key that looks like a typo of it."""
    names, prefixes = _known_keys((CommonConfig, cls.config_model))
    aliases = tuple(f"{kind}.{alias}." for kind in ("transforms", "predicates")
                    for alias in _csv(config.get(kind, "")))
    prefixes += _RUNTIME_PREFIXES + aliases
    warnings: dict[str, list[str]] = {}
    for key in config:
        if key in names or key.startswith(prefixes):
            continue
        kind, _, rest = key.partition(".")
        if kind in ("transforms", "predicates") and "." in rest:
            # an undeclared alias: the same setting of a declared one is the likely meaning
            setting = rest.split(".", 1)[1]
            hint = did_you_mean(key, (p + setting for p in aliases if p.startswith(kind + ".")))
        else:
            hint = did_you_mean(key, names)
        warnings[key] = [f"The configuration {key!r} was supplied but isn't a known config{hint}"]
        meant = nearest(key, names)
        if meant is not None and meant not in config and meant in problems:
            problems[meant] = [f"{msg.rstrip('.')}; {key!r} was supplied{hint}" for msg in problems[meant]]
    return warnings


def log_warnings(valid: ValidConfig) -> None:
    """Log the config's warnings, as Kafka Connect logs a config's unknown keys."""
    for messages in valid.warnings.values():
        for message in messages:
            log.warning("connector %s: %s", valid.name, message)


def _exactly_once_problems(config: Mapping[str, str], cls: type[SourceConnector],
                           connector_config: ConnectorConfig | None, worker: Mapping[str, Any]
                           ) -> dict[str, list[str]]:
    """A source's exactly-once keys against the worker's ``exactly.once.source.support``
    and the connector's own ``exactly_once_support`` (Kafka's KIP-618 preflight checks)."""
    problems: dict[str, list[str]] = {}
    support = str(worker.get("exactly.once.source.support") or "disabled")
    enabled = support == "enabled"
    if config.get("exactly.once.support") == "required":
        if not enabled:
            problems["exactly.once.support"] = [
                "exactly.once.support=required needs exactly.once.source.support=enabled on the worker "
                f"(it is {support!r}); only distributed workers can enable it"]
        elif connector_config is not None and not cls().exactly_once_support(connector_config):
            problems["exactly.once.support"] = [
                f"exactly.once.support=required, but {cls.__name__} cannot write its records and "
                "offsets in one transaction (its exactly_once_support() is False)"]
    if enabled and config.get("transaction.boundary") == "connector":
        problems["transaction.boundary"] = [
            f"transaction.boundary=connector: {cls.__name__} does not define its own transaction "
            "boundaries; use poll or interval"]
    topic = config.get("offsets.storage.topic")
    if topic and topic != worker.get("offset.storage.topic"):
        problems["offsets.storage.topic"] = [
            "per-connector offset topics are not supported: leave offsets.storage.topic unset "
            "(the worker's offset.storage.topic is used)"]
    return problems


def _aliased(problems: dict[str, list[str]], model: type[BaseModel]) -> dict[str, list[str]]:
    """pydantic reports a missing field by its alias already; map field names too."""
    names = {name: (f.alias or name) for name, f in model.model_fields.items()}
    return {names.get(k, k): v for k, v in problems.items()}


def validate_config(config: Mapping[str, Any], registry: PluginRegistry,
                    worker: Mapping[str, Any] | None = None) -> ValidConfig:
    """The validated config, or ConfigError with every problem, per key."""
    raw = _stringify(config)
    problems, built = _check(raw, registry, worker or {})
    if problems:
        raise ConfigError(problems)
    return ValidConfig(raw, built["common"], built["class"], built["connector"], built["key.converter"],
                       built["value.converter"], built["transforms"], built["warnings"])


def _definition(name: str, field: Any, group: str, order: int) -> dict[str, Any]:
    annotation = str(field.annotation)
    kind = ("INT" if "int" in annotation else "BOOLEAN" if "bool" in annotation
            else "LIST" if "list" in annotation else "PASSWORD" if "Secret" in annotation else "STRING")
    default = None if field.is_required() else field.get_default(call_default_factory=True)
    if isinstance(default, list):
        default = ",".join(default)
    elif isinstance(default, bool):
        default = "true" if default else "false"
    elif default is not None:
        default = str(default)
    return {"name": name, "type": kind, "required": field.is_required(), "default_value": default,
            "importance": "HIGH" if field.is_required() else "MEDIUM",
            "documentation": field.description or "", "group": group, "width": "NONE",
            "display_name": name, "dependents": [], "order": order}


def validation_report(config: Mapping[str, Any], registry: PluginRegistry,
                      worker: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Kafka Connect's ConfigInfos: ``name``, ``error_count``, ``groups``, and per config a
    ``definition`` and a ``value`` with its ``errors``; and ``warnings``, the unknown keys'
    messages per key (an addition: Kafka Connect only logs them)."""
    raw = _stringify(config)
    problems, built = _check(raw, registry, worker or {})
    cls = built.get("class")
    models: list[tuple[str, type[BaseModel]]] = [("Common", CommonConfig)]
    if cls is not None:
        models.append((cls.__name__, cls.config_model))
    configs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for group, model in models:
        for order, (field_name, field) in enumerate(model.model_fields.items(), 1):
            key = field.alias or field_name
            if key in seen:
                continue
            seen.add(key)
            configs.append({"definition": _definition(key, field, group, order),
                            "value": {"name": key, "value": raw.get(key), "recommended_values": [],
                                      "errors": problems.get(key, []), "visible": True}})
    for key, msgs in problems.items():
        if key not in seen:
            configs.append({"definition": {"name": key, "type": "STRING", "required": False, "default_value": None,
                                           "importance": "MEDIUM", "documentation": "", "group": "Transforms"
                                           if key.startswith(("transforms.", "predicates.")) else "Common",
                                           "width": "NONE", "display_name": key, "dependents": [], "order": -1},
                            "value": {"name": key, "value": raw.get(key), "recommended_values": [],
                                      "errors": msgs, "visible": True}})
    name = cls.__name__ if cls is not None else str(raw.get("connector.class", ""))
    return {"name": name, "error_count": sum(len(c["value"]["errors"]) for c in configs),
            "groups": [g for g, _ in models], "configs": configs, "warnings": built["warnings"]}


def patched(config: Mapping[str, str], patch: Mapping[str, Any]) -> dict[str, str]:
    """``config`` with ``patch`` applied, as Kafka Connect's PATCH /connectors/{name}/config:
    a key set to null is removed, any other is set."""
    out = dict(config)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out
