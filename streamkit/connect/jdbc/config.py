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
from streamkit.connect.transforms import config_problems

__all__ = ["JdbcSinkConfig", "JdbcSourceConfig", "parse_config", "to_task_config"]


def _split(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


CommaList = Annotated[tuple[str, ...], BeforeValidator(_split)]


class _Connection(ConnectorConfig):
    connection_url: str = Field(
        alias="connection.url", min_length=1,
        description="JDBC URL (`jdbc:postgresql://host:5432/db`, `jdbc:mysql://...`, "
                    "`jdbc:mariadb://...`, `jdbc:sqlite:path.db`) or a SQLAlchemy URL.")
    connection_user: str | None = Field(None, alias="connection.user",
                                        description="Database user; wins over the URL's.")
    connection_password: str | None = Field(None, alias="connection.password",
                                            description="Database password; wins over the URL's.")
    connection_attempts: int = Field(
        3, alias="connection.attempts", ge=1,
        description="Attempts to connect before the task fails (the database unreachable).")
    connection_backoff_ms: int = Field(10000, alias="connection.backoff.ms", ge=0,
                                       description="Wait between two connection attempts (ms).")


class JdbcSourceConfig(_Connection):
    mode: Annotated[Literal["bulk", "incrementing", "timestamp", "timestamp+incrementing"],
                    BeforeValidator(_lower)] = Field(
        description="How rows are found: `bulk` (the whole table every poll), `incrementing` "
                    "(new ids), `timestamp` (new or updated timestamps), "
                    "`timestamp+incrementing` (both: exact resumption).")
    topic_prefix: str = Field(alias="topic.prefix",
                              description="Topic name = prefix + table name (the prefix alone with "
                                          "`query`).")
    incrementing_column_name: str = Field(
        "", alias="incrementing.column.name",
        description="A strictly increasing, NOT NULL column (incrementing modes).")
    timestamp_column_name: CommaList = Field(
        (), alias="timestamp.column.name",
        description="Timestamp column(s) (timestamp modes); with several, the first that is "
                    "not null (COALESCE).")
    timestamp_delay_interval_ms: int = Field(
        0, alias="timestamp.delay.interval.ms", ge=0,
        description="Read a timestamp only this long (ms) after it, for transactions that "
                    "commit late.")
    table_whitelist: CommaList = Field((), alias="table.whitelist",
                                       description="The tables to read (default: every table).")
    table_include_list: CommaList = Field((), alias="table.include.list",
                                          description="Same as `table.whitelist`.")
    table_blacklist: CommaList = Field((), alias="table.blacklist",
                                       description="Tables not to read.")
    table_exclude_list: CommaList = Field((), alias="table.exclude.list",
                                          description="Same as `table.blacklist`.")
    table_types: CommaList = Field(("TABLE",), alias="table.types",
                                   description="`TABLE` and/or `VIEW`.")
    query: str = Field("", alias="query",
                       description="Read this query's rows instead of tables; the mode's condition "
                                   "is appended.")
    poll_interval_ms: int = Field(5000, alias="poll.interval.ms", ge=1,
                                  description="How often (ms) each table is queried.")
    batch_max_rows: int = Field(100, alias="batch.max.rows", ge=1,
                                description="Most rows one poll returns per table.")
    validate_non_null: bool = Field(
        True, alias="validate.non.null",
        description="Refuse nullable incrementing/timestamp columns at start.")
    key_mode: Annotated[Literal["none", "primary_key"], BeforeValidator(_lower)] = Field(
        "none", alias="key.mode",
        description="`none`: records have a null key, as with Confluent's connector (the "
                    "ValueToKey transform sets one); `primary_key`: the key is a struct of the "
                    "table's primary-key columns (null for tables without one and for `query`).")
    # Set by the connector in each task's config: the tables that task reads.
    tables: CommaList = Field((), alias="tables", json_schema_extra={"internal": True})

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
                           BeforeValidator(_lower)] = Field(
        "insert", alias="insert.mode",
        description="`insert`, `upsert` (insert or update by primary key) or `update`.")
    batch_size: int = Field(3000, alias="batch.size", ge=1,
                            description="Rows buffered per table before they are written.")
    delete_enabled: bool = Field(False, alias="delete.enabled",
                                 description="A tombstone (null value) deletes its row; needs "
                                             "`pk.mode=record_key`.")
    table_name_format: str = Field("${topic}", alias="table.name.format", min_length=1,
                                   description="The table of a topic; `${topic}` is replaced by "
                                               "the topic's name.")
    pk_mode: Annotated[Literal["none", "kafka", "record_key", "record_value"],
                       BeforeValidator(_lower)] = Field(
        "none", alias="pk.mode",
        description="Where the primary key comes from: `none`, `kafka` (topic, partition, "
                    "offset), `record_key`, `record_value`.")
    pk_fields: CommaList = Field((), alias="pk.fields",
                                 description="The primary-key columns: of a struct key or the value "
                                             "(default: all its fields), the one column of a "
                                             "primitive key, or three names with `kafka`.")
    fields_whitelist: CommaList = Field((), alias="fields.whitelist",
                                        description="The value fields to write (default: all).")
    fields_include_list: CommaList = Field((), alias="fields.include.list",
                                           description="Same as `fields.whitelist`.")
    auto_create: bool = Field(False, alias="auto.create",
                              description="Create a missing table from the record's schema.")
    auto_evolve: bool = Field(False, alias="auto.evolve",
                              description="Add columns for new fields of the record's schema.")

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
        raise ConfigError(config_problems(exc)) from None


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
