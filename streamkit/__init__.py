"""streamkit: stream processing in Python on a Kafka-compatible broker and partition log.

The stream-processing API is importable from the top level::

    import streamkit
    app = streamkit.App("pageviews")
    window = streamkit.tumbling(minutes=1)

Names are loaded on first use, so ``streamkit --help`` and the broker do not pay for the
stream-processing imports.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "App": "streamkit.streams.app",
    "Event": "streamkit.streams.event",
    "Topic": "streamkit.streams.topic",
    "SettingsError": "streamkit.streams.settings",
    "tumbling": "streamkit.streams.windows",
    "hopping": "streamkit.streams.windows",
    "sliding": "streamkit.streams.windows",
    "session": "streamkit.streams.windows",
    "current_event": "streamkit.streams.agent",
}

__all__ = ["App", "Event", "SettingsError", "Topic", "__version__", "current_event", "hopping",
           "session", "sliding", "tumbling"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streamkit' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
