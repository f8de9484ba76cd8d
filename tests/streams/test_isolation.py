"""Which input records an app reads, by ``isolation.level`` (Kafka Streams' rule): under
at-least-once its inputs are read ``read_uncommitted`` unless the setting says
``read_committed``, so what transactional producers abort is processed; under exactly-once
they are always read ``read_committed``. The input here comes from a real transactional
producer (aiokafka): one committed transaction, one aborted, one committed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

import streamkit

from .conftest import Probe, running, unique

pytestmark = pytest.mark.timeout(120)

MINUTE = 60_000
W = 1_700_000_000_000 // MINUTE * MINUTE  # the start of the minute every record falls in
COMMITTED, ABORTED = 7, 3


async def _produce_in_transactions(bootstrap: str, topic: str) -> None:
    """Views of one page in the first minute: 5 committed, 3 aborted, 2 committed; then a
    view an hour later, committed, which closes that minute's window."""
    view = orjson.dumps({"page": "/a"})
    transactions = [(range(0, 5), True), (range(5, 5 + ABORTED), False), (range(8, 10), True)]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("views-producer"))
    await producer.start()
    try:
        for seconds, commit in transactions:
            await producer.begin_transaction()
            for i in seconds:
                await producer.send(topic, view, key=b"u", timestamp_ms=W + i * 1000)
            await (producer.commit_transaction() if commit else producer.abort_transaction())
        async with producer.transaction():
            await producer.send(topic, view, key=b"u", timestamp_ms=W + 60 * MINUTE)
    finally:
        await producer.stop()


@pytest.mark.parametrize(("config", "counted"), [
    ({}, COMMITTED + ABORTED),  # at-least-once: read_uncommitted, as in Kafka Streams
    ({"isolation.level": "read_committed"}, COMMITTED),
    ({"processing.guarantee": "exactly_once"}, COMMITTED),  # always read_committed
], ids=["at-least-once", "at-least-once-read-committed", "exactly-once"])
async def test_windowed_counts_follow_the_isolation_level(make_app: Any, probe: Probe, config: dict[str, str],
                                                          counted: int) -> None:
    app = make_app(config=config)
    views = app.topic(f"{app.id}-views", partitions=1)
    (app.stream(views)
        .group_by(lambda v: v["page"], name="by-page")
        .window(streamkit.tumbling(minutes=1), grace=timedelta(0))
        .count(name="per-minute")
        .final()
        .to(f"{app.id}-counts"))
    await probe.create_topic(views.name, 1)
    await _produce_in_transactions(probe.bootstrap, views.name)
    async with running(app) as runtime:
        await probe.settle(runtime)
    outs = await probe.read(f"{app.id}-counts", read_committed=True)
    assert [(r.key, orjson.loads(r.value)["start"], orjson.loads(r.value)["value"]) for r in outs] == [
        (b"/a", W, counted)]
