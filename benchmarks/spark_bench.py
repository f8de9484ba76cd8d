"""Reading a topic into Spark with the ``streamkit`` data source, against ``spark.read.json``
of the same records from a local file, in the same run.

Setup: a ``streamkit broker`` child process (``streamkit.testing.BrokerProcess``, data in a
temp dir), a topic of ``--partitions`` partitions holding ``--records`` JSON page views
(``{"page": "p17", "user": 4242, "ms": 1700000000123}``, ~55 bytes), produced with
confluent-kafka, and the very same values as JSON Lines in a local file (on the same disk,
in the page cache after the first read, as the broker's log is). Spark runs ``local[N]``
with N = ``--partitions`` (one Spark task per topic partition, one per file split).

Each round runs both queries, interleaved (so other load on the machine hits both alike),
each one Spark job that reads every record, parses the JSON with the same schema, counts
the records and aggregates them (views and distinct users per page)::

    kafka: spark.read.format("streamkit")...load()
               .select(from_json(value.cast("string"), schema).alias("v")).select("v.*")
    file:  spark.read.schema(schema).json(path)
    both:  .groupBy("page").agg(count("*"), approx_count_distinct("user")).collect()

The first round warms the JVM and the Python workers and is not counted. Shown: each
query's best and median records/s, and the ratio kafka/file of the medians of the paired
rounds (target >= 0.5: reading over the Kafka protocol costs at most twice the local file).

Usage: python benchmarks/spark_bench.py [--records N] [--partitions P] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.spark import local_session
from streamkit.testing import BrokerProcess

TOPIC = "page-views"
PAGES = 1000
USERS = 50_000
T0 = 1_700_000_000_000


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
                producer.produce(TOPIC, value(i), partition=i % partitions)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="counted rounds, after one warm-up round")
    args = parser.parse_args()

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
            def aggregate(df):  # type: ignore[no-untyped-def]
                rows = df.groupBy("page").agg(F.count("*").alias("views"),
                                              F.approx_count_distinct("user").alias("users")).collect()
                total = sum(r.views for r in rows)
                if total != args.records or len(rows) != PAGES:
                    raise SystemExit(f"wrong result: {total} records in {len(rows)} pages")

            def kafka() -> None:
                df = (spark.read.format("streamkit").option("kafka.bootstrap.servers", broker.bootstrap)
                      .option("subscribe", TOPIC).load()
                      .select(F.from_json(F.col("value").cast("string"), schema).alias("v")).select("v.*"))
                aggregate(df)

            def file() -> None:
                aggregate(spark.read.schema(schema).json(str(path)))

            times: dict[str, list[float]] = {"kafka": [], "file": []}
            for n in range(args.rounds + 1):
                for name, query in (("kafka", kafka), ("file", file)):
                    started = time.perf_counter()
                    query()
                    elapsed = time.perf_counter() - started
                    label = "warm-up" if n == 0 else f"round {n}"
                    print(f"  {label:8} {name:5} {elapsed:6.2f} s  {args.records / elapsed:>12,.0f} records/s")
                    if n:
                        times[name].append(elapsed)

        print()
        for name, values in times.items():
            print(f"{name:5}: best {args.records / min(values):>12,.0f} records/s, "
                  f"median {args.records / statistics.median(values):>12,.0f} records/s")
        ratios = [f / k for k, f in zip(times["kafka"], times["file"], strict=True)]
        ratio = statistics.median(ratios)
        print(f"ratio kafka/file (median of paired rounds): {ratio:.2f}x (target >= 0.5x) "
              f"{'OK' if ratio >= 0.5 else 'BELOW TARGET'}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
