"""Fixtures for the Connect tests: one real broker per module (BrokerThread on port 0) and
standalone workers started in the test's event loop, their REST API on port 0."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from streamkit.connect.standalone import StandaloneWorker
from streamkit.connect.worker_config import load_worker_config
from streamkit.testing import BrokerThread

T = TypeVar("T")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    with BrokerThread(tmp_path_factory.mktemp("broker")) as running:
        yield running


def worker_settings(bootstrap: str, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "offset.storage.file.filename": str(tmp_path / "offsets.json"),
            "listeners": "http://127.0.0.1:0", "offset.flush.interval.ms": "500", **extra}


@asynccontextmanager
async def standalone(settings: dict[str, Any], connectors: list[tuple[str, dict[str, Any]]] = ()
                     ) -> AsyncIterator[tuple[StandaloneWorker, httpx.AsyncClient]]:
    worker = StandaloneWorker(load_worker_config(settings), list(connectors))
    await worker.start()
    try:
        async with httpx.AsyncClient(base_url=worker.url, timeout=30) as client:
            yield worker, client
    finally:
        await worker.stop()


async def eventually(probe: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Await ``probe()`` (sync or async) until truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        await asyncio.sleep(interval)


async def produce(bootstrap: str, topic: str, values: list[bytes | None], keys: list[bytes | None] | None = None) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i, value in enumerate(values):
            await producer.send_and_wait(topic, value, key=keys[i] if keys else None)
    finally:
        await producer.stop()


async def consume(bootstrap: str, topic: str, count: int, timeout: float = 30) -> list[Any]:
    """The first ``count`` records of ``topic`` (from the beginning, no group)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    out: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"read {len(out)} of {count} records from {topic} in {timeout}s")
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                out.extend(records)
    finally:
        await consumer.stop()
    return out[:count]
