"""``streamkit schemas list|get|register|check``, ``streamkit produce``/``consume`` with
``--value-format avro``, and ``streamkit schema-registry``'s settings, as subprocesses
against the module's broker and registry."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from streamkit.testing import BrokerProcess, SchemaRegistryProcess


def cli(*args: str, registry: SchemaRegistryProcess | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--schema-registry", registry.url] if registry is not None else []
    return subprocess.run([sys.executable, "-m", "streamkit", *args, *extra], capture_output=True, text=True,
                          timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_register_get_list_and_check(registry: SchemaRegistryProcess, tmp_path: Path, subject: str) -> None:
    v1 = tmp_path / "user.avsc"
    v1.write_text(json.dumps({"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]}))
    registered = cli("schemas", "register", subject, str(v1), registry=registry)
    assert registered.returncode == 0, registered.stderr
    schema_id = int(registered.stdout.strip())

    got = cli("schemas", "get", subject, registry=registry)
    assert got.returncode == 0 and json.loads(got.stdout) == json.loads(v1.read_text())
    assert f"{subject} version 1, id {schema_id}, AVRO" in got.stderr
    by_id = cli("schemas", "get", "--id", str(schema_id), registry=registry)
    assert json.loads(by_id.stdout) == json.loads(v1.read_text())

    listed = cli("schemas", "list", "--prefix", subject, registry=registry)
    assert listed.returncode == 0
    assert [subject, "1", str(schema_id), "AVRO"] in [line.split() for line in listed.stdout.splitlines()]

    v2 = tmp_path / "user-v2.avsc"
    v2.write_text(json.dumps({"type": "record", "name": "User", "fields": [
        {"name": "id", "type": "long"}, {"name": "email", "type": "string"}]}))
    checked = cli("schemas", "check", subject, str(v2), registry=registry)
    assert checked.returncode == 1
    assert "'email'" in checked.stderr and "READER_FIELD_MISSING_DEFAULT_VALUE" in checked.stderr
    v1_again = cli("schemas", "check", subject, str(v1), registry=registry)
    assert v1_again.returncode == 0 and "compatible" in v1_again.stdout


def test_errors_are_one_line(registry: SchemaRegistryProcess, tmp_path: Path, subject: str) -> None:
    missing = cli("schemas", "get", subject, registry=registry)
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0
    assert "not found" in missing.stderr and "40401" in missing.stderr
    bad = tmp_path / "bad.avsc"
    bad.write_text('{"type": "record"}')
    refused = cli("schemas", "register", subject, str(bad), registry=registry)
    assert refused.returncode == 2 and "42201" in refused.stderr
    untyped = tmp_path / "schema.txt"
    untyped.write_text("{}")
    assert "--type" in cli("schemas", "register", subject, str(untyped), registry=registry).stderr
    unreachable = cli("schemas", "list", "--schema-registry", "http://127.0.0.1:9")
    assert unreachable.returncode == 2 and "cannot reach the schema registry" in unreachable.stderr


def test_schema_registry_refuses_bad_settings() -> None:
    for setting, words in [("schema.compatibility.level=SIDEWAYS", "schema.compatibility.level"),
                           ("listeners=ftp://x:1", "listeners"), ("no.such.setting=1", "unknown setting")]:
        result = cli("schema-registry", "--set", setting)
        assert result.returncode == 2 and words in result.stderr, result.stderr


def test_produce_and_consume_avro(broker: BrokerProcess, registry: SchemaRegistryProcess, tmp_path: Path) -> None:
    topic = f"cli-avro-{uuid.uuid4().hex[:8]}"
    schema = tmp_path / "reading.avsc"
    schema.write_text(json.dumps({"type": "record", "name": "Reading", "fields": [
        {"name": "sensor", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}))
    lines = '{"sensor": 1, "note": "ok"}\n{"sensor": 2, "note": null}\n{"sensor": "three"}\n'
    produced = subprocess.run(
        [sys.executable, "-m", "streamkit", "produce", topic, "-b", broker.bootstrap, "--value-format", "avro",
         "--value-schema", str(schema), "--schema-registry", registry.url],
        input=lines, capture_output=True, text=True, timeout=60)
    # the third line does not fit the schema: the two before it are written
    assert produced.returncode == 2 and "line 3" in produced.stderr and "lines 1 to 2 were written" in produced.stderr
    # confluent-kafka's own deserializer reads what the CLI wrote
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    decode = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    got = []
    try:
        while len(got) < 2:
            message = consumer.poll(30)
            assert message is not None and message.error() is None
            got.append(decode(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert got == [{"sensor": 1, "note": "ok"}, {"sensor": 2, "note": None}]
    consumed = subprocess.run(
        [sys.executable, "-m", "streamkit", "consume", topic, "-b", broker.bootstrap, "--from-beginning",
         "--max-messages", "2", "--value-format", "avro", "--schema-registry", registry.url],
        capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert [json.loads(line) for line in consumed.stdout.splitlines()] == got
