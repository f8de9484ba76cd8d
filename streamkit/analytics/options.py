"""The options of a read, named and meant as in Spark's Kafka source.

Spark users bring their ``spark.read.format("kafka")`` options unchanged: the source is
``subscribe`` (comma-separated topics), ``subscribePattern`` (a regex) or ``assign`` (JSON
``{"topic": [0, 1]}``); the range is ``startingOffsets``/``endingOffsets`` (``earliest``,
``latest`` or JSON ``{"topic": {"0": 23, "1": -2}}`` where -2 is earliest and -1 latest) or
``startingTimestamp``/``endingTimestamp`` (one time for every partition) and
``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp`` (JSON per partition), which take
precedence in that order, as in Spark. ``kafka.*`` options go to the Kafka client with the
prefix removed (``kafka.bootstrap.servers``, ``kafka.isolation.level``, ``kafka.security.protocol``...).

Option names are case-insensitive, as Spark's are. Everything here is pure: parsing only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamkit.clients.errors import ClientError
from streamkit.clients.security import librdkafka_config

__all__ = ["EARLIEST", "LATEST", "OffsetSpec", "OptionError", "ReadOptions", "parse_offsets", "read_options"]

EARLIEST = -2
LATEST = -1

_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# Settings the reader owns: a user's value would break the read (Spark refuses them too).
_RESERVED = ("group.id", "enable.auto.commit", "auto.offset.reset", "enable.partition.eof",
             "key.deserializer", "value.deserializer")


class OptionError(ValueError):
    """An option that is missing, unknown in its value, or in conflict with another."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends.

    ``kind``: ``earliest``, ``latest``, ``offsets`` (``per_partition`` maps (topic, partition)
    to an offset, or -2/-1), ``timestamp`` (``timestamp`` for every partition) or
    ``timestamps`` (``per_partition`` maps to a time in ms)."""

    kind: str
    per_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int | None = None

    def to_json(self) -> str:
        """The JSON form of an ``offsets`` spec (``{"topic": {"0": 23}}``)."""
        out: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in sorted(self.per_partition.items()):
            out.setdefault(topic, {})[str(partition)] = offset
        return json.dumps(out)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """A read, parsed and checked (see the module doc for the option names)."""

    client_config: Mapping[str, str]  # librdkafka settings, bootstrap.servers included
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    include_headers: bool = False
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    # startingOffsetsByTimestampStrategy: "error" when a partition has no record at or after
    # the time, "latest" to start such a partition at its end
    by_timestamp_strategy: str = "error"
    # valueSchema (a streamkit option): the JSON of the Spark schema of the JSON values,
    # parsed into typed columns by the reader (``analytics.jsonvalues``)
    value_schema: str | None = None
    # valueFormat and schema.registry.url (streamkit options): values in the Schema
    # Registry's wire format, decoded into the columns of {topic}-value's schema
    value_format: str | None = None
    schema_registry_url: str | None = None

    @property
    def bootstrap(self) -> str:
        return self.client_config["bootstrap.servers"]


def parse_offsets(text: str, what: str) -> OffsetSpec:
    """``earliest``, ``latest`` or the per-partition JSON of ``startingOffsets``/``endingOffsets``."""
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word)
    per = _per_partition(text, what)
    for (topic, partition), offset in per.items():
        if offset < 0 and offset not in (EARLIEST, LATEST):
            raise OptionError(f"{what}: offset {offset} of {topic}-{partition} is negative "
                                  "(use -2 for earliest, -1 for latest)")
    return OffsetSpec("offsets", per)


def _per_partition(text: str, what: str) -> dict[tuple[str, int], int]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{what} must be 'earliest', 'latest' or JSON like "
                          f'{{"topic": {{"0": 23}}}}, not {text!r} ({exc.msg})') from None
    if not isinstance(data, dict):
        raise OptionError(f'{what} must be a JSON object like {{"topic": {{"0": 23}}}}')
    out: dict[tuple[str, int], int] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise OptionError(f'{what}: the value of {topic!r} must be an object like {{"0": 23}}')
        for partition, offset in partitions.items():
            try:
                out[(topic, int(partition))] = int(offset)
            except (TypeError, ValueError):
                raise OptionError(f"{what}: {topic}-{partition}: {offset!r} is not an integer") from None
    return out


def _timestamp(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"{what} must be a time in milliseconds since the epoch, not {text!r}") from None
    if value < 0:
        raise OptionError(f"{what} must not be negative")
    return value


def _position(options: Mapping[str, str], side: str, default: str) -> OffsetSpec:
    """``side`` is ``starting`` or ``ending``; timestamps win over offsets, as in Spark."""
    if f"{side}timestamp" in options:
        return OffsetSpec("timestamp", timestamp=_timestamp(options[f"{side}timestamp"], f"{side}Timestamp"))
    if f"{side}offsetsbytimestamp" in options:
        name = f"{side}OffsetsByTimestamp"
        per = _per_partition(options[f"{side}offsetsbytimestamp"], name)
        for (topic, partition), ts in per.items():
            if ts < 0:
                raise OptionError(f"{name}: the time of {topic}-{partition} must not be negative")
        return OffsetSpec("timestamps", per)
    return parse_offsets(options.get(f"{side}offsets", default), f"{side}Offsets")


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"{name} must be a positive integer, not {text!r}") from None
    if value < 1:
        raise OptionError(f"{name} must be a positive integer, not {value}")
    return value


def _bool(options: Mapping[str, str], name: str) -> bool:
    text = str(options.get(name.lower(), "false")).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"{name} must be true or false, not {text!r}")
    return text == "true"


def _assign(text: str) -> tuple[tuple[str, int], ...]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise OptionError(f'assign must be JSON like {{"topic": [0, 1]}}, not {text!r}')
    try:
        return tuple(sorted((topic, int(p)) for topic, parts in data.items() for p in parts))
    except (TypeError, ValueError):
        raise OptionError(f"assign: partitions must be integers in {text!r}") from None


def client_config(options: Mapping[str, Any]) -> dict[str, str]:
    """The ``kafka.*`` options without their prefix (librdkafka names match Kafka's)."""
    config = {k[len("kafka."):]: str(v) for k, v in options.items() if k.lower().startswith("kafka.")}
    try:
        config = librdkafka_config({k.lower(): v for k, v in config.items()})
    except ClientError as exc:
        raise OptionError(f"kafka.{exc}") from None
    if not config.get("bootstrap.servers"):
        raise OptionError("option kafka.bootstrap.servers is required (host:port of a broker)")
    for name in _RESERVED:
        if name in config:
            raise OptionError(f"kafka.{name} is not supported: the reader manages it "
                              "(it reads offset ranges and never commits)")
    level = config.setdefault("isolation.level", "read_uncommitted")
    if level not in _ISOLATION_LEVELS:
        raise OptionError(f"kafka.isolation.level must be read_uncommitted or read_committed, not {level!r}")
    return config


def read_options(options: Mapping[str, Any], *, streaming: bool = False) -> ReadOptions:
    """Parse Spark-style options (any case) into a ``ReadOptions``; ``OptionError`` says
    what is wrong. A batch read defaults to earliest..latest; a stream starts at latest."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    config = client_config(opts)
    given = [name for name in ("subscribe", "subscribePattern", "assign") if opts.get(name.lower())]
    if len(given) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern or assign is required"
                          + (f" (got {', '.join(given)})" if given else ""))
    subscribe = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
    if given == ["subscribe"] and not subscribe:
        raise OptionError("subscribe must name at least one topic")
    starting = _position(opts, "starting", "latest" if streaming else "earliest")
    if streaming:
        if any(k.startswith("ending") for k in opts):
            raise OptionError("endingOffsets and endingTimestamp apply to batch reads only; a stream has no end")
        ending = OffsetSpec("latest")
    else:
        ending = _position(opts, "ending", "latest")
        if starting.kind == "latest" or any(o == LATEST for o in starting.per_partition.values()
                                            if starting.kind == "offsets"):
            raise OptionError("startingOffsets cannot be latest (-1) for a batch read: it would read nothing")
        if ending.kind == "earliest" or any(o == EARLIEST for o in ending.per_partition.values()
                                            if ending.kind == "offsets"):
            raise OptionError("endingOffsets cannot be earliest (-2) for a batch read: it would read nothing")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
    return ReadOptions(
        client_config=config,
        subscribe=subscribe,
        subscribe_pattern=opts.get("subscribepattern") or None,
        assign=_assign(opts["assign"]) if opts.get("assign") else (),
        starting=starting,
        ending=ending,
        include_headers=_bool(opts, "includeHeaders"),
        min_partitions=_positive(opts, "minPartitions"),
        max_offsets_per_trigger=_positive(opts, "maxOffsetsPerTrigger"),
        by_timestamp_strategy=strategy,
        value_schema=opts.get("valueschema") or None,
        **_registry_options(opts, subscribe),
    )


def _registry_options(opts: Mapping[str, str], subscribe: tuple[str, ...]) -> dict[str, str | None]:
    value_format = opts.get("valueformat") or None
    url = opts.get("schema.registry.url") or None
    if value_format is None:
        if url is not None:
            raise OptionError("schema.registry.url is given without valueFormat (avro, json-schema or protobuf)")
        return {}
    if value_format.lower() not in ("avro", "json-schema", "protobuf"):
        raise OptionError(f"valueFormat must be avro, json-schema or protobuf, not {value_format!r}")
    if url is None:
        raise OptionError("valueFormat needs schema.registry.url (the Schema Registry's URL)")
    if len(subscribe) != 1 or opts.get("valueschema"):
        raise OptionError("valueFormat reads one topic (subscribe=TOPIC), without valueSchema: "
                          "the columns are its registered schema's")
    return {"value_format": value_format.lower(), "schema_registry_url": url}
