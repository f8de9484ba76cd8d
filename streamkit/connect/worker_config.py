"""The worker's settings, under Kafka Connect's worker names (connect-standalone.properties,
connect-distributed.properties), read from JSON or a ``.properties`` file.

Keys kept for the connectors: ``key.converter``/``value.converter`` and their prefixed
settings (``value.converter.schemas.enable``) are the defaults of connectors that name no
converter. ``plugin.path`` is accepted and ignored: plugins are Python packages found by
entry point (``streamkit.connectors``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic import Field as PField

from streamkit.connect.errors import ConfigError
from streamkit.connect.transforms import config_problems

__all__ = ["WorkerConfig", "load_worker_config", "read_config_file"]


class WorkerConfig(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True)

    bootstrap_servers: str = PField("localhost:9092", alias="bootstrap.servers",
        description='The brokers the worker connects to.')
    listeners: str | None = PField(None, description="The REST API's listeners (http://host:port; the first one is served); wins over rest.host.name/rest.port.")
    rest_host_name: str | None = PField(None, alias="rest.host.name",
        description="The REST API's host (default: every interface).")
    rest_port: int = PField(8083, alias="rest.port", ge=0, le=65535,
        description="The REST API's port.")
    offset_storage_file_filename: str | None = PField(None, alias="offset.storage.file.filename",
        description='Standalone mode: the file source offsets are kept in.')
    offset_flush_interval_ms: int = PField(60000, alias="offset.flush.interval.ms", ge=1,
        description='How often source offsets are committed.')
    task_shutdown_graceful_timeout_ms: int = PField(5000, alias="task.shutdown.graceful.timeout.ms", ge=0,
        description='How long tasks get to stop before they are abandoned.')
    key_converter: str = PField("org.apache.kafka.connect.json.JsonConverter", alias="key.converter",
        description="The converter of record keys (Kafka Connect's class names).")
    value_converter: str = PField("org.apache.kafka.connect.json.JsonConverter", alias="value.converter",
        description="The converter of record values (Kafka Connect's class names).")
    plugin_path: str | None = PField(None, alias="plugin.path",
        description='Directories searched for third-party connector modules.')
    group_id: str | None = PField(None, alias="group.id",
        description="Distributed mode: the Connect cluster's group (workers with the same group.id share connectors).")
    config_storage_topic: str | None = PField(None, alias="config.storage.topic",
        description='Distributed mode: the compacted topic connector configs are kept in.')
    offset_storage_topic: str | None = PField(None, alias="offset.storage.topic",
        description='Distributed mode: the compacted topic source offsets are kept in.')
    status_storage_topic: str | None = PField(None, alias="status.storage.topic",
        description='Distributed mode: the compacted topic connector and task statuses are kept in.')
    config_storage_replication_factor: int = PField(1, alias="config.storage.replication.factor",
        description='Replication factor of config.storage.topic.')
    offset_storage_replication_factor: int = PField(1, alias="offset.storage.replication.factor",
        description='Replication factor of offset.storage.topic.')
    status_storage_replication_factor: int = PField(1, alias="status.storage.replication.factor",
        description='Replication factor of status.storage.topic.')
    offset_storage_partitions: int = PField(25, alias="offset.storage.partitions", ge=1,
        description='Partitions of offset.storage.topic.')
    status_storage_partitions: int = PField(5, alias="status.storage.partitions", ge=1,
        description='Partitions of status.storage.topic.')
    session_timeout_ms: int = PField(10000, alias="session.timeout.ms", ge=1,
        description="Distributed mode: the worker group's session timeout.")
    heartbeat_interval_ms: int = PField(3000, alias="heartbeat.interval.ms", ge=1,
        description='Distributed mode: how often a worker heartbeats.')
    # KIP-618: "enabled" has source tasks write records and offsets in one transaction
    # (distributed mode only); "preparing" is the rolling-upgrade step, at-least-once still.
    exactly_once_source_support: Literal["disabled", "preparing", "enabled"] = PField(
        "disabled", alias="exactly.once.source.support",
        description='KIP-618: enabled makes source tasks write records and offsets in one transaction (distributed mode); preparing is the rolling-upgrade step.')

    def rest_address(self) -> tuple[str, int]:
        """Where the REST API listens: ``listeners`` (first one) wins over rest.host.name/rest.port."""
        if self.listeners:
            first = self.listeners.split(",")[0].strip()
            parts = urlsplit(first if "://" in first else f"http://{first}")
            return parts.hostname or "0.0.0.0", parts.port if parts.port is not None else 8083
        return self.rest_host_name or "0.0.0.0", self.rest_port

    def raw(self) -> dict[str, Any]:
        """Every setting by its Kafka name, the unknown (prefixed converter settings) too."""
        out = self.model_dump(by_alias=True)
        out.update(self.model_extra or {})
        return {k: v for k, v in out.items() if v is not None}


def read_config_file(path: Path) -> dict[str, Any]:
    """A JSON object, or Java properties (``key=value`` lines) when the file ends in .properties."""
    text = path.read_text()
    if path.suffix == ".properties":
        out: dict[str, Any] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if sep < 0:
                out[line] = ""
            else:
                out[line[:sep].strip()] = line[sep + 1:].strip()
        return out
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigError({str(path): [f"not valid JSON: {exc}"]}) from None
    if not isinstance(data, dict):
        raise ConfigError({str(path): ["must hold a JSON object"]})
    return data


def load_worker_config(settings: dict[str, Any]) -> WorkerConfig:
    from streamkit.connect.client_config import client_kwargs

    problems: dict[str, list[str]] = {}
    for kind in ("consumer", "producer"):
        try:
            client_kwargs(kind, settings, {})
        except ConfigError as exc:
            problems.update(exc.problems)
    if problems:
        raise ConfigError(problems)
    try:
        return WorkerConfig.model_validate({k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                                            else v for k, v in settings.items()})
    except ValidationError as exc:
        names = {n: (f.alias or n) for n, f in WorkerConfig.model_fields.items()}
        raise ConfigError({names.get(k, k): v for k, v in config_problems(exc).items()}) from None
