"""A counting app for the worker-process tests (``test_workers.py``).

Run as ``python -m streamkit worker -A tests.streams.apps_for_tests.counter:app`` from the
repository root. Configured by the environment, so that each test has its own app id and
topics on the shared broker:

- ``SK_TEST_APP_ID``: the app id (consumer group, internal topic prefix);
- ``SK_TEST_INPUT``: the input topic (string values, keyed);
- ``SK_TEST_CONFIG``: optional; JSON of more app settings (``{"num.standby.replicas": 1}``);
- ``SK_TEST_OUTPUT``: optional; a topic that gets every updated count (key, count);
- ``SK_TEST_GROUPS``: optional; a number n: the stream is first re-keyed to ``g{value % n}``
  through a repartition topic, and the tables count per group;
- ``SK_TEST_GATE``: optional; a file whose appearance this module waits for before it
  returns, so a test can have a worker process loaded and ready, and make it join the group
  at a moment of its choosing (within a fraction of a second).

The agent keeps two tables: ``counts`` (records per key: not idempotent, so a re-processed
record after a crash counts twice) and ``latest`` (the last value per key: idempotent, so
exact after any crash as long as no record is lost).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from streamkit import App
from streamkit.streams.agent import AgentStream

gate = os.environ.get("SK_TEST_GATE")
if gate:
    deadline = time.monotonic() + 120
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.01)

app = App(os.environ["SK_TEST_APP_ID"], config={
    "commit.interval.ms": 200,
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 500,
    "linger.ms": 1,
    **json.loads(os.environ.get("SK_TEST_CONFIG", "{}")),
})
words = app.topic(os.environ["SK_TEST_INPUT"], value_type=str)
counts = app.Table("counts", default=int)
latest = app.Table("latest")
output = app.topic(os.environ["SK_TEST_OUTPUT"], value_type=int) if os.environ.get("SK_TEST_OUTPUT") else None
groups = int(os.environ.get("SK_TEST_GROUPS", "0"))


@app.agent(words)
async def count(stream: AgentStream) -> None:
    if groups:
        stream = stream.group_by(lambda value: f"g{int(value) % groups}", name="regroup")
    async for event in stream.events():
        counts[event.key] += 1
        latest[event.key] = event.value
        if output is not None:
            output.send_soon(counts[event.key], key=event.key)
