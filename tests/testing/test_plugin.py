"""The pytest plugin's fixtures, as a user's tests get them: from the ``pytest11`` entry
point that installing streamkit registers (this repository defines no fixture of these names
for tests/testing)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

import streamkit
from streamkit.streams.agent import AgentStream
from streamkit.testing import AppTestDriver, BrokerThread


def upper_app() -> streamkit.App:
    app = streamkit.App("upper", config={"num.partitions": 1})
    words = app.topic("words", value_type=str)
    shout = app.topic("shout", value_type=str)

    @app.agent(words)
    async def upper(stream: AgentStream) -> None:
        async for word in stream:
            await shout.send(value=word.upper())

    return app


def test_app_driver_fixture_runs_an_app_and_closes_it(app_driver: Callable[..., AppTestDriver],
                                                      pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.has_plugin("streamkit")  # registered by the entry point
    app = upper_app()
    driver = app_driver(app)
    driver.input("words").send("hi")
    assert [r.value for r in driver.output("shout").read_all()] == ["HI"]
    assert app.runtime is not None


def test_broker_fixture_is_a_real_broker(broker: BrokerThread) -> None:
    async def roundtrip() -> bytes | None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("plugin-topic", b"hello")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("plugin-topic", bootstrap_servers=broker.bootstrap,
                                    auto_offset_reset="earliest", group_id=None)
        await consumer.start()
        try:
            record = await asyncio.wait_for(consumer.getone(), 20)
        finally:
            await consumer.stop()
        return record.value

    assert asyncio.run(roundtrip()) == b"hello"


def test_connect_worker_fixture_runs_connectors_on_the_broker(connect_worker: Any, broker: BrokerThread,
                                                              tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\n")
    config = {"connector.class": "FileStreamSource", "file": str(source), "topic": "plugin-lines",
              "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    response = httpx.put(f"{connect_worker.url}/connectors/lines/config", json=config, timeout=30)
    assert response.status_code in (200, 201), response.text

    async def read_two() -> list[bytes | None]:
        consumer = AIOKafkaConsumer("plugin-lines", bootstrap_servers=broker.bootstrap,
                                    auto_offset_reset="earliest", group_id=None)
        await consumer.start()
        try:
            return [(await asyncio.wait_for(consumer.getone(), 30)).value for _ in range(2)]
        finally:
            await consumer.stop()

    assert asyncio.run(read_two()) == [b"one", b"two"]
