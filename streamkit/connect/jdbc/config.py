"""The JDBC connectors' configs under Confluent's key names, validated by pydantic.

Values arrive as strings from JSON configs and task configs alike (``"100"``, ``"true"``,
``"a,b"``); lists are comma-separated as in Kafka Connect. Enumerations are case-insensitive,
as in Confluent's connector. Cross-key rules raise messages that start with the key at fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BeforeValidator, Field, ValidationError, model_validator

from streamkit.connect.connector import ConnectorConfig
from streamkit.connect.errors import ConfigError

__all__ = ["JdbcSinkConfig", "JdbcSourceConfig", "parse_config", "to_task_config"]


def _split(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


CommaList = Annotated[tuple[str, ...], BeforeValidator(_split)]


class _Connection(ConnectorConfig):
    connection_url: str = Field(alias="connection.url", min_length=1)
    connection_user: str | None = Field(None, alias="connection.user")
    connection_password: str | None = Field(None, alias="connection.password")


class JdbcSourceConfig(_Connection):
    mode: Annotated[Literal["bulk", "incrementing", "timestamp", "timestamp+incrementing"],
                    BeforeValidator(_lower)]
    topic_prefix: str = Field(alias="topic.prefix")
    incrementing_column_name: str = Field("", alias="incrementing.column.name")
    timestamp_column_name: CommaList = Field((), alias="timestamp.column.name")
    timestamp_delay_interval_ms: int = Field(0, alias="timestamp.delay.interval.ms", ge=0)
    table_whitelist: CommaList = Field((), alias="table.whitelist")
    table_include_list: CommaList = Field((), alias="table.include.list")
    table_blacklist: CommaList = Field((), alias="table.blacklist")
    table_exclude_list: CommaList = Field((), alias="table.exclude.list")
    table_types: CommaList = Field(("TABLE",), alias="table.types")
    query: str = Field("", alias="query")
    poll_interval_ms: int = Field(5000, alias="poll.interval.ms", ge=1)
    batch_max_rows: int = Field(100, alias="batch.max.rows", ge=1)
    validate_non_null: bool = Field(True, alias="validate.non.null")
    # Set by the connector in each task's config: the tables that task reads.
    tables: CommaList = Field((), alias="tables")

    @property
    def included(self) -> tuple[str, ...]:
        return self.table_whitelist + self.table_include_list

    @property
    def excluded(self) -> tuple[str, ...]:
        return self.table_blacklist + self.table_exclude_list

    @model_validator(mode="after")
    def _rules(self) -> JdbcSourceConfig:
        if self.mode in ("incrementing", "timestamp+incrementing") and not self.incrementing_column_name:
            raise ValueError(f"incrementing.column.name: required with mode={self.mode}")
        if self.mode in ("timestamp", "timestamp+incrementing") and not self.timestamp_column_name:
            raise ValueError(f"timestamp.column.name: required with mode={self.mode}")
        if self.query and (self.included or self.excluded):
            raise ValueError("query: cannot be combined with table.whitelist/include.list "
                             "or table.blacklist/exclude.list")
        if self.included and self.excluded:
            raise ValueError("table.whitelist: cannot be combined with table.blacklist "
                             "(or their include/exclude.list names)")
        bad = [t for t in self.table_types if t.upper() not in ("TABLE", "VIEW")]
        if bad:
            raise ValueError(f"table.types: {bad} not supported; use TABLE and/or VIEW")
        return self


class JdbcSinkConfig(_Connection):
    insert_mode: Annotated[Literal["insert", "upsert", "update"],
                           BeforeValidator(_lower)] = Field("insert", alias="insert.mode")
    batch_size: int = Field(3000, alias="batch.size", ge=1)
    delete_enabled: bool = Field(False, alias="delete.enabled")
    table_name_format: str = Field("${topic}", alias="table.name.format", min_length=1)
    pk_mode: Annotated[Literal["none", "kafka", "record_key", "record_value"],
                       BeforeValidator(_lower)] = Field("none", alias="pk.mode")
    pk_fields: CommaList = Field((), alias="pk.fields")
    fields_whitelist: CommaList = Field((), alias="fields.whitelist")
    fields_include_list: CommaList = Field((), alias="fields.include.list")
    auto_create: bool = Field(False, alias="auto.create")
    auto_evolve: bool = Field(False, alias="auto.evolve")

    @property
    def included_fields(self) -> tuple[str, ...]:
        return self.fields_whitelist + self.fields_include_list

    @model_validator(mode="after")
    def _rules(self) -> JdbcSinkConfig:
        if self.delete_enabled and self.pk_mode != "record_key":
            raise ValueError("delete.enabled: requires pk.mode=record_key")
        if self.insert_mode in ("upsert", "update") and self.pk_mode == "none":
            raise ValueError(f"pk.mode: insert.mode={self.insert_mode} needs a primary key; "
                             "set pk.mode to kafka, record_key or record_value")
        if self.pk_mode == "kafka" and len(self.pk_fields) not in (0, 3):
            raise ValueError("pk.fields: with pk.mode=kafka give three names (topic, partition, "
                             "offset) or none for __connect_topic,__connect_partition,"
                             "__connect_offset")
        return self


C = TypeVar("C", bound=ConnectorConfig)


def parse_config(model: type[C], config: Mapping[str, Any] | C) -> C:
    """``config`` validated as ``model``; every problem raised at once as a ConfigError."""
    if isinstance(config, model):
        return config
    try:
        return model.model_validate(dict(config))
    except ValidationError as exc:
        problems: dict[str, list[str]] = {}
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            if not loc and ": " in msg:
                loc, msg = msg.split(": ", 1)
            problems.setdefault(loc or "config", []).append(msg)
        raise ConfigError(problems) from None


def to_task_config(config: ConnectorConfig, **extra: str) -> dict[str, str]:
    """``config`` as the string map a task config is, under Kafka Connect's key names."""
    out: dict[str, str] = {}
    for key, value in config.model_dump(by_alias=True).items():
        if value is None:
            continue
        if isinstance(value, tuple | list):
            out[key] = ",".join(value)
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    out.update(extra)
    return out
