"""A handler that fails answers its request with UNKNOWN_SERVER_ERROR and keeps the
connection; a request whose response has nowhere to put an error still closes it.

The failure is injected by swapping one entry of the broker's own handler table for a
handler that raises: a real broker, a real socket, only the bug is planted.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.primitive import i16, i32, i32Timedelta

from streamkit.broker.handlers import HANDLERS
from streamkit.testing import embedded_broker
from tests.integration.util import request_frame


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: Any, cid: int) -> Any:
    writer.write(request_frame(body, cid))
    await writer.drain()
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    frame = await reader.readexactly(size)
    response_type = load_response_schema(type(body).__api_key__, type(body).__version__)
    header, n = entity_reader(response_type.__header_schema__)(frame, 0)
    assert header.correlation_id == cid
    return entity_reader(response_type)(frame, n)[0]


def _produce(acks: int) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)),
        topic_data=(TopicProduceData(name=TopicName("t"), partition_data=(
            PartitionProduceData(index=i32(0), records=b""), PartitionProduceData(index=i32(1), records=b""))),),
    )


@pytest.fixture
def failing_produce() -> Iterator[None]:
    async def broken(*_args: Any) -> Any:
        raise RuntimeError("planted handler bug")

    saved = HANDLERS[0]
    HANDLERS[0] = broken
    try:
        yield
    finally:
        HANDLERS[0] = saved


async def test_failing_handler_answers_unknown_server_error(
    tmp_path: Path, failing_produce: None, caplog: pytest.LogCaptureFixture
) -> None:
    async with embedded_broker(tmp_path) as broker:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        try:
            with caplog.at_level(logging.ERROR, logger="streamkit.broker.server"):
                response = await _call(reader, writer, _produce(-1), 1)
            [topic] = response.responses
            assert topic.name == "t"
            assert [(p.index, p.error_code) for p in topic.partition_responses] == [
                (0, ErrorCode.unknown_server_error), (1, ErrorCode.unknown_server_error)]
            assert "planted handler bug" in caplog.text  # the traceback is logged
            # the same connection still serves the next request
            meta = await _call(reader, writer, MetadataRequest(
                topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False), 2)
            assert [b.node_id for b in meta.brokers] == [0]
        finally:
            writer.close()
            await writer.wait_closed()


async def test_failing_acks0_produce_closes_the_connection(tmp_path: Path, failing_produce: None) -> None:
    # acks=0 gets no response, so an error answer would desynchronise the client: close.
    async with embedded_broker(tmp_path) as broker:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        try:
            writer.write(request_frame(_produce(0), 1))
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 10) == b""
        finally:
            writer.close()
            await writer.wait_closed()
