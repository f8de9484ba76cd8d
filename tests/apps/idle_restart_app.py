"""Not an example: a test app for ``window.idle.close.ms`` across a restart (2-second
tumbling counts, closed by wall clock after 3 idle seconds), run by ``test_apps.py`` with
``streamkit worker -A tests.apps.idle_restart_app``."""

from __future__ import annotations

import streamkit

app = streamkit.App("idle-restart", config={"window.idle.close.ms": 3000, "commit.interval.ms": 200})
events = app.topic("idle_restart_events", value_type=str)

(app.stream(events)
    .window(streamkit.tumbling(seconds=2))
    .count(name="idle_restart_counts")
    .final()
    .to("idle_restart_counts"))
