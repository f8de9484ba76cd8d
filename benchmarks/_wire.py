"""``broker_bench.py --latency``: the broker's request path, fast path against generic path.

Three brokers side by side, measured in the same run with the brokers interleaved in each
round (so drift and other load on the machine hit all alike):

- ``streamkit``: the default broker (compiled codecs for Produce, Fetch, ListOffsets,
  Metadata and Heartbeat, coalesced writes);
- ``generic``: the same broker started with ``STREAMKIT_BROKER_FAST_PATH=0``, which answers
  every request through kio's generic decoder and ``build`` + kio's writer, one socket write
  per response: the baseline;
- ``tansu`` (unless ``--skip-tansu`` or it cannot be had; see ``_tansu.py``).

Per round and broker: for each ``--latency-linger`` (default 0 here), produce at
``--latency-rate`` for ``--latency-seconds`` (+1 s warm-up) and measure each record's
produce-to-consume time (p50/p99/p99.9), and the broker's CPU seconds (``/proc/PID/stat``)
per request the two clients sent it (librdkafka's statistics: ``tx`` over every broker
connection). Then the usual produce/consume throughput rounds (``--records``) for the same
brokers. Ratios are medians of the rounds' paired ratios.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

__all__ = ["report_wire", "run_wire"]

FAST_PATH_ENV = "STREAMKIT_BROKER_FAST_PATH"  # streamkit.broker.server.FAST_PATH_ENV
P99_TARGET_MS = 5.0
CPU_TARGET = 0.5  # fast / generic broker CPU per request
TANSU_TARGET = 1.2


def run_wire(args: argparse.Namespace, latency_run: Callable[..., Any], throughput_rounds: Callable[..., Any],
             create_topic: Callable[..., Any], delete_topic: Callable[..., Any],
             targets: list[Any]) -> tuple[dict[tuple[str, int], list[Any]], dict[str, dict[str, list[Any]]]]:
    """Latency rounds, then throughput rounds, on ``targets`` (streamkit, generic[, tansu])."""
    lat: dict[tuple[str, int], list[Any]] = {(t.name, linger): [] for t in targets for linger in args.latency_linger}
    print(f"\nlatency: {args.latency_rate:,.0f} records/s for {args.latency_seconds:g} s (+1 s warm-up), "
          f"{args.trials} interleaved rounds", flush=True)
    for trial in range(args.trials):
        order = targets[trial % len(targets):] + targets[:trial % len(targets)]
        for target in order:
            for linger in args.latency_linger:
                topic = f"bench-wire-latency-{linger}-{trial}"
                create_topic(target, topic)
                result = latency_run(target, topic, args.latency_rate, args.latency_seconds, linger)
                delete_topic(target, topic)
                lat[(target.name, linger)].append(result)
                print(f"  round {trial + 1}/{args.trials} linger.ms={linger} {target.name:>9}: "
                      f"p50 {result.pct(0.5):6.2f} ms  p99 {result.pct(0.99):6.2f} ms  "
                      f"p99.9 {result.pct(0.999):6.2f} ms  broker {result.cpu_us_per_request:6.1f} "
                      f"CPU-us/request ({result.requests:,} requests, {len(result.samples):,} samples at "
                      f"{result.rate:,.0f}/s, {result.lost} lost)", flush=True)
    print(f"\nthroughput: {args.records:,} records per round, {args.trials} interleaved rounds", flush=True)
    runs = throughput_rounds(targets, args.records, args.trials, "bench-wire-tp")
    return lat, runs


def _median(values: list[float]) -> float:
    values = [v for v in values if v == v]  # drop NaN
    return statistics.median(values) if values else float("nan")


def _paired(a: list[float], b: list[float]) -> tuple[float, str]:
    ratios = [x / y for x, y in zip(a, b, strict=False) if y > 0 and x == x and y == y]
    if not ratios:
        return float("nan"), "-"
    mid = statistics.median(ratios)
    return mid, f"{mid:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def report_wire(args: argparse.Namespace, lat: dict[tuple[str, int], list[Any]],
                runs: dict[str, dict[str, list[Any]]], names: list[str]) -> None:
    line = "=" * 112
    print(f"\n{line}\nthe broker's request path: streamkit (fast path) vs generic (STREAMKIT_BROKER_FAST_PATH=0)"
          f"{' vs tansu' if 'tansu' in names else ''}; medians over {args.trials} rounds\n{line}")
    head = f"{'':30}" + "".join(f"{n:>16}" for n in names) + f"{'streamkit/generic':>24}{'target':>16}"
    for linger in args.latency_linger:
        print(f"\nlinger.ms={linger}, {args.latency_rate:,.0f} records/s")
        print(head)
        for label, q in (("p50 ms", 0.5), ("p99 ms", 0.99), ("p99.9 ms", 0.999)):
            cells = [_median([r.pct(q) for r in lat[(n, linger)]]) for n in names]
            _mid, both = _paired([r.pct(q) for r in lat[("streamkit", linger)]],
                                 [r.pct(q) for r in lat[("generic", linger)]])
            target = (f"< {P99_TARGET_MS:g} {'ok' if cells[0] < P99_TARGET_MS else 'MISS'}"
                      if q == 0.99 and linger == 0 else "")
            print(f"{label:30}" + "".join(f"{c:16.2f}" for c in cells) + f"{both:>24}{target:>16}")
        cpu = [_median([r.cpu_us_per_request for r in lat[(n, linger)]]) for n in names]
        mid, both = _paired([r.cpu_us_per_request for r in lat[("streamkit", linger)]],
                            [r.cpu_us_per_request for r in lat[("generic", linger)]])
        print(f"{'broker CPU-us per request':30}" + "".join(f"{c:16.1f}" for c in cpu)
              + f"{both:>24}{f'<= {CPU_TARGET:g}x ' + ('ok' if mid <= CPU_TARGET else 'MISS'):>16}")
        reqs = [_median([r.requests for r in lat[(n, linger)]]) for n in names]
        print(f"{'requests per run':30}" + "".join(f"{c:16,.0f}" for c in reqs))
    print("\nthroughput, records/s (best round; median round)")
    print(f"{'':30}" + "".join(f"{n:>22}" for n in names) + f"{'streamkit/generic':>24}"
          + (f"{'streamkit/tansu':>24}{'target':>12}" if "tansu" in names else ""))
    for kind in ("produce", "consume"):
        rates = {n: [r.rate for r in runs[n][kind]] for n in names}
        cells = "".join(f"{f'{max(rates[n]):,.0f} ({_median(rates[n]) / 1000:,.0f}k)':>22}" for n in names)
        _m, vs_generic = _paired(rates["streamkit"], rates["generic"])
        tail = ""
        if "tansu" in names:
            mid, vs_tansu = _paired(rates["streamkit"], rates["tansu"])
            tail = f"{vs_tansu:>24}{f'>= {TANSU_TARGET:g}x ' + ('ok' if mid >= TANSU_TARGET else 'MISS'):>12}"
        print(f"{kind:30}{cells}{vs_generic:>24}{tail}")
        cpu = "".join(f"{_median([r.broker_cpu_per_m for r in runs[n][kind]]):22.2f}" for n in names)
        print(f"{'  broker CPU-s per M records':30}{cpu}")
