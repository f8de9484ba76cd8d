"""Partition counts: a table has as many partitions as the topic that updates it (task p owns
input partition p and table partition p). A table declared without a count takes its input's;
a declared count that differs, or a changelog of another count, is refused at start with a
message naming the fix; a declared topic count that differs from the existing topic's is
warned about."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

import confluent_kafka
import pytest

from streamkit.streams.agent import AgentStream
from streamkit.streams.runtime import StartupError
from streamkit.streams.table import NotCoPartitionedError

from .conftest import Probe, eventually, running

pytestmark = pytest.mark.integration


async def test_a_table_takes_the_partition_count_of_its_input(make_app: Any, probe: Probe) -> None:
    """``partitions=3`` on the input against ``num.partitions=4``: every record of every
    partition is counted (records of partition 3 had no table partition, and keys hashed
    over 4 partitions missed the record's task)."""
    app = make_app(config={"num.partitions": 4})
    topic = app.topic(f"{app.id}-views", partitions=3)
    counts = app.Table("counts", default=int)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            counts[event.key] += 1

    async with running(app) as runtime:
        assert counts.partitions == 3 and topic.partitions == 3
        producer = confluent_kafka.Producer({"bootstrap.servers": probe.bootstrap})
        users = [f"u{i % 30}" for i in range(300)]
        for user in users:
            producer.produce(topic.name, b"{}", key=user.encode())
        assert producer.flush(30) == 0
        await probe.settle(runtime)
        assert dict(counts.items()) == dict(Counter(users))
    described = await probe.admin.describe_topics([counts.changelog.name])
    assert len(described[0]["partitions"]) == 3


async def test_a_declared_table_count_that_differs_from_the_input_is_refused(make_app: Any) -> None:
    app = make_app()
    topic = app.topic(f"{app.id}-views", partitions=3)
    counts = app.Table("counts", default=int, partitions=4)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            counts[event.key] += 1

    with pytest.raises(StartupError) as info:
        await app.start()
    message = str(info.value)
    assert f"agent 'count' reads topic '{topic.name}' (3 partitions)" in message
    assert "table 'counts' (4 partitions)" in message
    assert "app.Table('counts', partitions=3)" in message and "group_by" in message
    assert app.runtime is None


async def test_a_changelog_of_another_count_is_refused(make_app: Any, probe: Probe) -> None:
    app = make_app()
    await probe.create_topic(f"{app.id}-counts-changelog", 2, {"cleanup.policy": "compact"})
    topic = app.topic(f"{app.id}-views", partitions=4)
    counts = app.Table("counts", default=int)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            counts[event.key] += 1

    with pytest.raises(StartupError, match=r"table 'counts' has 4 partitions but its changelog topic .* has 2: "
                                           r"declare .*delete the topic"):
        await app.start()


async def test_a_declared_topic_count_that_differs_is_warned_about(make_app: Any, probe: Probe,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    app = make_app()
    name = f"{app.id}-views"
    await probe.create_topic(name, 2)
    topic = app.topic(name, partitions=6)

    @app.agent(topic)
    async def noop(stream: AgentStream) -> None:
        async for _ in stream:
            pass

    with caplog.at_level(logging.WARNING, logger="streamkit.streams.runtime"):
        async with running(app):
            await eventually(lambda: topic.partitions == 2, "the existing count to be taken")
    assert any(f"topic {name} has 2 partitions, not the 6 the app declares" in r.getMessage()
               for r in caplog.records)


# -- a table keyed differently from its input -----------------------------------------------


async def test_a_table_keyed_differently_fails_naming_the_fix_that_works(make_app: Any, probe: Probe) -> None:
    """Counting per page over a topic confluent-kafka keyed by user is refused (each page's
    count would be split over the tasks of its users), naming group_by; with that group_by
    the same count is exact."""
    producer = confluent_kafka.Producer({"bootstrap.servers": probe.bootstrap})
    pages = [f"/p{i % 7}" for i in range(400)]
    for grouped in (False, True):
        app = make_app()
        name = f"{app.id}-views"
        topic = app.topic(name, partitions=4, value_type=dict)
        per_page = app.Table("per_page", default=int)

        @app.agent(topic)
        async def count(stream: AgentStream, grouped: bool = grouped, per_page: Any = per_page) -> None:
            source = stream.group_by(lambda v: v["page"], name="by_page") if grouped else stream
            async for view in source:
                per_page[view["page"]] += 1

        await probe.create_topic(name, 4)
        for i, page in enumerate(pages):
            producer.produce(name, b'{"page": "%s"}' % page.encode(), key=f"user-{i % 50}".encode())
        assert producer.flush(30) == 0
        async with running(app, expect_failure=not grouped) as runtime:
            if grouped:
                await probe.settle(runtime, timeout=60)
                assert dict(per_page.items()) == dict(Counter(pages))
            else:
                await asyncio.wait_for(runtime.stopped.wait(), 30)
                message = str(runtime.failure)
                assert isinstance(runtime.failure, NotCoPartitionedError), runtime.failure
                assert "keyed differently from the stream" in message and "stream.group_by(" in message
