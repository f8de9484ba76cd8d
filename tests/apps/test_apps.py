"""End-to-end tests of the example apps: a real broker process, the app run by the real CLI
(``python -m streamkit worker -A apps.NAME``) in a child process, input produced and output
consumed with aiokafka, tables read over HTTP. Outputs are checked exactly.

Windows close by per-partition stream time, so the inputs are shaped for determinism:
records that must be processed before others are produced only once the worker has
demonstrably processed the first ones (seen in a table over HTTP or in the output), or,
when ordering within a partition is enough, all produced before the worker starts.
"""

from __future__ import annotations

import asyncio
import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkit.testing import BrokerProcess, metric_value
from tests.apps.harness import Reader, Worker, committed, create_topics, produce, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MINUTE = 60_000
T0 = 1_700_000_000_000 // MINUTE * MINUTE  # a minute boundary, so windows start at T0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker") as b:
        yield b


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[Worker]]:
    """Workers a test started; any still running at the end are killed (a test that stops
    its workers itself asserts their exit codes)."""
    started: list[Worker] = []
    yield started
    for w in started:
        w.kill()


async def start(workers: list[Worker], app: str, broker: BrokerProcess, data_dir: Path) -> Worker:
    worker = Worker(app, broker.bootstrap, data_dir)
    workers.append(worker)
    return await worker.start()


def stop(worker: Worker) -> None:
    code = worker.stop()
    assert code == 0, f"worker exited with {code}:\n{worker.log()}"


# -- wordcount --------------------------------------------------------------------------------


async def test_wordcount(broker: BrokerProcess, workers: list[Worker], tmp_path: Path) -> None:
    worker = await start(workers, "wordcount", broker, tmp_path / "w1")
    lines = ["Hello world", "hello, World! The end.", "the END of the world",
             "Don't stop-believing", "123 numbers 456 are not words", "", "Ünïcode ünïcode"]
    expected = {"hello": 2, "world": 3, "the": 3, "end": 2, "of": 1, "don": 1, "t": 1, "stop": 1,
                "believing": 1, "numbers": 1, "are": 1, "not": 1, "words": 1, "ünïcode": 2}
    async with Reader(broker.bootstrap, "word_counts") as out:
        await produce(broker.bootstrap, "lines", [(None, line, T0 + i) for i, line in enumerate(lines)])
        records = await out.read(sum(expected.values()))
        # Each update is the word's new count: 1, 2, ..., n in order (one partition per word).
        updates: dict[str, list[int]] = defaultdict(list)
        for r in records:
            assert r.key is not None
            updates[r.key].append(r.value)
        assert updates == {word: list(range(1, n + 1)) for word, n in expected.items()}

        assert await worker.table("word_counts", "world") == (200, 3)
        assert await worker.table("word_counts", "ünïcode") == (200, 2)
        status, _ = await worker.table("word_counts", "nope")
        assert status == 404
        stop(worker)

        # A new worker with an empty data dir rebuilds the table from its changelog and
        # carries on counting where the first one stopped.
        worker = await start(workers, "wordcount", broker, tmp_path / "w2")
        await produce(broker.bootstrap, "lines", [(None, "hello again, world", T0 + 100)])
        records = await out.read(sum(expected.values()) + 3)
        # (the three words are on different partitions: their relative order is arbitrary)
        assert sorted((r.key, r.value) for r in records[-3:]) == [("again", 1), ("hello", 3), ("world", 4)]
        assert await worker.table("word_counts", "hello") == (200, 3)
        stop(worker)


# -- pageviews --------------------------------------------------------------------------------


def view(user: str, page: str, seconds: float) -> tuple[str, dict[str, str], int]:
    return user, {"user": user, "page": page}, T0 + int(seconds * 1000)


def hopping_counts(timestamps: list[int], size: int = MINUTE, step: int = MINUTE // 2) -> list[dict[str, int]]:
    """The windows of views_per_page for one page's view timestamps, as the web returns them."""
    counts: dict[int, int] = defaultdict(int)
    for ts in timestamps:
        first = ts // step * step
        for start in range(first - size + step, first + 1, step):
            counts[start] += 1
    return [{"start": s, "end": s + size, "value": n} for s, n in sorted(counts.items())]


async def test_pageviews(broker: BrokerProcess, workers: list[Worker], tmp_path: Path) -> None:
    worker = await start(workers, "pageviews", broker, tmp_path / "w")
    # Phase 1: nothing past T0+70s (the first window's end + grace), so no window can close
    # whatever order the partitions are processed in. /cart's view at 55 s is produced after
    # one at 65 s: if it is processed after it too, it is out of order but within the grace
    # period, so it counts either way.
    phase1 = [
        view("ann", "/home", 1), view("bob", "/home", 15), view("cid", "/health", 10),
        view("ann", "/cart", 30), view("dan", "/home", 59), view("bob", "/home", 61),
        view("cid", "/cart", 65), view("dan", "/cart", 55), view("eve", "/checkout", 62),
        view("eve", "/health", 20),
    ]
    # Later views on every page, and health checks on every partition of page_views (the
    # users hc0..hc7 cover its four), move stream time far past those windows: it is the
    # minimum over the input partitions, so every partition must move.
    def flush(seconds: float) -> list[tuple[str, dict[str, str], int]]:
        return ([view("zed", page, seconds) for page in ("/home", "/cart", "/checkout")]
                + [view(f"hc{i}", "/health", seconds) for i in range(8)])

    flush1 = flush(600)
    late = [view("late", "/home", 30)]  # for a window that closed: dropped by the DSL count
    flush2 = flush(1200)

    async def table_has(page: str, views: list[tuple[str, dict[str, str], int]]) -> bool:
        want = hopping_counts([ts for _u, v, ts in views if v["page"] == page])
        return await worker.table("views_per_page", page) == (200, want)

    async def all_processed(views: list[tuple[str, dict[str, str], int]]) -> bool:
        return all([await table_has(page, views) for page in ("/home", "/cart", "/checkout")])

    async with Reader(broker.bootstrap, "page_counts") as out:
        await produce(broker.bootstrap, "page_views", phase1)
        # The agent's table shows when the views went through the worker (its group_by and
        # the DSL's are fed by the same read of page_views): only then the later ones.
        await wait_for(lambda: all_processed(phase1), "phase 1 in views_per_page")
        await produce(broker.bootstrap, "page_views", flush1)
        await wait_for(lambda: all_processed(phase1 + flush1), "flush 1 in views_per_page")

        first = [
            ("/cart", T0, 2), ("/cart", T0 + MINUTE, 1), ("/checkout", T0 + MINUTE, 1),
            ("/home", T0, 3), ("/home", T0 + MINUTE, 1),
        ]
        records = await out.read(len(first))
        assert sorted((r.key, r.value["start"], r.value["value"]) for r in records) == first
        for r in records:
            assert r.value == {"key": r.key, "start": r.value["start"], "end": r.value["start"] + MINUTE,
                               "value": r.value["value"]}
            assert r.timestamp == r.value["end"] - 1

        await produce(broker.bootstrap, "page_views", late)
        await wait_for(lambda: table_has("/home", phase1 + flush1 + late), "the late view in the table")
        await produce(broker.bootstrap, "page_views", flush2)
        records = await out.read(len(first) + 3)
        # The late view changed nothing: the next results are the 600 s windows only.
        assert sorted((r.key, r.value["start"], r.value["value"]) for r in records[len(first):]) == [
            (page, T0 + 10 * MINUTE, 1) for page in ("/cart", "/checkout", "/home")]

        # One late view: the DSL count's (the agent's table never drops views).
        status, metrics = await worker.get("/metrics")
        assert status == 200
        assert metric_value(metrics, "streamkit_late_records_total", app="pageviews") == 1
        # Health checks were filtered out before the table (a key without windows is a 404,
        # as a missing key in every table type).
        status, body = await worker.table("views_per_page", "/health")
        assert status == 404 and "not found" in body["error"]
        # The DSL count's state is queryable by window: the windows still stored (without
        # expires=, those not closed yet: the 1200 s ones).
        window = {"start": T0 + 20 * MINUTE, "end": T0 + 21 * MINUTE, "value": 1}
        assert await worker.get("/tables/page_counts") == (200, {p: [window] for p in ("/home", "/cart", "/checkout")})
        assert await worker.table("page_counts", "/home") == (200, [window])
        stop(worker)


# -- orders -----------------------------------------------------------------------------------


def customer(cid: str, name: str, tier: str = "standard") -> dict[str, str]:
    return {"id": cid, "name": name, "tier": tier}


def order(oid: str, cid: str, amount: float) -> dict[str, object]:
    return {"order_id": oid, "customer_id": cid, "amount": amount}


async def test_orders(broker: BrokerProcess, workers: list[Worker], tmp_path: Path) -> None:
    worker = await start(workers, "orders", broker, tmp_path / "w")
    ada, bob, cy = customer("c-1", "Ada"), customer("c-2", "Bob"), customer("c-3", "Cy", "gold")

    async def customer_is(cid: str, value: dict[str, str] | None) -> bool:
        status, body = await worker.table("customers", cid)
        return (status, body) == (200, value) if value is not None else status == 404

    async with Reader(broker.bootstrap, "enriched_orders") as out:
        await produce(broker.bootstrap, "customers", [("c-1", ada, T0), ("c-2", bob, T0), ("c-3", cy, T0)])
        for c in (ada, bob, cy):
            await wait_for(functools.partial(customer_is, c["id"], c), f"customer {c['id']} in the table")
        await produce(broker.bootstrap, "orders", [
            ("c-1", order("o-1", "c-1", 10.5), T0 + 1), ("c-2", order("o-2", "c-2", 20.0), T0 + 2),
            ("c-1", order("o-3", "c-1", 5.25), T0 + 3), ("c-9", order("o-4", "c-9", 99.0), T0 + 4),
        ])
        records = await out.read(4)
        # Bob moves up a tier, Cy is deleted (a tombstone): later orders see that.
        bob_gold = customer("c-2", "Bob", "gold")
        await produce(broker.bootstrap, "customers", [("c-2", bob_gold, T0 + 5), ("c-3", None, T0 + 5)])
        await wait_for(lambda: customer_is("c-2", bob_gold), "Bob's update")
        await wait_for(lambda: customer_is("c-3", None), "Cy's deletion")
        await produce(broker.bootstrap, "orders", [
            ("c-2", order("o-5", "c-2", 7.0), T0 + 6), ("c-3", order("o-6", "c-3", 1.0), T0 + 7),
        ])
        records = await out.read(6)
        # The whole table (this worker owns every partition), values as JSON.
        assert await worker.get("/tables/customers") == (200, {"c-1": ada, "c-2": bob_gold})

        by_order = {r.value["order"]["order_id"]: (r.key, r.value) for r in records}
        assert len(by_order) == len(records) == 6
        assert by_order == {
            "o-1": ("c-1", {"order": order("o-1", "c-1", 10.5), "customer": ada}),
            "o-2": ("c-2", {"order": order("o-2", "c-2", 20.0), "customer": bob}),
            "o-3": ("c-1", {"order": order("o-3", "c-1", 5.25), "customer": ada}),
            "o-4": ("c-9", {"order": order("o-4", "c-9", 99.0), "customer": None}),
            "o-5": ("c-2", {"order": order("o-5", "c-2", 7.0), "customer": bob_gold}),
            "o-6": ("c-3", {"order": order("o-6", "c-3", 1.0), "customer": None}),
        }
        assert [r.timestamp for r in sorted(records, key=lambda r: r.value["order"]["order_id"])] == [
            T0 + 1, T0 + 2, T0 + 3, T0 + 4, T0 + 6, T0 + 7]
        stop(worker)


# -- fraud ------------------------------------------------------------------------------------


def txn(card: str, amount: float, minutes: float,
        arrives: float | None = None) -> tuple[float, tuple[str, dict[str, object], int]]:
    """A card payment at ``minutes`` past T0, produced in the order of ``arrives`` (by
    default its own time; later for a straggler)."""
    record = card, {"card": card, "amount": amount, "merchant": "m"}, T0 + round(minutes * MINUTE)
    return minutes if arrives is None else arrives, record


# Payments as (arrival, record): produced in arrival order. Stream time is per partition and
# any card on a partition moves it, so only the arrival order makes the outcome exact,
# whatever cards share a partition.
PAYMENTS = [
    # card-a: 5 small payments a minute apart: one session of 5 -> alert (count)
    *(txn("card-a", 10.0, m) for m in range(5)),
    # card-b: two big ones -> alert (total 1100)
    txn("card-b", 600.0, 1), txn("card-b", 500.0, 3),
    # card-c: 4 payments, but in two sessions (8 minutes apart) of 2 -> nothing
    txn("card-c", 1.0, 0), txn("card-c", 1.0, 2), txn("card-c", 1.0, 10), txn("card-c", 1.0, 11),
    # card-d: 6 payments, one arriving after later ones (within grace): alert (count)
    *(txn("card-d", 2.5, m) for m in (0, 1, 2, 4, 5)), txn("card-d", 2.5, 3, arrives=5.5),
    # card-e: 700 at 0, 300 at 8: two sessions (0's closed at 5 min + 30 s grace); then a
    # straggler at 4 would bridge them (1300) if closed sessions still took records: they do
    # not, it joins the open one (600) -> no alert
    txn("card-e", 700.0, 0), txn("card-e", 300.0, 8), txn("card-e", 300.0, 4, arrives=8.5),
    # card-g: 400 at 0 and 400 at 5:10, two sessions (more than the gap apart) but the first is
    # still open (it closes at 5:30); a straggler at 2 bridges them: one session of 3, 1100 ->
    # alert (the app's adder merges the two sessions' stats)
    txn("card-g", 400.0, 0), txn("card-g", 400.0, 5 + 1 / 6), txn("card-g", 300.0, 2, arrives=5.2),
    # card-f: 5000 -> alert; then one for a session long closed: late, dropped
    txn("card-f", 5000.0, 30), txn("card-f", 5000.0, 0, arrives=30.5),
    # An hour later, a payment on every card closes every session above (each starts one of
    # its own that stays open).
    *(txn(f"card-{c}", 0.5, 60) for c in "abcdefg"),
]
ALERTS = sorted([
    ("card-a", {"card": "card-a", "start": T0, "end": T0 + 4 * MINUTE, "count": 5, "total": 50.0}),
    ("card-b", {"card": "card-b", "start": T0 + MINUTE, "end": T0 + 3 * MINUTE, "count": 2, "total": 1100.0}),
    ("card-d", {"card": "card-d", "start": T0, "end": T0 + 5 * MINUTE, "count": 6, "total": 15.0}),
    ("card-f", {"card": "card-f", "start": T0 + 30 * MINUTE, "end": T0 + 30 * MINUTE, "count": 1,
                "total": 5000.0}),
    ("card-g", {"card": "card-g", "start": T0, "end": T0 + 5 * MINUTE + 10_000, "count": 3, "total": 1100.0}),
], key=repr)


def payments(arriving_from: float = float("-inf"), before: float = float("inf")) -> list[tuple[str, Any, int]]:
    return [record for arrives, record in sorted(PAYMENTS, key=lambda p: p[0]) if arriving_from <= arrives < before]


async def test_fraud(broker: BrokerProcess, workers: list[Worker], tmp_path: Path) -> None:
    # All produced before the worker starts: it reads each partition in one batch, where a
    # closed session is still in the store when the stragglers after it are processed.
    await create_topics(broker.bootstrap, ["card_transactions"], partitions=4)
    await produce(broker.bootstrap, "card_transactions", payments())
    async with Reader(broker.bootstrap, "fraud_alerts") as out:
        worker = await start(workers, "fraud", broker, tmp_path / "w")
        alerts = await out.read(len(ALERTS))
        stop(worker)
    assert sorted(((r.key, r.value) for r in alerts), key=repr) == ALERTS


async def test_fraud_across_a_restart(broker: BrokerProcess, workers: list[Worker], tmp_path: Path) -> None:
    """The same alerts when the worker is stopped and a new one, with an empty data dir,
    takes over just before card-f's late payment: open sessions and each partition's stream
    time are rebuilt from the changelog (with stream time reset, that payment would open a
    new 5000 session: one more alert)."""
    async with Reader(broker.bootstrap, "fraud_alerts") as out:
        worker = await start(workers, "fraud", broker, tmp_path / "w1")
        await produce(broker.bootstrap, "card_transactions", payments(before=30.3))
        await asyncio.sleep(1.5)  # whatever it has not processed by its stop, w2 will
        stop(worker)
        worker = await start(workers, "fraud", broker, tmp_path / "w2")
        await produce(broker.bootstrap, "card_transactions", payments(arriving_from=30.3))
        alerts = await out.read(len(ALERTS))
        stop(worker)
    assert sorted(((r.key, r.value) for r in alerts), key=repr) == ALERTS


# -- window.idle.close.ms ---------------------------------------------------------------------


async def test_idle_partitions_close_windows_by_wall_clock(broker: BrokerProcess, workers: list[Worker],
                                                          tmp_path: Path) -> None:
    """With window.idle.close.ms, windows close by wall clock once the input stops entirely
    (no later record ever comes to move stream time)."""
    worker = await start(workers, "tests.apps.idle_app", broker, tmp_path / "w")
    async with Reader(broker.bootstrap, "idle_counts") as out:
        await produce(broker.bootstrap, "idle_events",
                      [("k", "a", T0), ("k", "b", T0 + 500), ("j", "c", T0 + 1000), ("k", "d", T0 + 1999)])
        records = await out.read(2, timeout=15)
        stop(worker)
    assert sorted((r.key, r.value) for r in records) == [
        ("j", {"key": "j", "start": T0, "end": T0 + 2000, "value": 1}),
        ("k", {"key": "k", "start": T0, "end": T0 + 2000, "value": 3}),
    ]


async def test_idle_windows_close_by_wall_clock_after_a_restart(broker: BrokerProcess, workers: list[Worker],
                                                               tmp_path: Path) -> None:
    """The worker stops while a window is still open (its input done, the idle time not
    yet up); the next worker restores it and, its input still idle, closes it by wall
    clock. The wall-clock anchor used to be set only by a record, so after a restart an
    idle partition never closed its windows."""
    worker = await start(workers, "tests.apps.idle_restart_app", broker, tmp_path / "w1")
    records = [("k", "a", T0), ("k", "b", T0 + 500), ("j", "c", T0 + 1000), ("k", "d", T0 + 1999)]
    async with Reader(broker.bootstrap, "idle_restart_counts") as out:
        await produce(broker.bootstrap, "idle_restart_events", records)

        async def all_committed() -> bool:
            return await committed(broker.bootstrap, "idle-restart") >= len(records)

        await wait_for(all_committed, "the records to be committed", timeout=15, interval=0.05)
        stop(worker)
        assert await out.read(0, settle=0.5) == [], "the window closed before the restart (machine too slow?)"
        worker = await start(workers, "tests.apps.idle_restart_app", broker, tmp_path / "w1")
        got = await out.read(2, timeout=20)
        stop(worker)
    assert sorted((r.key, r.value) for r in got) == [
        ("j", {"key": "j", "start": T0, "end": T0 + 2000, "value": 1}),
        ("k", {"key": "k", "start": T0, "end": T0 + 2000, "value": 3}),
    ]
