"""Not an example: a test app for ``window.idle.close.ms`` (2-second tumbling counts whose
windows must close by wall clock once the input stops), run by ``test_apps.py`` with
``streamkit worker -A tests.apps.idle_app``."""

from __future__ import annotations

import streamkit

app = streamkit.App("idle-close", config={"window.idle.close.ms": 300, "commit.interval.ms": 200})
events = app.topic("idle_events", value_type=str)

(app.stream(events)
    .window(streamkit.tumbling(seconds=2))
    .count(name="idle_counts")
    .final()
    .to("idle_counts"))
