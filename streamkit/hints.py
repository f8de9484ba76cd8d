"""The "did you mean ...?" hint of every unknown-name error (configs, settings, topics).

One helper, so that a typo reads the same wherever it is made: the broker's, a topic's, a
group's, an app's or a connector's settings.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "nearest"]


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like ``name``, if one is near enough to be a typo of it."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name nearest ``name``; empty when none is near."""
    close = nearest(name, known)
    return f" (did you mean {close!r}?)" if close else ""
