"""Event: one record as a stream function sees it, and where its event time comes from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "TimestampExtractor", "extract_timestamp"]


@dataclass(slots=True)
class Event:
    """A consumed (or about to be produced) record with its metadata.

    ``timestamp`` is the record's event time in epoch milliseconds: the record timestamp,
    or what the topic's timestamp extractor returned for it (``app.topic(...,
    timestamp=fn)``); ``offset`` is -1 for events not read from a topic. ``raw_key`` is the
    record's key as it was on the wire (tables compare it with their own keys: a table key
    equal to the record's key belongs to the record's task whatever partitioner placed it).
    """

    key: Any
    value: Any
    timestamp: int
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    topic: str = ""
    partition: int = -1
    offset: int = -1
    raw_key: bytes | None = None

    def header(self, name: str) -> bytes | None:
        """The value of the first header called ``name``, or None."""
        for key, value in self.headers:
            if key == name:
                return value
        return None


TimestampExtractor = Callable[[Event], int]
"""``fn(event) -> int``: a record's event time in epoch milliseconds, from the decoded
event (``event.value``, ``event.key``, ``event.headers``, and the record timestamp as
``event.timestamp``). Kafka Streams' TimestampExtractor, for ``app.topic(..., timestamp=fn)``
and ``stream.window(..., timestamp=fn)``."""


def extract_timestamp(fn: TimestampExtractor, event: Event) -> int:
    """``fn(event)``, checked: an int of milliseconds (a float or a datetime would make
    window boundaries depend on rounding or time zones; bool is refused as always a bug)."""
    ts = fn(event)
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise TypeError(f"timestamp extractor {getattr(fn, '__name__', fn)!r} must return an int of "
                        f"epoch milliseconds, got {ts!r}")
    return ts
