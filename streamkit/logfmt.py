"""How log lines show collections, so they read like a product's and not like Python reprs:
partitions as ranges (``page_views[0-3], orders[0,2]``) and settings as ``key=value``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import groupby

__all__ = ["assignment", "key_values", "ranges"]


def ranges(numbers: Iterable[int]) -> str:
    """``0-3,5,7-8`` for {0, 1, 2, 3, 5, 7, 8}: runs of consecutive numbers collapsed;
    ``none`` for no numbers."""
    parts = []
    # consecutive numbers share number - position: each group is one run
    for _, run in groupby(enumerate(sorted(set(numbers))), lambda item: item[1] - item[0]):
        values = [n for _, n in run]
        parts.append(str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}")
    return ",".join(parts) or "none"


def assignment(partitions: Iterable[tuple[str, int]]) -> str:
    """``page_views[0-3], orders[0,2]`` for (topic, partition) pairs, topics in name order;
    ``none`` for no partitions."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(f"{topic}[{ranges(by_topic[topic])}]" for topic in sorted(by_topic)) or "none"


def key_values(values: Mapping[str, object]) -> str:
    """``cleanup.policy=compact, segment.bytes=104857600``, in the mapping's order."""
    return ", ".join(f"{key}={value}" for key, value in values.items())
