"""The registry's operations over its state. Reads answer from the local state; writes
(``register``, deletes, ``/config`` and ``/mode`` changes) run only on the leader, one at
a time: it catches up with the topic, plans the records from the state, writes them and
waits until it has applied them, so ids come from everything any leader wrote before."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from streamkit.schemas import errors
from streamkit.schemas.compatibility import (
    LEVELS,
    SCHEMA_TYPES,
    ParsedSchema,
    check_compatibility,
    parse_schema,
)
from streamkit.schemas.errors import RegistryError
from streamkit.schemas.kafkastore import KafkaStore
from streamkit.schemas.records import (
    Reference,
    SchemaVersion,
    config_key,
    config_value,
    mode_key,
    mode_value,
    schema_key,
    schema_value,
)
from streamkit.schemas.state import RegistryState

__all__ = ["MODES", "NewSchema", "Registry"]

MODES = ("READWRITE", "READONLY", "IMPORT")

Records = list[tuple[bytes, bytes | None]]


@dataclass(frozen=True)
class NewSchema:
    """A schema as a client sends it (``POST /subjects/{s}/versions`` and lookups)."""
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    id: int | None = None
    version: int | None = None

    @staticmethod
    def from_json(body: dict[str, Any]) -> NewSchema:
        schema = body.get("schema")
        if not isinstance(schema, str):
            raise RegistryError(errors.INVALID_SCHEMA, "Invalid schema: the body needs a \"schema\" string")
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type not in SCHEMA_TYPES:
            raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema type {schema_type!r}: one of {list(SCHEMA_TYPES)}")
        refs = []
        for ref in body.get("references") or ():
            try:
                refs.append(Reference(str(ref["name"]), str(ref["subject"]), int(ref["version"])))
            except (KeyError, TypeError, ValueError):
                raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema reference {ref!r}: needs name, subject "
                                                           "and version") from None
        sid, version = body.get("id"), body.get("version")
        for name, value in (("id", sid), ("version", version)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise RegistryError(errors.INVALID_SCHEMA, f"Invalid {name} {value!r}")
        return NewSchema(schema, schema_type, tuple(refs), sid if sid else None, version if version else None)


class Registry:
    def __init__(self, state: RegistryState, default_level: str) -> None:
        self.state = state
        self.default_level = default_level
        self.store: KafkaStore | None = None
        self._write_lock = asyncio.Lock()
        self._parsed: dict[tuple[str, str, tuple[Reference, ...]], ParsedSchema] = {}

    # reading

    def level(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.configs:
            return self.state.configs[subject]
        return self.state.configs.get(None, self.default_level)

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    def _reference_texts(self, refs: tuple[Reference, ...], seen: set[tuple[str, int]] | None = None) -> list[str]:
        """The referenced schemas' texts, dependencies first."""
        seen = set() if seen is None else seen
        out: list[str] = []
        for ref in refs:
            try:
                sv = self.state.version(ref.subject, ref.version, deleted=False)
            except RegistryError:
                raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema: reference {ref.name} to subject "
                                                           f"{ref.subject} version {ref.version} not found") from None
            if (sv.subject, sv.version) in seen:
                continue
            seen.add((sv.subject, sv.version))
            out += self._reference_texts(sv.references, seen)
            out.append(sv.schema)
        return out

    def parse(self, schema_type: str, text: str, refs: tuple[Reference, ...], normalize: bool = False) -> ParsedSchema:
        key = (schema_type, text, refs)
        if not normalize and key in self._parsed:
            return self._parsed[key]
        try:
            parsed = parse_schema(schema_type, text, self._reference_texts(refs), normalize)
        except ValueError as exc:
            raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema: {exc}") from None
        if not normalize:
            self._parsed[key] = parsed
        return parsed

    def parse_stored(self, sv: SchemaVersion) -> ParsedSchema:
        return self.parse(sv.schema_type, sv.schema, sv.references)

    def lookup(self, subject: str, new: NewSchema, normalize: bool, deleted: bool) -> SchemaVersion:
        versions = self.state.versions(subject, deleted=deleted)
        canonical = self.parse(new.schema_type, new.schema, new.references, normalize).canonical
        for sv in reversed(versions):
            if sv.schema_type == new.schema_type and sv.references == new.references and (
                    sv.schema == canonical or self.parse_stored(sv).canonical == canonical):
                return sv
        raise RegistryError(errors.SCHEMA_NOT_FOUND, "Schema not found")

    def compatibility_problems(self, subject: str, new: NewSchema, version: int | None, normalize: bool = False
                               ) -> list[str]:
        """Why ``new`` breaks the subject's level, against ``version`` (None: the versions
        the level names)."""
        parsed = self.parse(new.schema_type, new.schema, new.references, normalize)
        level = self.level(subject)
        if version is None:
            earlier = self.state.live_versions(subject)
        else:
            earlier = [self.state.version(subject, version)]
        return check_compatibility(level, parsed, [(sv.version, self.parse_stored(sv)) for sv in earlier])

    # writing (leader only)

    async def _write(self, records: Records) -> None:
        if records:
            assert self.store is not None
            await self.store.send(records)

    async def _catch_up(self) -> None:
        assert self.store is not None
        await self.store.read_to_end()

    def _writable(self, subject: str | None) -> None:
        if self.mode(subject) == "READONLY":
            what = f"Subject {subject}" if subject is not None else "The registry"
            raise RegistryError(errors.OPERATION_NOT_PERMITTED, f"{what} is in read-only mode")

    async def register(self, subject: str, new: NewSchema, normalize: bool) -> SchemaVersion:
        async with self._write_lock:
            await self._catch_up()
            sv, records = self._plan_register(subject, new, normalize)
            await self._write(records)
            return sv

    def _plan_register(self, subject: str, new: NewSchema, normalize: bool) -> tuple[SchemaVersion, Records]:
        self._writable(subject)
        mode = self.mode(subject)
        if new.id is not None and mode != "IMPORT":
            raise RegistryError(errors.OPERATION_NOT_PERMITTED,
                                f"Subject {subject} is not in import mode: a schema id cannot be given")
        parsed = self.parse(new.schema_type, new.schema, new.references, normalize)
        canonical = parsed.canonical
        for sv in reversed(self.state.live_versions(subject)):
            same = sv.schema_type == new.schema_type and sv.references == new.references and sv.schema == canonical
            if same and (new.id is None or new.id == sv.id):
                return sv, []
        if mode != "IMPORT":
            problems = self.compatibility_problems(subject, new, None, normalize)
            if problems:
                raise RegistryError(errors.INCOMPATIBLE_SCHEMA,
                                    f"Schema being registered is incompatible with an earlier schema for subject "
                                    f"\"{subject}\", details: [{', '.join(problems)}]")
        existing = self.state.find_id(new.schema_type, canonical, new.references)
        if new.id is not None:
            if new.id in self.state.id_versions and existing != new.id:
                raise RegistryError(errors.OPERATION_NOT_PERMITTED,
                                    f"Overwrite new schema with id {new.id} is not permitted.")
            schema_id = new.id
        else:
            schema_id = existing if existing is not None else self.state.max_id + 1
        version = new.version if new.version is not None and mode == "IMPORT" else self.state.next_version(subject)
        if version in self.state.subjects.get(subject, {}):
            raise RegistryError(errors.OPERATION_NOT_PERMITTED, f"Version {version} of subject {subject} exists")
        sv = SchemaVersion(subject, version, schema_id, new.schema_type, canonical, new.references)
        return sv, [(schema_key(subject, version), schema_value(sv))]

    async def delete_version(self, subject: str, version: int, permanent: bool) -> int:
        async with self._write_lock:
            await self._catch_up()
            self._writable(subject)
            sv = self.state.version(subject, version, deleted=True)
            if version == -1:
                live = self.state.live_versions(subject)
                sv = live[-1] if live and not permanent else sv
            if self.state.referenced_by(subject, sv.version):
                raise RegistryError(errors.REFERENCE_EXISTS, f"One or more references exist to the schema "
                                                             f"{{subject={subject},version={sv.version}}}.")
            if permanent:
                if not sv.deleted:
                    raise RegistryError(errors.VERSION_NOT_SOFT_DELETED,
                                        f"Subject '{subject}' Version {sv.version} was not deleted first before "
                                        "being permanently deleted")
                await self._write([(schema_key(subject, sv.version), None)])
            else:
                if sv.deleted:
                    raise RegistryError(errors.VERSION_SOFT_DELETED,
                                        f"Subject '{subject}' Version {sv.version} was soft deleted. Set "
                                        "permanent=true to delete permanently")
                gone = SchemaVersion(**{**sv.__dict__, "deleted": True})
                await self._write([(schema_key(subject, sv.version), schema_value(gone))])
            return sv.version

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self._write_lock:
            await self._catch_up()
            self._writable(subject)
            versions = self.state.versions(subject, deleted=True)
            live = [sv for sv in versions if not sv.deleted]
            for sv in live if not permanent else versions:
                if self.state.referenced_by(subject, sv.version):
                    raise RegistryError(errors.REFERENCE_EXISTS, f"One or more references exist to the schema "
                                                                 f"{{subject={subject},version={sv.version}}}.")
            if permanent:
                if live:
                    raise RegistryError(errors.SUBJECT_NOT_SOFT_DELETED,
                                        f"Subject '{subject}' was not deleted first before being permanently deleted")
                records: Records = [(schema_key(subject, sv.version), None) for sv in versions]
                if subject in self.state.configs:
                    records.append((config_key(subject), None))
                if subject in self.state.modes:
                    records.append((mode_key(subject), None))
                await self._write(records)
                return [sv.version for sv in versions]
            if not live:
                raise RegistryError(errors.SUBJECT_SOFT_DELETED,
                                    f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently")
            await self._write([(schema_key(subject, sv.version), schema_value(SchemaVersion(**{**sv.__dict__,
                                                                                              "deleted": True})))
                               for sv in live])
            return [sv.version for sv in live]

    async def set_level(self, subject: str | None, level: str | None) -> str | None:
        """Set (None: remove) a compatibility level; the level it replaces."""
        if level is not None and level not in LEVELS:
            raise RegistryError(errors.INVALID_COMPATIBILITY_LEVEL,
                                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                "backward_transitive, forward_transitive, and full_transitive")
        async with self._write_lock:
            await self._catch_up()
            old = self.state.configs.get(subject)
            if level is None and subject is not None and old is None:
                if subject not in self.state.subjects:
                    raise RegistryError(errors.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
                raise RegistryError(errors.SUBJECT_CONFIG_NOT_FOUND,
                                    f"Subject '{subject}' does not have subject-level compatibility configured")
            await self._write([(config_key(subject), config_value(level) if level is not None else None)])
            return old if old is not None else (self.level(None) if subject is None else None)

    async def set_mode(self, subject: str | None, mode: str | None, force: bool) -> str | None:
        if mode is not None and mode not in MODES:
            raise RegistryError(errors.INVALID_MODE, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY, "
                                                     "IMPORT")
        async with self._write_lock:
            await self._catch_up()
            if mode == "IMPORT" and not force:
                has_schemas = (not self.state.is_empty() if subject is None
                               else bool(self.state.subjects.get(subject)))
                if has_schemas:
                    raise RegistryError(errors.OPERATION_NOT_PERMITTED,
                                        "Cannot import since found existing subjects")
            old = self.state.modes.get(subject)
            if mode is None and subject is not None and old is None:
                raise RegistryError(errors.SUBJECT_MODE_NOT_FOUND,
                                    f"Subject '{subject}' does not have subject-level mode configured")
            await self._write([(mode_key(subject), mode_value(mode) if mode is not None else None)])
            return old
