"""An unreachable broker is one error that says where and why, for every aiokafka client the
CLI, stream workers and Connect start: ``cannot reach a broker at HOST:PORT (REASON)``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError

from streamkit.clients.errors import BrokerUnreachable, ClientError
from streamkit.clients.lifecycle import bootstrap_addresses, start_client
from tests.integration.util import free_port

CLIENTS: dict[str, Callable[[str], Any]] = {
    "producer": lambda bootstrap: AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=3000),
    "consumer": lambda bootstrap: AIOKafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=3000),
    "admin": lambda bootstrap: AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000),
}


async def _start_error(kind: str, bootstrap: str) -> BrokerUnreachable:
    with pytest.raises(BrokerUnreachable) as raised:
        await start_client(CLIENTS[kind](bootstrap))
    return raised.value


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_a_closed_port_is_connection_refused(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    with caplog.at_level(logging.DEBUG, logger="aiokafka"):
        error = await _start_error(kind, bootstrap)
    assert str(error) == f"cannot reach a broker at {bootstrap} (connection refused)"
    # still the errors callers already handle: retried as a connection error, shown as a client error
    assert isinstance(error, KafkaConnectionError) and isinstance(error, ClientError)
    # said once, by the error: aiokafka's own line about the failed connection is left out
    assert not [r for r in caplog.records if "Unable connect to" in r.getMessage()]


async def test_an_unknown_host() -> None:
    error = await _start_error("admin", "no-such-host.invalid:9092")
    assert str(error) == "cannot reach a broker at no-such-host.invalid:9092 (unknown host)"


async def test_a_server_that_is_not_a_kafka_broker() -> None:
    async def hang_up(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    try:
        bootstrap = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        error = await _start_error("consumer", bootstrap)
    finally:
        server.close()
        await server.wait_closed()
    assert str(error) == (f"cannot reach a broker at {bootstrap} "
                          "(it accepts connections but does not answer as a Kafka broker)")


def test_bootstrap_addresses() -> None:
    assert bootstrap_addresses("a:1, b:2") == [("a", 1), ("b", 2)]
    assert bootstrap_addresses("[::1]:9093") == [("::1", 9093)]
    assert bootstrap_addresses("kafka") == [("kafka", 9092)]
