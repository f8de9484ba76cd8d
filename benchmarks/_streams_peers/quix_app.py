"""quixstreams' side of ``benchmarks/streams_bench.py``: the same tumbling 1-minute count.

Runs in ``benchmarks/.venv-quix`` as ``python quix_app.py``, configured through environment
variables: ``STREAMS_BENCH_BOOTSTRAP`` (host:port of the streamkit broker),
``STREAMS_BENCH_APP`` (consumer group), ``STREAMS_BENCH_INPUT``, ``STREAMS_BENCH_OUTPUT``,
``STREAMS_BENCH_DATADIR``, ``STREAMS_BENCH_COMMIT_MS`` (1000).

``StreamingDataFrame.tumbling_window(60 s).count().final(closing_strategy="partition")``:
RocksDB state (quix's default) with changelog topics; a window's final count goes to the
output topic once the partition's stream time passes its end (no grace), which is what
streamkit's ``.window(tumbling(minutes=1)).count().final()`` does.
"""

from __future__ import annotations

import logging
import os

from quixstreams import Application

BOOTSTRAP = os.environ.get("STREAMS_BENCH_BOOTSTRAP", "127.0.0.1:9092")
APP_ID = os.environ.get("STREAMS_BENCH_APP", "streams-bench-quix")
INPUT = os.environ.get("STREAMS_BENCH_INPUT", "events")
OUTPUT = os.environ.get("STREAMS_BENCH_OUTPUT", f"{APP_ID}-out")
DATADIR = os.environ.get("STREAMS_BENCH_DATADIR", "quix-state")
COMMIT_S = int(os.environ.get("STREAMS_BENCH_COMMIT_MS", "1000")) / 1000


def main() -> None:
    app = Application(
        broker_address=BOOTSTRAP,
        consumer_group=APP_ID,
        auto_offset_reset="earliest",
        commit_interval=COMMIT_S,
        state_dir=DATADIR,
        loglevel=logging.WARNING,
    )
    events = app.topic(INPUT, key_deserializer="str", value_deserializer="json")
    out = app.topic(OUTPUT, key_serializer="str", value_serializer="json")
    sdf = app.dataframe(events)
    sdf = sdf.tumbling_window(duration_ms=60_000).count().final(closing_strategy="partition")
    sdf.to_topic(out)
    app.run()


if __name__ == "__main__":
    main()
