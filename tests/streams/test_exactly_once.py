"""Exactly-once processing (``processing.guarantee=exactly_once``), proven with process kills.

The counter app (``apps_for_tests/counter.py``) re-keys its input through a repartition
topic (``g{value % 7}``), counts per group in a table (not idempotent: a record processed
twice counts twice) and sends every updated count to an output topic. Under exactly-once,
whatever is SIGKILLed when, the committed results equal the offline reference exactly:

- the counts changelog, read committed, holds the number of input records per group;
- the output topic, read committed, holds for each group exactly the counts 1, 2, ..., n in
  order: no duplicate (a record processed twice) and no gap (a lost one).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

import streamkit
from streamkit.streams.app import App

from .conftest import Probe, eventually, log_tail, running
from .test_workers import _owned_by
from .worker_processes import PARTITIONS, Scenario, Worker

pytestmark = [pytest.mark.timeout(300), pytest.mark.integration]

GROUPS = 7
EXACTLY_ONCE = {"processing.guarantee": "exactly_once"}


def _output(s: Scenario) -> str:
    return f"{s.app_id}-counts-out"


def _eos_worker(s: Scenario, name: str, **config: Any) -> Worker:
    w = s.worker(name, config={**EXACTLY_ONCE, **config})
    w.env.update({"SK_TEST_OUTPUT": _output(s), "SK_TEST_GROUPS": str(GROUPS)})
    return w


def _expected(s: Scenario) -> dict[str, int]:
    return dict(Counter(f"g{int(v) % GROUPS}" for _k, v in s.sent))


async def _outputs(s: Scenario) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in await s.probe.read(_output(s), read_committed=True):
        out.setdefault(r.key.decode(), []).append(orjson.loads(r.value))
    return out


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """``values`` as runs of consecutive numbers (first, last): where a sequence breaks."""
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


async def _check_exact(s: Scenario) -> None:
    expected = _expected(s)
    state = await s.probe.latest(f"{s.app_id}-counts-changelog", read_committed=True)
    counts = {k.decode(): orjson.loads(v) for k, v in state.items()}
    assert counts == expected
    outputs = await _outputs(s)
    wrong = {g: (_runs(vs), len(vs), expected.get(g)) for g, vs in outputs.items()
             if vs != list(range(1, expected.get(g, 0) + 1))}
    assert not wrong, f"output not exactly 1..n per group (duplicates or gaps): {wrong}"
    assert set(outputs) == set(expected)


async def _caught_up(s: Scenario, timeout: float = 120) -> None:
    """Every input record committed, and every output committed (the repartition topic
    drained too: the outputs' total is the number of records)."""
    await s.caught_up(timeout=timeout)

    async def outputs_complete() -> bool:
        return sum(len(v) for v in (await _outputs(s)).values()) >= len(s.sent)

    await eventually(outputs_complete, "every output to be committed", timeout=timeout, interval=0.2)


async def _committed_more(s: Scenario, than: int, timeout: float = 60) -> int:
    async def more() -> int | None:
        for w in s.workers:
            if w.process is not None and w.process.returncode not in (None, 0, -9):
                raise AssertionError(f"worker {w.name} failed:\n{log_tail(w.log_path)}")
        total = await s.committed_total()
        return total if total > than else None

    return await eventually(more, f"the group to commit past {than}", timeout=timeout, interval=0.05)


def _produce_until(s: Scenario, stop: asyncio.Event, size: int = 200, every: float = 0.1) -> asyncio.Task[None]:
    """Produce ``size`` records every ``every`` seconds until ``stop`` is set: the input
    flows during every kill, whatever the worker's speed."""
    async def run() -> None:
        while not stop.is_set():
            await s.produce(size)
            await asyncio.sleep(every)

    return asyncio.ensure_future(run())


async def test_sigkill_again_and_again_gives_exact_results(scenario: Scenario) -> None:
    """Five SIGKILLs at random moments while the input flows, each followed by a restart
    on the same state directory: counts and outputs are exact, not merely complete."""
    s = scenario
    await s.probe.create_topic(_output(s), PARTITIONS)
    rng = random.Random(20261126)
    # A restart on a loaded machine can take longer than the default 10 s, after which the
    # broker, not the next producer, aborts the open transaction: the check below is of
    # the fencing, so the transactions here outlive any restart.
    w = _eos_worker(s, "w1", **{"transaction.timeout.ms": 120_000}).start()
    stop = asyncio.Event()
    producing = _produce_until(s, stop)
    committed = 0
    for _ in range(5):
        committed = await _committed_more(s, committed)
        await asyncio.sleep(rng.uniform(0.0, 0.6))  # somewhere in a commit interval
        w.kill()
        w.start()
    stop.set()
    await producing
    await _caught_up(s)
    await w.terminate()
    await _check_exact(s)
    # Every kill left a transaction open; its task's next producer aborted it.
    assert "aborts its open transaction" in s.broker.log_file.read_text(errors="replace")


async def test_a_worker_killed_during_a_rebalance_leaves_exact_results(scenario: Scenario) -> None:
    """Two workers share the tasks; a third joins and, while the group rebalances, one of
    the first two is SIGKILLed. The survivors take its tasks over (fencing its producers):
    counts and outputs are exact."""
    s = scenario
    await s.probe.create_topic(_output(s), PARTITIONS)
    a, b = _eos_worker(s, "a").start(), _eos_worker(s, "b").start()
    stop = asyncio.Event()
    producing = _produce_until(s, stop)
    await _owned_by([a, b], s.input)
    await _committed_more(s, 1000)
    c = _eos_worker(s, "c").start()
    await c.port()  # loaded and about to join: the rebalance starts now
    await asyncio.sleep(0.3)
    b.kill()
    await _owned_by([a, c], s.input)
    await _committed_more(s, await s.committed_total())
    stop.set()
    await producing
    await _caught_up(s)
    await a.terminate()
    await c.terminate()
    await _check_exact(s)


async def test_at_least_once_would_not_be_exact(scenario: Scenario) -> None:
    """The same kill under at_least_once repeats outputs: what makes the tests above pass
    is the guarantee, not a kill that happened to land right after a commit. (No commit
    happens here before the SIGKILL: the interval is ten minutes.)"""
    s = scenario
    await s.probe.create_topic(_output(s), PARTITIONS)
    w = s.worker("w1", config={"commit.interval.ms": 600_000})
    w.env.update({"SK_TEST_OUTPUT": _output(s), "SK_TEST_GROUPS": str(GROUPS)})
    w.start()
    await s.produce(2000)

    async def produced(n: int) -> bool:
        return len(await s.probe.read(_output(s))) >= n

    await eventually(lambda: produced(2000), "the first life's outputs", timeout=60, interval=0.2)
    w.kill()
    w.start()
    await eventually(lambda: produced(4000), "the second life's outputs", timeout=60, interval=0.2)
    await w.terminate()
    outputs = await _outputs(s)
    # At least twice: the second life also re-reads what the first one repartitioned.
    assert sum(len(v) for v in outputs.values()) >= 2 * len(s.sent), "records not processed again"


# -- in-process ------------------------------------------------------------------------------


async def test_aborted_changelog_writes_never_reach_a_restored_store(make_app: Any, probe: Probe,
                                                                     tmp_path: Path) -> None:
    """A transaction left open by a killed task producer is aborted by the next owner;
    the table restored from the changelog (read committed) has only committed counts."""
    app: App = make_app(config=EXACTLY_ONCE)
    words = app.topic(f"{app.id}-in", value_type=str, partitions=1)
    counts = app.Table("counts", default=int, partitions=1)

    @app.agent(words)
    async def count(stream: Any) -> None:
        async for event in stream.events():
            counts[event.key] += 1

    await probe.create_topic(words.name, 1)
    for i in range(10):
        await probe.produce(words.name, str(i).encode(), key=b"k")
    runtime = await app.start()
    try:
        await eventually(lambda: counts.get("k") == 10, "10 counted")
    finally:
        await runtime.stop()
    # A zombie with the task's transactional id writes a wrong count and dies mid-transaction.
    zombie = AIOKafkaProducer(bootstrap_servers=probe.bootstrap, transactional_id=f"{app.id}-0")
    await zombie.start()
    await zombie.begin_transaction()
    await zombie.send_and_wait(counts.changelog.name, b"999", key=counts.key_codec.dumps("k"), partition=0)
    await zombie.stop()  # no commit: the transaction stays open
    # A fresh state directory: everything comes from the changelog.
    app2: App = make_app(app_id=app.id, config=EXACTLY_ONCE, data_dir=tmp_path / "fresh")
    words2 = app2.topic(words.name, value_type=str, partitions=1)
    counts2 = app2.Table("counts", default=int, partitions=1)

    @app2.agent(words2)
    async def count2(stream: Any) -> None:
        async for event in stream.events():
            counts2[event.key] += 1

    runtime = await app2.start()
    try:
        def restored() -> bool:
            progress = runtime.metrics.restore.get(("counts", 0))
            return progress is not None and progress.done

        await eventually(restored, "counts-0 restored")
        assert counts2.get("k") == 10
        await probe.produce(words.name, b"10", key=b"k")
        await eventually(lambda: counts2.get("k") == 11, "one more counted")
    finally:
        await runtime.stop()
    assert runtime.failure is None


async def test_global_table_writes_commit_with_the_task(make_app: Any, probe: Probe) -> None:
    """A global table written by an agent under exactly-once: the write is on the changelog
    at once, in the task's open transaction, and every worker's copy (read committed) sees it
    only when that transaction commits with the input offset that led to it."""
    app: App = make_app(config={**EXACTLY_ONCE, "commit.interval.ms": 600_000})  # explicit commits only
    words = app.topic(f"{app.id}-in", value_type=str, partitions=1)
    seen = app.GlobalTable("seen", partitions=1)

    @app.agent(words)
    async def remember(stream: Any) -> None:
        async for event in stream.events():
            seen[event.key] = event.value

    await probe.create_topic(words.name, 1)
    runtime = await app.start()
    try:
        await probe.produce(words.name, b"hello", key=b"k")

        async def written() -> bool:
            return len(await probe.read(seen.changelog.name)) == 1

        await eventually(written, "the write on the changelog (uncommitted)")
        assert await probe.read(seen.changelog.name, read_committed=True) == []
        assert seen.get("k") is None  # the follower reads committed records only
        await runtime.commit()
        await eventually(lambda: seen.get("k") == "hello", "the write visible once committed")
        assert await probe.committed(app.id) != {}
    finally:
        await runtime.stop()
    assert runtime.failure is None


class _PageView(BaseModel):
    user: str
    page: str


async def test_live_transactional_input_gives_exact_windows(make_app: Any, probe: Probe) -> None:
    """The README's DSL count under exactly-once, started on an empty topic (its partitions
    announced idle), then fed by a transactional producer: commit, abort, commit, commit,
    abort, commit. The final windows are the committed records' and none of them is late.

    The tasks' transactions commit in the worst order, task 0's first and the others'
    a moment later: downstream then reads task 0's records of a batch before the other
    tasks' ones, and had the partitions that just got data still counted as idle, task 0's
    watermark closed their windows."""
    app: App = make_app(config={**EXACTLY_ONCE, "linger.ms": 5})
    pages = ["/home", "/cart", "/about", "/health", "/a", "/b", "/c"]
    window_ms = 10_000
    t0 = 1_700_000_040_000
    views = app.topic(f"{app.id}-views", value_type=_PageView, partitions=4)
    out = f"{app.id}-counts"
    (app.stream(views)
        .filter(lambda v: v.page != "/health")
        .group_by(lambda v: v.page, name="by_page")
        .window(streamkit.tumbling(seconds=window_ms // 1000), grace=timedelta(seconds=1))
        .count(name="page-counts")
        .final()
        .to(out))
    expected: Counter[tuple[str, int]] = Counter()
    async with running(app) as runtime:
        await probe.settle(runtime)
        await eventually(lambda: len(runtime._announced_idle) == 4, "the empty input partitions announced idle")
        collector = runtime.collector
        assert collector is not None
        commit_one = collector._commit_one

        async def task_0_first(producer: Any, offsets: Any, group_id: str) -> None:
            if producer is not collector._tasks.get(0):
                await asyncio.sleep(0.3)
            await commit_one(producer, offsets, group_id)

        collector._commit_one = task_0_first  # type: ignore[method-assign]
        producer = AIOKafkaProducer(bootstrap_servers=probe.bootstrap, transactional_id=f"{app.id}-producer")
        await producer.start()
        try:
            i = 0
            for commit in [True, False, True, True, False, True]:
                await producer.begin_transaction()
                for _ in range(150):  # 150 s of event time: 15 windows
                    page, ts = pages[i % len(pages)], t0 + i * 1000
                    await producer.send(views.name, orjson.dumps({"user": f"u{i % 5}", "page": page}),
                                        key=f"u{i % 5}".encode(), timestamp_ms=ts)
                    if commit and page != "/health":
                        expected[(page, ts - ts % window_ms)] += 1
                    i += 1
                await (producer.commit_transaction() if commit else producer.abort_transaction())
                await asyncio.sleep(0.5)  # the worker reads and commits in between
            await producer.begin_transaction()  # a record on every partition closes every window
            for p in range(4):
                await producer.send(views.name, orjson.dumps({"user": "x", "page": "/health"}), partition=p,
                                    timestamp_ms=t0 + (i + 100) * 1000)
            await producer.commit_transaction()
        finally:
            await producer.stop()
        await probe.settle(runtime, timeout=60)
        assert runtime.metrics.late_records == 0
    results = [orjson.loads(r.value) for r in await probe.read(out, read_committed=True)]
    assert {(v["key"], v["start"]): v["value"] for v in results} == dict(expected)
    assert len(results) == len(expected), "a window came out twice"
