"""The console inside the broker process (``console.listeners`` on ``streamkit broker``):
one process serves the Kafka protocol and the console's pages, and the schema pages too when
the registry is in the same process."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.testing import BrokerProcess
from tests.console.conftest import JSON, eventually


def test_console_in_the_broker_process(tmp_path: Path) -> None:
    settings = {"console.listeners": "http://127.0.0.1:0", "schema.registry.listeners": "http://127.0.0.1:0"}
    with BrokerProcess(tmp_path / "data", settings) as broker:
        assert broker.console_port is not None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("embedded-orders", 2)])["embedded-orders"].result(30)
        with httpx.Client(base_url=f"http://127.0.0.1:{broker.console_port}", timeout=30) as web:
            start = web.get("/")
            assert start.status_code == 200
            assert f"127.0.0.1:{broker.port}" in start.text  # names the broker it reaches
            eventually(lambda: "embedded-orders" in web.get("/topics").text, "the topic on the topics page")
            described = web.get("/topics/embedded-orders", headers=JSON).json()
            assert described["topic"]["partitions"] == 2
            # the registry of the same process: its pages are there
            assert web.get("/schemas", headers=JSON).json()["subjects"] == []


def test_a_bad_console_listener_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"console\.listeners"):
        BrokerProcess(tmp_path / "data", {"console.listeners": "nowhere"}).start()
