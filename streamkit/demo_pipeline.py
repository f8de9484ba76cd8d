"""The whole pipeline on one machine: file -> Connect -> broker -> stream app -> Connect -> Spark.

``make demo`` runs it, with nothing to set up:

1. a deterministic sample of page views (JSON Lines, ``VIEWS`` over an hour of event
   time, page popularity skewed like real traffic, then one per page ten minutes later
   that closes the last windows) is generated into the demo's data dir;
2. an embedded broker starts on a free port, and a Schema Registry in this process on it
   (on its own thread);
3. a Connect worker (standalone, in this process) runs the file source connector of
   ``connectors/demo-file-source.json``, which ingests the file into ``page_views``;
4. a stream app counts views per page per minute (the DSL: tumbling windows with a grace
   period and ``.final()``, as ``apps/pageviews.py``) into ``page_counts``, as Avro through
   the registry (``AvroSerde``);
5. the same worker runs the Spark sink connector of ``connectors/demo-spark-sink.json``,
   which reads ``page_counts`` with the AvroConverter and exports it into a Parquet table in
   exactly-once micro-batches;
6. Spark reads the table and prints the top pages, checked against a batch computation of
   the same input.

Progress bars follow the ingestion (records on ``page_views``), the processing (final
window counts on ``page_counts``) and the export (rows committed to the table).

With ``secure`` (``python -m streamkit.demo --secure``) the same pipeline runs against a
broker that only has a SASL_SSL listener (PLAIN logins over TLS, a certificate from a CA the
demo makes) with ACLs on: Connect logs in as ``connect``, the stream app as ``pipeline``,
each allowed only its topics and groups (``SECURE_USERS``, ``_secure_acls``); the demo's own
clients and the console as the super user ``admin``. Connect's REST API and the app's web
endpoints are served over https with basic authentication, which the console uses.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamkit.streams.app import App

__all__ = ["SECURE_USERS", "TIMEOUT", "VIEWS", "PipelineTimeout", "Reached", "Sample", "SecureSetup", "generate",
           "run_pipeline"]

VIEWS = 300_000
MINUTES = 60
T0 = 1_700_000_040_000  # a minute boundary
HEALTH = "/health"
PAGES = ["/home", "/search", "/cart", "/checkout", "/deals", "/help", "/account", "/blog",
         *(f"/products/{i}" for i in range(1, 33))]
CONNECTORS = Path(__file__).resolve().parents[1] / "connectors"
TOP = 5
TIMEOUT = 150.0  # seconds from the pipeline's start to the last row in the table (--timeout)


@dataclass(frozen=True)
class Sample:
    """The generated input and what a batch computation says about it."""

    path: Path
    rows: int  # lines in the file: the hour's views and the closing ones
    views: int  # the hour's views, health checks included
    windows: dict[tuple[str, int], int]  # (page, window start) -> views, for windows that close

    @property
    def counted(self) -> int:
        """Views in the windows that close: the hour's, less the health checks."""
        return sum(self.windows.values())

    def totals(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for (page, _start), n in self.windows.items():
            out[page] += n
        return out


def generate(path: Path, views: int = VIEWS, seed: int = 7) -> Sample:
    """``views`` page views in event-time order over ``MINUTES`` minutes, every 25th a health
    check, then one view per page ten minutes later: it moves every page's stream time past
    the last windows' end and grace, so they close (its own windows stay open)."""
    rng = random.Random(seed)
    weights = list(itertools.accumulate(1 / (rank + 1) ** 1.1 for rank in range(len(PAGES))))
    pages = rng.choices(PAGES, cum_weights=weights, k=views)
    step = MINUTES * 60_000 / views
    windows: Counter[tuple[str, int]] = Counter()
    lines = []
    for i, page in enumerate(pages):
        ts = T0 + int(i * step)
        if i % 25 == 24:
            page = HEALTH
        else:
            windows[(page, ts - ts % 60_000)] += 1
        lines.append(orjson.dumps({"user": f"u{rng.randrange(5000)}", "page": page, "ts": ts}))
    closing = T0 + (MINUTES + 10) * 60_000
    lines.extend(orjson.dumps({"user": "u0", "page": page, "ts": closing}) for page in PAGES)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return Sample(path, len(lines), views, dict(windows))


# The demo's SASL users with --secure: admin is a super user; the others have ACLs.
SECURE_USERS = {"admin": "admin-secret", "connect": "connect-secret", "pipeline": "pipeline-secret"}
APP_ID = "demo-pipeline"


@dataclass(frozen=True)
class SecureSetup:
    """The files of ``--secure``: a CA, the certificate its servers share (broker, Connect's
    REST API, the app's web endpoints), and a JAAS file of the HTTP users."""

    ca: Path
    keystore: Path
    jaas: Path

    @staticmethod
    def make(directory: Path) -> SecureSetup:
        from streamkit.testing_tls import CertificateAuthority, jaas_users

        ca = CertificateAuthority(directory)
        cert = ca.issue("localhost", "CN=localhost", hosts=["localhost", "127.0.0.1"])
        # Connect's REST API and the app's web endpoints: one users file, each its own section
        jaas = jaas_users(directory, ["KafkaConnect", "StreamkitWorker"], {"admin": SECURE_USERS["admin"]})
        return SecureSetup(ca.cert_path, cert.keystore, jaas)

    def broker_settings(self) -> dict[str, str]:
        """One SASL_SSL listener, PLAIN users in Kafka's JAAS line, the StandardAuthorizer."""
        users = " ".join(f'user_{name}="{password}"' for name, password in SECURE_USERS.items())
        return {"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.keystore), "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_ssl.plain.sasl.jaas.config":
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="admin" password="{SECURE_USERS["admin"]}" {users};',
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin"}

    def client_settings(self, user: str) -> dict[str, str]:
        """Kafka's client settings that log ``user`` in."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": SECURE_USERS[user], "ssl.ca.location": str(self.ca)}

    def connect_settings(self) -> dict[str, str]:
        """The worker's clients log in as connect; its REST API is https with basic auth."""
        return {**self.client_settings("connect"), "listeners": "https://127.0.0.1:0",
                "listeners.https.ssl.keystore.location": str(self.keystore),
                "rest.extension.classes":
                    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension",
                "java.security.auth.login.config": str(self.jaas)}

    def registry_settings(self) -> dict[str, str]:
        """The registry keeps its schemas in the broker as admin (Confluent's kafkastore.*)."""
        return {"kafkastore.security.protocol": "SASL_SSL", "kafkastore.sasl.mechanism": "PLAIN",
                "kafkastore.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                                               f'username="admin" password="{SECURE_USERS["admin"]}";',
                "kafkastore.ssl.truststore.location": str(self.ca)}

    def app_settings(self) -> dict[str, str]:
        """The app's clients log in as pipeline; its web endpoints are https with basic auth."""
        return {**self.client_settings("pipeline"), "web.ssl.keystore.location": str(self.keystore),
                "web.authentication.method": "BASIC", "java.security.auth.login.config": str(self.jaas)}


def _secure_acls() -> list[Any]:
    """What each user may do, as ``streamkit acls add`` would grant it."""
    from streamkit.clients.acls import AclOptions, bindings

    connect, pipeline = ["User:connect"], ["User:pipeline"]
    return [
        # the file source writes page_views; the Spark sink reads page_counts in its group
        *bindings(AclOptions(allow_principals=connect, topic="page_views", producer=True)),
        *bindings(AclOptions(allow_principals=connect, topic="page_counts", group="connect-demo-spark-sink",
                             consumer=True)),
        *bindings(AclOptions(allow_principals=connect, cluster=True, operations=["Describe", "IdempotentWrite"])),
        # the app reads page_views, writes page_counts, owns its internal topics and group
        *bindings(AclOptions(allow_principals=pipeline, topic="page_views", group=APP_ID, consumer=True)),
        *bindings(AclOptions(allow_principals=pipeline, topic="page_counts", producer=True)),
        *bindings(AclOptions(allow_principals=pipeline, topic=APP_ID, pattern_type="prefixed")),
        *bindings(AclOptions(allow_principals=pipeline, transactional_id=APP_ID, pattern_type="prefixed")),
        *bindings(AclOptions(allow_principals=pipeline, cluster=True, operations=["Describe", "IdempotentWrite"])),
    ]


def _app(bootstrap: str, data_dir: Path, registry_url: str | None, config: dict[str, Any] | None = None) -> App:
    """Views per page per minute, as ``apps/pageviews.py`` declares it (event time from ``ts``),
    the counts written to ``page_counts`` as Avro through the Schema Registry at
    ``registry_url`` (None: as JSON, for a test of the app's logic without a registry)."""
    from datetime import timedelta

    from pydantic import BaseModel

    from streamkit.schemas.serdes import AvroSerde
    from streamkit.streams.app import App
    from streamkit.streams.windows import tumbling

    class PageView(BaseModel):
        user: str
        page: str
        ts: int

    class PageCount(BaseModel):
        page: str
        window_start: int
        window_end: int
        views: int

    app = App(APP_ID, broker=bootstrap, data_dir=data_dir,
              config={"commit.interval.ms": 200, "num.partitions": 2, **(config or {})})
    views = app.topic("page_views", value_type=PageView, partitions=1, timestamp=lambda e: e.value.ts)
    (app.stream(views)
        .filter(lambda v: v.page != HEALTH)
        .group_by(lambda v: v.page, name="by_page")
        .window(tumbling(minutes=1), grace=timedelta(seconds=10))
        .count(name="page_counts")
        .final()
        .map(lambda w: PageCount(page=w.key, window_start=w.start, window_end=w.end, views=w.value))
        .to("page_counts", value_type=AvroSerde(PageCount, registry_url) if registry_url else PageCount))
    return app


def _connector(config_file: str, **overrides: str) -> tuple[str, dict[str, Any]]:
    shipped = json.loads((CONNECTORS / config_file).read_text())
    return shipped["name"], {**shipped["config"], **overrides}


def _start_spark(warehouse: Path) -> tuple[Future[None], Future[SparkSession]]:
    """A local SparkSession, started in the background while the pipeline runs (the Spark
    sink connector's task shares it: one JVM for the whole demo). The first future is done
    once the JVM runs, quietly (``streamkit.spark.jvm``): start the connector after it, or
    its task would launch the JVM itself, with Spark's default logging."""
    import pyspark.sql  # noqa: F401 - imported here, once, before any thread imports it

    from streamkit.connect.spark import acquire_spark_session
    from streamkit.spark.jvm import start_jvm

    conf = {"spark.master": "local[1]", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "1", "spark.sql.session.timeZone": "UTC",
            "spark.sql.warehouse.dir": str(warehouse)}
    jvm: Future[None] = Future()
    session: Future[SparkSession] = Future()

    def start() -> None:
        try:
            start_jvm(conf)
            jvm.set_result(None)
            session.set_result(acquire_spark_session(conf))
        except BaseException as exc:
            for future in (jvm, session):
                if not future.done():
                    future.set_exception(exc)

    threading.Thread(target=start, name="demo-spark", daemon=True).start()
    return jvm, session


async def _start_registry(bootstrap: str, settings: dict[str, str]) -> tuple[str, Callable[[], None]]:
    """A Schema Registry in this process, on its own thread and event loop: the Connect
    worker's converters ask it for schemas with blocking calls from the demo's loop, which
    would wait forever on a registry served by that same loop. Its URL, and how to stop it."""
    from streamkit.schemas import RegistryConfig, SchemaRegistryServer

    server = SchemaRegistryServer(RegistryConfig.from_settings({
        "listeners": "http://127.0.0.1:0", "kafkastore.bootstrap.servers": bootstrap, **settings}))
    loop = asyncio.new_event_loop()
    ready: Future[str] = Future()

    def serve() -> None:
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:
            ready.set_exception(exc)
            loop.close()
            return
        ready.set_result(server.url)
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=serve, name="demo-schema-registry", daemon=True)
    thread.start()
    url = await asyncio.wrap_future(ready)

    def stop() -> None:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)

    return url, stop


class _EndOffsets:
    """Records on a topic so far: the sum of its partitions' end offsets."""

    def __init__(self, bootstrap: str, consumer: Any) -> None:
        self.bootstrap = bootstrap
        self.consumer = consumer
        self.partitions: dict[str, int] = {}

    async def __call__(self, topic: str) -> int:
        from aiokafka.structs import TopicPartition

        from streamkit.clients.admin import ClientError, describe_topic

        if topic not in self.partitions:
            try:
                self.partitions[topic] = (await describe_topic(self.bootstrap, topic)).partitions
            except ClientError:
                return 0  # not created yet
        ends = await self.consumer.end_offsets([TopicPartition(topic, p) for p in range(self.partitions[topic])])
        return int(sum(ends.values()))


@dataclass(frozen=True)
class Reached:
    """How far each stage of the pipeline got: records on ``page_views``, final counts on
    ``page_counts``, rows committed to the Spark table."""

    ingested: int
    processed: int
    exported: int


class PipelineTimeout(Exception):
    """The pipeline did not export every closed window's count within its timeout."""

    def __init__(self, timeout: float, reached: Reached, sample: Sample) -> None:
        expected = len(sample.windows)
        super().__init__(
            f"the pipeline did not finish within its timeout of {timeout:g} s: ingested {reached.ingested:,}/"
            f"{sample.rows:,} page views, processed {reached.processed:,}/{expected:,} final counts, exported "
            f"{reached.exported:,}/{expected:,} rows (a loaded machine may need longer: --timeout SECONDS)")
        self.reached = reached


async def _reached(end_offset: _EndOffsets, commit_log: Any, sample: Sample) -> Reached:
    return Reached(await end_offset("page_views"), min(len(sample.windows), await end_offset("page_counts")),
                   sum(b.rows for b in commit_log.batches()))


async def _follow(console: Console, end_offset: _EndOffsets, commit_log: Any, sample: Sample, timeout: float
                  ) -> Reached:
    """Progress bars until every closed window's count is in the table (or ``timeout``):
    how far each stage got."""
    expected = len(sample.windows)
    with Progress(TextColumn("{task.description:<11}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[unit]}"), TimeElapsedColumn(), console=console) as progress:
        ingest = progress.add_task("ingestion", total=sample.rows, unit="page views on page_views")
        process = progress.add_task("processing", total=expected, unit="final counts on page_counts")
        export = progress.add_task("export", total=expected, unit="rows in the Spark table")
        deadline = time.monotonic() + timeout
        while True:
            reached = await _reached(end_offset, commit_log, sample)
            progress.update(ingest, completed=reached.ingested)
            progress.update(process, completed=reached.processed)
            progress.update(export, completed=reached.exported)
            if reached.exported >= expected or time.monotonic() >= deadline:
                return reached
            await asyncio.sleep(0.25)


async def _until_interrupted(console: Console, url: str) -> None:
    """Wait for Ctrl-C (or SIGTERM) with everything running, then go on to the results."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    console.print(f"everything keeps running; look around at {url}, then press Ctrl-C for Spark's results")
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def run_pipeline(directory: Path, console: Console, views: int = VIEWS, timeout: float = TIMEOUT,
                       keep_running: bool = False, secure: bool = False) -> bool:
    """Run the pipeline in ``directory`` (wiped first); True when Spark's top pages equal the
    batch computation of the input; ``PipelineTimeout`` when the table does not hold every
    closed window's count ``timeout`` seconds after the pipeline started (Spark's summary of
    a partial table would be meaningless). The web console shows it while it runs; with
    ``keep_running`` everything stays up after the run until Ctrl-C, to look around in it;
    with ``secure``, against a SASL_SSL broker with ACLs (the module's docstring)."""
    from aiokafka import AIOKafkaConsumer

    from streamkit.clients.acls import create_acls
    from streamkit.clients.admin import create_topic
    from streamkit.clients.security import aiokafka_security, use_client_config
    from streamkit.connect.spark import read_committed, release_spark_session
    from streamkit.connect.spark_log import CommitLog
    from streamkit.connect.standalone import StandaloneWorker
    from streamkit.connect.worker_config import load_worker_config
    from streamkit.console import ConsoleServer, ConsoleSettings
    from streamkit.testing import embedded_broker

    started = time.monotonic()
    shutil.rmtree(directory, ignore_errors=True)
    console.rule("[bold]streamkit demo: the whole pipeline")
    sample = generate(directory / "input" / "page_views.jsonl", views)
    console.print(f"generated {sample.rows:,} page views (JSON Lines) in {sample.path}: {sample.views:,} over "
                  f"{MINUTES} minutes of event time on {len(PAGES)} pages, every 25th a {HEALTH} check, then "
                  f"{sample.rows - sample.views} ten minutes later, one per page, to close the last windows")
    jvm_started, spark_future = _start_spark(directory / "spark")
    table = directory / "tables" / "page_counts"
    expected = len(sample.windows)
    setup = SecureSetup.make(directory / "tls") if secure else None
    admin_security: dict[str, Any] = {}
    if setup is not None:
        # the demo's own clients (topic creation, ACLs, progress) and the console: admin
        use_client_config(setup.client_settings("admin"), from_file=False)
        admin_security = aiokafka_security(setup.client_settings("admin"))
    # The sample's event times are in November 2023, and the repartitioned views and the
    # window results carry them: under the default retention.ms (7 days) the broker would
    # delete them at its next retention check, as Kafka would (README: old event timestamps).
    broker_settings = {"log.retention.ms": -1, **(setup.broker_settings() if setup else {})}
    async with embedded_broker(directory / "broker", broker_settings) as broker:
        registry_url, stop_registry = await _start_registry(broker.bootstrap, setup.registry_settings() if setup else {})
        await create_topic(broker.bootstrap, "page_views", 1, {})
        if setup is not None:
            await create_acls(broker.bootstrap, _secure_acls())
            console.print(f"broker: SASL_SSL only (PLAIN users {', '.join(SECURE_USERS)}; CA {setup.ca}), "
                          "ACLs on: connect and pipeline may use only their topics and groups")
        app = _app(broker.bootstrap, directory / "app", registry_url, setup.app_settings() if setup else None)
        runtime = await app.start(web_port=0)
        worker = StandaloneWorker(load_worker_config({
            "bootstrap.servers": broker.bootstrap, "listeners": "http://127.0.0.1:0",
            "offset.storage.file.filename": str(directory / "connect" / "offsets.json"),
            "offset.flush.interval.ms": "1000",
            # A run cut short by its timeout stops the Spark sink task with rows buffered: its
            # last micro-batch (Spark's first job, slow to start) may take longer than the
            # default 5 s, and cancelling it would leave Spark's job to die with the session.
            "task.shutdown.graceful.timeout.ms": "60000", **(setup.connect_settings() if setup else {})}), [
            _connector("demo-file-source.json", file=str(sample.path)),
            _connector("demo-spark-sink.json", path=str(table), **{"value.converter.schema.registry.url": registry_url}),
        ])
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, **admin_security)
        commit_log = CommitLog(table)
        web_console: ConsoleServer | None = None
        try:
            await asyncio.wrap_future(jvm_started)
            await worker.start()
            await consumer.start()
            scheme = runtime.web.security.scheme
            web_console = ConsoleServer(ConsoleSettings(
                broker.bootstrap, worker.url, (f"{scheme}://{runtime.web.host}:{runtime.web.port}",),
                schema_registry_url=registry_url,
                client_config=setup.client_settings("admin") if setup else {},
                http_user_info=f"admin:{SECURE_USERS['admin']}" if setup else None,
                http_ca_location=str(setup.ca) if setup else None), "127.0.0.1", 0)
            await web_console.start()
            console.print(f"broker on {broker.bootstrap}, schema registry on {registry_url}; Connect worker on "
                          f"{worker.url} running demo-file-source and demo-spark-sink; app demo-pipeline counting "
                          "views per page per minute into page_counts (Avro)")
            console.print(f"web console: {web_console.url} (the pipeline: {web_console.url}/pipeline)")
            end_offsets = _EndOffsets(broker.bootstrap, consumer)
            reached = await _follow(console, end_offsets, commit_log, sample, timeout)
            if keep_running:
                await _until_interrupted(console, web_console.url)
                reached = await _reached(end_offsets, commit_log, sample)  # it ran on meanwhile
        finally:
            if web_console is not None:
                await web_console.stop()
            await consumer.stop()
            # The Spark sink task's stop waits for its SparkSession: a run that ends before
            # Spark is up (a timeout) waits for it here, or the worker would give up on the
            # task after a few seconds and cancel it, with a warning.
            await asyncio.to_thread(futures.wait, [spark_future])
            await worker.stop()
            await runtime.stop()
            await asyncio.to_thread(stop_registry)
    spark = spark_future.result()
    if reached.exported < expected:
        release_spark_session(spark)
        raise PipelineTimeout(timeout, reached, sample)
    batches = len(commit_log.batches())
    df = read_committed(spark, table)
    from pyspark.sql import functions as F

    top = (df.groupBy("page").agg(F.sum("views").alias("views"), F.count("*").alias("minutes"),
                                  F.max("views").alias("peak"))
           .orderBy(F.desc("views"), "page").limit(TOP).collect())
    rows, total = df.count(), df.agg(F.sum("views")).collect()[0][0]
    batch_totals = sample.totals()
    result = Table(title=f"top {TOP} pages (Spark, from {table})")
    for column in ("page", "views", "minutes", "busiest minute", "batch computation"):
        result.add_column(column, justify="left" if column == "page" else "right")
    for r in top:
        result.add_row(r.page, f"{r.views:,}", str(r.minutes), f"{r.peak:,}", f"{batch_totals[r.page]:,}")
    console.print(result)
    expected_top = sorted(batch_totals.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    exact = [(r.page, r.views) for r in top] == expected_top and rows == expected and total == sum(batch_totals.values())
    console.print(f"pipeline: {sample.rows:,} page views ingested -> {expected:,} windowed counts -> {rows:,} rows "
                  f"in {batches} micro-batches, {total:,} views (the {sample.views - sample.counted:,} {HEALTH} "
                  f"checks filtered; the closing views' windows stay open); in {time.monotonic() - started:.0f} s")
    console.print(f"top pages {'match' if exact else 'DO NOT match'} the batch computation of the input "
                  f"({runtime.metrics.late_records} late records)")
    console.print(f"read the table yourself: spark.read.parquet({str(table)!r})")
    release_spark_session(spark)
    return exact
