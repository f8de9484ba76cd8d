"""DSL pipelines shared by in-process tests and the worker-process apps that run them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import streamkit
from streamkit.streams.app import App

__all__ = ["count_pages"]


def count_pages(app: App, clicks_topic: Any, out: str, *, two_hops: bool = False,
                peek: Callable[[Any], None] | None = None) -> None:
    """Clicks ({"user", "page"}) counted per page in one-minute tumbling windows with 5 s
    grace, final results to ``out``; with ``two_hops``, through a repartition by user first.
    ``peek`` sees every click first."""
    stream = app.stream(clicks_topic)
    if peek is not None:
        stream = stream.peek(peek)
    if two_hops:
        stream = stream.group_by(lambda v: v["user"], name="by-user").map(lambda v: {**v, "hop": 2})
    (stream.group_by(lambda v: v["page"], name="by-page")
        .window(streamkit.tumbling(minutes=1), grace=timedelta(seconds=5))
        .count(name="clicks-per-minute")
        .final()
        .to(out))
