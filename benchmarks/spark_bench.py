"""Reading a topic into Spark with the ``streamkit`` data source, against ``spark.read.json``
of the same records from a local file, in the same run.

Setup: a ``streamkit broker`` child process (``streamkit.testing.BrokerProcess``, data in a
temp dir), a topic of ``--partitions`` partitions holding ``--records`` JSON page views
(``{"page": "p17", "user": 4242, "ms": 1700000000123}``, ~45 bytes, keyed by page),
produced with confluent-kafka, and the very same values as JSON Lines in a local file (in
the page cache, as the broker's log is). Spark runs ``local[N]``, N = ``--partitions``.

Two pairs of queries, each one Spark job that reads every record, counts and aggregates:

* ``records``: the records as each source gives them. Kafka: views per page by the record
  key (``groupBy("key")``, count and total value bytes); file: ``spark.read.json`` with the
  schema, views per page (``groupBy("page")``, count and distinct users). This is the cost
  of getting the records into Spark: the target (>= 0.5) applies to it.
* ``typed``: both parse the whole JSON value into typed columns; Kafka with
  ``streamkit.spark.read_topic(spark, topic, PageView)`` (Arrow's JSON reader in the Python
  workers), and, as a third line, with Spark's ``from_json``, which alone costs about 1.5x
  the whole file query (measured on ``spark.read.text`` + ``from_json`` of the same file).

Rounds interleave the queries (other load on the machine hits all alike); the first round
warms the JVM and the Python workers and is not counted. Shown per query: median wall time
and CPU seconds (the JVM, its Python workers and, for Kafka, the broker process: the
steadier figure on a shared machine), and the ratios kafka/file of both (throughput: above
1 the topic is faster).

Usage: python benchmarks/spark_bench.py [--records N] [--partitions P] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pydantic import BaseModel

from streamkit.spark import local_session, read_topic
from streamkit.testing import BrokerProcess

TOPIC = "page-views"
PAGES = 1000
USERS = 50_000
T0 = 1_700_000_000_000
_TICKS = os.sysconf("SC_CLK_TCK")


class PageView(BaseModel):
    page: str
    user: int
    ms: int


def value(i: int) -> bytes:
    return b'{"page":"p%d","user":%d,"ms":%d}' % (i % PAGES, (i * 7919) % USERS, T0 + i)


def produce(bootstrap: str, records: int, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "compression.type": "none", "acks": "all"})
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value(i), key=b"p%d" % (i % PAGES), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise SystemExit("the broker did not acknowledge every record")
    return time.perf_counter() - started


def write_file(path: Path, records: int) -> None:
    with path.open("wb") as f:
        for start in range(0, records, 100_000):
            f.write(b"\n".join(value(i) for i in range(start, min(start + 100_000, records))) + b"\n")


def cpu_seconds(*roots: int) -> float:
    """CPU time of ``roots`` and all their descendants (children reaped included), from /proc."""
    procs: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / _TICKS)
    children: dict[int, list[int]] = {}
    for pid, (parent, _cpu) in procs.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0.0, list(roots)
    while stack:
        pid = stack.pop()
        total += procs.get(pid, (0, 0.0))[1]
        stack += children.get(pid, [])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="counted rounds, after one warm-up round")
    args = parser.parse_args()

    from pyspark import SparkContext
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("page", StringType()), StructField("user", LongType()),
                         StructField("ms", LongType())])
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp, BrokerProcess(Path(tmp) / "broker") as broker:
        seconds = produce(broker.bootstrap, args.records, args.partitions)
        print(f"produced {args.records:,} records in {seconds:.1f} s to {args.partitions} partitions")
        path = Path(tmp) / "views.json"
        write_file(path, args.records)
        print(f"wrote the same records to {path} ({path.stat().st_size / 2**20:.0f} MiB)")

        with local_session("spark-bench", cores=args.partitions, shuffle_partitions=args.partitions) as spark:
            jvm = SparkContext._gateway.proc.pid  # type: ignore[union-attr]
            assert broker.process is not None

            def check(rows: list, counted: str) -> None:  # type: ignore[type-arg]
                total = sum(r[counted] for r in rows)
                if total != args.records or len(rows) != PAGES:
                    raise SystemExit(f"wrong result: {total} records in {len(rows)} pages")

            def kafka_df():  # type: ignore[no-untyped-def]
                return (spark.read.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
                        .option("subscribe", TOPIC).load())

            def by_page(df):  # type: ignore[no-untyped-def]
                return df.groupBy("page").agg(F.count("*").alias("views"),
                                              F.approx_count_distinct("user").alias("users")).collect()

            queries = {
                ("records", "kafka"): lambda: check(kafka_df().groupBy("key").agg(
                    F.count("*").alias("views"), F.sum(F.length("value")).alias("bytes")).collect(), "views"),
                ("records", "file"): lambda: check(by_page(spark.read.schema(schema).json(str(path))), "views"),
                ("typed", "kafka"): lambda: check(by_page(read_topic(spark, TOPIC, PageView,
                                                                     bootstrap=broker.bootstrap)), "views"),
                ("typed", "file"): lambda: check(by_page(spark.read.schema(schema).json(str(path))), "views"),
                ("from_json", "kafka"): lambda: check(by_page(kafka_df().select(
                    F.from_json(F.col("value").cast("string"), schema).alias("v")).select("v.*")), "views"),
            }
            walls: dict[tuple[str, str], list[float]] = {q: [] for q in queries}
            cpus: dict[tuple[str, str], list[float]] = {q: [] for q in queries}
            for n in range(args.rounds + 1):
                for (kind, source), query in queries.items():
                    roots = (jvm, broker.process.pid) if source == "kafka" else (jvm,)
                    cpu0, started = cpu_seconds(*roots), time.perf_counter()
                    query()
                    wall, cpu = time.perf_counter() - started, cpu_seconds(*roots) - cpu0
                    label = "warm-up" if n == 0 else f"round {n}"
                    print(f"  {label:8} {kind:9} {source:5} {wall:6.2f} s wall {cpu:6.2f} s CPU "
                          f"{args.records / wall:>12,.0f} records/s")
                    if n:
                        walls[(kind, source)].append(wall)
                        cpus[(kind, source)].append(cpu)

        print()
        for kind in ("records", "typed", "from_json"):
            f_kind = "typed" if kind == "from_json" else kind
            k_wall, f_wall = statistics.median(walls[(kind, "kafka")]), statistics.median(walls[(f_kind, "file")])
            k_cpu, f_cpu = statistics.median(cpus[(kind, "kafka")]), statistics.median(cpus[(f_kind, "file")])
            print(f"{kind:9}: kafka {args.records / k_wall:>10,.0f} records/s ({k_cpu:.2f} CPU s), "
                  f"file {args.records / f_wall:>10,.0f} records/s ({f_cpu:.2f} CPU s); "
                  f"ratio kafka/file: wall {f_wall / k_wall:.2f}x, CPU {f_cpu / k_cpu:.2f}x")
        ratio = statistics.median(walls[("records", "file")]) / statistics.median(walls[("records", "kafka")])
        print(f"target: records ratio >= 0.5x: {ratio:.2f}x {'OK' if ratio >= 0.5 else 'BELOW TARGET'}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
