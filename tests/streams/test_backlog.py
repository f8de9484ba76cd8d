"""Event time on a real broker: data that is already there when the app starts (a backlog),
skewed partitions, repartition after repartition, a join over a backlog and a restart in the
middle of one. Each gives exactly the batch computation of the same records.

The backlog: a 3-partition topic of keyed clicks covering five minutes, produced before the
app starts, then a few records an hour later on every partition. Counted per page in
one-minute tumbling windows with 5 s grace, ``.final()``. A worker drains one partition's
backlog before the next; without watermarks the first partition's hour-later records closed
every window and the other partitions' records were dropped as late."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from streamkit.streams.topic import partition_for_key
from streamkit.streams.windows import MIN_TIMESTAMP
from streamkit.testing import http_get, metric_value

from .apps_for_tests.pipelines import count_pages
from .conftest import Probe, eventually, running
from .worker_processes import Scenario

pytestmark = [pytest.mark.timeout(180), pytest.mark.integration]

T0 = 1_700_000_040_000  # a minute boundary
MINUTE, GRACE = 60_000, 5_000
SOURCE_PARTITIONS = 3
PAGES = ["/", "/a", "/b", "/c", "/d"]

Click = tuple[str, str, int]  # user, page, timestamp


def backlog(seed: int, *, per_partition: int = 120, skew: dict[int, int] | None = None) -> list[Click]:
    """Ten minutes of clicks of 12 users in time order, some a little out of order (within
    grace), then one click an hour later per user. ``skew`` shifts a partition's clicks
    later (ms)."""
    rng = random.Random(seed)
    users = [f"user{i}" for i in range(12)]
    out: list[Click] = []
    later: list[Click] = []
    for user in users:
        p = partition_for_key(user.encode(), SOURCE_PARTITIONS)
        shift = (skew or {}).get(p, 0)
        ts = T0 + shift
        for _ in range(per_partition // 4):
            ts += rng.randint(0, 2 * 5 * MINUTE // (per_partition // 4))
            jitter = rng.randint(0, GRACE // 2) if rng.random() < 0.2 else 0
            out.append((user, rng.choice(PAGES), ts - jitter))
        later.append((user, rng.choice(PAGES), T0 + 3_600_000 + shift))
    return sorted(out, key=lambda c: c[2]) + later


def reference(clicks: list[Click], key: Callable[[Click], str] = lambda c: c[1]) -> dict[tuple[str, int], int]:
    """The batch computation: per page and minute the number of clicks, for the windows the
    records close (by the slowest partition); a record late with respect to its own
    partition's largest timestamp by more than grace is dropped."""
    counts: dict[tuple[str, int], int] = defaultdict(int)
    highs: dict[int, int] = {}
    for click in clicks:
        p = partition_for_key(click[0].encode(), SOURCE_PARTITIONS)
        ts = click[2]
        highs[p] = max(highs.get(p, MIN_TIMESTAMP), ts)
        start = ts - ts % MINUTE
        if start + MINUTE + GRACE > highs[p]:
            counts[(key(click), start)] += 1
    stream_time = min(highs.values())
    return {k: n for k, n in counts.items() if k[1] + MINUTE + GRACE <= stream_time}


def encode(clicks: list[Click]) -> list[tuple[bytes, bytes, int]]:
    return [(user.encode(), orjson.dumps({"user": user, "page": page}), ts) for user, page, ts in clicks]


async def results(probe: Probe, topic: str) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for r in await probe.read(topic):
        value = orjson.loads(r.value)
        key = (value["key"], value["start"])
        assert key not in out, f"window {key} emitted twice"
        out[key] = value["value"]
    return out


async def until_results(probe: Probe, topic: str, expected: dict[Any, Any], timeout: float = 60) -> dict[Any, Any]:
    """The output once it has as many windows as expected (then compared exactly)."""
    async def enough() -> dict[Any, Any] | None:
        if topic not in await probe.admin.list_topics():
            return None
        got = await results(probe, topic)
        return got if len(got) >= len(expected) else None

    return await eventually(enough, f"{len(expected)} final windows in {topic}", timeout=timeout, interval=0.3)


@pytest.mark.parametrize("workers", [1, 3])
async def test_backlog_gives_the_batch_reference(make_app: Any, probe: Probe, workers: int) -> None:
    clicks = backlog(1)
    expected = reference(clicks)
    assert len(expected) > 20 and all(start < T0 + 10 * MINUTE for _p, start in expected)
    first = make_app(config={"num.partitions": 3})
    topic = f"{first.id}-clicks"
    await probe.create_topic(topic, SOURCE_PARTITIONS)
    await probe.produce_many(topic, encode(clicks))
    apps = [first] + [make_app(app_id=first.id, config={"num.partitions": 3}) for _ in range(workers - 1)]
    for app in apps:
        count_pages(app, app.topic(topic, partitions=SOURCE_PARTITIONS), f"{first.id}-counts")
    async with running(apps[0]) as runtime:
        if workers == 1:
            got = await until_results(probe, f"{first.id}-counts", expected)
            assert runtime.metrics.late_records == 0
        else:
            async with running(apps[1]), running(apps[2]):
                got = await until_results(probe, f"{first.id}-counts", expected)
    assert got == expected


async def test_backlog_with_partitions_aligned(make_app: Any, probe: Probe) -> None:
    """max.task.idle.ms: partitions that run ahead of the slowest one are paused until it
    catches up (small fetches, so that they do); the results are the same."""
    clicks = backlog(6, per_partition=400)
    expected = reference(clicks)
    app = make_app(config={"num.partitions": 2, "max.task.idle.ms": 10_000, "max.poll.records": 10})
    topic = f"{app.id}-clicks"
    await probe.create_topic(topic, SOURCE_PARTITIONS)
    # Partition by partition, so that the first ones read are far ahead of the others.
    by_partition: dict[int, list[Click]] = defaultdict(list)
    for click in clicks:
        by_partition[partition_for_key(click[0].encode(), SOURCE_PARTITIONS)].append(click)
    for p in sorted(by_partition):
        await probe.produce_many(topic, encode(by_partition[p]))
    count_pages(app, app.topic(topic, partitions=SOURCE_PARTITIONS), f"{app.id}-counts")
    async with running(app) as runtime:
        got = await until_results(probe, f"{app.id}-counts", expected)
        assert runtime.metrics.late_records == 0
        assert runtime.metrics.alignment_pauses > 0
    assert got == expected


async def test_skewed_live_partitions(make_app: Any, probe: Probe) -> None:
    """Live input where one partition runs ten minutes ahead of the others: nothing of the
    slower partitions is dropped, and windows close as the slowest partition moves."""
    clicks = backlog(2, skew={0: 10 * MINUTE})
    expected = reference(clicks)
    app = make_app(config={"num.partitions": 2})
    topic = app.topic(f"{app.id}-clicks", partitions=SOURCE_PARTITIONS)
    count_pages(app, topic, f"{app.id}-counts")
    by_partition: dict[int, list[Click]] = defaultdict(list)
    for click in clicks:
        by_partition[partition_for_key(click[0].encode(), SOURCE_PARTITIONS)].append(click)
    async with running(app, web_port=0) as runtime:
        # The fast partition first, then the others, in slices: as live producers would.
        await probe.produce_many(topic.name, encode(by_partition[0]))
        rest = sorted(by_partition[1] + by_partition[2], key=lambda c: c[2])
        for i in range(0, len(rest), 20):
            await probe.produce_many(topic.name, encode(rest[i:i + 20]))
        got = await until_results(probe, f"{app.id}-counts", expected)
        assert runtime.metrics.late_records == 0
        # /metrics: stream time per operator and partition, and how far it is behind.
        status, body = await http_get(runtime.web.port, "/metrics")
        assert status == 200
        labels = {"app": app.id, "operator": "clicks-per-minute"}
        assert metric_value(body, "streamkit_stream_time_ms", **labels, partition="0") is not None
        assert metric_value(body, "streamkit_stream_time_lag_ms", **labels, partition="1") is not None
    assert got == expected


async def test_two_repartitions_in_a_row(make_app: Any, probe: Probe) -> None:
    clicks = backlog(3)
    expected = reference(clicks)
    app = make_app(config={"num.partitions": 2})
    topic = f"{app.id}-clicks"
    await probe.create_topic(topic, SOURCE_PARTITIONS)
    await probe.produce_many(topic, encode(clicks))
    count_pages(app, app.topic(topic, partitions=SOURCE_PARTITIONS), f"{app.id}-counts", two_hops=True)
    async with running(app) as runtime:
        got = await until_results(probe, f"{app.id}-counts", expected)
        assert runtime.metrics.late_records == 0
    assert got == expected


async def test_restart_mid_backlog(make_app: Any, probe: Probe) -> None:
    """A worker stopped half way through the backlog and started again: the same results."""
    clicks = backlog(4, per_partition=400)
    expected = reference(clicks)
    app = make_app(config={"num.partitions": 2, "max.poll.records": 20})
    topic = f"{app.id}-clicks"
    await probe.create_topic(topic, SOURCE_PARTITIONS)
    await probe.produce_many(topic, encode(clicks))
    count_pages(app, app.topic(topic, partitions=SOURCE_PARTITIONS), f"{app.id}-counts")
    async with running(app) as runtime:
        await eventually(lambda: runtime.metrics.commits >= 3 and sum(runtime.metrics.consumed_total.values()) > 300,
                         "some of the backlog processed")
    again = make_app(app_id=app.id, data_dir=app.data_dir, config={"num.partitions": 2})
    count_pages(again, again.topic(topic, partitions=SOURCE_PARTITIONS), f"{app.id}-counts")
    async with running(again) as runtime:
        got = await until_results(probe, f"{app.id}-counts", expected)
        assert runtime.metrics.late_records == 0
    assert got == expected


async def test_stream_stream_join_over_a_backlog(make_app: Any, probe: Probe) -> None:
    """Clicks joined with purchases of the same user within 10 s, both topics a backlog
    whose first partition runs an hour ahead: every pair that the batch join finds, once."""
    rng = random.Random(5)
    users = [f"user{i}" for i in range(9)]
    clicks = sorted(((u, T0 + rng.randrange(5 * MINUTE)) for u in users for _ in range(8)), key=lambda c: c[1])
    buys = sorted(((u, T0 + rng.randrange(5 * MINUTE)) for u in users for _ in range(4)), key=lambda c: c[1])
    within = 10_000
    expected = sorted((u, c, b) for u, c in clicks for v, b in buys if u == v and abs(c - b) <= within)
    assert expected
    app = make_app(config={"num.partitions": SOURCE_PARTITIONS})
    left = app.topic(f"{app.id}-clicks", partitions=SOURCE_PARTITIONS, value_type=int)
    right = app.topic(f"{app.id}-buys", partitions=SOURCE_PARTITIONS, value_type=int)
    far = [(u, T0 + 3_600_000) for u in users]
    await probe.create_topic(left.name, SOURCE_PARTITIONS)
    await probe.create_topic(right.name, SOURCE_PARTITIONS)
    await probe.produce_many(left.name, [(u.encode(), str(ts).encode(), ts) for u, ts in clicks + far])
    await probe.produce_many(right.name, [(u.encode(), str(ts).encode(), ts) for u, ts in buys + far])
    (app.stream(left).join(app.stream(right), within=within, name="click-buy")
        .map(lambda pair: list(pair)).to(f"{app.id}-pairs"))
    async with running(app) as runtime:
        async def pairs() -> list[tuple[str, int, int]] | None:
            if f"{app.id}-pairs" not in await probe.admin.list_topics():
                return None
            got = [(r.key.decode(), *orjson.loads(r.value)) for r in await probe.read(f"{app.id}-pairs")]
            # Count only the backlog's pairs: the far records pair up too, and a partition
            # that runs ahead may emit them before the last backlog pairs come out.
            real = [p for p in got if p[1] < T0 + 3_600_000]
            return got if len(real) >= len(expected) else None

        got = await eventually(pairs, "the joined pairs", timeout=60, interval=0.3)
        assert runtime.metrics.late_records == 0
    real = sorted(p for p in got if p[1] < T0 + 3_600_000)
    assert real == expected


# -- a worker process killed mid-backlog -----------------------------------------------------

BACKLOG_APP = "tests.streams.apps_for_tests.backlog:app"


async def _kill_mid_backlog(s: Scenario, config: dict[str, Any]) -> tuple[list[Click], int]:
    """A ``streamkit worker`` process of the backlog app, slowed to about 1 ms per click,
    SIGKILLed once a quarter of the backlog is committed, and started again (at full speed)
    on the same data directory; returns the clicks and how many of them were committed at
    the kill, once the restarted worker has committed every input record."""
    clicks = backlog(8, per_partition=1_600)
    s.input = f"{s.app_id}-clicks"
    await s.probe.create_topic(s.input, SOURCE_PARTITIONS)
    await s.probe.produce_many(s.input, encode(clicks))
    w = s.worker("w1", config={"max.poll.records": 20, **config}, app=BACKLOG_APP)
    w.env["SK_TEST_PACE_MS"] = "1"
    w.start()

    async def committed() -> int:
        return sum(o for tp, o in (await s.probe.committed(s.app_id)).items() if tp.topic == s.input)

    async def a_quarter() -> bool:
        return await committed() >= len(clicks) // 4

    await eventually(a_quarter, "a quarter of the backlog committed", timeout=90, interval=0.05)
    w.kill()
    at_kill = await committed()
    assert at_kill < len(clicks), "the backlog was done before the SIGKILL: not mid-backlog"
    del w.env["SK_TEST_PACE_MS"]
    w.start()
    topics = [s.input, f"{s.app_id}-by-page-repartition"]

    async def done() -> bool:
        assert w.alive, f"worker exited:\n{w.log()[-3000:]}"
        return await s.probe.caught_up(s.app_id, topics)

    await eventually(done, "the restarted worker to commit the backlog", timeout=150, interval=0.1)
    await w.terminate()
    return clicks, at_kill


async def _emitted(probe: Probe, topic: str, *, read_committed: bool = False) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in await probe.read(topic, read_committed=read_committed):
        value = orjson.loads(r.value)
        out[(value["key"], value["start"])].append(value["value"])
    return out


async def test_sigkill_mid_backlog_loses_nothing(scenario: Scenario) -> None:
    """At least once: SIGKILL mid-backlog, restart. Every window of the batch reference is
    emitted and no other; none counts less than the reference, and all of them together
    over-count by no more than the records not committed at the kill (processed again)."""
    s = scenario
    clicks, at_kill = await _kill_mid_backlog(s, {})
    expected = reference(clicks)
    got = await _emitted(s.probe, f"{s.app_id}-counts")
    assert set(got) == set(expected)
    short = {k: (v, expected[k]) for k, v in got.items() if min(v) < expected[k]}
    assert not short, f"records lost: {short}"
    assert sum(max(v) - expected[k] for k, v in got.items()) <= len(clicks) - at_kill


async def test_sigkill_mid_backlog_gives_the_batch_reference(scenario: Scenario) -> None:
    """Exactly once: SIGKILL mid-backlog, restart: every final window once, with exactly
    the batch reference's count."""
    s = scenario
    clicks, _at_kill = await _kill_mid_backlog(s, {"processing.guarantee": "exactly_once_v2"})
    got = await _emitted(s.probe, f"{s.app_id}-counts", read_committed=True)
    assert {k: v for k, v in got.items() if len(v) > 1} == {}, "windows emitted more than once"
    assert {k: v[0] for k, v in got.items()} == reference(clicks)
