"""JDBC connectors against raw psycopg on PostgreSQL, measured in the same run.

Sink: ``--rows`` SinkRecords (id, name, price Decimal, at Timestamp, qty) written by
JdbcSinkTask (insert.mode=insert, which uses COPY; batch.size 10000; put then flush) versus
raw psycopg ``COPY ... FROM STDIN`` of the same rows as ready-made tuples. The records exist
before the clock starts, as they would after the runtime's converter. Also printed, for
information: insert.mode=upsert (COPY into a staging table, then INSERT ... ON CONFLICT).

Source: JdbcSourceTask in incrementing mode (batch.max.rows 10000, ordered LIMIT queries)
turning the table into SourceRecords, versus a raw ``SELECT *`` fetched with psycopg.

Each figure is the best of ``--rounds``. Prints rows/s and the ratio connector/raw
(target >= 0.5).

Usage: python benchmarks/connect_bench.py [--rows 200000] [--rounds 3] [--only sink|source]
       [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import gc
import os
import sys
import time
import uuid
from pathlib import Path

import psycopg
import sqlalchemy as sa

from streamkit.connect.data import DECIMAL, TIMESTAMP, Field, Schema, SinkRecord
from streamkit.connect.jdbc.sink import JdbcSinkTask
from streamkit.connect.jdbc.source import JdbcSourceTask

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_load

VALUE = Schema("struct", name="bench", fields=(
    Field("id", Schema("int64")),
    Field("name", Schema("string", optional=True)),
    Field("price", Schema("bytes", optional=True, name=DECIMAL, parameters={"scale": "2"})),
    Field("at", Schema("int64", optional=True, name=TIMESTAMP)),
    Field("qty", Schema("int32", optional=True)),
))
KEY = Schema("struct", fields=(Field("id", Schema("int64")),))
EPOCH = dt.datetime(1970, 1, 1)
AT0 = 1_700_000_000_000
DDL = ("CREATE TABLE {name} (id bigint PRIMARY KEY, name text, price numeric, "
       "at timestamp, qty integer)")


def records(n: int) -> list[SinkRecord]:
    return [SinkRecord(topic="bench", partition=0, offset=i, key={"id": i}, key_schema=KEY,
                       value={"id": i, "name": f"customer {i}",
                              "price": decimal.Decimal(i % 100000).scaleb(-2),
                              "at": AT0 + i, "qty": i % 1000},
                       value_schema=VALUE) for i in range(n)]


def tuples(n: int) -> list[tuple]:
    return [(i, f"customer {i}", decimal.Decimal(i % 100000).scaleb(-2),
             EPOCH + dt.timedelta(milliseconds=AT0 + i), i % 1000) for i in range(n)]


def psycopg_dsn(url: sa.URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def fresh_table(conn: psycopg.Connection, prefix: str) -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    conn.execute(DDL.format(name=name))
    conn.commit()
    return name


def drop(conn: psycopg.Connection, name: str) -> None:
    conn.rollback()
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.commit()


def bench_raw_copy(conn: psycopg.Connection, rows: list[tuple]) -> float:
    name = fresh_table(conn, "bench_raw")
    try:
        start = time.perf_counter()
        with conn.cursor() as cur, cur.copy(
                f"COPY {name} (id, name, price, at, qty) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        conn.commit()
        return time.perf_counter() - start
    finally:
        drop(conn, name)


def bench_sink(conn: psycopg.Connection, url: str, recs: list[SinkRecord], mode: str) -> float:
    name = fresh_table(conn, "bench_sink")
    task = JdbcSinkTask()
    task.start({"connection.url": url, "insert.mode": mode, "pk.mode": "record_key",
                "table.name.format": name, "batch.size": "10000"})
    try:
        start = time.perf_counter()
        for i in range(0, len(recs), 10000):
            task.put(recs[i:i + 10000])
        task.flush({})
        elapsed = time.perf_counter() - start
    finally:
        task.stop()
        drop(conn, name)
    return elapsed


def bench_raw_select(conn: psycopg.Connection, name: str) -> float:
    start = time.perf_counter()
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {name}")
        n = len(cur.fetchall())
    conn.commit()
    assert n > 0
    return time.perf_counter() - start


class _NoOffsets:
    def offset(self, source_partition: object) -> None:
        return None


def bench_source(url: str, name: str, n: int) -> float:
    task = JdbcSourceTask()
    task.initialize(_NoOffsets())
    task.start({"connection.url": url, "mode": "incrementing", "incrementing.column.name": "id",
                "topic.prefix": "", "tables": name, "batch.max.rows": "10000",
                "poll.interval.ms": "1000"})
    try:
        got = 0
        start = time.perf_counter()
        while got < n:
            got += len(task.poll())
        return time.perf_counter() - start
    finally:
        task.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("sink", "source"), help="run one half only")
    parser.add_argument("--url", default=os.environ.get(
        "STREAMKIT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    args = parser.parse_args()
    url = sa.make_url(args.url)
    n = args.rows
    print(f"JDBC connectors vs raw psycopg, {n} rows, best of {args.rounds}; {machine_load()}")
    recs, rows = records(n) if args.only != "source" else [], tuples(n)
    with psycopg.connect(psycopg_dsn(url)) as conn:
        if args.only != "source":
            raw_copy = min(bench_raw_copy(conn, rows) for _ in range(args.rounds))
            sink = min(bench_sink(conn, args.url, recs, "insert") for _ in range(args.rounds))
            upsert = min(bench_sink(conn, args.url, recs, "upsert") for _ in range(args.rounds))
            # The sink's input is a million live objects that every garbage collection during
            # the source's run would walk again: gone before the source is timed.
            del recs
            gc.collect()
        if args.only == "sink":
            return report_sink(n, raw_copy, sink, upsert)
        table = fresh_table(conn, "bench_src")
        try:
            with conn.cursor() as cur, cur.copy(
                    f"COPY {table} (id, name, price, at, qty) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            conn.commit()
            conn.execute(f"ANALYZE {table}")
            conn.commit()
            raw_select = min(bench_raw_select(conn, table) for _ in range(args.rounds))
            source = min(bench_source(args.url, table, n) for _ in range(args.rounds))
        finally:
            drop(conn, table)

    if args.only != "source":
        report_sink(n, raw_copy, sink, upsert)
    print("source out of PostgreSQL")
    line(n, "raw psycopg SELECT * fetchall", raw_select)
    line(n, "JdbcSourceTask mode=incrementing", source, raw_select)
    print("target: ratio >= 0.5")


def line(n: int, what: str, seconds: float, raw: float | None = None) -> None:
    ratio = f"   ratio {raw / seconds:.2f}" if raw else ""
    print(f"  {what:<52} {n / seconds:>10,.0f} rows/s{ratio}")


def report_sink(n: int, raw_copy: float, sink: float, upsert: float) -> None:
    print("sink into PostgreSQL")
    line(n, "raw psycopg COPY", raw_copy)
    line(n, "JdbcSinkTask insert.mode=insert (COPY)", sink, raw_copy)
    line(n, "JdbcSinkTask insert.mode=upsert (COPY+ON CONFLICT)", upsert, raw_copy)


if __name__ == "__main__":
    main()
