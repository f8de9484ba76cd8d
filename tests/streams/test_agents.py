"""Agents on a real broker, with the worker running in the test's event loop
(``await app.start()``): what a stream function sees, group_by, transforms, send/cast,
concurrency, timers, failures and the deserialization error policy."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from streamkit.streams.agent import AgentStream, current_event
from streamkit.streams.app import App
from streamkit.streams.event import Event
from streamkit.streams.topic import partition_for_key

from .conftest import Probe, eventually, running, unique

pytestmark = pytest.mark.timeout(90)

T0 = 1_700_000_000_000  # a multiple of every window size used here


class Order(BaseModel):
    id: int
    user: str
    amount: int


def topic_name(app: App, what: str) -> str:
    return f"{app.id}-{what}"


# -- what a stream function sees -------------------------------------------------------


async def test_values_and_event_metadata(make_app: Any) -> None:
    app = make_app()
    topic = app.topic(topic_name(app, "in"), value_type=str)
    events: list[Event] = []
    values: list[str] = []
    current: list[Event | None] = []

    @app.agent(topic)
    async def with_events(stream: AgentStream) -> None:
        async for event in stream.events():
            current.append(current_event())
            events.append(event)

    @app.agent(topic)
    async def with_values(stream: AgentStream) -> None:
        async for value in stream:
            values.append(value)

    async with running(app):
        sent = []
        for i in range(6):
            meta = await topic.send(f"v{i}", key=f"k{i % 3}", timestamp=1_600_000_000_000 + i,
                                    headers=[("trace", f"t{i}".encode()), ("n", b"")])
            sent.append((i, meta))
        await eventually(lambda: len(events) == 6 and len(values) == 6, "both agents to get 6 records")

    by_value = {e.value: e for e in events}
    for i, (partition, offset) in sent:
        e = by_value[f"v{i}"]
        assert e.key == f"k{i % 3}"
        assert e.timestamp == 1_600_000_000_000 + i
        assert e.headers == [("trace", f"t{i}".encode()), ("n", b"")]
        assert e.header("trace") == f"t{i}".encode() and e.header("missing") is None
        assert e.topic == topic.name
        assert (e.partition, e.offset) == (partition, offset)
        assert partition == partition_for_key(f"k{i % 3}".encode(), 4)  # Kafka's partitioner
    assert sorted(values) == [f"v{i}" for i in range(6)]
    # current_event() is the event being processed.
    assert [c.offset if c else None for c in current] == [e.offset for e in events]


async def test_current_event_of_a_values_agent_is_the_records_event(make_app: Any) -> None:
    """An agent iterating values gets from ``current_event()`` the record's Event, built
    when asked: equal to the one ``stream.events()`` hands another agent (key, value,
    timestamp, headers, topic, partition, offset, raw key; null keys and tombstones too),
    the same object for the whole record, and unchanged after the agent moved on."""
    app = make_app()
    topic = app.topic(topic_name(app, "in"), value_type=str, partitions=1)
    from_events: list[Event] = []
    current: list[tuple[Event | None, Event | None]] = []

    @app.agent(topic)
    async def with_events(stream: AgentStream) -> None:
        async for event in stream.events():
            from_events.append(event)

    @app.agent(topic)
    async def with_values(stream: AgentStream) -> None:
        async for _value in stream:
            current.append((current_event(), current_event()))

    async with running(app):
        for i in range(6):
            await topic.send(None if i == 4 else f"v{i}", key=None if i == 2 else f"k{i}",
                             timestamp=1_600_000_000_000 + i,
                             headers=[("trace", f"t{i}".encode())] if i % 2 else None)
        await eventually(lambda: len(from_events) == 6 and len(current) == 6, "both agents to get 6 records")

    assert all(first is second for first, second in current)
    assert [first for first, _ in current] == from_events
    assert [(e.key, e.value, e.raw_key) for e in from_events][2:5] == [
        (None, "v2", None), ("k3", "v3", b"k3"), ("k4", None, b"k4")]
    assert [e.headers for e in from_events] == [[("trace", f"t{i}".encode())] if i % 2 else [] for i in range(6)]
    assert [e.offset for e in from_events] == sorted(e.offset for e in from_events)


async def test_embedded_broker(tmp_path: Path) -> None:
    """No broker named: the worker runs one in its own loop, in ``{data_dir}/broker``."""
    app = App(unique("embedded"), data_dir=tmp_path, config={"commit.interval.ms": 100})
    topic = app.topic("numbers", value_type=int)
    total: list[int] = []

    @app.agent(topic)
    async def add(stream: AgentStream) -> None:
        async for n in stream:
            total.append(n)

    async with running(app) as runtime:
        assert runtime.bootstrap is not None and runtime.bootstrap.startswith("127.0.0.1:")
        for n in range(5):
            await topic.send(n, key="k")
        await eventually(lambda: sum(total) == 10, "the agent to add 0..4")
    assert (tmp_path / "broker").is_dir()
    assert app.runtime is None


async def test_null_keys_and_tombstones_reach_the_agent(make_app: Any, probe: Probe) -> None:
    app = make_app()
    topic = app.topic(topic_name(app, "in"), value_type=Order)
    seen: list[tuple[Any, Any]] = []

    @app.agent(topic)
    async def collect(stream: AgentStream) -> None:
        async for event in stream.events():
            seen.append((event.key, event.value))

    async with running(app):
        await topic.send(Order(id=1, user="u", amount=3))  # no key
        await topic.send(None, key="gone")  # tombstone
        await eventually(lambda: len(seen) == 2, "two records")
    assert sorted(seen, key=repr) == sorted([(None, Order(id=1, user="u", amount=3)), ("gone", None)], key=repr)


# -- group_by ----------------------------------------------------------------------------


async def test_group_by_rekeys_through_the_repartition_topic(make_app: Any, probe: Probe) -> None:
    """Records keyed by order id are re-keyed by user: each user's records reach one
    partition of ``{app}-by-user-repartition`` (the user's), in their original order, and
    the agent sees the new key; a table keyed by user is then always local."""
    app = make_app()
    orders = app.topic(topic_name(app, "orders"), value_type=Order, partitions=1)
    totals = app.Table("totals", default=int)
    seen: list[Event] = []

    @app.agent(orders)
    async def per_user(stream: AgentStream) -> None:
        async for event in stream.group_by(lambda o: o.user, name="by-user").events():
            totals[event.key] += event.value.amount
            seen.append(event)

    users = ["ann", "bob", "cid", "dan", "eve", "fay"]
    sent = [Order(id=i, user=users[(i * 7) % len(users)], amount=i) for i in range(60)]
    async with running(app) as runtime:
        repartition = app.topics[f"{app.id}-by-user-repartition"]
        assert repartition.internal
        for order in sent:
            orders.send_soon(order, key=str(order.id))
        await eventually(lambda: len(seen) == len(sent), "every order to be re-keyed and processed")
        await probe.settle(runtime)
        assert dict(totals.items()) == {u: sum(o.amount for o in sent if o.user == u) for u in users}

    for user in users:
        mine = [e for e in seen if e.value.user == user]
        assert [e.value.id for e in mine] == [o.id for o in sent if o.user == user], "per-key order"
        assert {e.key for e in mine} == {user}
        assert {e.topic for e in mine} == {repartition.name}
        assert {e.partition for e in mine} == {partition_for_key(user.encode(), 4)}
    # The repartition topic holds exactly the re-keyed records.
    records = await probe.read(repartition.name)
    assert sorted(r.key for r in records) == sorted(o.user.encode() for o in sent)


async def test_group_by_must_come_before_iterating(make_app: Any) -> None:
    app = make_app()
    errors: list[BaseException] = []

    @app.agent(topic_name(app, "in"))
    async def twice(stream: AgentStream) -> None:
        stream.group_by(lambda v: v, name="one")
        try:
            stream.group_by(lambda v: v, name="two")
        except RuntimeError as exc:
            errors.append(exc)
        async for _ in stream:
            pass

    async with running(app):
        await eventually(lambda: errors, "the second group_by to be refused")
    assert "grouped once" in str(errors[0])


# -- transforms --------------------------------------------------------------------------


async def test_filter_and_map_on_the_stream(make_app: Any) -> None:
    app = make_app()
    topic = app.topic(topic_name(app, "in"), value_type=int, partitions=1)
    values: list[Any] = []
    events: list[Event] = []

    @app.agent(topic)
    async def evens_squared(stream: AgentStream) -> None:
        async for v in stream.filter(lambda v: v % 2 == 0).map(lambda v: v * v).map(str):
            values.append(v)

    @app.agent(topic)
    async def mapped_events(stream: AgentStream) -> None:
        async for e in stream.map(lambda v: -v).events():
            events.append(e)

    async with running(app) as runtime:
        for i in range(10):
            await topic.send(i, key="k", timestamp=5000 + i)
        await eventually(lambda: len(events) == 10 and len(values) == 5, "both agents")
        await eventually(lambda: runtime._committed.get((topic.name, 0)) == 10,
                         "filtered-out records to be acknowledged and committed too")
    assert values == ["0", "4", "16", "36", "64"]
    assert [e.value for e in events] == [-i for i in range(10)]
    # A mapped event keeps the record's metadata.
    assert [(e.key, e.timestamp, e.offset) for e in events] == [("k", 5000 + i, i) for i in range(10)]


# -- send and cast -------------------------------------------------------------------------


async def test_agent_send_and_cast(make_app: Any) -> None:
    app = make_app()
    got: list[tuple[str, Any]] = []
    forwarded: list[Any] = []

    @app.agent(topic_name(app, "a"), name="first")
    async def first(stream: AgentStream) -> None:
        async for event in stream.events():
            got.append((event.key, event.value))
            second.cast({"from": event.value}, key=event.key)  # fire and forget, to another agent

    @app.agent(topic_name(app, "b"), name="second")
    async def second(stream: AgentStream) -> None:
        async for value in stream:
            forwarded.append(value)

    async with running(app) as runtime:
        partition, offset = await first.send("hello", key="k1")
        assert partition == partition_for_key(b"k1", 4) and offset == 0
        first.cast("world", key="k2", timestamp=123)
        await eventually(lambda: len(forwarded) == 2, "both values to pass through both agents")
        await runtime.commit()  # a commit confirms every cast
        assert runtime.collector is not None and not runtime.collector._pending_sends
    assert sorted(got) == [("k1", "hello"), ("k2", "world")]
    assert sorted(f["from"] for f in forwarded) == ["hello", "world"]


# -- concurrency -------------------------------------------------------------------------


async def test_concurrency_keeps_per_partition_order(make_app: Any, probe: Probe) -> None:
    app = make_app()
    topic = app.topic(topic_name(app, "in"), value_type=int)
    log: list[tuple[int, int, int]] = []  # (instance, partition, offset)
    active: set[int] = set()
    overlap: list[int] = []
    rng = random.Random(7)

    @app.agent(topic, concurrency=3)
    async def work(stream: AgentStream) -> None:
        async for event in stream.events():
            active.add(stream.instance)
            overlap.append(len(active))
            await asyncio.sleep(rng.random() / 500)  # simulated I/O: lets instances interleave
            log.append((stream.instance, event.partition, event.offset))
            active.discard(stream.instance)

    n = 200
    async with running(app) as runtime:
        await probe.produce_many(topic.name, [(f"k{i}".encode(), str(i).encode(), None) for i in range(n)])
        await eventually(lambda: len(log) == n, f"{n} records processed", timeout=30)
        await probe.settle(runtime)

    by_partition: dict[int, list[int]] = defaultdict(list)
    instances: dict[int, set[int]] = defaultdict(set)
    for instance, partition, offset in log:
        by_partition[partition].append(offset)
        instances[partition].add(instance)
    for partition, offsets in by_partition.items():
        assert offsets == sorted(offsets) == list(range(len(offsets))), f"partition {partition} out of order"
        assert instances[partition] == {partition % 3}, "a partition is always served by one instance"
    assert len({i for i, _p, _o in log}) > 1
    assert max(overlap) > 1, "the instances never ran concurrently"


# -- timers ------------------------------------------------------------------------------


async def test_timer_fires_repeatedly(make_app: Any) -> None:
    app = make_app()
    ticks: list[float] = []

    @app.timer(0.05)
    async def every_50ms() -> None:
        ticks.append(asyncio.get_running_loop().time())

    async with running(app) as runtime:
        await eventually(lambda: len(ticks) >= 4, "the timer to fire")
        assert runtime.failure is None
    count = len(ticks)
    assert all(b - a >= 0.04 for a, b in itertools.pairwise(ticks))
    await asyncio.sleep(0.15)  # stopped: no more ticks
    assert len(ticks) == count


async def test_a_failing_timer_stops_the_worker_like_an_agent(make_app: Any,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    app = make_app()

    @app.timer(0.05, name="flaky")
    async def flaky() -> None:
        raise RuntimeError("timer broke")

    async with running(app, expect_failure=True) as runtime:
        await asyncio.wait_for(runtime.stopped.wait(), 20)
    assert isinstance(runtime.failure, RuntimeError) and str(runtime.failure) == "timer broke"
    assert "timer flaky failed; stopping the worker" in caplog.text


async def test_a_timer_writing_a_table_while_commits_run_loses_no_write(make_app: Any, probe: Probe) -> None:
    """Commits every 10 ms while a timer writes a table every few ms: every write is in
    the committed changelog (a write during a commit's prepare failed and was lost)."""
    app = make_app(config={"commit.interval.ms": 10})
    topic = app.topic(topic_name(app, "in"), value_type=str, partitions=1)
    table = app.Table("ticks", default=int, partitions=1)
    writes: list[int] = []

    @app.agent(topic)
    async def reader(stream: AgentStream) -> None:
        async for value in stream:
            table[value] = 1

    @app.timer(0.002)
    async def tick() -> None:
        runtime = app.runtime
        if runtime is None or not runtime.assigned or runtime.tasks.restores:
            return  # the table's partition is not this worker's yet
        n = len(writes)
        writes.append(n)
        table[f"t{n}"] = n

    async with running(app) as runtime:
        for i in range(40):
            await probe.produce(topic.name, f"v{i}".encode(), key=b"k")
        await eventually(lambda: len(writes) >= 200 and runtime.metrics.commits >= 20, "writes across commits",
                         timeout=60)
    assert runtime.failure is None
    latest = {k.decode(): orjson.loads(v) for k, v in (await probe.latest(table.changelog.name)).items()}
    expected = {f"t{n}": n for n in writes}
    assert {k: v for k, v in latest.items() if k.startswith("t")} == expected


# -- failures ------------------------------------------------------------------------------


async def test_agent_exception_stops_the_worker(make_app: Any, probe: Probe) -> None:
    """The worker stops with ``runtime.failure`` set and does not commit the failed event:
    a worker started again (here with a fixed agent) processes it."""
    app = make_app()
    topic = app.topic(topic_name(app, "in"), value_type=str, partitions=1)
    done: list[str] = []

    @app.agent(topic)
    async def fragile(stream: AgentStream) -> None:
        async for value in stream:
            if value == "boom":
                raise ValueError("cannot handle boom")
            done.append(value)

    async with running(app, expect_failure=True) as runtime:
        for v in ["a", "b"]:
            await topic.send(v, key="k")
        await eventually(lambda: runtime._committed.get((topic.name, 0)) == 2, "a and b committed")
        await topic.send("boom", key="k")
        await topic.send("c", key="k")
        await asyncio.wait_for(runtime.stopped.wait(), 20)
    assert isinstance(runtime.failure, ValueError)
    assert str(runtime.failure) == "cannot handle boom"
    assert app.runtime is None
    assert done == ["a", "b"]
    assert (await probe.committed(app.id))[_tp(topic.name, 0)] == 2

    again = make_app(app_id=app.id, data_dir=app.data_dir)
    retried: list[str] = []

    @again.agent(again.topic(topic.name, value_type=str))
    async def fixed(stream: AgentStream) -> None:
        async for value in stream:
            retried.append(value)

    async with running(again):
        await eventually(lambda: retried == ["boom", "c"], "the failed event to be processed again")


def _tp(topic: str, partition: int) -> Any:
    from aiokafka.structs import TopicPartition

    return TopicPartition(topic, partition)


# -- deserialization errors --------------------------------------------------------------

GOOD = [Order(id=1, user="u", amount=5), Order(id=2, user="u", amount=7)]
BAD_VALUE = b'{"id": 3, "user": "u", "amount": '  # cut short: not JSON


async def _produce_good_bad_good(probe: Probe, topic: str) -> None:
    await probe.produce(topic, GOOD[0].model_dump_json().encode(), key=b"k", partition=0)
    await probe.produce(topic, BAD_VALUE, key=b"k", partition=0, headers=[("origin", b"test")])
    await probe.produce(topic, b'{"id": 4}', key=b"\xff\xfe", partition=0)  # bad key and value
    await probe.produce(topic, GOOD[1].model_dump_json().encode(), key=b"k", partition=0)


def _orders_app(make_app: Any, policy: str | None, **config: Any) -> tuple[App, Any, list[Order]]:
    cfg = dict(config)
    if policy is not None:
        cfg["deserialization.exception.handler"] = policy
    app = make_app(config=cfg)
    topic = app.topic(topic_name(app, "orders"), value_type=Order, partitions=1)
    got: list[Order] = []

    @app.agent(topic)
    async def orders(stream: AgentStream) -> None:
        async for order in stream:
            got.append(order)

    return app, topic, got


@pytest.mark.parametrize("with_dsl", [False, True])
async def test_fail_policy_stops_on_a_bad_record_with_the_command_that_skips_it(make_app: Any, probe: Probe,
                                                                                 with_dsl: bool) -> None:
    app, topic, got = _orders_app(make_app, "fail")
    if with_dsl:  # a second reader of the topic: still one failure, on the first bad record
        app.stream(topic).map(lambda o: o.id).to(topic_name(app, "ids"))
    await probe.create_topic(topic.name, 1)
    async with running(app, expect_failure=True) as runtime:
        await _produce_good_bad_good(probe, topic.name)
        await asyncio.wait_for(runtime.stopped.wait(), 20)
    message = str(runtime.failure)
    assert f"cannot deserialize record {topic.name}-0@1" in message
    assert "invalid Order: Invalid JSON: EOF while parsing" in message  # pydantic's detail
    assert "deserialization.exception.handler" in message
    assert (f"`streamkit groups reset-offsets {app.id} --topic {topic.name} --partition 0 --to-offset 2 "
            "--execute`") in message
    # The good record before it may or may not have reached the agent before the stop.
    assert got in ([], GOOD[:1])
    assert runtime.metrics.deserialization_errors == 1
    committed = (await probe.committed(app.id)).get(_tp(topic.name, 0), 0)
    assert committed <= 1, "the bad record (or what follows) was committed"


async def test_skip_policy_drops_bad_records(make_app: Any, probe: Probe) -> None:
    app, topic, got = _orders_app(make_app, "skip")
    await probe.create_topic(topic.name, 1)
    async with running(app) as runtime:
        await _produce_good_bad_good(probe, topic.name)
        await probe.settle(runtime)
        assert got == GOOD
        assert runtime.metrics.deserialization_errors == 2
        assert runtime._committed[(topic.name, 0)] == 4
    assert not [t for t in await probe.admin.list_topics() if t.startswith(app.id) and "dead" in t]


@pytest.mark.parametrize("custom_name", [False, True])
async def test_dead_letter_policy_is_the_default(make_app: Any, probe: Probe, custom_name: bool) -> None:
    """With no setting at all, bad records go to ``{app}-dead-letter`` with their key, value,
    timestamp and headers, plus Kafka Streams' error-context headers; the rest goes on."""
    extra = {"errors.deadletterqueue.topic.name": f"dlq-{unique('x')}"} if custom_name else {}
    app, topic, got = _orders_app(make_app, None, **extra)
    dlq = extra.get("errors.deadletterqueue.topic.name", f"{app.id}-dead-letter")
    await probe.create_topic(topic.name, 1)
    async with running(app) as runtime:
        await _produce_good_bad_good(probe, topic.name)
        await probe.settle(runtime)
        assert got == GOOD
        dead = await eventually(lambda: _read_n(probe, dlq, 2), "two dead letters")
    assert [(r.key, r.value) for r in dead] == [(b"k", BAD_VALUE), (b"\xff\xfe", b'{"id": 4}')]
    first = dict(dead[0].headers)
    assert first["origin"] == b"test"  # the record's own headers are kept
    assert first["__streams.errors.topic"] == topic.name.encode()
    assert (first["__streams.errors.partition"], first["__streams.errors.offset"]) == (b"0", b"1")
    assert first["__streams.errors.exception"] == b"ValidationError"
    assert b"invalid Order: Invalid JSON" in first["__streams.errors.message"]
    assert dict(dead[1].headers)["__streams.errors.offset"] == b"2"


def _two_readers(app: App, topic: Any, readers: str) -> dict[str, list[int]]:
    """Two readers of ``topic`` of the kinds named ``"first+second"`` (``agent``, ``group_by``
    for an agent that re-keys first, ``dsl`` for a DSL pipeline): what each saw (order ids),
    from its agent's list or, for a pipeline, its output topic ``{app}-dsl-{i}``."""
    seen: dict[str, list[int]] = {}
    for i, kind in enumerate(readers.split("+")):
        name = f"{kind}{i}"
        if kind == "dsl":
            app.stream(topic).map(lambda o: o.id).to(topic_name(app, f"dsl-{i}"))
            continue
        got = seen.setdefault(name, [])

        async def collect(stream: AgentStream, got: list[int] = got, kind: str = kind, name: str = name) -> None:
            if kind == "group_by":
                stream = stream.group_by(lambda o: o.user, name=f"by-user-{name}")
            async for order in stream:
                got.append(order.id)

        app.agent(topic, name=name)(collect)
    return seen


@pytest.mark.parametrize(("readers", "policy"), [
    ("agent+dsl", "dead_letter"), ("agent+group_by", "dead_letter"), ("group_by+group_by", "dead_letter"),
    ("dsl+dsl", "dead_letter"), ("agent+dsl", "skip")])
async def test_a_bad_record_is_handled_once_however_many_read_it(make_app: Any, probe: Probe,
                                                                   caplog: pytest.LogCaptureFixture,
                                                                   readers: str, policy: str) -> None:
    """A bad record read by two agents, an agent and a DSL pipeline, or two pipelines is
    one dead letter, one log line and one count in the metric, as with one reader."""
    app = make_app(config={"deserialization.exception.handler": policy})
    topic = app.topic(topic_name(app, "orders"), value_type=Order, partitions=1)
    seen = _two_readers(app, topic, readers)
    await probe.create_topic(topic.name, 1)
    caplog.set_level("WARNING", logger="streamkit.streams.runtime")
    async with running(app) as runtime:
        await _produce_good_bad_good(probe, topic.name)
        await probe.settle(runtime)
        assert runtime.metrics.deserialization_errors == 2
    for name, got in seen.items():
        assert got == [1, 2], name
    for i in (i for i, kind in enumerate(readers.split("+")) if kind == "dsl"):
        assert [r.value for r in await probe.read(topic_name(app, f"dsl-{i}"))] == [b"1", b"2"]
    lines = [r.getMessage() for r in caplog.records if "cannot be deserialized" in r.getMessage()]
    assert len(lines) == 2, lines
    assert [f"{topic.name}-0@1" in lines[0], f"{topic.name}-0@2" in lines[1]] == [True, True]
    if policy == "dead_letter":
        dead = await probe.read(f"{app.id}-dead-letter")
        assert [dict(r.headers)["__streams.errors.offset"] for r in dead] == [b"1", b"2"]


async def _read_n(probe: Probe, topic: str, n: int) -> list[Any] | None:
    if topic not in await probe.admin.list_topics():
        return None
    records = await probe.read(topic)
    return records if len(records) >= n else None


async def test_a_skipped_record_does_not_commit_records_still_queued(make_app: Any, probe: Probe) -> None:
    """Skipping a bad record acknowledges it, but only once the agent has processed the
    records before it: otherwise a commit would include records still waiting in the agent's
    queue, and a crash would lose them."""
    app = make_app(config={"deserialization.exception.handler": "skip"})
    topic = app.topic(topic_name(app, "orders"), value_type=Order, partitions=1)
    release = asyncio.Event()
    got: list[Order] = []

    @app.agent(topic)
    async def slow(stream: AgentStream) -> None:
        async for order in stream:
            await release.wait()
            got.append(order)

    await probe.create_topic(topic.name, 1)
    async with running(app) as runtime:
        await probe.produce(topic.name, GOOD[0].model_dump_json().encode(), key=b"k")
        await probe.produce(topic.name, GOOD[1].model_dump_json().encode(), key=b"k")
        await probe.produce(topic.name, BAD_VALUE, key=b"k")
        await eventually(lambda: runtime.metrics.deserialization_errors == 1, "the bad record to be seen")
        # (A commit now would wait for the agent to finish its event: the gate.)
        assert runtime.acks.committable().get((topic.name, 0), 0) == 0
        release.set()
        await probe.settle(runtime)
        assert got == GOOD
        assert runtime._committed[(topic.name, 0)] == 3


async def test_user_codec_errors_follow_the_policy(make_app: Any, probe: Probe) -> None:
    class Upper:
        def dumps(self, obj: Any) -> bytes:
            return str(obj).upper().encode()

        def loads(self, data: bytes) -> Any:
            if not data.isupper():
                raise ValueError("not upper case")
            return data.decode()

    app = make_app(config={"deserialization.exception.handler": "skip"})
    topic = app.topic(topic_name(app, "in"), value_type=Upper(), partitions=1)
    got: list[str] = []

    @app.agent(topic)
    async def collect(stream: AgentStream) -> None:
        async for v in stream:
            got.append(v)

    await probe.create_topic(topic.name, 1)
    async with running(app) as runtime:
        await topic.send("a", key="k")
        await probe.produce(topic.name, b"lower", key=b"k")
        await topic.send("b", key="k")
        await probe.settle(runtime)
        assert got == ["A", "B"]
        assert runtime.metrics.deserialization_errors == 1


async def test_json_values_round_trip_through_a_topic(make_app: Any, probe: Probe) -> None:
    app = make_app()
    topic = app.topic(topic_name(app, "in"), partitions=1)  # no value_type: JSON
    got: list[Any] = []

    @app.agent(topic)
    async def collect(stream: AgentStream) -> None:
        async for v in stream:
            got.append(v)

    values = [{"a": 1}, [1, "x"], "text", 3.5, None, True]
    async with running(app):
        for v in values:
            await topic.send(v, key="k")
        await eventually(lambda: len(got) == len(values), "all values")
    assert got == values
    raw = await probe.read(topic.name)
    assert [r.value for r in raw][:4] == [orjson.dumps(v) for v in values[:4]]


# -- windowed tables: event time and late records ---------------------------------------------


async def test_windowed_table_uses_the_topics_timestamp_extractor(make_app: Any, probe: Probe) -> None:
    """An agent's windowed table counts by the event time the topic's extractor gives (a
    field of the value), also through group_by's repartition topic; record timestamps are
    ignored."""
    app = make_app()
    views = app.topic(topic_name(app, "views"), partitions=1, timestamp=lambda e: e.value["at"])
    per_page = app.Table("per_page", default=int).tumbling(0.1, expires=3600)
    seen: list[int] = []

    @app.agent(views)
    async def count(stream: AgentStream) -> None:
        async for event in stream.group_by(lambda v: v["page"], name="by_page").events():
            seen.append(event.timestamp)
            per_page[event.key] += 1

    at = [T0 + 5, T0 + 150, T0 + 99, T0 + 230, T0 + 100]
    # Record timestamps that would put everything in one window.
    values = [(b"u", orjson.dumps({"page": "/a", "at": t}), T0 + 50) for t in at]
    async with running(app) as runtime:
        await probe.produce_many(views.name, values)
        await probe.settle(runtime)
        windows = per_page.windows("/a")
    assert seen == at
    assert [(w.start - T0, w.end - T0, n) for w, n in windows] == [(0, 100, 2), (100, 200, 2), (200, 300, 1)]


async def test_late_records_of_a_windowed_table_go_to_the_late_topic(make_app: Any, probe: Probe) -> None:
    """A record whose windows have all expired is counted once and, with
    late.records.topic.name, sent there (key: the table key, value: the event's JSON)."""
    late_topic = unique("late")
    app = make_app(config={"late.records.topic.name": late_topic})
    clicks = app.topic(topic_name(app, "clicks"), value_type=Order, partitions=4)
    spent = app.Table("spent", default=int).hopping(10, 5, expires=10)

    @app.agent(clicks)
    async def add(stream: AgentStream) -> None:
        async for order in stream:
            spent[order.user] += order.amount

    async with running(app) as runtime:
        await probe.create_topic(late_topic, 1)
        for i, ts in enumerate([T0 + 40_000, T0 + 1_000, T0 + 27_000]):
            # Stream time T0+40s: windows ending at or before T0+30s are expired. T0+1s has
            # only expired windows (late); T0+27s has [20s, 30s) expired but [25s, 35s) not.
            await clicks.send(Order(id=i, user="ann", amount=i + 1), key="ann", timestamp=ts)
        await probe.settle(runtime)
        assert runtime.metrics.late_records == 1
        late = await eventually(lambda: probe.read(late_topic), "the late record")
    assert [(r.key, orjson.loads(r.value)) for r in late] == [(b"ann", {"id": 1, "user": "ann", "amount": 2})]
