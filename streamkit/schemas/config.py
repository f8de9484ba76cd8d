"""The registry's settings under Confluent's names (schema-registry.properties)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from streamkit.schemas.compatibility import LEVELS

__all__ = ["SETTINGS", "SETTINGS_DOC", "RegistryConfig", "RegistryConfigError"]

SETTINGS = {
    "listeners": "http://127.0.0.1:8081",
    "kafkastore.bootstrap.servers": "127.0.0.1:9092",
    "kafkastore.topic": "_schemas",
    "kafkastore.topic.replication.factor": "1",
    "schema.compatibility.level": "BACKWARD",
    "schema.registry.group.id": "schema-registry",
    "leader.eligibility": "true",
    "host.name": "",
}


# What each setting does, for the reference (keys: exactly SETTINGS', a test checks).
SETTINGS_DOC = {
    "listeners": "The HTTP listener of the REST API, http://HOST:PORT (the first one is served).",
    "kafkastore.bootstrap.servers": "The brokers whose topic holds the schemas.",
    "kafkastore.topic": "The compacted single-partition topic the schemas live in.",
    "kafkastore.topic.replication.factor": "Replication factor of kafkastore.topic when the registry creates it.",
    "schema.compatibility.level": "The global compatibility level: NONE, BACKWARD, FORWARD, FULL or their _TRANSITIVE forms.",
    "schema.registry.group.id": "The group the registries of one cluster join to elect the leader that writes.",
    "leader.eligibility": "Whether this registry may become the leader (false: it forwards writes).",
    "host.name": "The host name this registry advertises to the others for forwarded writes.",
}


class RegistryConfigError(ValueError):
    """A setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class RegistryConfig:
    host: str
    port: int
    bootstrap: str
    topic: str
    replication: int
    compatibility_level: str
    group_id: str
    leader_eligible: bool
    advertised_host: str

    @staticmethod
    def from_settings(settings: Mapping[str, str]) -> RegistryConfig:
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise RegistryConfigError(f"unknown setting {unknown[0]} (known: {', '.join(sorted(SETTINGS))})")
        values = {**SETTINGS, **settings}
        listener = values["listeners"].split(",")[0].strip()
        parts = urlsplit(listener)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise RegistryConfigError(f"listeners: expected http://HOST:PORT, got {listener!r}")
        level = values["schema.compatibility.level"].upper()
        if level not in LEVELS:
            raise RegistryConfigError(f"schema.compatibility.level: one of {', '.join(LEVELS)}, got {level!r}")
        try:
            replication = int(values["kafkastore.topic.replication.factor"])
        except ValueError:
            raise RegistryConfigError("kafkastore.topic.replication.factor: expected an integer") from None
        eligible = values["leader.eligibility"].lower()
        if eligible not in ("true", "false"):
            raise RegistryConfigError("leader.eligibility: expected true or false")
        if not values["kafkastore.topic"]:
            raise RegistryConfigError("kafkastore.topic: must not be empty")
        return RegistryConfig(host=parts.hostname, port=parts.port, bootstrap=values["kafkastore.bootstrap.servers"],
                              topic=values["kafkastore.topic"], replication=replication, compatibility_level=level,
                              group_id=values["schema.registry.group.id"], leader_eligible=eligible == "true",
                              advertised_host=values["host.name"])
