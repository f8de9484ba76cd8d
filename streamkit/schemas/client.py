"""A small synchronous client of a Confluent-compatible Schema Registry (streamkit's or
Confluent's), for the ``streamkit schemas`` commands: each failure is a
``RegistryClientError`` whose message is one line (the registry's own, with its code).

A registry served over https with basic authentication is reached with Confluent's client
settings (``registry_options``): ``basic.auth.user.info=USER:PASSWORD`` (with
``basic.auth.credentials.source=USER_INFO``, the default; ``URL`` takes them from
``https://user:password@host``) and ``schema.registry.ssl.ca.location`` (or
``schema.registry.ssl.truststore.location``), the PEM file of the CAs that signed its
certificate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["REGISTRY_CLIENT_SETTINGS", "RegistryClient", "RegistryClientError", "SubjectVersion", "registry_options",
           "schema_type_of"]

# Confluent's names of a registry client's security settings (serializers, converters, the CLI).
REGISTRY_CLIENT_SETTINGS = ("basic.auth.credentials.source", "basic.auth.user.info",
                            "schema.registry.basic.auth.user.info", "schema.registry.ssl.ca.location",
                            "schema.registry.ssl.truststore.location")

_TYPES_BY_SUFFIX = {".avsc": "AVRO", ".avro": "AVRO", ".proto": "PROTOBUF", ".json": "JSON"}


class RegistryClientError(Exception):
    """A request that failed: ``code`` is the registry's error_code (0: no answer)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SubjectVersion:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str


def schema_type_of(path: Path, given: str | None) -> str:
    """The schema type given, else the one the file's suffix names (.avsc, .proto, .json)."""
    if given is not None:
        upper = given.upper().replace("-", "_")
        kind = {"JSON_SCHEMA": "JSON"}.get(upper, upper)
        if kind not in ("AVRO", "JSON", "PROTOBUF"):
            raise RegistryClientError(f"--type must be avro, json or protobuf, not {given!r}")
        return kind
    if path.suffix.lower() in _TYPES_BY_SUFFIX:
        return _TYPES_BY_SUFFIX[path.suffix.lower()]
    raise RegistryClientError(f"cannot tell the schema type of {path.name}: give --type avro, json or protobuf")


def registry_options(settings: Mapping[str, Any]) -> dict[str, Any]:
    """httpx arguments (auth, verify) for Confluent's registry client settings in
    ``settings``; other names are ignored. A bad one is a ``RegistryClientError``."""
    from streamkit.http import HttpSecurityError, http_client_options

    source = str(settings.get("basic.auth.credentials.source") or "USER_INFO").upper()
    if source not in ("USER_INFO", "URL"):
        raise RegistryClientError(f"basic.auth.credentials.source: USER_INFO or URL, got {source!r}")
    user_info = settings.get("basic.auth.user.info") or settings.get("schema.registry.basic.auth.user.info")
    ca = settings.get("schema.registry.ssl.ca.location") or settings.get("schema.registry.ssl.truststore.location")
    try:
        return http_client_options(str(user_info) if user_info and source == "USER_INFO" else None,
                                   str(ca) if ca else None)
    except HttpSecurityError as exc:
        raise RegistryClientError(str(exc)) from None


class RegistryClient:
    def __init__(self, url: str, timeout_s: float = 30, settings: Mapping[str, Any] | None = None) -> None:
        """``settings``: Confluent's client settings (``basic.auth.user.info``,
        ``schema.registry.ssl.ca.location``...) of a registry served over https with basic auth."""
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s,
                                  headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                                  **registry_options(settings or {}))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> Any:
        try:
            response = self._http.request(method, path, json=body, params=params)
        except httpx.HTTPError as exc:
            raise RegistryClientError(f"cannot reach the schema registry at {self.url}: {exc}") from None
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code >= 400:
            if isinstance(payload, dict) and "message" in payload:
                raise RegistryClientError(f"{payload['message']} (error {payload.get('error_code')})",
                                          int(payload.get("error_code") or 0))
            raise RegistryClientError(f"the schema registry answered HTTP {response.status_code}")
        return payload

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        params = {"deleted": "true"} if deleted else {}
        if prefix:
            params["subjectPrefix"] = prefix
        return list(self._call("GET", "/subjects", params=params))

    def version(self, subject: str, version: str = "latest") -> SubjectVersion:
        body = self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}")
        return SubjectVersion(body["subject"], body["version"], body["id"], body.get("schemaType", "AVRO"),
                              body["schema"])

    def by_id(self, schema_id: int) -> tuple[str, str]:
        """The schema with ``schema_id``: (type, text)."""
        body = self._call("GET", f"/schemas/ids/{schema_id}")
        return body.get("schemaType", "AVRO"), body["schema"]

    def schema_by_id(self, schema_id: int) -> dict[str, Any]:
        """The registry's answer for ``/schemas/ids/{id}``: schema, schemaType, references."""
        return dict(self._call("GET", f"/schemas/ids/{schema_id}"))

    def version_body(self, subject: str, version: str = "latest") -> dict[str, Any]:
        """The registry's answer for a subject's version, references included."""
        return dict(self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}"))

    def register(self, subject: str, schema: str, schema_type: str,
                 references: list[dict[str, Any]] | None = None) -> int:
        request: dict[str, Any] = {"schema": schema, "schemaType": schema_type}
        if references:
            request["references"] = references
        body = self._call("POST", f"/subjects/{quote(subject, safe='')}/versions", request)
        return int(body["id"])

    def lookup(self, subject: str, schema: str, schema_type: str) -> int:
        """The id of ``schema`` if it is registered under ``subject``."""
        body = self._call("POST", f"/subjects/{quote(subject, safe='')}", {"schema": schema, "schemaType": schema_type})
        return int(body["id"])

    def check(self, subject: str, schema: str, schema_type: str, version: str = "latest") -> list[str]:
        """Why ``schema`` breaks the subject's compatibility level against ``version``
        (empty: it does not)."""
        body = self._call("POST", f"/compatibility/subjects/{quote(subject, safe='')}/versions/{version}",
                          {"schema": schema, "schemaType": schema_type}, params={"verbose": "true"})
        if body.get("is_compatible"):
            return []
        return list(body.get("messages") or ["incompatible"])
