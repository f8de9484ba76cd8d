"""Conformance: one scenario (an app, the records sent into it, the topics it writes) run
through ``AppTestDriver`` and through a real worker on a real broker, so a test can check
that both give the same outputs. streamkit's own suite runs its scenarios this way
(tests/testing/test_conformance.py); users can run theirs too::

    scenario = Scenario(app, [Send("page_views", {"user": "u", "page": "/"}, key="u", timestamp=t0), ...],
                        outputs=("page_counts",))
    expected = run_in_driver(scenario)
    assert await run_on_broker(scenario, broker.bootstrap, tmp_path, expect=expected) == expected

Outputs are compared per topic and key, in offset order: the order of records of one key is
defined (one partition), the interleaving of keys is not. Give records explicit timestamps
that grow in the order they are sent: a worker reads a backlog lowest timestamp first, the
driver in the order of ``send``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.structs import TopicPartition

from streamkit.streams.clients import start_client, stop_client
from streamkit.streams.processing import jsonable
from streamkit.testing.driver import AppTestDriver, restore_declarations, save_declarations

if TYPE_CHECKING:
    from streamkit.streams.app import App

__all__ = ["Outputs", "Scenario", "Send", "run_in_driver", "run_on_broker"]

# topic -> key -> values in offset order (JSON-able)
Outputs = dict[str, dict[Any, list[Any]]]


@dataclass(frozen=True)
class Send:
    """One record sent into the app: ``send()``'s arguments."""

    topic: str
    value: Any = None
    key: Any = None
    timestamp: int | None = None
    partition: int | None = None
    headers: Mapping[str, str | bytes] | None = None


@dataclass(frozen=True)
class Scenario:
    """An app, the records sent into it in order, the topics whose outputs are compared,
    and settings for this run (``config``, Kafka's names)."""

    app: App
    sends: Sequence[Send]
    outputs: tuple[str, ...]
    config: Mapping[str, Any] = field(default_factory=dict)


def _add(out: Outputs, topic: str, key: Any, value: Any) -> None:
    out.setdefault(topic, {}).setdefault(key, []).append(jsonable(value))


def run_in_driver(scenario: Scenario) -> Outputs:
    """The scenario's outputs through ``AppTestDriver`` (after a final commit)."""
    out: Outputs = {t: {} for t in scenario.outputs}
    with AppTestDriver(scenario.app, config=scenario.config) as driver:
        for s in scenario.sends:
            driver.input(s.topic).send(s.value, key=s.key, timestamp=s.timestamp, headers=s.headers,
                                       partition=s.partition)
        driver.commit()
        for topic in scenario.outputs:
            for record in driver.output(topic, read_committed=True).read_all():
                _add(out, topic, record.key, record.value)
    return out


@contextlib.contextmanager
def _configured(app: App, overrides: Mapping[str, Any]) -> Iterator[None]:
    saved = save_declarations(app)
    app.configure(overrides)
    try:
        yield
    finally:
        restore_declarations(app, saved)


async def run_on_broker(scenario: Scenario, bootstrap: str, state_dir: Path, *, expect: Outputs | None = None,
                        timeout_s: float = 60) -> Outputs:
    """The scenario's outputs through a real worker (``app.start``) on the broker at
    ``bootstrap``: the inputs are produced first, then the worker runs until its outputs
    equal ``expect`` (or, without it, until ``timeout_s``), and is stopped; what the
    output topics then hold (read_committed) is returned."""
    app = scenario.app
    config = {"commit.interval.ms": 100, **scenario.config, "state.dir": str(state_dir)}
    with _configured(app, config):
        await _produce(app, bootstrap, scenario.sends)
        runtime = await app.start(broker=bootstrap)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if runtime.failure is not None:
                    break
                if expect is not None and await _read(app, bootstrap, scenario.outputs) == expect:
                    break
                await asyncio.sleep(0.1)
        finally:
            await runtime.stop()
        if runtime.failure is not None:
            raise RuntimeError(f"the worker failed: {runtime.failure!r}") from runtime.failure
        return await _read(app, bootstrap, scenario.outputs)


async def _produce(app: App, bootstrap: str, sends: Sequence[Send]) -> None:
    """Create the input topics as the worker would, and produce the records."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await start_client(admin)
    try:
        wanted = {s.topic for s in sends}
        new = [NewTopic(name, app.topics[name].partitions or app.settings.num_partitions, 1)
               for name in sorted(wanted)]
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics(new)
    finally:
        await stop_client(admin)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await start_client(producer)
    try:
        for s in sends:
            key, value = app.topics[s.topic].encode(s.key, s.value)
            headers = [(h, v.encode() if isinstance(v, str) else bytes(v)) for h, v in (s.headers or {}).items()]
            await producer.send_and_wait(s.topic, value, key=key, partition=s.partition, timestamp_ms=s.timestamp,
                                         headers=headers or None)
    finally:
        await stop_client(producer)


async def _read(app: App, bootstrap: str, topics: Sequence[str]) -> Outputs:
    """Every committed record of ``topics``, decoded with the app's codecs."""
    out: Outputs = {t: {} for t in topics}
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await start_client(admin)
    try:
        described = await admin.describe_topics(list(topics))
    finally:
        await stop_client(admin)
    tps = [TopicPartition(d["topic"], p["partition"]) for d in described if not d["error_code"]
           for p in d["partitions"]]
    if not tps:
        return out
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                isolation_level="read_committed", auto_offset_reset="earliest")
    await start_client(consumer)
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            batch = await consumer.getmany(timeout_ms=200)
            for tp_records in batch.values():
                records.extend(tp_records)
        for record in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
            topic = app.topics.get(record.topic)
            key, value = topic.decode(record.key, record.value) if topic is not None else (record.key, record.value)
            _add(out, record.topic, key, value)
    finally:
        await stop_client(consumer)
    return out
