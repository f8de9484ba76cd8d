"""Default names of the DSL's stateful operators.

A ``group_by``, a windowed aggregation or a stream-stream join keeps data under a name: the
repartition topic ``{app}-{name}-repartition``, the changelog ``{app}-{name}-changelog`` and
the local store. A new deploy must find them under the same name, or it silently starts
from empty state (and the old topics linger). Kafka Streams numbers unnamed operators in
declaration order (KSTREAM-AGGREGATE-0000000004), so adding or moving one operator renames
all later ones, and its docs recommend naming them.

Here an unnamed operator is named after where it sits: the source topic and the chain of
operators from it (``page_views-filter-group-by``, then
``page_views-filter-group-by-tumbling-count``). Declaring other pipelines, or the same ones
in another order, changes nothing; only structurally identical operators (two unnamed
``group_by`` on the same stream) are told apart by a counter, in their declaration order.
A warning is logged for each unnamed one: naming them (``name=...``) is still the way to
keep state across changes to the pipeline itself.
"""

from __future__ import annotations

import hashlib
import logging
import re
import weakref
from collections.abc import Mapping
from typing import Any, Protocol


class App(Protocol):
    """What naming needs of an app: the names already taken by its tables."""

    @property
    def tables(self) -> Mapping[str, Any]: ...


__all__ = ["generated_name", "topic_safe"]

log = logging.getLogger("streamkit.streams.dsl")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX = 120  # internal topics add the app id and a suffix; Kafka allows 249 characters

_taken: weakref.WeakKeyDictionary[App, set[str]] = weakref.WeakKeyDictionary()


def topic_safe(text: str) -> str:
    """``text`` with the characters a topic name cannot have replaced, shortened (with a
    hash of the whole, so two long paths stay apart) if too long."""
    safe = _UNSAFE.sub("-", text).strip("-") or "stream"
    if len(safe) <= _MAX:
        return safe
    digest = hashlib.sha1(safe.encode()).hexdigest()[:10]
    return f"{safe[:_MAX - 11]}-{digest}"


def generated_name(app: App, path: str, what: str) -> str:
    """A name for an unnamed stateful operator at ``path`` (see the module doc), unique in
    ``app``, with a warning that says which it is."""
    base = topic_safe(path)
    taken = _taken.setdefault(app, set())
    name, n = base, 1
    while name in taken or name in app.tables:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    log.warning("%s has no name=: its state and topics are named %r after its place in the pipeline; "
                "name it so they stay the same when the pipeline changes", what, name)
    return name
