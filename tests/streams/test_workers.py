"""Restart and scale with real worker *processes* (``python -m streamkit worker``) on the
shared broker process: SIGTERM and SIGKILL mid-stream, two workers and rebalances, a
restore after the local state was deleted, a rebalance in the middle of a restore, and a
standby replica taking over from a killed worker.

The app (``apps_for_tests/counter.py``) counts records per key (``counts``, not idempotent)
and keeps the last value per key (``latest``, idempotent). Results are read from the
tables' changelog topics (the committed state) and from the workers' web endpoints (the
live state). Each test records its duration in its report section (``-rA`` shows it)."""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from typing import Any

import confluent_kafka
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamkit.streams import worker as worker_module
from streamkit.streams.topic import partition_for_key

from .conftest import eventually, unique
from .worker_processes import APP, PARTITIONS, REPO, Scenario, Worker

pytestmark = [pytest.mark.timeout(180), pytest.mark.integration]

# -- (a) restart mid-stream ----------------------------------------------------------------


async def _produce_in_background(s: Scenario, chunks: int, size: int, lead: int = 1000) -> asyncio.Task[None]:
    """Produce ``chunks`` chunks; while ``s.pace`` is set, stay at most ``lead`` records
    ahead of what the group has committed, so the input is still flowing when the test
    stops the worker (a producer left alone outruns it and the stream is over)."""
    async def run() -> None:
        for _ in range(chunks):
            await s.produce(size)
            deadline = time.monotonic() + 30
            while s.pace and time.monotonic() < deadline and await s.committed_total() < len(s.sent) - lead:
                await asyncio.sleep(0.02)

    s.pace = True
    return asyncio.ensure_future(run())


async def test_sigterm_mid_stream_gives_exact_counts(scenario: Scenario) -> None:
    """SIGTERM commits exactly what was processed: restarted, the worker goes on from
    there, and every count is exact (nothing lost, nothing counted twice)."""
    s = scenario
    w = s.worker("w1").start()
    producing = await _produce_in_background(s, chunks=40, size=250)
    await eventually(lambda: _at_least(s, 2000), "the worker to commit 2,000 records", timeout=60)
    assert not producing.done(), "the input ended before the SIGTERM: not mid-stream"
    await w.terminate()
    s.pace = False
    stopped_at = await s.committed_total()
    await producing
    assert stopped_at < len(s.sent)
    w.start()  # same data directory: local RocksDB state plus the changelog tail
    await s.caught_up()
    await w.terminate()
    assert await s.counts() == s.expected_counts()
    assert await s.latest() == s.expected_latest()
    assert "restored counts" not in w.log().split("---- start")[-1], "a clean restart needs no restore"


async def _at_least(s: Scenario, n: int) -> bool:
    return await s.committed_total() >= n


async def test_sigkill_mid_stream_loses_nothing(scenario: Scenario) -> None:
    """SIGKILL: the uncommitted tail is processed again. The idempotent table is exact; the
    counts are at least exact (at-least-once), and over-count by no more than the records
    that were processed but not yet committed when the worker died."""
    s = scenario
    w = s.worker("w1").start()
    producing = await _produce_in_background(s, chunks=40, size=250)
    await eventually(lambda: _at_least(s, 2000), "the worker to commit 2,000 records", timeout=60)
    assert not producing.done(), "the input ended before the SIGKILL: not mid-stream"
    w.kill()
    s.pace = False
    committed_at_kill = await s.committed_total()
    await producing
    w.start()
    await s.caught_up()
    await w.terminate()
    counts, expected = await s.counts(), s.expected_counts()
    assert set(counts) == set(expected)
    short = {k: (counts[k], n) for k, n in expected.items() if counts[k] < n}
    assert not short, f"records lost: {short}"
    assert await s.latest() == s.expected_latest()
    over = sum(counts.values()) - len(s.sent)
    assert over <= len(s.sent) - committed_at_kill


# -- (b) two workers and rebalances -----------------------------------------------------


async def _owned_by(workers: list[Worker], topic: str, timeout: float = 60) -> list[set[str]]:
    """Wait until ``workers`` split every partition of ``topic`` between them (disjoint,
    each one at least one) and none is restoring; returns each one's partitions."""
    everything = {f"{topic}-{p}" for p in range(PARTITIONS)}

    async def split() -> list[set[str]] | None:
        owned = [await w.partitions() for w in workers]
        mine = [{p for p in o if p.startswith(f"{topic}-")} for o in owned]
        if any(not m for m in mine) or set().union(*mine) != everything or sum(map(len, mine)) != PARTITIONS:
            return None
        for w in workers:
            _status, metrics = await w.get("/metrics")
            if _restoring(metrics):
                return None
        return mine

    return await eventually(split, f"{len(workers)} workers to share {topic}", timeout=timeout, interval=0.2)


def _restoring(metrics: str) -> bool:
    """Whether any table partition's restore is behind (restored < total)."""
    values: dict[tuple[str, str], dict[str, float]] = {}
    for sample in _samples(metrics, "streamkit_restore_records"):
        labels = sample.labels
        values.setdefault((labels["table"], labels["partition"]), {})[labels["kind"]] = sample.value
    return any(v.get("restored", 0) < v.get("total", 0) for v in values.values())


def _samples(metrics: str, name: str) -> list[Any]:
    """The samples named ``name`` in a /metrics text (Prometheus exposition format)."""
    return [sample for family in text_string_to_metric_families(metrics)
            for sample in family.samples if sample.name == name]


async def test_two_workers_share_and_hand_over(scenario: Scenario) -> None:
    """One worker; a second joins (the partitions split, each restores what it gets); a key
    is readable from either worker's web endpoint; one leaves (the other takes everything
    over). Counts stay exact throughout."""
    s = scenario
    w1 = s.worker("w1").start()
    await s.produce(2000)
    await s.caught_up()
    assert await w1.partitions() >= {f"{s.input}-{p}" for p in range(PARTITIONS)}

    w2 = s.worker("w2").start()
    split = await _owned_by([w1, w2], s.input)
    await s.produce(2000)
    await s.caught_up()
    expected = s.expected_counts()
    # Interactive queries: each worker answers for every key, forwarding to the owner.
    for key in ("k0", "k1", "k2", "k3", "k7"):
        for w in (w1, w2):
            status, body = await w.get(f"/tables/counts/{key}")
            assert (status, body) == (200, {"key": key, "value": expected[key]}), (w.name, key)
    # Each worker's own part is exactly the keys of its partitions.
    parts = [(await w.get("/tables/counts?limit=100000"))[1] for w in (w1, w2)]
    assert not set(parts[0]) & set(parts[1])
    assert {**parts[0], **parts[1]} == expected
    assert all(split)

    await w1.terminate()
    (alone,) = await _owned_by([w2], s.input)
    assert len(alone) == PARTITIONS
    await s.produce(2000)
    await s.caught_up()
    _status, whole = await w2.get("/tables/counts?limit=100000")
    assert whole == s.expected_counts()
    await w2.terminate()
    assert await s.counts() == s.expected_counts()
    assert await s.latest() == s.expected_latest()


# -- (c) restore after the local state is deleted -----------------------------------------


async def test_restore_after_deleting_the_local_state(scenario: Scenario) -> None:
    s = scenario
    w = s.worker("w1").start()
    await s.produce(3000)
    await s.caught_up()
    await w.terminate()
    state = w.data_dir / "state"
    assert any(state.rglob("CURRENT")), "RocksDB files were written"
    shutil.rmtree(state)
    await s.produce(1000)  # while no worker runs
    w.start()
    await s.caught_up()
    _status, live = await w.get("/tables/counts?limit=100000")
    assert live == s.expected_counts(), "the restored state plus the new records"
    _status, metrics = await w.get("/metrics")
    restored = sum(v for k, v in _metric(metrics, "streamkit_restore_records", "counts").items()
                   if k.endswith(":restored"))
    assert restored >= 50, "the counts were rebuilt from the changelog"
    await w.terminate()
    assert await s.counts() == s.expected_counts()
    assert await s.latest() == s.expected_latest()


# -- (d) a rebalance during a restore -----------------------------------------------------


async def test_rebalance_during_restore_does_not_hang(scenario: Scenario) -> None:
    """A worker restores a large changelog; a second worker joins in the middle of it. The
    first gives up partitions mid-restore and resumes the ones it keeps; the second restores
    its own; both end up processing, within a deadline, with exact counts."""
    s = scenario
    # Large enough that the restore is still running when the second worker joins (it
    # restores at several hundred thousand records/s).
    keys = 1_000_000
    changelog = f"{s.app_id}-counts-changelog"
    await s.probe.create_topic(changelog, PARTITIONS, {"cleanup.policy": "compact"})
    _produce_fast(s.probe.bootstrap, changelog, ((f"c{i}".encode(), b"1000") for i in range(keys)))
    gate = s.tmp / "gate"
    # Frequent heartbeats: the first worker hears of the rebalance within 0.1 s, not 0.5 s,
    # which with a restore of about half a second decided whether the join came in time.
    fast = {"heartbeat.interval.ms": 100}
    w1 = s.worker("w1", config=fast).start()
    w2 = s.worker("w2", gate=gate, config=fast).start()  # loads, then waits for the gate

    async def restoring() -> bool:
        _status, metrics = await w1.get("/metrics")
        return 'table="counts"' in metrics and _restoring(metrics)

    started = time.monotonic()
    await eventually(restoring, "the first worker to be restoring", timeout=60, interval=0.05)
    gate.touch()
    await _owned_by([w1, w2], s.input, timeout=90)
    stable_after = time.monotonic() - started

    await s.produce(2000, keys=100, prefix="c")
    await s.caught_up(timeout=90)
    base = {f"c{i}": 1000 for i in range(keys)}
    expected = s.expected_counts(base)
    for key in ("c0", "c1", "c99", "c150000"):
        for w in (w1, w2):
            status, body = await w.get(f"/tables/counts/{key}")
            assert (status, body) == (200, {"key": key, "value": expected[key]}), (w.name, key)

    # The join really came during the restore: the first worker lost partitions before it
    # had finished restoring all four.
    log = w1.log()
    revoked_at = log.find("partitions revoked")
    assert revoked_at > 0, "the first worker was never rebalanced"
    assert log[:revoked_at].count("restored counts-") < PARTITIONS, "the restore ended before the rebalance"

    await w1.terminate()
    await w2.terminate()
    assert await s.counts() == expected
    print(f"two workers stable {stable_after:.1f}s after the first started restoring")


def _produce_fast(bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes]]) -> None:
    """Many records through librdkafka (aiokafka's pure-Python partitioner is slow). Its
    murmur2_random partitioner is the Java client's, which tables partition by."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                         "partitioner": "murmur2_random"})
    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        if i % 50_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "records left unsent"


# -- (e) standby replicas -----------------------------------------------------------------


def _metric(metrics: str, name: str, table: str) -> dict[str, int]:
    """``{partition: value}`` of ``name`` for ``table`` (``kind`` labels joined with ":")."""
    out: dict[str, int] = {}
    for sample in _samples(metrics, name):
        labels = sample.labels
        if labels.get("table") == table:
            kind = labels.get("kind")
            out[labels["partition"] + (f":{kind}" if kind else "")] = int(sample.value)
    return out


async def test_a_standby_takes_over_a_killed_worker_replaying_only_the_tail(scenario: Scenario) -> None:
    """num.standby.replicas=1 with two workers: each keeps the other's table partitions warm
    by following their changelogs (never serving them). SIGKILL one: the survivor takes its
    tasks over, restoring only the changelog records its standby had not applied (none
    here), and the state is exact."""
    s = scenario
    config = {"num.standby.replicas": 1}
    w1 = s.worker("w1", config=config).start()
    w2 = s.worker("w2", config=config).start()
    split = await _owned_by([w1, w2], s.input)
    tasks = [{int(tp.rsplit("-", 1)[1]) for tp in mine} for mine in split]

    async def standing_by() -> bool:
        health = [(await w.get("/health"))[1] for w in (w1, w2)]
        return set(health[0]["standby_tasks"]) == tasks[1] and set(health[1]["standby_tasks"]) == tasks[0]

    await eventually(standing_by, "each worker to stand by for the other's tasks", timeout=60, interval=0.2)
    await s.produce(6000, keys=6000)  # as many keys: long changelogs
    await s.caught_up()
    changelog = f"{s.app_id}-counts-changelog"
    ends = {tp.partition: end for tp, end in (await s.probe.end_offsets(await s.probe.partitions(changelog))).items()}

    async def standbys_caught_up() -> bool:
        for w, theirs in ((w1, tasks[1]), (w2, tasks[0])):
            _status, metrics = await w.get("/metrics")
            for table in ("counts", "latest"):
                lag = _metric(metrics, "streamkit_standby_lag", table)
                if {int(p) for p in lag} != theirs or any(lag.values()):
                    return False
        return True

    await eventually(standbys_caught_up, "the standbys to apply every changelog record", timeout=60, interval=0.2)
    # Standbys never serve: each worker's part of the table is its own partitions' keys.
    _status, part = await w2.get("/tables/counts?limit=100000")
    assert {partition_for_key(k.encode(), PARTITIONS) for k in part} == tasks[1]

    w1.kill()  # everything it processed is committed: the state must stay exact
    (alone,) = await _owned_by([w2], s.input, timeout=60)
    assert len(alone) == PARTITIONS
    await s.produce(1000, keys=6000)
    await s.caught_up()
    _status, live = await w2.get("/tables/counts?limit=100000")
    assert live == s.expected_counts()
    _status, metrics = await w2.get("/metrics")
    restore = _metric(metrics, "streamkit_restore_records", "counts")
    taken = sorted(tasks[0])
    length = sum(ends[p] for p in taken)
    restored = sum(restore[f"{p}:restored"] for p in taken)
    assert length >= 2000, "the changelogs of the partitions taken over are long"
    assert restored <= length // 20, f"restored {restored} of {length} changelog records: not only the tail"
    assert "standby tasks" in w2.log()
    print(f"restored {restored} of {length} changelog records on takeover")
    await w2.terminate()
    assert await s.counts() == s.expected_counts()
    assert await s.latest() == s.expected_latest()


# -- the command line -----------------------------------------------------------------------


def _worker_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # COLUMNS: the CLI prints errors through rich, which wraps them at the terminal width
    # (80 without a terminal); these tests are about the message, not the wrapping.
    return subprocess.run([sys.executable, "-m", "streamkit", "worker", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "400", **(env or {})})


def test_worker_cli_reports_a_bad_app_path() -> None:
    done = _worker_cli("-A", "tests.streams.apps_for_tests.nothing_here:app", "--broker", "127.0.0.1:1")
    assert done.returncode == 2
    assert "cannot import 'tests.streams.apps_for_tests.nothing_here'" in done.stderr
    assert "Traceback" not in done.stderr
    done = _worker_cli("-A", "tests.streams.apps_for_tests.counter:missing", "--broker", "127.0.0.1:1",
                       env={"SK_TEST_APP_ID": "x", "SK_TEST_INPUT": "y"})
    assert done.returncode == 2
    assert "does not name a streamkit.App" in done.stderr


def test_worker_cli_reports_a_bad_setting_in_one_line() -> None:
    done = _worker_cli("-A", APP, "--broker", "127.0.0.1:1", env={"SK_TEST_APP_ID": "no spaces allowed",
                                                                  "SK_TEST_INPUT": "y"})
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "bad value for app setting 'application.id'" in lines[0]


def test_worker_cli_gives_up_on_an_unreachable_broker_after_bootstrap_timeout() -> None:
    """A port nobody listens on (bound, not listening: refused, and not reusable by anyone
    meanwhile): the worker retries for bootstrap.timeout.ms, then ends with a one-line error
    and a non-zero exit, not a traceback."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        started = time.monotonic()
        done = _worker_cli("-A", APP, "--broker", f"127.0.0.1:{port}",
                           env={"SK_TEST_APP_ID": unique("unreachable"), "SK_TEST_INPUT": "in",
                                "SK_TEST_CONFIG": '{"bootstrap.timeout.ms": 1500}'})
        elapsed = time.monotonic() - started
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1] == (f"error: cannot reach a broker at 127.0.0.1:{port} (connection refused); "
                         "gave up after bootstrap.timeout.ms=1500"), done.stderr
    retries = [line for line in lines[:-1] if "retrying" in line]
    assert retries, "it said it was retrying"
    assert all(f"WARNING streamkit.streams.runtime: cannot reach a broker at 127.0.0.1:{port} (connection "
               "refused); retrying in " in line for line in retries), retries
    assert not [line for line in lines[:-1] if "aiokafka" in line or "AddressFamily" in line], lines
    assert 1.5 <= elapsed < 15, elapsed


def test_a_worker_process_tunes_the_garbage_collector() -> None:
    """``streamkit worker`` freezes what start-up loaded and collects young objects every
    50,000 allocations instead of 700 (the streams benchmark's agent path spent a quarter of
    its CPU in the collector), or every 20 per record of a full fetch batch when that is more
    (max.poll.records), so a batch of models does not cross the threshold on its own."""
    thresholds = gc.get_threshold()
    try:
        worker_module._tune_gc(500)
        assert gc.get_threshold() == (50_000, 20, 50)
        assert gc.get_freeze_count() > 0
        gc.unfreeze()
        worker_module._tune_gc(10_000)  # the default max.poll.records
        assert gc.get_threshold() == (200_000, 20, 50)
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
