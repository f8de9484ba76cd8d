"""Every served (api_key, version): random, schema-valid requests through the real handler,
the response builder and the encoder, against a real broker state on disk.

kio's hypothesis strategies draw the bodies; a taming pass then points some names at an
existing topic and some records at a real batch (so the handlers do real work, not only
"unknown topic"), and caps waits and counts (so a Fetch does not long-poll for an hour and
a CreateTopics does not create two billion partitions). The property: building and
encoding the reply never raises, and the client can decode what was sent. A second
property covers the safety net: the UNKNOWN_SERVER_ERROR answer that the server sends when a
handler fails builds and encodes for every version too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from streamkit.broker.build import build
from streamkit.broker.codec import API_SPECS, ApiSpec, Request, encode_response
from streamkit.broker.error_reply import error_response
from streamkit.broker.errors import ErrorCode
from streamkit.broker.handlers import HANDLERS
from streamkit.broker.server import Broker
from streamkit.broker.state import ClientInfo
from streamkit.log.records import Record, build_batch
from streamkit.testing import embedded_broker
from tests.broker import kio_strategies

pytestmark = pytest.mark.filterwarnings(
    r"ignore:\w+ is deprecated. Use files\(\) instead:DeprecationWarning"
)

kio_strategies.register()

TOPIC = "fuzz-a"
# SaslHandshake and SaslAuthenticate change the connection's state: the server answers them
# itself (tests/broker/test_sasl.py fuzzes their tokens).
SPECS = sorted(k for k in API_SPECS if k[0] in HANDLERS)
FUZZ = settings(max_examples=4, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
_MAX_WAIT = datetime.timedelta(milliseconds=20)
_NAMES = ("name", "topic", "topic_name")
_PARTITIONS = ("partition", "partition_index", "index")
_COUNTS = ("num_partitions", "count", "replication_factor")


@dataclasses.dataclass
class Running:
    loop: asyncio.AbstractEventLoop
    broker: Broker


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    loop = asyncio.new_event_loop()
    context = embedded_broker(Path(tmp_path_factory.mktemp("fuzz")), {"log.cleaner.enable": "false"})
    broker = loop.run_until_complete(context.__aenter__())
    assert broker.state is not None
    broker.state.topics.create(TOPIC, 2)
    try:
        yield Running(loop, broker)
    finally:
        loop.run_until_complete(context.__aexit__(None, None, None))
        loop.close()


def _batch(data: st.DataObject) -> bytes:
    idempotent = data.draw(st.booleans())
    return build_batch(
        [Record(b"k", b"v", 1_700_000_000_000 + i) for i in range(data.draw(st.integers(1, 3)))],
        producer_id=data.draw(st.integers(0, 3)) if idempotent else -1,
        producer_epoch=data.draw(st.integers(0, 2)) if idempotent else -1,
        base_sequence=data.draw(st.integers(0, 6)) if idempotent else -1,
    )


def tame(value: Any, data: st.DataObject, name: str = "") -> Any:
    """A copy of a kio request (or part of one) with the taming described above."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: tame(getattr(value, f.name), data, f.name) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(tame(v, data, name) for v in value[:4])
    if isinstance(value, datetime.timedelta):
        return min(value, _MAX_WAIT)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and name in _NAMES and data.draw(st.booleans()):
        return type(value)(TOPIC)
    if isinstance(value, int) and name in _PARTITIONS and data.draw(st.booleans()):
        return type(value)(data.draw(st.integers(0, 2)))
    if isinstance(value, int) and name in _COUNTS:
        return type(value)(data.draw(st.sampled_from([-1, 0, 1, 2, 3])))
    if isinstance(value, bytes) and name == "records" and data.draw(st.booleans()):
        return _batch(data)
    return value


def _specs() -> Any:
    return pytest.mark.parametrize("spec", [API_SPECS[k] for k in SPECS],
                                   ids=[f"{API_SPECS[k].name}-v{k[1]}" for k in SPECS])


def _client_decodes(spec: ApiSpec, frame: bytes) -> Any:
    _header, header_size = entity_reader(spec.response_type.__header_schema__)(frame, 4)
    body, body_size = entity_reader(spec.response_type)(frame, 4 + header_size)
    assert 4 + header_size + body_size == len(frame)
    return body


async def _handle(running: Running, request: Request) -> bytes | None:
    assert running.broker.state is not None
    handler = HANDLERS[request.api_key]
    reply = await asyncio.wait_for(handler(running.broker.state, request, ClientInfo("fuzz", "127.0.0.1")), 10)
    if reply is None:
        return None
    body = reply.get("__body__") or build(API_SPECS[request.api_key, request.api_version].response_type, reply)
    return encode_response(request, body)


@_specs()
@FUZZ
@given(data=st.data())
def test_random_requests_get_encodable_replies(running: Running, spec: ApiSpec, data: st.DataObject) -> None:
    body = tame(data.draw(st.from_type(spec.request_type)), data)
    request = Request(spec.api_key, spec.api_version, 7, "fuzz", body, 0, True)
    frame = running.loop.run_until_complete(_handle(running, request))
    if frame is None:
        assert spec.api_key == 0 and int(body.acks) == 0
        return
    _client_decodes(spec, frame)


def _error_codes(value: Any) -> Iterator[ErrorCode]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.metadata.get("kafka_type") == "error_code":
                yield getattr(value, f.name)
            else:
                yield from _error_codes(getattr(value, f.name))
    elif isinstance(value, tuple):
        for item in value:
            yield from _error_codes(item)


@_specs()
@FUZZ
@given(data=st.data())
def test_error_answer_encodes_for_every_version(spec: ApiSpec, data: st.DataObject) -> None:
    body = data.draw(st.from_type(spec.request_type))
    request = Request(spec.api_key, spec.api_version, 9, "fuzz", body, 0, True)
    answer = error_response(request)
    if answer is None:  # nothing to put the error in: the server closes the connection
        return
    decoded = _client_decodes(spec, encode_response(request, answer))
    assert set(_error_codes(decoded)) == {ErrorCode.unknown_server_error}


def test_error_answer_mirrors_the_request() -> None:
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.types import TopicName
    from kio.static.primitive import i16, i32, i32Timedelta

    body = ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)),
        topic_data=(TopicProduceData(name=TopicName("t"), partition_data=(
            PartitionProduceData(index=i32(3), records=b""), PartitionProduceData(index=i32(5), records=b""))),),
    )
    answer = error_response(Request(0, 9, 1, "c", body, 0, True))
    assert answer is not None
    [topic] = answer.responses  # type: ignore[attr-defined]
    assert topic.name == "t"
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [
        (3, ErrorCode.unknown_server_error, -1), (5, ErrorCode.unknown_server_error, -1)]

