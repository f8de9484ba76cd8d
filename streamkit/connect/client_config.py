"""Kafka client settings for the runtime's consumers and producers, under Kafka's names.

As in Kafka Connect, the worker's ``consumer.*``/``producer.*`` settings apply to every sink
consumer/source producer, and a connector's ``consumer.override.*``/``producer.override.*``
override them for that connector (Kafka's default override policy, ``All``). Each Kafka
name maps to the aiokafka argument of the same meaning; a name aiokafka has no equivalent
for is a config error rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streamkit.connect.errors import ConfigError

__all__ = ["client_kwargs", "client_problems"]


def _int(value: str) -> int:
    return int(value)


def _bool(value: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return text == "true"


def _acks(value: str) -> Any:
    text = value.strip().lower()
    if text in ("all", "-1"):
        return "all"
    if text in ("0", "1"):
        return int(text)
    raise ValueError(f"acks must be all, -1, 0 or 1, got {value!r}")


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return parse


_CONSUMER: dict[str, tuple[str, Callable[[str], Any]]] = {
    "auto.offset.reset": ("auto_offset_reset", _choice("earliest", "latest", "none")),
    "max.poll.records": ("max_poll_records", _int),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _int),
    "fetch.min.bytes": ("fetch_min_bytes", _int),
    "fetch.max.bytes": ("fetch_max_bytes", _int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _int),
    "session.timeout.ms": ("session_timeout_ms", _int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", _int),
    "max.poll.interval.ms": ("max_poll_interval_ms", _int),
    "request.timeout.ms": ("request_timeout_ms", _int),
    "isolation.level": ("isolation_level", _choice("read_uncommitted", "read_committed")),
    "client.id": ("client_id", str),
    "check.crcs": ("check_crcs", _bool),
}

_PRODUCER: dict[str, tuple[str, Callable[[str], Any]]] = {
    "acks": ("acks", _acks),
    "linger.ms": ("linger_ms", _int),
    "batch.size": ("max_batch_size", _int),
    "compression.type": ("compression_type", _choice("none", "gzip", "snappy", "lz4", "zstd")),
    "max.request.size": ("max_request_size", _int),
    "enable.idempotence": ("enable_idempotence", _bool),
    "transaction.timeout.ms": ("transaction_timeout_ms", _int),
    "request.timeout.ms": ("request_timeout_ms", _int),
    "client.id": ("client_id", str),
}

_TABLES = {"consumer": _CONSUMER, "producer": _PRODUCER}


def _collect(kind: str, settings: Mapping[str, Any], prefix: str, out: dict[str, Any],
             problems: dict[str, list[str]]) -> None:
    table = _TABLES[kind]
    for key, value in settings.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        if kind == "consumer" and prefix == "consumer." and name.startswith("override."):
            continue
        found = table.get(name)
        if found is None:
            problems.setdefault(key, []).append(
                f"unsupported {kind} setting {name!r}; supported: {', '.join(sorted(table))}")
            continue
        argument, parse = found
        try:
            parsed = parse(str(value))
        except ValueError as exc:
            problems.setdefault(key, []).append(str(exc))
            continue
        if argument == "compression_type" and parsed == "none":
            parsed = None
        out[argument] = parsed


def client_kwargs(kind: str, worker: Mapping[str, Any], connector: Mapping[str, Any]) -> dict[str, Any]:
    """aiokafka keyword arguments for a ``kind`` ("consumer" or "producer") client."""
    out: dict[str, Any] = {}
    problems: dict[str, list[str]] = {}
    _collect(kind, {k: v for k, v in worker.items() if not k.startswith(f"{kind}.override.")}, f"{kind}.", out,
             problems)
    _collect(kind, connector, f"{kind}.override.", out, problems)
    if problems:
        raise ConfigError(problems)
    return out


def client_problems(connector: Mapping[str, Any]) -> dict[str, list[str]]:
    """Problems of a connector's ``consumer.override.*``/``producer.override.*`` keys."""
    problems: dict[str, list[str]] = {}
    for kind in _TABLES:
        _collect(kind, connector, f"{kind}.override.", {}, problems)
    return problems
