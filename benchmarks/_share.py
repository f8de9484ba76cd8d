"""Share-group consumption (KIP-932) against a classic consumer group, streamkit only.

Each round pre-fills a fresh topic per kind with ``records`` 100-byte values and reads it,
interleaved: a classic consumer group of one consumer (subscribe,
auto.offset.reset=earliest), a share group of one ShareConsumer and a share group of four
ShareConsumers on one partition, then one and four ShareConsumers on a topic of four
partitions (the producer's default partitioner spreads the records). Each ShareConsumer
polls on its own thread with implicit acknowledgement, so every poll accepts the previous
one's records. Share groups start at the earliest offset through AlterShareGroupOffsets.
Timed from subscribe() to the last record, so each includes its group join; records/s and
the broker's CPU per million records.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, ShareConsumer

from streamkit.clients.share import alter_share_group_offsets

__all__ = ["ShareRun", "report_share", "share_rounds"]

KINDS = ("classic x1", "share x1", "share x4", "share x1 4p", "share x4 4p")


@dataclass
class ShareRun:
    records: int
    seconds: float
    broker_cpu: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def _classic(bootstrap: str, topic: str, records: int, common: dict[str, Any]) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, **common, "group.id": f"{topic}-classic",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + max(120.0, records / 5_000)
    try:
        while got < records and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
    finally:
        consumer.close()
    return got


def _shared(bootstrap: str, topic: str, records: int, consumers: int, partitions: int,
            common: dict[str, Any]) -> int:
    group = f"{topic}-share{consumers}"
    asyncio.run(alter_share_group_offsets(bootstrap, group, topic, dict.fromkeys(range(partitions), -2)))
    counts = [0] * consumers
    done = threading.Event()
    deadline = time.monotonic() + max(120.0, records / 2_000)

    def read(i: int) -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, **common, "group.id": group})
        consumer.subscribe([topic])
        try:
            while not done.is_set() and time.monotonic() < deadline:
                counts[i] += sum(1 for m in consumer.poll(0.5).records() if m.error() is None)
                if sum(counts) >= records:
                    done.set()
        finally:
            consumer.close()

    threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(consumers)]
    for t in threads:
        t.start()
    done.wait(max(120.0, records / 2_000))
    done.set()
    for t in threads:
        t.join(60)
    return sum(counts)


def share_rounds(bootstrap: str, pid: int, records: int, trials: int, fill: Any, cpu_seconds: Any,
                 common: dict[str, Any]) -> dict[str, list[ShareRun]]:
    """``fill(topic, records, partitions)`` creates and fills a topic; ``cpu_seconds(pid)`` the
    broker's CPU."""
    runs: dict[str, list[ShareRun]] = {k: [] for k in KINDS}
    for trial in range(trials):
        kinds = list(KINDS[trial % len(KINDS):] + KINDS[: trial % len(KINDS)])
        line = []
        for kind in kinds:
            topic = f"bench-share-{trial}-{kind.replace(' ', '')}"
            partitions = 4 if kind.endswith("4p") else 1
            fill(topic, records, partitions)
            cpu0, start = cpu_seconds(pid), time.perf_counter()
            if kind == "classic x1":
                got = _classic(bootstrap, topic, records, common)
            else:
                got = _shared(bootstrap, topic, records, int(kind.split()[1][1:]), partitions, common)
            elapsed = time.perf_counter() - start
            if got < records:
                print(f"  ! {kind}: read {got:,} of {records:,}")
            run = ShareRun(got, elapsed, cpu_seconds(pid) - cpu0)
            runs[kind].append(run)
            line.append(f"{kind} {run.rate:>9,.0f} rec/s")
        print(f"  round {trial + 1}/{trials}: " + "  ".join(line), flush=True)
    return runs


def report_share(records: int, runs: dict[str, list[ShareRun]]) -> None:
    line = "=" * 100
    print(f"\n{line}\nshare groups vs a classic consumer group (streamkit), {records:,} x 100-byte records "
          f"per round in one partition (4p: in four)\nrates: best round (median round); ratio: median of the "
          f"rounds' paired ratios against classic x1; scaling: share x4 4p against share x1 4p\n{line}")
    print(f"{'':<14}{'records/s':>26}{'CPU-s/M rec':>14}{'vs classic':>14}")
    base = runs["classic x1"]
    for kind in KINDS:
        rs = runs[kind]
        rates = [r.rate for r in rs]
        cpu = statistics.median(r.broker_cpu / r.records * 1e6 for r in rs if r.records) if rs else float("nan")
        ratios = [a.rate / b.rate for a, b in zip(rs, base, strict=False) if b.rate > 0]
        vs = f"{statistics.median(ratios):.2f}x" if ratios else "-"
        print(f"{kind:<14}{max(rates):>14,.0f} ({statistics.median(rates):>9,.0f}){cpu:>14.2f}{vs:>14}")
    one, four = runs["share x1 4p"], runs["share x4 4p"]
    scaling = [b.rate / a.rate for a, b in zip(one, four, strict=False) if a.rate > 0]
    if scaling:
        print(f"scaling on 4 partitions, 4 ShareConsumers vs 1: {statistics.median(scaling):.2f}x (median round)")
