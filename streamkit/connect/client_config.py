"""Kafka client settings for the runtime's consumers, producers and admin clients, under
Kafka's names.

As in Kafka Connect, the worker's ``consumer.*``/``producer.*``/``admin.*`` settings apply to
every sink consumer/source producer/admin client of a connector, and a connector's
``consumer.override.*``/``producer.override.*``/``admin.override.*`` override them for that
connector (Kafka's default override policy, ``All``). Each Kafka name maps to the aiokafka
argument of the same meaning; a name aiokafka has no equivalent for is a config error rather
than silently ignored.

The client security settings (``security.protocol``, ``sasl.*``, ``ssl.*``: see
``streamkit.clients.security``) at the top of the worker config are those of the worker's
own clients (its internal topics, its group membership, its admin calls) and the base of every
connector client; the prefixed ones override them per kind, then per connector. A Java
worker's config, which repeats them under ``producer.`` and ``consumer.``, works unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streamkit.clients.errors import ClientError
from streamkit.clients.security import SECURITY_SETTINGS, aiokafka_security
from streamkit.connect.errors import ConfigError

__all__ = ["KINDS", "client_kwargs", "client_problems", "security_kwargs", "worker_security"]


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

_ADMIN: dict[str, tuple[str, Callable[[str], Any]]] = {
    "request.timeout.ms": ("request_timeout_ms", _int),
    "client.id": ("client_id", str),
}

_TABLES = {"consumer": _CONSUMER, "producer": _PRODUCER, "admin": _ADMIN}
KINDS = tuple(_TABLES)


def _collect(kind: str, settings: Mapping[str, Any], prefix: str, out: dict[str, Any],
             problems: dict[str, list[str]]) -> None:
    table = _TABLES[kind]
    for key, value in settings.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        if name.startswith("override.") and not prefix.endswith("override."):
            continue
        if name in SECURITY_SETTINGS:  # read by security_kwargs
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


def _security_settings(settings: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {key[len(prefix):]: value for key, value in settings.items()
            if key.startswith(prefix) and key[len(prefix):] in SECURITY_SETTINGS}


def _security(settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    try:
        return aiokafka_security(settings)
    except ClientError as exc:
        raise ConfigError({where: [str(exc)]}) from None


def worker_security(worker: Mapping[str, Any]) -> dict[str, Any]:
    """aiokafka's security arguments of the worker's own clients: its top-level
    ``security.protocol``, ``sasl.*`` and ``ssl.*`` settings ({} for PLAINTEXT)."""
    return _security(_security_settings(worker, ""), "security.protocol")


def security_kwargs(kind: str, worker: Mapping[str, Any], connector: Mapping[str, Any]) -> dict[str, Any]:
    """aiokafka's security arguments of a connector's ``kind`` client: the worker's top-level
    settings, then its ``{kind}.*`` ones, then the connector's ``{kind}.override.*``."""
    merged = {**_security_settings(worker, ""), **_security_settings(worker, f"{kind}."),
              **_security_settings(connector, f"{kind}.override.")}
    where = f"{kind}.override.security.protocol" if any(
        k.startswith(f"{kind}.override.") for k in connector) else f"{kind}.security.protocol"
    return _security(merged, where)


def client_kwargs(kind: str, worker: Mapping[str, Any], connector: Mapping[str, Any]) -> dict[str, Any]:
    """aiokafka keyword arguments for a ``kind`` ("consumer", "producer" or "admin") client,
    its security arguments included."""
    out: dict[str, Any] = {}
    problems: dict[str, list[str]] = {}
    _collect(kind, {k: v for k, v in worker.items() if not k.startswith(f"{kind}.override.")}, f"{kind}.", out,
             problems)
    _collect(kind, connector, f"{kind}.override.", out, problems)
    if problems:
        raise ConfigError(problems)
    return {**out, **security_kwargs(kind, worker, connector)}


def _security_problems(connector: Mapping[str, Any], prefix: str, problems: dict[str, list[str]]) -> None:
    """Each security override alone (the worker's settings complete them when the task starts)."""
    for name, value in _security_settings(connector, prefix).items():
        alone: dict[str, Any] = {name: value}
        if name in ("sasl.mechanism", "sasl.username", "sasl.password", "sasl.jaas.config"):
            # placeholders for what the worker may give; a JAAS line is read for its own credentials
            given = {} if name == "sasl.jaas.config" else {"sasl.username": "u", "sasl.password": "p"}
            alone = {"security.protocol": "SASL_PLAINTEXT", **given, name: value}
        elif name.startswith("ssl.") and name != "ssl.truststore.type":
            alone = {"security.protocol": "SSL", name: value}
            if name in ("ssl.certificate.location", "ssl.key.location"):
                alone |= {"ssl.certificate.location": value, "ssl.key.location": value}
        try:
            aiokafka_security(alone)
        except ClientError as exc:
            problems.setdefault(prefix + name, []).append(str(exc))


def client_problems(connector: Mapping[str, Any]) -> dict[str, list[str]]:
    """Problems of a connector's ``consumer.override.*``/``producer.override.*``/``admin.override.*`` keys."""
    problems: dict[str, list[str]] = {}
    for kind in _TABLES:
        _collect(kind, connector, f"{kind}.override.", {}, problems)
        _security_problems(connector, f"{kind}.override.", problems)
    return problems
