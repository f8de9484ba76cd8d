"""Share-group consumption (KIP-932) against a classic consumer group, streamkit only.

Each round pre-fills a fresh topic per kind with ``records`` 100-byte values and reads it,
interleaved: a classic consumer group of one consumer (subscribe,
auto.offset.reset=earliest), a share group of one ShareConsumer and a share group of four
ShareConsumers on one partition, then one and four ShareConsumers on a topic of four
partitions (the producer's default partitioner spreads the records). Every consumer runs in
a process of its own, as deployed consumers do (threads of one process would measure its
GIL), made before the clock starts. ShareConsumers use implicit acknowledgement, so every
poll accepts the previous one's records. Share groups start at the earliest offset through AlterShareGroupOffsets.
Timed from subscribe() to the last record, so each includes its group join; records/s and
the broker's CPU per million records.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, ShareConsumer

from streamkit.clients.share import alter_share_group_offsets

__all__ = ["ShareRun", "report_share", "share_rounds"]

IO_US = 10

# name: (consumers, partitions, µs of I/O wait per record read)
KINDS: dict[str, tuple[int, int, int]] = {
    "classic x1": (1, 1, 0),
    "share x1": (1, 1, 0),
    "share x4": (4, 1, 0),
    "share x1 4p": (1, 4, 0),
    "share x4 4p": (4, 4, 0),
    "share x1 4p io": (1, 4, IO_US),
    "share x4 4p io": (4, 4, IO_US),
}


@dataclass
class ShareRun:
    records: int
    seconds: float
    broker_cpu: float
    client_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def _consumer(kind: str, bootstrap: str, topic: str, common: dict[str, Any]) -> tuple[Any, Any]:
    """A consumer, not yet subscribed, and its poll (a batch of messages)."""
    if kind == "classic":
        consumer = Consumer({"bootstrap.servers": bootstrap, **common, "group.id": f"{topic}-classic",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10})
        return consumer, lambda: consumer.consume(10_000, 0.5)
    share = ShareConsumer({"bootstrap.servers": bootstrap, **common, "group.id": kind})
    return share, lambda: share.poll(0.5).records()


def _read(kind: str, bootstrap: str, topic: str, common: dict[str, Any], io_us: int, ready: Any, go: Any,
          stop: Any, count: Any, cpu: Any) -> None:
    """One consumer in a process of its own: made, then subscribed on ``go``, counting what it
    reads into ``count`` until ``stop`` (waiting ``io_us`` per record, as a consumer calling
    out to another service does); its CPU seconds from ``go`` added to ``cpu``."""
    consumer, poll = _consumer(kind, bootstrap, topic, common)
    ready.release()
    go.wait()
    cpu0 = time.process_time()
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            got = sum(1 for m in poll() if m.error() is None)
            if got and io_us:
                time.sleep(got * io_us / 1e6)
            if got:
                with count.get_lock():
                    count.value += got
        with cpu.get_lock():
            cpu.value += time.process_time() - cpu0
    finally:
        consumer.close()


def _run(kind: str, consumers: int, io_us: int, bootstrap: str, topic: str, records: int,
         common: dict[str, Any], pid: int, cpu_seconds: Any) -> ShareRun:
    """``consumers`` processes of one kind ("classic" or a share group's id) read ``topic``;
    timed from their subscribe() to the last record."""
    ctx = multiprocessing.get_context("spawn")  # librdkafka's threads do not survive a fork
    ready, go, stop = ctx.Semaphore(0), ctx.Event(), ctx.Event()
    count, client_cpu = ctx.Value("q", 0), ctx.Value("d", 0.0)
    procs = [ctx.Process(target=_read, args=(kind, bootstrap, topic, common, io_us, ready, go, stop, count, client_cpu),
                         daemon=True) for _ in range(consumers)]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.acquire()
    cpu0, start = cpu_seconds(pid), time.perf_counter()
    go.set()
    deadline = time.monotonic() + max(120.0, records / 2_000)
    while count.value < records and time.monotonic() < deadline:
        time.sleep(0.002)
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu0
    stop.set()
    for proc in procs:
        proc.join(60)
    return ShareRun(count.value, elapsed, cpu, client_cpu.value)


def share_rounds(bootstrap: str, pid: int, records: int, trials: int, fill: Any, cpu_seconds: Any,
                 common: dict[str, Any]) -> dict[str, list[ShareRun]]:
    """``fill(topic, records, partitions)`` creates and fills a topic; ``cpu_seconds(pid)`` the
    broker's CPU."""
    runs: dict[str, list[ShareRun]] = {k: [] for k in KINDS}
    names = list(KINDS)
    for trial in range(trials):
        kinds = names[trial % len(names):] + names[: trial % len(names)]
        line = []
        for kind in kinds:
            topic = f"bench-share-{trial}-{kind.replace(' ', '')}"
            consumers, partitions, io_us = KINDS[kind]
            fill(topic, records, partitions)
            group = "classic"
            if kind != "classic x1":
                group = f"{topic}-group"
                asyncio.run(alter_share_group_offsets(bootstrap, group, topic, dict.fromkeys(range(partitions), -2)))
            run = _run(group, consumers, io_us, bootstrap, topic, records, common, pid, cpu_seconds)
            if run.records < records:
                print(f"  ! {kind}: read {run.records:,} of {records:,}")
            runs[kind].append(run)
            line.append(f"{kind} {run.rate:>9,.0f} rec/s")
        print(f"  round {trial + 1}/{trials}: " + "  ".join(line), flush=True)
    return runs


def report_share(records: int, runs: dict[str, list[ShareRun]]) -> None:
    line = "=" * 100
    print(f"\n{line}\nshare groups vs a classic consumer group (streamkit), {records:,} x 100-byte records "
          f"per round in one partition (4p: in four; io: {IO_US} us of I/O wait per record)\nrates: best round "
          f"(median round); CPU: the broker's and the consumers', median; ratio: median of the rounds' paired "
          f"ratios against classic x1\n{line}")
    print(f"{'':<16}{'records/s':>24}{'broker CPU-s/M':>16}{'client CPU-s/M':>16}{'vs classic':>12}")
    base = runs["classic x1"]
    for kind in KINDS:
        rs = runs[kind]
        rates = [r.rate for r in rs]
        cpu = statistics.median(r.broker_cpu / r.records * 1e6 for r in rs if r.records) if rs else float("nan")
        client = statistics.median(r.client_cpu / r.records * 1e6 for r in rs if r.records) if rs else float("nan")
        ratios = [a.rate / b.rate for a, b in zip(rs, base, strict=False) if b.rate > 0]
        vs = f"{statistics.median(ratios):.2f}x" if ratios else "-"
        print(f"{kind:<16}{max(rates):>12,.0f} ({statistics.median(rates):>9,.0f}){cpu:>16.2f}{client:>16.2f}{vs:>12}")
    for suffix in ("4p", "4p io"):
        one, four = runs[f"share x1 {suffix}"], runs[f"share x4 {suffix}"]
        scaling = [b.rate / a.rate for a, b in zip(one, four, strict=False) if a.rate > 0]
        if scaling:
            print(f"scaling, 4 ShareConsumers vs 1 on 4 partitions{' with I/O' if 'io' in suffix else ''}: "
                  f"{statistics.median(scaling):.2f}x (median round)")
