"""Plain Kafka clients (confluent-kafka) for the Spark and Dask tests: create topics and
produce known records with chosen partitions, timestamps and headers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

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
