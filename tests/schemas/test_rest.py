"""Confluent's REST API and error codes, against ``streamkit schema-registry`` started as
a process on a real broker (httpx as the client)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from streamkit.testing import SchemaRegistryProcess

CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


@pytest.fixture(scope="module")
def http(registry: SchemaRegistryProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=registry.url, timeout=30, headers=CT) as client:
        yield client


def avro_record(*fields: tuple[str, Any], name: str = "User") -> str:
    return json.dumps({"type": "record", "name": name, "fields": [
        {"name": n, "type": t} if not isinstance(t, tuple) else {"name": n, "type": t[0], "default": t[1]}
        for n, t in fields]})


V1 = avro_record(("id", "long"))
V2 = avro_record(("id", "long"), ("email", ("string", "")))


def register(http: httpx.Client, subject: str, schema: str, **extra: Any) -> httpx.Response:
    return http.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})


def error(response: httpx.Response) -> tuple[int, int]:
    return response.status_code, response.json()["error_code"]


def test_register_and_read_back(http: httpx.Client, subject: str) -> None:
    first = register(http, subject, V1)
    assert first.status_code == 200, first.text
    sid = first.json()["id"]
    assert register(http, subject, V1).json()["id"] == sid  # the same schema again: no new version
    second = register(http, subject, V2).json()
    assert second["id"] > sid and second["version"] == 2
    assert http.get(f"/subjects/{subject}/versions").json() == [1, 2]
    latest = http.get(f"/subjects/{subject}/versions/latest").json()
    assert latest == {"subject": subject, "version": 2, "id": second["id"], "schema": V2.replace(" ", "")}
    assert json.loads(http.get(f"/subjects/{subject}/versions/1/schema").text) == json.loads(V1)
    assert json.loads(http.get(f"/schemas/ids/{sid}").json()["schema"]) == json.loads(V1)
    assert http.get(f"/schemas/ids/{sid}/versions").json() == [{"subject": subject, "version": 1}]
    assert subject in http.get("/subjects").json()
    assert sorted(http.get("/schemas/types").json()) == ["AVRO", "JSON", "PROTOBUF"]
    assert http.get("/contexts").json() == ["."]


def test_one_schema_has_one_id_across_subjects(http: httpx.Client, subject: str) -> None:
    schema = avro_record(("shared", "string"), name="Shared")
    a = register(http, subject, schema).json()["id"]
    b = register(http, subject + "-other", schema).json()["id"]
    assert a == b
    assert http.get(f"/schemas/ids/{a}/subjects").json() == sorted([subject, subject + "-other"])


def test_error_codes(http: httpx.Client, subject: str) -> None:
    assert error(register(http, subject, '{"type": "record", "name": "X"}')) == (422, 42201)
    assert error(register(http, subject, V1, schemaType="XML")) == (422, 42201)
    assert error(http.post(f"/subjects/{subject}/versions", json={"nope": 1})) == (422, 42201)
    assert error(http.get("/subjects/no-such-subject/versions")) == (404, 40401)
    assert error(http.get("/subjects/no-such-subject/versions/1")) == (404, 40401)
    register(http, subject, V1)
    assert error(http.get(f"/subjects/{subject}/versions/7")) == (404, 40402)
    assert error(http.get(f"/subjects/{subject}/versions/zero")) == (422, 42202)
    assert error(http.get("/schemas/ids/999999")) == (404, 40403)
    incompatible = register(http, subject, avro_record(("id", "string")))
    assert error(incompatible) == (409, 409)
    assert "TYPE_MISMATCH" in incompatible.json()["message"]


@pytest.mark.parametrize("body", [b"{not json", b"", b"[1, 2]", b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_a_4xx(http: httpx.Client, subject: str, body: bytes) -> None:
    for method, path in [("POST", f"/subjects/{subject}/versions"), ("POST", f"/subjects/{subject}"),
                         ("PUT", "/config"), ("PUT", "/mode"),
                         ("POST", f"/compatibility/subjects/{subject}/versions/latest")]:
        response = http.request(method, path, content=body)
        assert 400 <= response.status_code < 500, (method, path, response.status_code, response.text)
        assert "error_code" in response.json()


def test_lookup(http: httpx.Client, subject: str) -> None:
    assert error(http.post(f"/subjects/{subject}", json={"schema": V1})) == (404, 40401)
    sid = register(http, subject, V1).json()["id"]
    # the same schema written differently is found
    found = http.post(f"/subjects/{subject}", json={"schema": json.dumps(json.loads(V1), indent=2)}).json()
    assert (found["id"], found["version"], found["subject"]) == (sid, 1, subject)
    assert error(http.post(f"/subjects/{subject}", json={"schema": V2})) == (404, 40403)


def test_compatibility_endpoint(http: httpx.Client, subject: str) -> None:
    register(http, subject, V1)
    ok = http.post(f"/compatibility/subjects/{subject}/versions/latest", json={"schema": V2}).json()
    assert ok == {"is_compatible": True}
    bad = http.post(f"/compatibility/subjects/{subject}/versions/1?verbose=true",
                    json={"schema": avro_record(("id", "long"), ("x", "int"))}).json()
    assert bad["is_compatible"] is False and "'x'" in bad["messages"][0]
    assert error(http.post(f"/compatibility/subjects/{subject}/versions/5", json={"schema": V2})) == (404, 40402)


def test_config_global_and_per_subject(http: httpx.Client, subject: str) -> None:
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert error(http.get(f"/config/{subject}")) == (404, 40408)
    assert http.get(f"/config/{subject}?defaultToGlobal=true").json() == {"compatibilityLevel": "BACKWARD"}
    assert http.put(f"/config/{subject}", json={"compatibility": "forward"}).json() == {"compatibility": "FORWARD"}
    assert http.get(f"/config/{subject}").json() == {"compatibilityLevel": "FORWARD"}
    assert error(http.put(f"/config/{subject}", json={"compatibility": "SIDEWAYS"})) == (422, 42203)
    # FORWARD: the old schema must read the new one, so a new field without default is fine
    register(http, subject, V1)
    assert register(http, subject, avro_record(("id", "long"), ("x", "int"))).status_code == 200
    assert error(register(http, subject, avro_record(("x", "int")))) == (409, 409)  # v2 cannot read it
    assert http.put(f"/config/{subject}", json={"compatibility": "NONE"}).status_code == 200
    assert register(http, subject, avro_record(("x", "int"))).status_code == 200
    assert http.delete(f"/config/{subject}").json() == {"compatibilityLevel": "NONE"}
    assert error(http.get(f"/config/{subject}")) == (404, 40408)


def test_modes(http: httpx.Client, subject: str) -> None:
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    assert http.put(f"/mode/{subject}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert error(register(http, subject, V1)) == (422, 42205)
    assert error(http.put(f"/mode/{subject}", json={"mode": "SLEEPY"})) == (422, 42204)
    assert http.put(f"/mode/{subject}", json={"mode": "IMPORT"}).status_code == 200
    # IMPORT keeps the id given (a migration from another registry)
    imported = register(http, subject, V1, id=50_000, version=3)
    assert imported.status_code == 200 and imported.json()["id"] == 50_000
    assert http.get(f"/subjects/{subject}/versions").json() == [3]
    assert http.delete(f"/mode/{subject}").json() == {"mode": "IMPORT"}
    # an id given outside IMPORT mode is refused
    assert error(register(http, subject, V2, id=50_001)) == (422, 42205)
    # a registry that has schemas enters IMPORT only when forced
    assert error(http.put("/mode", json={"mode": "IMPORT"})) == (422, 42205)
    # ids go on above the highest ever seen
    assert register(http, subject + "-next", avro_record(("n", "int"), name="Next")).json()["id"] > 50_000


def test_soft_and_hard_deletes(http: httpx.Client, subject: str) -> None:
    register(http, subject, V1)
    register(http, subject, V2)
    assert error(http.delete(f"/subjects/{subject}/versions/1?permanent=true")) == (404, 40407)
    assert http.delete(f"/subjects/{subject}/versions/1").json() == 1
    assert error(http.delete(f"/subjects/{subject}/versions/1")) == (404, 40406)
    assert http.get(f"/subjects/{subject}/versions").json() == [2]
    assert http.get(f"/subjects/{subject}/versions?deleted=true").json() == [1, 2]
    assert http.get(f"/subjects/{subject}/versions/1?deleted=true").json()["version"] == 1
    assert http.delete(f"/subjects/{subject}/versions/1?permanent=true").json() == 1
    assert http.get(f"/subjects/{subject}/versions?deleted=true").json() == [2]
    assert error(http.delete(f"/subjects/{subject}?permanent=true")) == (404, 40405)
    assert http.delete(f"/subjects/{subject}").json() == [2]
    assert error(http.delete(f"/subjects/{subject}")) == (404, 40404)
    assert subject not in http.get("/subjects").json()
    assert subject in http.get("/subjects?deleted=true").json()
    # a soft-deleted subject takes new versions after the old ones
    again = register(http, subject, V1).json()
    assert again["version"] == 3
    http.delete(f"/subjects/{subject}")
    assert http.delete(f"/subjects/{subject}?permanent=true").json() == [2, 3]
    assert error(http.get(f"/subjects/{subject}/versions?deleted=true")) == (404, 40401)


def test_references(http: httpx.Client, subject: str) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "com.example",
                          "fields": [{"name": "city", "type": "string"}]})
    register(http, subject + "-address", address)
    user = json.dumps({"type": "record", "name": "Customer", "namespace": "com.example",
                       "fields": [{"name": "home", "type": "com.example.Address"}]})
    assert error(register(http, subject, user)) == (422, 42201)  # Address unknown without the reference
    refs = [{"name": "com.example.Address", "subject": subject + "-address", "version": 1}]
    sid = register(http, subject, user, references=refs).json()["id"]
    assert http.get(f"/schemas/ids/{sid}").json()["references"] == refs
    assert http.get(f"/subjects/{subject}-address/versions/1/referencedby").json() == [sid]
    assert error(http.delete(f"/subjects/{subject}-address/versions/1")) == (422, 42206)
    missing = [{"name": "x", "subject": "nowhere", "version": 1}]
    assert error(register(http, subject + "-2", user, references=missing)) == (422, 42201)


def test_json_schema_and_protobuf_subjects(http: httpx.Client, subject: str) -> None:
    js = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    body = register(http, subject, js, schemaType="JSON").json()
    assert http.get(f"/schemas/ids/{body['id']}").json()["schemaType"] == "JSON"
    narrowed = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert error(register(http, subject, narrowed, schemaType="JSON")) == (409, 409)
    proto = 'syntax = "proto3";\nmessage M {\n  string a = 1;\n}'
    pid = register(http, subject + "-pb", proto, schemaType="PROTOBUF").json()["id"]
    assert http.get(f"/schemas/ids/{pid}").json() == {"schemaType": "PROTOBUF", "schema": proto}
    assert error(register(http, subject + "-pb", proto.replace("string a", "double a"),
                          schemaType="PROTOBUF")) == (409, 409)
    assert error(register(http, subject + "-pb", "message {", schemaType="PROTOBUF")) == (422, 42201)
    # a subject's schema type does not change under a compatibility level
    assert error(register(http, subject, V1)) == (409, 409)
