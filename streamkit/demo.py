"""``make demo``: the whole pipeline on one machine, and tours of its parts.

By default (``python -m streamkit.demo [DIR]``) it runs the pipeline of
``streamkit.demo_pipeline``: a file source connector ingests generated page views, a stream
app counts them per page and minute, the Spark sink connector exports the counts and Spark
prints the top pages; with ``--secure`` against a broker that only speaks SASL_SSL, with
ACLs (``streamkit.demo_pipeline``). ``--tour broker|streams|log|all`` runs the tours instead:

1. The broker: start one (in this process, on a free port), produce page views with a
   plain Kafka client (aiokafka), count them in a consumer group, restart the broker and
   show that the group's committed offsets survived.
2. Stream processing on that broker: a stream app (the DSL's windowed count per page and
   minute, and an agent keeping a table) run by the same runtime as ``streamkit worker``;
   its final window results, and interactive queries over its HTTP endpoints.
3. The partition log underneath: append batches, read them back, look one up by
   timestamp, restart, survive a simulated crash with a torn write, and compact.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from streamkit.log import Compression, LogConfig, PartitionLog, Record, build_batch, clean
from streamkit.log.batch import iter_batch_spans
from streamkit.log.records import records_of

if TYPE_CHECKING:
    from streamkit.streams.app import App

console = Console(soft_wrap=True)
PAGES = ["/home", "/cart", "/checkout", "/search", "/help"]


def _all_records(log: PartitionLog) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 64 * 1024)
        if not data:
            break
        batches = [data[p : p + n] for p, n, _b, _l in iter_batch_spans(data)]
        got = [r for r in records_of(batches) if r.offset >= offset]
        out.extend(got)
        offset = got[-1].offset + 1 if got else offset + 1
    return out


def run(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    config = LogConfig.from_kafka(
        {"segment.bytes": 16 * 1024, "cleanup.policy": "compact,delete", "retention.ms": -1}
    )
    console.rule("[bold]streamkit demo: the partition log")
    log = PartitionLog.open(directory, config)
    t0 = 1_700_000_000_000
    for i in range(200):
        batch = build_batch(
            [Record(key=PAGES[(i + j) % 5].encode(), value=f"view-{i}-{j}".encode(),
                    timestamp=t0 + i * 1000 + j) for j in range(5)],
            compression=Compression(i % 5),
        )
        log.append(batch)
    console.print(
        f"appended 1000 records in 200 batches (every codec) -> offsets "
        f"[{log.log_start_offset}, {log.log_end_offset}) in {len(log.segments)} segments"
    )
    records = _all_records(log)
    console.print(f"read back {len(records)} records; first {records[0].value!r}, last {records[-1].value!r}")
    hit = log.offset_for_timestamp(t0 + 150_000)
    console.print(f"first record at or after t0+150s: offset {hit[0] if hit else None}")

    log.close()
    log = PartitionLog.open(directory, config)
    console.print(f"clean restart: log end offset {log.log_end_offset}, {len(_all_records(log))} records")

    last = log.segments[-1]
    log.abandon()
    with open(last.path, "r+b") as f:  # a crash mid-write: the last batch is cut short
        f.truncate(os.path.getsize(last.path) - 7)
    log = PartitionLog.open(directory, config)
    console.print(
        f"after a simulated crash with a torn tail: recovered to offset {log.log_end_offset} "
        f"({len(_all_records(log))} valid records, the torn batch cut)"
    )

    result = clean(log, force=True)
    remaining = _all_records(log)
    latest = {r.key: r.value for r in remaining}
    console.print(
        f"compaction: {result.records_removed if result else 0} superseded records removed, "
        f"{len(remaining)} left; latest per page: "
        + ", ".join(f"{k.decode()}={v.decode()}" for k, v in sorted(latest.items()) if k and v)
    )
    log.close()
    console.print(f"[green]done[/green]; inspect the files with: streamkit dump-log {directory}")


async def broker_tour(directory: Path) -> None:
    import orjson
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from streamkit.clients.admin import create_topic, describe_group
    from streamkit.testing import embedded_broker

    shutil.rmtree(directory, ignore_errors=True)
    console.rule("[bold]streamkit demo: the broker")
    async with embedded_broker(directory) as broker:
        console.print(f"broker listening on {broker.bootstrap} (data in {directory})")
        await create_topic(broker.bootstrap, "page_views", 3, {"retention.ms": "86400000"})
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="lz4")
        await producer.start()
        for i in range(1000):
            page = PAGES[i % len(PAGES)]
            await producer.send("page_views", orjson.dumps({"user": f"u{i % 37}", "page": page}),
                                key=page.encode())
        await producer.flush()
        await producer.stop()
        console.print("produced 1000 page views to page_views (3 partitions, lz4, acks=all)")
        consumer = AIOKafkaConsumer("page_views", bootstrap_servers=broker.bootstrap, group_id="demo-counter",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        counts: dict[str, int] = {}
        while sum(counts.values()) < 1000:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for r in records:
                    page = orjson.loads(r.value)["page"]
                    counts[page] = counts.get(page, 0) + 1
        await consumer.commit()
        await consumer.stop()
        console.print("consumer group demo-counter counted: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    async with embedded_broker(directory) as broker:
        state, _members, lags = await describe_group(broker.bootstrap, "demo-counter")
        committed = sum(lag.committed for lag in lags)
        console.print(f"after a broker restart: group {state}, committed offsets sum to {committed}, "
                      f"total lag {sum(lag.lag for lag in lags)}")


STREAM_VIEWS = 3000
STREAM_MINUTES = 3
CLOSING_MS = 600_000  # event time of the views that close the windows, after t0
GRACE_MS = 10_000


def _stream_app(bootstrap: str, data_dir: Path) -> App:
    """The demo's stream app: what ``apps/pageviews.py`` does, declared here."""
    from datetime import timedelta

    from pydantic import BaseModel

    from streamkit.streams.agent import AgentStream
    from streamkit.streams.app import App
    from streamkit.streams.windows import tumbling

    class PageView(BaseModel):
        user: str
        page: str

    app = App("demo-pageviews", broker=bootstrap, data_dir=data_dir,
                        config={"commit.interval.ms": 200, "num.partitions": 3})
    # One input partition: its views arrive in event-time order, and group_by keeps that
    # order per page. (Views of one page coming from several input partitions would be
    # interleaved by the repartitioning, and those behind by more than the grace period
    # would be late.)
    views = app.topic("demo_page_views", value_type=PageView, partitions=1)
    totals = app.Table("views_per_page", default=int)
    (app.stream(views)
        .filter(lambda v: v.page != "/health")
        .group_by(lambda v: v.page, name="by_page")
        .window(tumbling(minutes=1), grace=timedelta(milliseconds=GRACE_MS), expires=timedelta(hours=1))
        .count(name="page_counts")
        .final()
        .to("page_counts"))

    @app.agent(views)
    async def count(stream: AgentStream) -> None:
        async for view in stream.group_by(lambda v: v.page, name="views_per_page"):
            totals[view.page] += 1

    return app


async def stream_tour(directory: Path) -> None:
    import orjson
    from aiokafka import AIOKafkaProducer

    from streamkit.testing import embedded_broker, http_get

    shutil.rmtree(directory, ignore_errors=True)
    console.rule("[bold]streamkit demo: stream processing")
    # Event times in 2023: kept whatever their age (see streamkit.demo_pipeline).
    async with embedded_broker(directory / "broker", {"log.retention.ms": -1}) as broker:
        app = _stream_app(broker.bootstrap, directory / "app")
        runtime = await app.start(web_port=0)
        try:
            console.print(f"app demo-pageviews running on {broker.bootstrap}: a windowed count per page and "
                          "minute (DSL), and a table of totals (agent)")
            t0 = 1_700_000_040_000  # a minute boundary
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
            await producer.start()
            step = STREAM_MINUTES * 60_000 // STREAM_VIEWS
            expected: dict[tuple[str, int], int] = {}
            for i in range(STREAM_VIEWS):
                page = "/health" if i % 10 == 9 else PAGES[(i * 7) % len(PAGES)]
                ts = t0 + i * step
                if page != "/health":
                    expected[(page, ts - ts % 60_000)] = expected.get((page, ts - ts % 60_000), 0) + 1
                await producer.send("demo_page_views", orjson.dumps({"user": f"u{i % 41}", "page": page}),
                                    key=f"u{i % 41}".encode(), timestamp_ms=ts)
            # One view per page ten minutes later moves every page's stream time past the
            # earlier windows' end + grace: they close, and their final counts come out.
            for page in PAGES:
                await producer.send("demo_page_views", orjson.dumps({"user": "u0", "page": page}),
                                    key=b"u0", timestamp_ms=t0 + CLOSING_MS)
            await producer.flush()
            await producer.stop()
            console.print(f"produced {STREAM_VIEWS:,} page views over {STREAM_MINUTES} minutes of event time (every "
                          f"10th a /health check), then {len(PAGES)} at minute {CLOSING_MS // 60_000}, one per "
                          "page: they move each page's stream time past the first windows' end and grace period, "
                          "so those windows close")
            results = await _read_results(broker.bootstrap, len(expected))
            console.print("page_counts, one final result per page and minute (event time):")
            for page in PAGES:
                counts = [results.get((page, t0 + m * 60_000)) for m in range(STREAM_MINUTES)]
                console.print(f"  {page:<10} " + "  ".join(f"minute {m}: {c}" for m, c in enumerate(counts)))
            exact = all(results.get(k) == n for k, n in expected.items()) and len(results) == len(expected)
            console.print(f"windowed counts {'match' if exact else 'DO NOT match'} the counts computed from the "
                          f"input ({runtime.metrics.late_records} late records)")
            port = runtime.web.port
            total_views = STREAM_VIEWS - STREAM_VIEWS // 10 + len(PAGES)
            await _wait_for_totals(port, total_views)
            status, body = await http_get(port, "/tables/views_per_page/%2Fcart")
            console.print(f"interactive query GET /tables/views_per_page/%2Fcart -> {status} {body} (every view of "
                          f"/cart, the one at minute {CLOSING_MS // 60_000} included)")
            status, body = await http_get(port, "/tables/page_counts/%2Fcart")
            windows = body.get("value", []) if isinstance(body, dict) else []
            closed = [w for w in windows if w["end"] + GRACE_MS <= t0 + CLOSING_MS]
            console.print(f"interactive query GET /tables/page_counts/%2Fcart -> {status}, {len(windows)} windows: "
                          f"{len(closed)} closed (kept until they expire, an hour later), and "
                          f"{len(windows) - len(closed)} still open, the closing view's: " + ", ".join(
                              f"[{w['start'] - t0}, {w['end'] - t0}) ms: {w['value']}" for w in windows))
        finally:
            await runtime.stop()
    console.print("run it yourself: .venv/bin/streamkit worker -A apps.pageviews --web-port 8080")


async def _read_results(bootstrap: str, count: int, timeout: float = 40) -> dict[tuple[str, int], int]:
    """The final window results on page_counts: (page, window start) -> count."""
    import orjson
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer("page_counts", bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    results: dict[tuple[str, int], int] = {}
    deadline = asyncio.get_running_loop().time() + timeout
    try:
        while len(results) < count and asyncio.get_running_loop().time() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for r in records:
                    value = orjson.loads(r.value)
                    results[(value["key"], value["start"])] = value["value"]
    finally:
        await consumer.stop()
    return results


async def _wait_for_totals(port: int, total: int, timeout: float = 30) -> None:
    """Until the agent's table holds every view (its commits make them visible)."""
    from streamkit.testing import http_get

    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        _status, body = await http_get(port, "/tables/views_per_page")
        if isinstance(body, dict) and sum(v for v in body.values() if isinstance(v, int)) >= total:
            return
        await asyncio.sleep(0.2)


TOURS = ("pipeline", "broker", "streams", "log", "all")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value


def main(argv: list[str] | None = None) -> None:
    from streamkit.demo_pipeline import TIMEOUT

    parser = argparse.ArgumentParser(prog="python -m streamkit.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", default="data/demo", help="where the demo keeps its data")
    parser.add_argument("--tour", choices=TOURS, default="pipeline",
                        help="pipeline (default): the whole pipeline; broker, streams, log: one tour; all: the "
                             "three tours")
    parser.add_argument("--secure", action="store_true",
                        help="pipeline: against a broker with only a SASL_SSL listener and ACLs, Connect's REST "
                             "API and the app's web endpoints over https with basic auth")
    parser.add_argument("--timeout", type=_seconds, default=TIMEOUT, metavar="SECONDS",
                        help=f"pipeline: how long the pipeline may take to export every count once it runs "
                             f"(default {TIMEOUT:g}); past it the demo stops with an error")
    parser.add_argument("--keep-running", action="store_true",
                        help="pipeline: keep the broker, Connect, the app and the web console running after "
                             "the run until Ctrl-C")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="  [log] %(message)s")
    root = Path(args.directory)
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    if args.tour == "pipeline":
        from streamkit.demo_pipeline import PipelineTimeout, run_pipeline

        if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
            console.print("the pipeline needs Java 17 or later for Spark (e.g. apt-get install "
                          "openjdk-17-jre-headless); the tours run without it: python -m streamkit.demo --tour all")
            sys.exit(2)

        try:
            exact = asyncio.run(run_pipeline(root / "pipeline", console, timeout=args.timeout,
                                             keep_running=args.keep_running, secure=args.secure))
        except PipelineTimeout as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(1)
        console.print("\nmore: python -m streamkit.demo --tour broker|streams|log|all")
        sys.exit(0 if exact else 1)
    if args.tour in ("broker", "all"):
        asyncio.run(broker_tour(root / "broker"))
    if args.tour in ("streams", "all"):
        asyncio.run(stream_tour(root / "streams"))
    if args.tour in ("log", "all"):
        run(root / "page_views-0")
    console.print("\nnext: run a broker with `.venv/bin/streamkit broker` and point any Kafka client or "
                  "kcat at 127.0.0.1:9092")


if __name__ == "__main__":
    main()
