"""The web console's endpoints under load, against the bare Kafka client calls that fetch the
same data, measured in the same run on the same broker process.

- topic list: ``GET /topics`` (JSON) with ``--topics`` topics, versus aiokafka's admin
  client listing and describing them (what the page needs, with no page);
- group lag: ``GET /groups/GROUP/lag`` (JSON) with ``--groups`` groups in the cluster,
  versus the admin client's committed offsets plus a consumer's end offsets;
- message browser: the first page (50 records) at offset 0 of a ``--records``-record
  topic, versus an aiokafka consumer assigned, seeked to 0 and fetching 50 records.

Each endpoint is asked ``--requests`` times one after another; prints p50 and p99 in ms and
the ratio console/client of the p99s. Target: p99 < 200 ms for each console endpoint.

Usage: python benchmarks/console_bench.py [--topics 1000] [--groups 100] [--records 1000000]
       [--requests 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
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
from _machine import machine_load


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


async def _run(bootstrap: str, requests: int, group: str) -> None:
    server = ConsoleServer(ConsoleSettings(bootstrap), "127.0.0.1", 0)
    await server.start()
    json_accept = {"Accept": "application/json"}
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

            print(f"{'endpoint':<34}{'p50 ms':>9}{'p99 ms':>9}   client p50/p99 ms   console/client p99")
            for what, console_call, client_call in [
                ("GET /topics", console_topics, client_topics),
                ("GET /groups/GROUP/lag", console_lag, client_lag),
                ("GET /topics/big/messages (page 1)", console_browse, client_browse),
            ]:
                c = await _timed(requests, console_call)
                b = await _timed(requests, client_call)
                verdict = "ok" if _p(c, 99) < 200 else "OVER 200 ms"
                print(f"{what:<34}{_p(c, 50):>9.1f}{_p(c, 99):>9.1f}   {_p(b, 50):>7.1f} /{_p(b, 99):>7.1f}"
                      f"      {_p(c, 99) / _p(b, 99):>6.2f}x   {verdict}")
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()
    print(f"console bench: {args.topics} topics, {args.groups} groups, {args.records:,} records; {machine_load()}")
    with tempfile.TemporaryDirectory() as directory, BrokerProcess(Path(directory) / "data") as broker:
        started = time.monotonic()
        _setup(broker.bootstrap, args.topics, args.groups, args.records)
        print(f"set up in {time.monotonic() - started:.0f} s")
        asyncio.run(_run(broker.bootstrap, args.requests, f"group-{args.groups // 2:03d}"))


if __name__ == "__main__":
    main()
