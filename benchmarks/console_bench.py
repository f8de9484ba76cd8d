"""The web console's endpoints under load, against the bare Kafka client calls that fetch the
same data, measured in the same run on the same broker process.

- topic list: ``GET /topics`` (JSON) with ``--topics`` topics, versus aiokafka's admin
  client listing and describing them (what the page needs, with no page);
- group lag: ``GET /groups/GROUP/lag`` (JSON) with ``--groups`` groups in the cluster,
  versus the admin client's committed offsets plus a consumer's end offsets;
- message browser: the first page (50 records) at offset 0 of a ``--records``-record
  topic, versus an aiokafka consumer assigned, seeked to 0 and fetching 50 records.

Each endpoint is asked ``--requests`` times one after another, while the broker's
``/metrics`` is scraped every second as Prometheus would; prints p50 and p99 in ms, the ratio
console/client of the p99s, and the CPU seconds the bench process (console or client) and the
broker spent. Target: p99 < 200 ms for each console endpoint.

Then the broker's produce throughput with the console open on a live tail of the topic
written to, against none, in the same run: ``streamkit console`` as its own process, a reader
of its server-sent events in this one, and a confluent-kafka producer process writing
``--produce`` records; the two cases alternate ``--rounds`` times and the medians are
compared. Target: within 5%.

Usage: python benchmarks/console_bench.py [--topics 1000] [--groups 100] [--records 1000000]
       [--requests 100] [--produce 2000000] [--rounds 3] [--endpoints-only | --throughput-only]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.clients.admin import admin_client
from streamkit.console import ConsoleServer, ConsoleSettings
from streamkit.testing import BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_seconds, machine_load


def _setup(bootstrap: str, topics: int, groups: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench-{i:04d}" for i in range(topics)]
    for start in range(0, len(names), 200):
        futures = admin.create_topics([NewTopic(n, 1, 1) for n in names[start:start + 200]])
        for f in futures.values():
            f.result(60)
    admin.create_topics([NewTopic("big", 1, 1)])["big"].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    value = b'{"page": "/home", "user": 12345, "ms": 1700000000000}'
    for i in range(records):
        producer.produce("big", value=value, key=str(i % 1000).encode())
        if i % 100_000 == 0:
            producer.poll(0)
    producer.flush(300)
    for g in range(groups):
        offsets = [CTopicPartition(names[g % len(names)], 0, 0), CTopicPartition("big", 0, g * 10)]
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(f"group-{g:03d}", offsets)])[
            f"group-{g:03d}"].result(60)


async def _timed(requests: int, call: Callable[[], Awaitable[None]]) -> list[float]:
    await call()  # warm up
    out = []
    for _ in range(requests):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


async def _scrape(url: str, stop: asyncio.Event) -> int:
    """GET the broker's /metrics every second until ``stop``; how many scrapes."""
    count = 0
    async with httpx.AsyncClient(timeout=30) as http:
        while not stop.is_set():
            (await http.get(url)).raise_for_status()
            count += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    return count


async def _run(bootstrap: str, requests: int, group: str, broker_pid: int, metrics_url: str) -> None:
    server = ConsoleServer(ConsoleSettings(bootstrap), "127.0.0.1", 0)
    await server.start()
    json_accept = {"Accept": "application/json"}
    stop_scraping = asyncio.Event()
    scraper = asyncio.create_task(_scrape(metrics_url, stop_scraping))
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            async def console_topics() -> None:
                r = await http.get("/topics", headers=json_accept)
                assert r.status_code == 200 and len(r.json()["topics"]) > 0

            async def client_topics() -> None:
                async with admin_client(bootstrap) as admin:
                    names = await admin.list_topics()
                    await admin.describe_topics(sorted(names))

            async def console_lag() -> None:
                r = await http.get(f"/groups/{group}/lag", headers=json_accept)
                assert r.status_code == 200 and r.json()["lags"]

            async def client_lag() -> None:
                async with admin_client(bootstrap) as admin:
                    offsets = await admin.list_consumer_group_offsets(group)
                consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
                await consumer.start()
                try:
                    await consumer.end_offsets(list(offsets))
                finally:
                    await consumer.stop()

            async def console_browse() -> None:
                r = await http.get("/topics/big/messages?partition=0&start=offset&offset=0&limit=50",
                                   headers=json_accept)
                assert r.status_code == 200 and len(r.json()["page"]["messages"]) == 50

            async def client_browse() -> None:
                consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
                await consumer.start()
                try:
                    tp = TopicPartition("big", 0)
                    consumer.assign([tp])
                    consumer.seek(tp, 0)
                    got = 0
                    while got < 50:
                        batch = await consumer.getmany(tp, timeout_ms=1000, max_records=50 - got)
                        got += sum(len(v) for v in batch.values())
                finally:
                    await consumer.stop()

            print(f"{'endpoint':<34}{'p50 ms':>9}{'p99 ms':>9}   client p50/p99 ms   console/client p99"
                  "   CPU s console+broker / client+broker")
            for what, console_call, client_call in [
                ("GET /topics", console_topics, client_topics),
                ("GET /groups/GROUP/lag", console_lag, client_lag),
                ("GET /topics/big/messages (page 1)", console_browse, client_browse),
            ]:
                c, c_cpu, c_broker = await _with_cpu(requests, console_call, broker_pid)
                b, b_cpu, b_broker = await _with_cpu(requests, client_call, broker_pid)
                verdict = "ok" if _p(c, 99) < 200 else "OVER 200 ms"
                print(f"{what:<34}{_p(c, 50):>9.1f}{_p(c, 99):>9.1f}   {_p(b, 50):>7.1f} /{_p(b, 99):>7.1f}"
                      f"      {_p(c, 99) / _p(b, 99):>6.2f}x   {verdict}"
                      f"   {c_cpu:.1f}+{c_broker:.1f} / {b_cpu:.1f}+{b_broker:.1f}")
    finally:
        stop_scraping.set()
        scrapes = await scraper
        print(f"(broker /metrics scraped {scrapes} times meanwhile)")
        await server.stop()


async def _with_cpu(requests: int, call: Callable[[], Awaitable[None]],
                    broker_pid: int) -> tuple[list[float], float, float]:
    """The timings, and the CPU seconds of this process and of the broker meanwhile."""
    own, broker = time.process_time(), cpu_seconds(broker_pid)
    timings = await _timed(requests, call)
    return timings, time.process_time() - own, cpu_seconds(broker_pid) - broker


_PRODUCER = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
value = b'{"page": "/home", "user": 12345, "ms": 1700000000000}'
failed = []
def delivered(error, _message):
    if error is not None:
        failed.append(error)
start = time.perf_counter()
for i in range(count):
    while True:
        try:
            p.produce(topic, value=value, key=str(i % 1000).encode(), on_delivery=delivered)
            break
        except BufferError:
            p.poll(0.01)
    if i % 10000 == 0:
        p.poll(0)
if p.flush(300) or failed:
    sys.exit(f"not every record was delivered: {failed[:1]}")
print(time.perf_counter() - start)
"""


class _Tail:
    """A browser's live tail: reads the console's server-sent events on a thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.events = 0
        self.ready = threading.Event()
        self._http = httpx.Client(timeout=None)
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        with contextlib.suppress(httpx.HTTPError, RuntimeError, OSError), \
                self._http.stream("GET", self.url) as response:
            for line in response.iter_lines():
                if line.startswith("event: ready"):
                    self.ready.set()
                elif line.startswith("data: {\"partition\""):
                    self.events += 1

    def __enter__(self) -> _Tail:
        self._thread.start()
        if not self.ready.wait(60):
            raise RuntimeError("the live tail did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()  # the page closes: its connection ends, and the reader with it
        self._thread.join(30)


def _produce_round(bootstrap: str, topic: str, count: int, broker_pid: int) -> tuple[float, float]:
    """Records per second of one producer process, and the broker's CPU seconds meanwhile."""
    before = cpu_seconds(broker_pid)
    done = subprocess.run([sys.executable, "-c", _PRODUCER, bootstrap, topic, str(count)], capture_output=True,
                          text=True, check=True, timeout=900)
    return count / float(done.stdout.strip().splitlines()[-1]), cpu_seconds(broker_pid) - before


def _throughput(bootstrap: str, count: int, rounds: int, broker_pid: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("tailed", 1, 1)])["tailed"].result(60)
    console = subprocess.Popen([sys.executable, "-m", "streamkit", "console", "-b", bootstrap, "--listen",
                                "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    try:
        assert console.stdout is not None
        url = console.stdout.readline().strip().rsplit(" ", 1)[-1]
        bare: list[tuple[float, float]] = []
        tailed: list[tuple[float, float]] = []
        seen = 0
        for _ in range(rounds):
            bare.append(_produce_round(bootstrap, "tailed", count, broker_pid))
            with _Tail(f"{url}/topics/tailed/tail") as tail:
                console_cpu = cpu_seconds(console.pid)
                tailed.append(_produce_round(bootstrap, "tailed", count, broker_pid))
                console_cpu = cpu_seconds(console.pid) - console_cpu
                time.sleep(1)
                seen += tail.events
        without = statistics.median(r for r, _ in bare)
        with_tail = statistics.median(r for r, _ in tailed)
        verdict = "ok" if with_tail >= 0.95 * without else "MORE THAN 5% SLOWER"
        print(f"produce {count:,} records x {rounds} rounds: without a console {without:,.0f} records/s "
              f"(broker CPU {statistics.median(c for _, c in bare):.1f} s a round); with the console on a live "
              f"tail {with_tail:,.0f} records/s (broker CPU {statistics.median(c for _, c in tailed):.1f} s, "
              f"console CPU {console_cpu:.1f} s in the last round; {seen:,} records reached the page): "
              f"{with_tail / without:.3f}x   {verdict}")
        print("  rounds without: " + ", ".join(f"{r:,.0f}" for r, _ in bare) +
              "; with: " + ", ".join(f"{r:,.0f}" for r, _ in tailed))
    finally:
        console.terminate()
        console.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--produce", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--throughput-only", action="store_true", help="skip the endpoints (and their setup)")
    parser.add_argument("--endpoints-only", action="store_true", help="skip the produce throughput")
    args = parser.parse_args()
    print(f"console bench: {args.topics} topics, {args.groups} groups, {args.records:,} records; {machine_load()}")
    with tempfile.TemporaryDirectory() as directory, \
            BrokerProcess(Path(directory) / "data", {"metrics.listener": "http://127.0.0.1:0"}) as broker:
        assert broker.process is not None
        if args.throughput_only:
            _throughput(broker.bootstrap, args.produce, args.rounds, broker.process.pid)
            return
        started = time.monotonic()
        _setup(broker.bootstrap, args.topics, args.groups, args.records)
        print(f"set up in {time.monotonic() - started:.0f} s")
        asyncio.run(_run(broker.bootstrap, args.requests, f"group-{args.groups // 2:03d}", broker.process.pid,
                         f"http://127.0.0.1:{broker.metrics_port}/metrics"))
        if args.endpoints_only:
            return
        _throughput(broker.bootstrap, args.produce, args.rounds, broker.process.pid)


if __name__ == "__main__":
    main()
