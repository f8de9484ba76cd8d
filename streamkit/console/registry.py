"""A Schema Registry, as the console uses it (Confluent's REST API: subjects, versions,
compatibility config, register and delete), and the decoding of records in the registry's
wire format (magic byte 0, the schema id as 4 bytes big-endian, then the encoded record):
Avro, JSON Schema and Protobuf records show as JSON, with the id of the schema they were
written with. A Protobuf record has the message-index array before its encoding (which
message of the schema's file it is), and shows in Protobuf's JSON mapping with the .proto's
field names, as ``kafka-protobuf-console-consumer`` prints it."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import fastavro
from google.protobuf import descriptor_pb2, json_format, message_factory
from google.protobuf.message import DecodeError

from streamkit.console.errors import ConsoleError
from streamkit.console.rest import HttpClients, RestClient
from streamkit.schemas.protobuf_wire import (
    build_file,
    decode_indexes,
    file_descriptor_proto,
    message_at,
)

__all__ = ["COMPATIBILITY_LEVELS", "SCHEMA_TYPES", "RegistryClient", "SchemaDecoder", "schema_id"]

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE", "NONE")
_HEADER = struct.Struct(">bI")
_MAX_SCHEMAS = 1000  # decoders kept by id; a registry rarely has more in use


def _s(subject: str) -> str:
    return quote(subject, safe="")


class RegistryClient(RestClient):
    def __init__(self, url: str, http: HttpClients | None = None) -> None:
        super().__init__(url, "the Schema Registry", "application/vnd.schemaregistry.v1+json", http)

    async def subjects(self) -> list[str]:
        return sorted(str(s) for s in await self.request("GET", "/subjects") or [])

    async def versions(self, subject: str) -> list[int]:
        return sorted(int(v) for v in await self.request("GET", f"/subjects/{_s(subject)}/versions") or [])

    async def version(self, subject: str, version: int | str = "latest") -> dict[str, Any]:
        found = await self.request("GET", f"/subjects/{_s(subject)}/versions/{version}")
        return dict(found or {})

    async def by_id(self, schema_id: int) -> dict[str, Any]:
        return dict(await self.request("GET", f"/schemas/ids/{schema_id}") or {})

    async def compatibility(self, subject: str | None = None) -> str:
        """The subject's own level (its config, else the global one) or the global one."""
        if subject is None:
            found = await self.request("GET", "/config")
        else:
            found = await self.request("GET", f"/config/{_s(subject)}", params={"defaultToGlobal": "true"})
        return str((found or {}).get("compatibilityLevel") or (found or {}).get("compatibility") or "")

    async def set_compatibility(self, level: str, subject: str | None = None) -> None:
        if level not in COMPATIBILITY_LEVELS:
            raise ConsoleError(f"compatibility must be one of {', '.join(COMPATIBILITY_LEVELS)}, not {level!r}")
        path = "/config" if subject is None else f"/config/{_s(subject)}"
        await self.request("PUT", path, {"compatibility": level})

    async def register(self, subject: str, schema: str, schema_type: str) -> int:
        if schema_type not in SCHEMA_TYPES:
            raise ConsoleError(f"schema type must be one of {', '.join(SCHEMA_TYPES)}, not {schema_type!r}")
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        return int((await self.request("POST", f"/subjects/{_s(subject)}/versions", body))["id"])

    async def delete_subject(self, subject: str) -> list[int]:
        """Soft-delete, then hard-delete: the console's delete leaves nothing behind."""
        deleted = await self.request("DELETE", f"/subjects/{_s(subject)}")
        await self.request("DELETE", f"/subjects/{_s(subject)}", params={"permanent": "true"})
        return [int(v) for v in deleted or []]

    async def delete_version(self, subject: str, version: int) -> None:
        await self.request("DELETE", f"/subjects/{_s(subject)}/versions/{version}")
        await self.request("DELETE", f"/subjects/{_s(subject)}/versions/{version}", params={"permanent": "true"})


def schema_id(data: bytes | None) -> int | None:
    """The schema id of a record in the registry's wire format, else None."""
    if data is None or len(data) <= _HEADER.size or data[0] != 0:
        return None
    return int(_HEADER.unpack_from(data)[1])


class SchemaDecoder:
    """Decodes records by the schema their id names, fetched once per id (``prepare``)."""

    def __init__(self, client: RegistryClient) -> None:
        self.client = client
        self._schemas: dict[int, tuple[str, Any] | None] = {}  # None: no such schema (or not one we decode)

    async def prepare(self, datas: Iterable[bytes | None]) -> None:
        """Fetch the schemas of ``datas`` not yet known; a registry that does not answer
        leaves them undecoded (shown as bytes) rather than failing the page."""
        wanted = {i for i in (schema_id(d) for d in datas) if i is not None and i not in self._schemas}
        for sid in sorted(wanted):
            try:
                found = await self.client.by_id(sid)
            except ConsoleError:
                continue
            kind = str(found.get("schemaType") or "AVRO")
            parsed: Any = None
            try:
                if kind == "AVRO":
                    parsed = fastavro.parse_schema(json.loads(found["schema"]))
                elif kind == "PROTOBUF":
                    files = await self._proto_references(found.get("references") or [], [])
                    parsed = build_file([*files, file_descriptor_proto(found["schema"], f"schema-{sid}.proto")])
            except (ValueError, KeyError, TypeError, fastavro.schema.SchemaParseException, ConsoleError):
                self._schemas[sid] = None
                continue
            if len(self._schemas) >= _MAX_SCHEMAS:
                self._schemas.pop(next(iter(self._schemas)))
            self._schemas[sid] = (kind, parsed) if kind in SCHEMA_TYPES else None

    async def _proto_references(self, references: list[dict[str, Any]],
                                out: list[descriptor_pb2.FileDescriptorProto]) -> list[descriptor_pb2.FileDescriptorProto]:
        """The files a Protobuf schema imports (its references, theirs first), as
        ``ProtobufTypes`` builds them for the serdes."""
        for reference in references:
            if any(f.name == reference["name"] for f in out):
                continue
            version = await self.client.version(str(reference["subject"]), int(reference["version"]))
            await self._proto_references(version.get("references") or [], out)
            out.append(file_descriptor_proto(version["schema"], str(reference["name"])))
        return out

    def decode(self, data: bytes) -> tuple[str, str, int] | None:
        """(kind, pretty JSON, schema id), or None when ``data`` is not a record it can decode."""
        sid = schema_id(data)
        known = self._schemas.get(sid) if sid is not None else None
        if sid is None or known is None:
            return None
        kind, parsed = known
        body = memoryview(data)[_HEADER.size:]
        try:
            if kind == "AVRO":
                value = fastavro.schemaless_reader(io.BytesIO(body), parsed)
                return "avro", json.dumps(value, indent=2, ensure_ascii=False, default=_plain), sid
            if kind == "PROTOBUF":
                indexes, offset = decode_indexes(body, 0)
                message = message_factory.GetMessageClass(message_at(parsed, indexes)).FromString(bytes(body[offset:]))
                shown = json_format.MessageToDict(message, preserving_proto_field_name=True)
                return "protobuf", json.dumps(shown, indent=2, ensure_ascii=False), sid
            return "json-schema", json.dumps(json.loads(bytes(body)), indent=2, ensure_ascii=False), sid
        except (ValueError, EOFError, IndexError, TypeError, StopIteration, DecodeError):
            return None


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex(" ")
    return str(value)
