"""The ``_schemas`` topic's records in Confluent's JSON layout, so a topic written by
either registry reads in the other:

    key   {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
    value {"subject":S,"version":V,"id":N,"schemaType":T,"references":[...],"schema":TEXT,"deleted":B}
          (schemaType left out for AVRO; a null value: the version is deleted for good)
    key   {"keytype":"CONFIG","subject":S|null,"magic":0}   value {"compatibilityLevel":L} | null
    key   {"keytype":"MODE","subject":S|null,"magic":0}     value {"mode":M} | null
    key   {"keytype":"NOOP","magic":0}                      written by a leader to fence a read

Keys are encoded the same way every time, so compaction keeps the last value of each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "Reference",
    "SchemaVersion",
    "config_key",
    "config_value",
    "decode_key",
    "decode_schema_value",
    "mode_key",
    "mode_value",
    "noop_key",
    "schema_fields",
    "schema_key",
    "schema_value",
]


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = field(default=())
    deleted: bool = False


def _dumps(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj)


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_fields(sv: SchemaVersion) -> dict[str, Any]:
    """``schemaType`` (left out for AVRO), ``references`` (when any) and ``schema``, as both
    the topic and the REST API carry them."""
    out: dict[str, Any] = {}
    if sv.schema_type != "AVRO":
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [r.to_json() for r in sv.references]
    out["schema"] = sv.schema
    return out


def schema_value(sv: SchemaVersion) -> bytes:
    return _dumps({"subject": sv.subject, "version": sv.version, "id": sv.id, **schema_fields(sv),
                   "deleted": sv.deleted})


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "CONFIG", "subject": subject, "magic": 0})


def config_value(level: str) -> bytes:
    return _dumps({"compatibilityLevel": level})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "MODE", "subject": subject, "magic": 0})


def mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def noop_key() -> bytes:
    return _dumps({"keytype": "NOOP", "magic": 0})


def decode_key(key: bytes) -> dict[str, Any]:
    """The key as a dict; raises ValueError when it is not one of ours."""
    obj = orjson.loads(key)
    if not isinstance(obj, dict) or not isinstance(obj.get("keytype"), str):
        raise ValueError("not a registry key")
    return obj


def decode_schema_value(value: bytes) -> SchemaVersion:
    obj = orjson.loads(value)
    refs = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in obj.get("references") or ())
    return SchemaVersion(subject=obj["subject"], version=int(obj["version"]), id=int(obj["id"]),
                         schema_type=obj.get("schemaType") or "AVRO", schema=obj["schema"], references=refs,
                         deleted=bool(obj.get("deleted", False)))
