"""The console against a SASL_SSL listener (Kafka's client security settings, as the CLI
takes them), with the broker's authorizer, SCRAM users and its embedded Schema Registry: the
ACL, user and schema pages, and records decoded through the registry."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from playwright.sync_api import expect

from streamkit.clients.users import create_user
from streamkit.console import ConsoleSettings
from streamkit.testing import BrokerProcess
from streamkit.testing_tls import CertificateAuthority, authorizer_settings, scram_listener_settings
from tests.console.conftest import JSON, ConsoleThread, eventually

READING = {"type": "record", "name": "Reading", "fields": [{"name": "sensor", "type": "string"},
                                                          {"name": "celsius", "type": "double"}]}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def secured(ca: CertificateAuthority, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    cert = ca.issue("broker", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    with BrokerProcess(tmp_path_factory.mktemp("secured") / "data", settings={
        **scram_listener_settings(cert),
        **authorizer_settings(),
        "schema.registry.listeners": "http://127.0.0.1:0",
    }) as process:
        create_user(process.address("PLAINTEXT"), "admin", "admin-secret")
        yield process


@pytest.fixture(scope="module")
def web(secured: BrokerProcess, ca: CertificateAuthority) -> Iterator[httpx.Client]:
    settings = ConsoleSettings(
        secured.address("SASL_SSL"), schema_registry_url=f"http://127.0.0.1:{secured.schema_registry_port}",
        client_config={"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                       "sasl.username": "admin", "sasl.password": "admin-secret", "ssl.ca.location": str(ca.cert_path)})
    with ConsoleThread(settings) as console, httpx.Client(base_url=console.url, timeout=30) as c:
        yield c


def test_topics_and_messages_over_sasl_ssl(web: httpx.Client, secured: BrokerProcess) -> None:
    topic = f"secure-{uuid.uuid4().hex[:6]}"
    created = web.post("/topics", data={"name": topic, "partitions": "2"}, headers=JSON)
    assert created.status_code == 200, created.text
    assert topic in [t["name"] for t in web.get("/topics", headers=JSON).json()["topics"]]
    produced = web.post(f"/topics/{topic}/produce", data={"key": "k", "value": "over tls", "partition": "1"},
                        headers=JSON)
    assert produced.json()["result"] == {"partition": 1, "offset": 0}
    page = web.get(f"/topics/{topic}/messages", headers=JSON).json()["page"]
    assert [m["value"]["text"] for m in page["messages"]] == ["over tls"]
    assert f":{secured.listener_ports['SASL_SSL']}" in web.get("/").text


def test_acls_list_create_and_delete(web: httpx.Client) -> None:
    assert 'href="/acls"' in web.get("/").text
    acl = {"principal": "User:alice", "permission": "allow", "operation": "Read", "resource_type": "topic",
           "resource_name": "payments", "pattern_type": "literal", "host": "*"}
    assert web.post("/acls", data=acl, headers=JSON).status_code == 200
    rows = web.get("/acls", headers=JSON).json()["acls"]
    mine = [r for r in rows if r["principal"] == "User:alice" and r["resource_name"] == "payments"]
    assert mine == [{"resource_type": "TOPIC", "resource_name": "payments", "pattern_type": "LITERAL",
                     "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}]
    bad = web.post("/acls", data={**acl, "operation": "Fly"}, headers=JSON)
    assert bad.status_code == 400 and "Fly" in bad.json()["error"]
    assert web.post("/acls/delete", data=mine[0], headers=JSON).status_code == 200
    assert not [r for r in web.get("/acls", headers=JSON).json()["acls"] if r["principal"] == "User:alice"]


def test_scram_users_create_and_delete(web: httpx.Client) -> None:
    assert 'href="/users"' in web.get("/").text
    made = web.post("/users", data={"user": "carol", "password": "s3cret", "mechanism": "SCRAM-SHA-512"},
                    headers=JSON)
    assert made.status_code == 200, made.text
    found = {u["user"]: u["mechanisms"] for u in web.get("/users", headers=JSON).json()["users"]}
    assert found["carol"] == {"SCRAM-SHA-512": 4096} and "admin" in found
    assert web.post("/users/carol/delete", headers=JSON).json()["result"] == ["SCRAM-SHA-512"]
    assert "carol" not in {u["user"] for u in web.get("/users", headers=JSON).json()["users"]}


def test_schemas_register_config_and_delete(web: httpx.Client) -> None:
    subject = f"readings-{uuid.uuid4().hex[:6]}-value"
    registered = web.post("/schemas", data={"subject": subject, "schema_type": "AVRO",
                                            "schema": json.dumps(READING)}, headers=JSON)
    assert registered.status_code == 200, registered.text
    assert subject in web.get("/schemas", headers=JSON).json()["subjects"]
    shown = web.get(f"/schemas/{subject}", headers=JSON).json()
    assert shown["versions"] == [1] and json.loads(shown["schema"]["schema"]) == READING
    assert web.post(f"/schemas/{subject}/config", data={"compatibility": "FULL"}, headers=JSON).status_code == 200
    assert web.get(f"/schemas/{subject}", headers=JSON).json()["compatibility"] == "FULL"
    # A field without a default breaks FULL compatibility: the registry's 409 and message.
    broken = {**READING, "fields": [*READING["fields"], {"name": "unit", "type": "string"}]}
    refused = web.post("/schemas", data={"subject": subject, "schema": json.dumps(broken)}, headers=JSON)
    assert refused.status_code == 409 and refused.json()["error"]
    assert web.get(f"/schemas/{subject}?version=7", headers=JSON).status_code == 404
    assert web.get(f"/schemas/{subject}?version=x", headers=JSON).status_code == 400
    assert web.post(f"/schemas/{subject}/delete", headers=JSON).json()["result"] == [1]
    assert subject not in web.get("/schemas", headers=JSON).json()["subjects"]
    assert web.get(f"/schemas/{subject}", headers=JSON).status_code == 404


def test_avro_and_json_schema_records_are_decoded(web: httpx.Client, secured: BrokerProcess) -> None:
    topic = f"readings-{uuid.uuid4().hex[:6]}"
    assert web.post("/topics", data={"name": topic}, headers=JSON).status_code == 200
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{secured.schema_registry_port}"})
    avro = AvroSerializer(registry, json.dumps(READING))
    as_json = JSONSerializer(json.dumps({"type": "object", "properties": {"sensor": {"type": "string"}}}), registry,
                             conf={"subject.name.strategy": lambda _ctx, _name: f"{topic}-json"})
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": secured.address("PLAINTEXT")})
    producer.produce(topic, avro({"sensor": "s1", "celsius": 21.5}, context))
    producer.produce(topic, as_json({"sensor": "s2"}, context))
    producer.flush(10)
    page = eventually(lambda: web.get(f"/topics/{topic}/messages", headers=JSON).json()["page"]["messages"],
                      "the records")
    values = [m["value"] for m in sorted(page, key=lambda m: m["offset"])]
    assert [v["kind"] for v in values] == ["avro", "json-schema"]
    assert json.loads(values[0]["text"]) == {"sensor": "s1", "celsius": 21.5}
    assert json.loads(values[1]["text"]) == {"sensor": "s2"}
    assert values[0]["schema_id"] != values[1]["schema_id"]
    html = web.get(f"/topics/{topic}/messages").text
    assert "avro, schema" in html and "&#34;celsius&#34;: 21.5" in html


def _reading_class() -> Any:
    """``Reading``, the second message of its file: its records carry the message-index
    array [1], not the common [0]."""
    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="console_test_reading.proto", package="console.test",
                                              syntax="proto3")
    file.message_type.add(name="Header").field.add(name="source", number=1, type=f.TYPE_STRING,
                                                   label=f.LABEL_OPTIONAL)
    reading = file.message_type.add(name="Reading")
    reading.field.add(name="sensor_id", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    reading.field.add(name="celsius", number=2, type=f.TYPE_DOUBLE, label=f.LABEL_OPTIONAL)
    reading.field.add(name="tags", number=3, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("console.test.Reading"))


def _produce_protobuf(secured: BrokerProcess, topic: str) -> None:
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{secured.schema_registry_port}"})
    reading = _reading_class()
    serialize = ProtobufSerializer(reading, registry, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": secured.address("PLAINTEXT")})
    producer.produce(topic, serialize(reading(sensor_id="s3", celsius=19.25, tags=["roof", "north"]),
                                      SerializationContext(topic, MessageField.VALUE)))
    producer.flush(10)


def test_protobuf_records_are_decoded_through_the_registry(web: httpx.Client, secured: BrokerProcess) -> None:
    topic = f"pb-readings-{uuid.uuid4().hex[:6]}"
    assert web.post("/topics", data={"name": topic}, headers=JSON).status_code == 200
    _produce_protobuf(secured, topic)
    page = eventually(lambda: web.get(f"/topics/{topic}/messages", headers=JSON).json()["page"]["messages"],
                      "the record")
    value = page[0]["value"]
    assert value["kind"] == "protobuf"
    # The .proto's field names (not the JSON mapping's camelCase), as Confluent's console consumer prints.
    assert json.loads(value["text"]) == {"sensor_id": "s3", "celsius": 19.25, "tags": ["roof", "north"]}
    registered = SchemaRegistryClient({"url": f"http://127.0.0.1:{secured.schema_registry_port}"})
    assert value["schema_id"] == registered.get_latest_version(f"{topic}-value").schema_id


def test_in_the_browser_a_protobuf_record_shows_as_json(web: httpx.Client, secured: BrokerProcess, page: Any) -> None:
    topic = f"pb-browser-{uuid.uuid4().hex[:6]}"
    assert web.post("/topics", data={"name": topic}, headers=JSON).status_code == 200
    _produce_protobuf(secured, topic)
    page.goto(f"{web.base_url}/topics")
    page.get_by_role("link", name=topic, exact=True).click()
    page.get_by_role("link", name="Browse messages").click()
    expect(page.locator("small.schema").first).to_contain_text("protobuf, schema")
    expect(page.locator("td.protobuf pre").first).to_contain_text('"sensor_id": "s3"')
    expect(page.locator("td.protobuf pre").first).to_contain_text('"celsius": 19.25')


def test_in_the_browser_register_then_delete_a_schema_after_confirming(web: httpx.Client, page: Any) -> None:
    subject = f"browser-{uuid.uuid4().hex[:6]}-value"
    page.goto(f"{web.base_url}/")
    page.get_by_role("link", name="Schemas", exact=True).click()
    form = page.locator("#register-schema")
    form.get_by_label("Subject").fill(subject)
    form.get_by_label("Schema", exact=True).fill(json.dumps(READING))
    form.get_by_role("button", name="Register").click()
    expect(page.get_by_role("status")).to_contain_text(f"under {subject}")
    expect(page.locator("#schema-text")).to_contain_text('"celsius"')
    page.once("dialog", lambda dialog: dialog.dismiss())  # changed their mind: nothing happens
    page.locator("#delete-subject").get_by_role("button").click()
    expect(page.locator("#subject")).to_have_text(subject)
    assert subject in web.get("/schemas", headers=JSON).json()["subjects"]
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#delete-subject").get_by_role("button").click()
    expect(page.get_by_role("status")).to_contain_text(f"deleted subject {subject}")
    assert subject not in web.get("/schemas", headers=JSON).json()["subjects"]


def test_in_the_browser_add_an_acl_then_remove_it_after_confirming(web: httpx.Client, page: Any) -> None:
    page.goto(f"{web.base_url}/")
    page.get_by_role("link", name="ACLs", exact=True).click()
    form = page.locator("#create-acl")
    form.get_by_label("Principal").fill("User:dave")
    form.get_by_label("Operation").select_option("Write")
    form.get_by_label("Resource name").fill("audit")
    form.get_by_role("button", name="Add").click()
    expect(page.get_by_role("status")).to_contain_text("added 1 ACL(s)")
    row = page.locator("#acls tr.acl", has_text="User:dave")
    expect(row).to_contain_text("TOPIC:audit")
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.get_by_role("button", name="Remove").click()
    expect(row).to_have_count(1)
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Remove").click()
    expect(page.get_by_role("status")).to_contain_text("removed 1 ACL(s)")
    expect(page.locator("#acls tr.acl", has_text="User:dave")).to_have_count(0)


def test_groups_and_lag_over_sasl_ssl(web: httpx.Client, secured: BrokerProcess) -> None:
    topic = f"secure-lag-{uuid.uuid4().hex[:6]}"
    assert web.post("/topics", data={"name": topic}, headers=JSON).status_code == 200
    for value in ("a", "b", "c"):
        web.post(f"/topics/{topic}/produce", data={"value": value}, headers=JSON)
    consumer = Consumer({"bootstrap.servers": secured.address("PLAINTEXT"), "group.id": "secure-readers"})
    consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()
    listed = web.get("/groups", headers=JSON)
    assert listed.status_code == 200 and "secure-readers" in [g["group_id"] for g in listed.json()["groups"]]
    group = web.get("/groups/secure-readers", headers=JSON).json()
    assert group["total_lag"] == 2
    r = web.post("/groups/secure-readers/reset", data={"topic": topic, "to": "latest"}, headers=JSON)
    assert r.status_code == 200, r.text
    assert web.get("/groups/secure-readers", headers=JSON).json()["total_lag"] == 0
