"""faust-streaming's side of ``benchmarks/streams_bench.py``: the same tumbling 1-minute count.

Runs in ``benchmarks/.venv-faust`` (faust-streaming + rocksdict), as
``python faust_app.py worker --loglevel warn``, configured through environment variables:
``STREAMS_BENCH_BOOTSTRAP`` (host:port of the streamkit broker), ``STREAMS_BENCH_APP`` (app id
= consumer group), ``STREAMS_BENCH_INPUT``, ``STREAMS_BENCH_DATADIR``,
``STREAMS_BENCH_COMMIT_MS`` (1000), ``STREAMS_BENCH_PARTITIONS`` (4).

An agent does ``table[key] += 1`` on ``app.Table(..., default=int).tumbling(60)`` with
RocksDB state (``store="rocksdb://"``, rocksdict) and a changelog topic. faust-streaming
0.15 expires windows (and calls ``on_window_close``) by the *wall clock*
(``Table._del_old_keys`` compares window ends with ``time.time()``), not by event time, so a
"final result when stream time passes the window's end" cannot be expressed; ``expires`` is
set to an hour so that no window of the (recent) benchmark data is dropped mid-run, which
would reset its count. faust therefore produces no output records here.
"""

from __future__ import annotations

import os
from datetime import timedelta

import faust

BOOTSTRAP = os.environ.get("STREAMS_BENCH_BOOTSTRAP", "127.0.0.1:9092")
APP_ID = os.environ.get("STREAMS_BENCH_APP", "streams-bench-faust")
INPUT = os.environ.get("STREAMS_BENCH_INPUT", "events")
DATADIR = os.environ.get("STREAMS_BENCH_DATADIR", "faust-data")
COMMIT_S = int(os.environ.get("STREAMS_BENCH_COMMIT_MS", "1000")) / 1000
PARTITIONS = int(os.environ.get("STREAMS_BENCH_PARTITIONS", "4"))

app = faust.App(
    APP_ID,
    broker=f"kafka://{BOOTSTRAP}",
    store="rocksdb://",
    datadir=DATADIR,
    topic_partitions=PARTITIONS,
    broker_commit_interval=COMMIT_S,
    consumer_auto_offset_reset="earliest",
    web_enabled=False,
)
events = app.topic(INPUT, key_type=bytes, value_serializer="json", partitions=PARTITIONS)
counts = app.Table("counts", default=int, partitions=PARTITIONS).tumbling(
    60, expires=timedelta(hours=1)
)


@app.agent(events)
async def count(stream):  # type: ignore[no-untyped-def]
    async for value in stream:
        counts[value["key"]] += 1


if __name__ == "__main__":
    app.main()
