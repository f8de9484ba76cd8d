"""The registry's state, rebuilt by applying the ``_schemas`` topic's records in order:
subjects and their versions, schema ids, and the compatibility levels and modes set
globally (subject ``None``) and per subject. Pure: no I/O; the store feeds it."""

from __future__ import annotations

import logging

import orjson

from streamkit.schemas import errors
from streamkit.schemas.errors import RegistryError
from streamkit.schemas.records import SchemaVersion, decode_key, decode_schema_value

__all__ = ["RegistryState"]

log = logging.getLogger(__name__)


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.id_versions: dict[int, set[tuple[str, int]]] = {}
        # the highest id ever seen, also one whose versions were later deleted for good:
        # an id is never handed out twice
        self.max_id = 0
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.records_applied = 0

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        self.records_applied += 1
        if key is None:
            return
        try:
            fields = decode_key(key)
            keytype = fields["keytype"]
            if keytype == "SCHEMA":
                self._apply_schema(str(fields["subject"]), int(fields["version"]), value)
            elif keytype == "CONFIG":
                self._apply_setting(self.configs, fields.get("subject"), value, "compatibilityLevel")
            elif keytype == "MODE":
                self._apply_setting(self.modes, fields.get("subject"), value, "mode")
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring a malformed registry record %r: %s", key[:200], exc)

    def _apply_schema(self, subject: str, version: int, value: bytes | None) -> None:
        versions = self.subjects.setdefault(subject, {})
        old = versions.pop(version, None)
        if old is not None:
            self.id_versions.get(old.id, set()).discard((subject, version))
            if not self.id_versions.get(old.id):
                self.id_versions.pop(old.id, None)
        if value is None:
            if not versions:
                del self.subjects[subject]
            return
        sv = decode_schema_value(value)
        versions[version] = sv
        self.id_versions.setdefault(sv.id, set()).add((subject, version))
        self.max_id = max(self.max_id, sv.id)

    @staticmethod
    def _apply_setting(table: dict[str | None, str], subject: object, value: bytes | None, name: str) -> None:
        key = None if subject is None else str(subject)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = str(orjson.loads(value)[name])

    # queries

    def subject_names(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s, versions in self.subjects.items()
                      if s.startswith(prefix) and any(deleted or not v.deleted for v in versions.values()))

    def live_versions(self, subject: str) -> list[SchemaVersion]:
        """The subject's versions not deleted, oldest first."""
        return [sv for _, sv in sorted(self.subjects.get(subject, {}).items()) if not sv.deleted]

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, oldest first (``deleted``: soft-deleted ones too); 40401 when
        there are none."""
        found = [sv for _, sv in sorted(self.subjects.get(subject, {}).items()) if deleted or not sv.deleted]
        if not found:
            raise RegistryError(errors.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        return found

    def version(self, subject: str, version: int, deleted: bool = False) -> SchemaVersion:
        """One version (``-1``: the latest); 40401 for an unknown subject, 40402 for an
        unknown version."""
        found = self.versions(subject, deleted)
        if version == -1:
            return found[-1]
        for sv in found:
            if sv.version == version:
                return sv
        raise RegistryError(errors.VERSION_NOT_FOUND, f"Version {version} not found.")

    def by_id(self, schema_id: int, subject: str | None = None) -> SchemaVersion:
        where = sorted(self.id_versions.get(schema_id, ()))
        if subject:
            where = [w for w in where if w[0] == subject] or where
        if not where:
            raise RegistryError(errors.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        subject_name, version = where[0]
        return self.subjects[subject_name][version]

    def id_usages(self, schema_id: int, deleted: bool = False) -> list[SchemaVersion]:
        found = [self.subjects[s][v] for s, v in sorted(self.id_versions.get(schema_id, ()))]
        found = [sv for sv in found if deleted or not sv.deleted]
        if not found and schema_id not in self.id_versions:
            raise RegistryError(errors.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        return found

    def find_id(self, schema_type: str, schema: str, references: tuple[object, ...]) -> int | None:
        """The id already given to this exact schema (type, text and references), in any subject."""
        for schema_id, where in self.id_versions.items():
            s, v = next(iter(where))
            sv = self.subjects[s][v]
            if sv.schema_type == schema_type and sv.schema == schema and sv.references == references:
                return schema_id
        return None

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted({sv.id for versions in self.subjects.values() for sv in versions.values()
                       if not sv.deleted and any(r.subject == subject and r.version == version for r in sv.references)})

    def next_version(self, subject: str) -> int:
        return max(self.subjects.get(subject, {}).keys(), default=0) + 1

    def is_empty(self) -> bool:
        return not self.subjects
