"""Client lifecycle: a worker stopped (or a restore cancelled) at any moment of a client's
start leaves no connection open behind it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from streamkit.streams.agent import AgentStream
from streamkit.streams.clients import start_client
from streamkit.testing import BrokerProcess
from tests.streams.conftest import Probe, eventually, running


def _open_connections() -> int:
    """Connections of this process's Kafka clients that are still open: each has a reader
    task running until it is closed."""
    return sum(1 for task in asyncio.all_tasks()
               if getattr(task.get_coro(), "__qualname__", "") == "AIOKafkaConnection._read")


def _unclosed_after_collect() -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


async def test_a_start_cancelled_at_any_point_closes_its_connections(broker: BrokerProcess) -> None:
    """The pattern of a table restore: start a consumer, use it, stop it on the way out;
    cancelled at every step of the start in turn."""

    async def use_a_consumer() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        try:
            await start_client(consumer)
            await asyncio.sleep(3600)
        finally:
            await consumer.stop()

    _unclosed_after_collect()  # what earlier tests left is not this test's business
    for step in range(60):  # cancel after 0, 0.5, 1, ... 29.5 ms: through every await of start
        task = asyncio.create_task(use_a_consumer())
        await asyncio.sleep(step / 2000)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        del task
    assert _unclosed_after_collect() == []


async def test_a_start_cancelled_again_while_it_finishes_closes_its_connections(broker: BrokerProcess) -> None:
    """A restore may be cancelled more than once (the revoke, the stop, the loop shutting
    down): a second cancel that arrived while the start was finishing after the first one
    skipped the stop and left the client connected."""

    async def use_a_consumer() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        await start_client(consumer)
        await consumer.stop()

    _unclosed_after_collect()
    before = _open_connections()
    for step in range(40):
        task = asyncio.create_task(use_a_consumer())
        await asyncio.sleep(step / 2000)
        while not task.done():  # cancel again and again until it gives up
            task.cancel()
            await asyncio.sleep(0.0005)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        del task
    assert _open_connections() == before
    assert _unclosed_after_collect() == []


async def test_a_failed_start_leaves_no_connection(broker: BrokerProcess) -> None:
    """A start that fails after its client connected (a fault injected after a real
    bootstrap and a real connection to the broker) closes what it opened."""
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=2000)
    _unclosed_after_collect()
    before = _open_connections()
    original = consumer._client.bootstrap

    async def bootstrap_then_fail() -> None:
        await original()
        node = next(iter(consumer._client.cluster.brokers())).nodeId
        assert await consumer._client.ready(node)
        raise RuntimeError("failed after connecting")

    consumer._client.bootstrap = bootstrap_then_fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="after connecting"):
        await start_client(consumer)
    await asyncio.sleep(0.1)
    assert _open_connections() == before
    assert _unclosed_after_collect() == []


async def test_stop_waits_for_the_restores_it_cancels(make_app: Any, probe: Probe) -> None:
    """Stopping a worker whose table restores have just begun (their consumers connecting)
    returned while the restores were still closing their consumers, which then finished after
    the stop, or never (the loop gone)."""
    apps = [make_app() for _ in range(3)]
    for app in apps:
        # A changelog long enough that its restore is still running when the worker stops.
        changelog = f"{app.id}-t-changelog"
        await probe.create_topic(changelog, 2, {"cleanup.policy": "compact"})
        await probe.produce_many(changelog, ((f"k{i}".encode(), b"1", None) for i in range(20_000)))
    _unclosed_after_collect()
    before = _open_connections()  # the probe's
    for app in apps:
        topic = app.topic(f"{app.id}-in", value_type=int, partitions=2)
        app.Table("t", default=int, partitions=2)

        @app.agent(topic)
        async def noop(stream: AgentStream) -> None:
            async for _ in stream:
                pass

        async with running(app) as runtime:
            await eventually(lambda: any(p.restored for p in runtime.metrics.restore.values()),
                             "a table restore to be under way", interval=0.001)
            restores = [task for task in runtime.tasks.restores.values() if not task.done()]
            assert restores
        assert all(task.done() for task in restores)
    await asyncio.sleep(0.5)  # a straggling close would end by now
    assert _open_connections() == before
    assert _unclosed_after_collect() == []

