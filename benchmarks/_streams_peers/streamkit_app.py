"""streamkit's side of ``benchmarks/streams_bench.py``: a tumbling 1-minute count per key.

Run by the benchmark as ``python -m streamkit worker -A streamkit_app:app -b BOOTSTRAP
--data-dir DIR`` (cwd: this directory), configured through environment variables:

- ``STREAMS_BENCH_MODE``: ``dsl`` (declarative, one final result per closed window to the
  output topic; dict values, no Python function: it runs on the columnar path),
  ``dsl-row`` (the same on the row path: ``dsl.columnar.enable=false``), ``dsl-lambda`` (the
  DSL as the README's tutorial writes it: a pydantic model and a lambda filter, so the row
  path), ``dsl-columns`` (the same pipeline in column expressions: the columnar path),
  ``agent`` (an agent doing ``table[key] += 1`` on a windowed Table) or ``agent-take`` (the
  same over ``stream.take(1000, within=0.1)`` batches).
- ``STREAMS_BENCH_FORMAT`` (``json``; ``avro`` for ``--format avro``: agent mode reads Avro
  values through the Schema Registry at ``STREAMS_BENCH_REGISTRY`` with ``AvroSerde``).
- ``STREAMS_BENCH_APP`` (the app id = consumer group), ``STREAMS_BENCH_INPUT``,
  ``STREAMS_BENCH_OUTPUT``, ``STREAMS_BENCH_COMMIT_MS`` (1000), ``STREAMS_BENCH_PARTITIONS`` (4),
  ``STREAMS_BENCH_GUARANTEE`` (``at_least_once``; ``exactly_once`` for ``--exactly-once``).

Input records are keyed by ``value["key"]`` already (the benchmark produces them with the
Java client's murmur2 partitioner, as streamkit's tables use), so neither mode repartitions.
State is RocksDB in both modes (the DSL's aggregation tables are always RocksDB).
"""

from __future__ import annotations

import os

from pydantic import BaseModel

import streamkit
from streamkit.streams.columnar import col

MODE = os.environ.get("STREAMS_BENCH_MODE", "dsl")
APP_ID = os.environ.get("STREAMS_BENCH_APP", f"streams-bench-streamkit-{MODE}")
INPUT = os.environ.get("STREAMS_BENCH_INPUT", "events")
OUTPUT = os.environ.get("STREAMS_BENCH_OUTPUT", f"{APP_ID}-out")
COMMIT_MS = int(os.environ.get("STREAMS_BENCH_COMMIT_MS", "1000"))
PARTITIONS = int(os.environ.get("STREAMS_BENCH_PARTITIONS", "4"))
GUARANTEE = os.environ.get("STREAMS_BENCH_GUARANTEE", "at_least_once")


class Reading(BaseModel):
    key: str
    ts: int
    value: int


app = streamkit.App(APP_ID, config={"commit.interval.ms": COMMIT_MS, "num.partitions": PARTITIONS,
                                    "processing.guarantee": GUARANTEE, "dsl.columnar.enable": MODE != "dsl-row"})
# keys: str, values: JSON (orjson) -> dict, or the model; with STREAMS_BENCH_FORMAT=avro
# (agent mode), Avro through the Schema Registry at STREAMS_BENCH_REGISTRY -> the model
FORMAT = os.environ.get("STREAMS_BENCH_FORMAT", "json")
if FORMAT == "avro":
    from streamkit.schemas.serdes import AvroSerde

    events = app.topic(INPUT, value_type=AvroSerde(Reading, os.environ["STREAMS_BENCH_REGISTRY"]))
else:
    events = app.topic(INPUT, value_type=Reading if MODE in ("dsl-lambda", "dsl-columns") else None)

if MODE == "dsl-lambda":
    # Every input record passes the filter: the same results as the other modes.
    (
        app.stream(events)
        .filter(lambda r: r.key != "health")
        .window(streamkit.tumbling(minutes=1))
        .count(name="counts")
        .final()
        .to(OUTPUT)
    )
elif MODE == "dsl-columns":
    (
        app.stream(events)
        .filter(col("key") != "health")
        .window(streamkit.tumbling(minutes=1))
        .count(name="counts")
        .final()
        .to(OUTPUT)
    )
elif MODE in ("dsl", "dsl-row"):
    (
        app.stream(events)
        .window(streamkit.tumbling(minutes=1))
        .count(name="counts")
        .final()
        .to(OUTPUT)
    )
elif MODE == "agent":
    # expires: a window is dropped once stream time is 60 s past its end (event time).
    counts = app.Table("counts", default=int).tumbling(60, expires=60)

    if FORMAT == "avro":
        @app.agent(events)
        async def count(stream):  # type: ignore[no-untyped-def]
            async for value in stream:
                counts[value.key] += 1
    else:
        @app.agent(events)
        async def count(stream):  # type: ignore[no-untyped-def]
            async for value in stream:
                counts[value["key"]] += 1
elif MODE == "agent-take":
    # The same, a batch at a time: the table merges each batch's updates per window.
    counts = app.Table("counts", default=int).tumbling(60, expires=60)

    @app.agent(events)
    async def count_batches(stream):  # type: ignore[no-untyped-def]
        async for batch in stream.take(1000, within=0.1):
            for value in batch:
                counts[value["key"]] += 1
else:
    raise SystemExit(f"STREAMS_BENCH_MODE must be dsl, dsl-row, dsl-lambda, dsl-columns, agent or agent-take, "
                     f"not {MODE!r}")
