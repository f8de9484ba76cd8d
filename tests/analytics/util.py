"""Plain Kafka clients (confluent-kafka) for the Spark and Dask tests: create topics and
produce known records with chosen partitions, timestamps and headers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.analytics.fetch import read_range
from streamkit.analytics.options import read_options
from streamkit.analytics.planning import PlanError, plan_ranges
from streamkit.analytics.tables import TableDecoder, latest_per_key
from streamkit.testing import BrokerThread

T0 = 1_700_000_000_000


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    partition: int
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


def broker_fixture(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[BrokerThread]:
    with BrokerThread(Path(tmp_path_factory.mktemp(name))) as broker:
        yield broker


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, records: Iterable[Rec]) -> None:
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for r in records:
        while True:
            try:
                producer.produce(topic, key=r.key, value=r.value, partition=r.partition, timestamp=r.timestamp,
                                 headers=list(r.headers) or None, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0
    assert not errors, errors


def current_table(bootstrap: str, decoder: TableDecoder) -> list[dict[str, Any]]:
    """A table's rows as of now, with the core reader alone (no Spark, no Dask)."""
    options = read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": decoder.topic})
    try:
        ranges = plan_ranges(options)
    except PlanError:
        return []  # the changelog does not exist yet
    latest = [rec for r in ranges for rec in latest_per_key(read_range(options.client_config, r), decoder)]
    return decoder.to_batch(latest).to_pylist()


async def wait_for_table(bootstrap: str, decoder: TableDecoder, want: list[dict[str, Any]],
                         timeout: float = 60) -> None:
    """Wait until the table holds exactly ``want`` (any order)."""
    deadline = time.monotonic() + timeout
    key = sort_key
    while True:
        rows = await asyncio.to_thread(current_table, bootstrap, decoder)
        if sorted(rows, key=key) == sorted(want, key=key):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {decoder.topic} to hold {want} (last: {rows})")
        await asyncio.sleep(0.2)


def sort_key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(v) for v in row.values())
