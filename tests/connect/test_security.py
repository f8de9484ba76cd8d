"""Connect against a broker that only lets its clients in over SASL_SSL with SCRAM, ACLs on:
the worker's security settings reach every client it makes (its internal topics' clients and
group membership in distributed mode, the source producers, the sink consumers, the admin
calls), a connector's ``*.override.*`` ones reach its own clients, and wrong credentials are
one line.

The test's own setup (ACLs, reading the topic) goes through the broker's PLAINTEXT listener,
whose ANONYMOUS principal is a super user here; the worker logs in as ``connect``, whose ACLs
allow the ``sec-`` topics, the ``connect-`` groups and creating topics, nothing more.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streamkit.clients.acls import AclOptions, bindings, create_acls
from streamkit.testing_tls import SecuredBroker, scram_broker
from tests.connect.conftest import consume, eventually, standalone
from tests.connect.test_distributed import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING = "org.apache.kafka.connect.storage.StringConverter"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    with scram_broker(tmp_path_factory.mktemp("secured"), {"connect": "connect-secret", "mallory": "mallory-secret"},
                      acls=True, super_users=["ANONYMOUS"]) as broker:
        wanted = [*bindings(AclOptions(allow_principals=["User:connect"], topic="sec-", pattern_type="prefixed")),
                  *bindings(AclOptions(allow_principals=["User:connect"], group="connect-", pattern_type="prefixed")),
                  *bindings(AclOptions(allow_principals=["User:connect"], cluster=True,
                                       operations=["Describe", "Create", "IdempotentWrite"]))]
        asyncio.run(create_acls(broker.plaintext, wanted))
        yield broker


def java_properties(secured: SecuredBroker, password: str = "connect-secret") -> str:
    """Security lines as a Java worker's connect-*.properties holds them: once for the
    worker, again under producer. and consumer. for the connectors' clients."""
    lines = ["security.protocol=SASL_SSL", f"sasl.mechanism={secured.mechanism}",
             "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
             f'username="connect" password="{password}";',
             "ssl.truststore.type=PEM", f"ssl.truststore.location={secured.ca.cert_path}"]
    return "\n".join([*lines, *(f"producer.{line}" for line in lines), *(f"consumer.{line}" for line in lines)])


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_standalone_file_source_to_sink_over_sasl_ssl_and_connector_overrides(
        secured: SecuredBroker, tmp_path: Path) -> None:
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"line {i}\n" for i in range(20)))
    settings = {"bootstrap.servers": secured.address, "listeners": "http://127.0.0.1:0",
                "offset.storage.file.filename": str(tmp_path / "offsets.json"), "offset.flush.interval.ms": "500",
                "key.converter": STRING, "value.converter": STRING,
                # librdkafka's names at the top: the base of every client the worker makes
                **secured.client_settings("connect", "connect-secret")}
    connectors = [("src", {"connector.class": SOURCE, "file": str(src), "topic": "sec-standalone"}),
                  ("sink", {"connector.class": SINK, "file": str(out), "topics": "sec-standalone"}),
                  # mallory has no ACL on the topic: her sink logs in but may not read
                  ("mallory", {"connector.class": SINK, "file": str(tmp_path / "mallory.txt"),
                               "topics": "sec-standalone", "consumer.override.sasl.username": "mallory",
                               "consumer.override.sasl.password": "mallory-secret"}),
                  ("wrong", {"connector.class": SINK, "file": str(tmp_path / "wrong.txt"),
                             "topics": "sec-standalone", "consumer.override.sasl.password": "wrong"})]
    async with standalone(settings, connectors) as (_worker, client):
        await eventually(lambda: len(lines_of(out)) == 20, 60, "20 lines in the sink file")

        async def task_trace(name: str) -> str:
            tasks = (await client.get(f"/connectors/{name}/status")).json()["tasks"]
            return str(tasks[0].get("trace", "")) if tasks and tasks[0]["state"] == "FAILED" else ""

        refused = await eventually(lambda: task_trace("wrong"), 60, "the wrong password's task to fail")
        assert "over SASL_SSL as connect (SCRAM-SHA-256)" in refused, refused
        denied = await eventually(lambda: task_trace("mallory"), 60, "mallory's task to fail")
        assert "Authorization" in denied or "AUTHORIZATION" in denied, denied
    assert lines_of(out) == [f"line {i}" for i in range(20)]
    assert lines_of(tmp_path / "mallory.txt") == []
    records = await consume(secured.plaintext, "sec-standalone", 20)
    assert [r.value for r in records] == [f"line {i}".encode() for i in range(20)]


def test_a_distributed_worker_from_java_properties_runs_a_pipeline_over_sasl_ssl(
        secured: SecuredBroker, tmp_path: Path) -> None:
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"row {i}\n" for i in range(10)))
    worker = {
        "bootstrap.servers": secured.address, "listeners": "http://127.0.0.1:0", "group.id": "connect-sec-cluster",
        "config.storage.topic": "sec-configs", "offset.storage.topic": "sec-offsets",
        "status.storage.topic": "sec-status", "offset.storage.partitions": "2", "status.storage.partitions": "1",
        "offset.flush.interval.ms": "500", "key.converter": STRING, "value.converter": STRING}
    properties = tmp_path / "connect-distributed.properties"
    properties.write_text("\n".join(f"{k}={v}" for k, v in worker.items()) + "\n" + java_properties(secured))
    ready = tmp_path / "port"
    with (tmp_path / "worker.log").open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "streamkit", "connect", "distributed", str(properties),
                                    "--ready-file", str(ready)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: process.poll() is not None or (ready.exists() and ready.read_text()), 120,
                 lambda: (tmp_path / "worker.log").read_text())
        assert process.poll() is None, (tmp_path / "worker.log").read_text()
        url = f"http://127.0.0.1:{ready.read_text()}"
        with httpx.Client(base_url=url, timeout=30) as client:
            for name, config in (("src", {"connector.class": SOURCE, "file": str(src), "topic": "sec-distributed"}),
                                 ("sink", {"connector.class": SINK, "file": str(out), "topics": "sec-distributed"})):
                assert client.put(f"/connectors/{name}/config", json=config).status_code in (200, 201)
            wait_for(lambda: len(lines_of(out)) == 10, 90, lambda: (tmp_path / "worker.log").read_text())
            status = client.get("/connectors/sink/status").json()
            assert status["connector"]["state"] == "RUNNING", status
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert lines_of(out) == [f"row {i}" for i in range(10)]
    # the worker's internal topics were written over SASL_SSL, under its ACLs
    configs = asyncio.run(consume(secured.plaintext, "sec-configs", 4))
    assert any(r.key == b"connector-src" and json.loads(r.value)["properties"]["connector.class"] == SOURCE
               for r in configs), configs


def test_wrong_worker_credentials_are_one_line_and_exit_code_2(secured: SecuredBroker, tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(f"bootstrap.servers={secured.address}\nlisteners=http://127.0.0.1:0\n"
                      + java_properties(secured, password="wrong"))
    result = subprocess.run([sys.executable, "-m", "streamkit", "connect", "standalone", str(worker)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        f"error: cannot connect to {secured.address} over SASL_SSL as connect (SCRAM-SHA-256): "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_bad_security_settings_are_config_errors(secured: SecuredBroker) -> None:
    from streamkit.connect.errors import ConfigError
    from streamkit.connect.worker_config import load_worker_config

    with pytest.raises(ConfigError) as raised:
        load_worker_config({"bootstrap.servers": secured.address, "security.protocol": "SASL_SSL"})
    assert "needs sasl.username and sasl.password" in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        load_worker_config({"bootstrap.servers": secured.address, "producer.security.protocol": "SSL",
                            "producer.ssl.ca.location": "/nonexistent/ca.pem"})
    assert "producer.security.protocol" in str(raised.value) and "no such file" in str(raised.value)
