"""The app test driver against the same test on a broker.

The test: 10,000 page views (100 users, 20 pages, timestamps rising over 10 minutes) through
the page-view app (``apps/pageviews.py``: the README's DSL windowed count of views per page
and minute behind a ``group_by``, plus an agent keeping hopping windows in a table, as in the
tutorial), then every final window count read back. Measured in the same run, from app start to outputs read:

1. ``AppTestDriver``, the records sent one ``send()`` at a time (each processed on return);
2. ``AppTestDriver``, the records sent with one ``send_many()``;
3. the same app as a real worker (``app.start``) on an embedded broker in this process
   (``streamkit.testing.embedded_broker``), the records produced with aiokafka, until the
   outputs equal the driver's (``streamkit.testing.conformance.run_on_broker``), broker
   start and stop included.

The driver's CPU seconds are printed beside its wall time: it runs on one thread with no I/O,
so on a quiet machine they are its wall time, and on a shared one they show its own cost.
The broker's run is wall time only (a broker, a worker and clients on one event loop, with
waits that are not CPU).

Also: the mean time of a typical unit test in the driver (start, 5 records, a table read, an
output read, close), over ``--unit-runs`` runs. Prints each time and the broker's time as a
multiple of the driver's.

    .venv/bin/python benchmarks/driver_bench.py [--events 10000] [--unit-runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apps import pageviews
from streamkit.testing import AppTestDriver, embedded_broker
from streamkit.testing.conformance import Scenario, Send, run_in_driver, run_on_broker

MINUTE = 60_000
T0 = 1_700_000_000_000 // MINUTE * MINUTE


def views(count: int, seed: int = 7) -> list[Send]:
    rng = random.Random(seed)
    span = 10 * MINUTE
    sends = [Send("page_views", {"user": f"u{rng.randrange(100)}", "page": f"/p{rng.randrange(20)}"},
                  key=f"u{i % 100}", timestamp=T0 + i * span // count) for i in range(count)]
    # One record per input partition an hour later: every window closes.
    sends += [Send("page_views", {"user": "end", "page": "/end"}, key="end", timestamp=T0 + 60 * MINUTE,
                   partition=p) for p in range(4)]
    return sends


def one_by_one(sends: list[Send]) -> tuple[float, float, int]:
    """Wall and CPU seconds (the driver runs on this thread alone), and the outputs."""
    started, cpu = time.perf_counter(), time.process_time()
    with AppTestDriver(pageviews.app) as driver:
        for s in sends:
            driver.input(s.topic).send(s.value, key=s.key, timestamp=s.timestamp, partition=s.partition)
        outputs = len(driver.output("page_counts").read_all())
    return time.perf_counter() - started, time.process_time() - cpu, outputs


def batched(sends: list[Send]) -> tuple[float, float, int]:
    started, cpu = time.perf_counter(), time.process_time()
    with AppTestDriver(pageviews.app) as driver:
        driver.input("page_views").send_many([{"value": s.value, "key": s.key, "timestamp": s.timestamp,
                                               "partition": s.partition} for s in sends])
        outputs = len(driver.output("page_counts").read_all())
    return time.perf_counter() - started, time.process_time() - cpu, outputs


def unit_test() -> None:
    with AppTestDriver(pageviews.app, start_time_ms=T0) as driver:
        for i in range(5):
            driver.input("page_views").send({"user": "u", "page": "/home"}, key="u", timestamp=T0 + i)
        assert driver.table("views_per_page")["/home"][0]["value"] == 5
        assert driver.output("page_counts").read_all() == []


async def on_broker(scenario: Scenario, expected: dict) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        async with embedded_broker(Path(tmp) / "broker") as broker:
            got = await run_on_broker(scenario, broker.bootstrap, Path(tmp) / "state", expect=expected,
                                      timeout_s=300)
        elapsed = time.perf_counter() - started
    if got != expected:
        raise SystemExit("the worker's outputs differ from the driver's")
    return elapsed, sum(len(v) for v in got["page_counts"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--unit-runs", type=int, default=200)
    args = parser.parse_args()
    sends = views(args.events)

    unit_test()  # warm: imports, first compilations
    started = time.perf_counter()
    for _ in range(args.unit_runs):
        unit_test()
    unit_ms = (time.perf_counter() - started) / args.unit_runs * 1000

    single_s, single_cpu, single_out = one_by_one(sends)
    batch_s, batch_cpu, batch_out = batched(sends)
    scenario = Scenario(pageviews.app, sends, outputs=("page_counts",))
    expected = run_in_driver(scenario)
    broker_s, broker_out = asyncio.run(on_broker(scenario, expected))

    print(f"page-view app, {args.events:,} events ({single_out} final window counts out)")
    print(f"  driver, send() per event     {single_s:8.3f} s   ({single_cpu:.3f} CPU s)")
    print(f"  driver, send_many()          {batch_s:8.3f} s   ({batch_cpu:.3f} CPU s, outputs {batch_out})")
    print(f"  worker on an embedded broker {broker_s:8.3f} s   (outputs {broker_out}): "
          f"{broker_s / single_s:.1f}x the driver's send() time, {broker_s / batch_s:.1f}x send_many()'s")
    print(f"  a unit test in the driver (start, 5 records, read, close): {unit_ms:.2f} ms mean over "
          f"{args.unit_runs} runs")


if __name__ == "__main__":
    main()
