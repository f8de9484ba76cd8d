"""The backlog app of ``test_backlog.py`` as a worker process: clicks counted per page in
one-minute windows (``pipelines.count_pages``), final results to ``{app id}-counts``.

Run as ``python -m streamkit worker -A tests.streams.apps_for_tests.backlog:app``, configured
by the environment like ``counter.py``: ``SK_TEST_APP_ID``, ``SK_TEST_INPUT`` (the clicks
topic, 3 partitions), ``SK_TEST_CONFIG`` (JSON of more app settings) and
``SK_TEST_PACE_MS``: optional, a pause per input record (blocking the worker's loop, as a
slow processing step would), so that a test can stop the worker in the middle of a backlog
that it would otherwise drain within one commit interval."""

from __future__ import annotations

import json
import os
import time

from streamkit import App
from tests.streams.apps_for_tests.pipelines import count_pages

app = App(os.environ["SK_TEST_APP_ID"], config={
    "commit.interval.ms": 200,
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 500,
    "linger.ms": 1,
    "num.partitions": 2,
    **json.loads(os.environ.get("SK_TEST_CONFIG", "{}")),
})
pace = float(os.environ.get("SK_TEST_PACE_MS", "0")) / 1000
count_pages(app, app.topic(os.environ["SK_TEST_INPUT"], value_type=dict, partitions=3), f"{app.id}-counts",
            peek=(lambda _click: time.sleep(pace)) if pace else None)
