"""Kafka's rules for topic names, checked before anything is sent (a broker asked about an
illegal name makes clients retry metadata until they time out)."""

from __future__ import annotations

import re

__all__ = ["MAX_TOPIC_NAME_LENGTH", "InvalidTopicName", "check_topic_name"]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class InvalidTopicName(ValueError):
    pass


def check_topic_name(name: str) -> str:
    """``name`` if Kafka accepts it as a topic name, else ``InvalidTopicName`` saying why."""
    if not name:
        raise InvalidTopicName("a topic name cannot be empty")
    if name in (".", ".."):
        raise InvalidTopicName(f"{name!r} is not a legal topic name ('.' and '..' are reserved)")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicName(f"topic name of {len(name)} characters is too long "
                               f"(at most {MAX_TOPIC_NAME_LENGTH})")
    if not _LEGAL.match(name):
        bad = sorted({c for c in name if not re.match(r"[a-zA-Z0-9._-]", c)})
        raise InvalidTopicName(f"{name!r} is not a legal topic name: {''.join(bad)!r} not allowed "
                               "(use letters, digits, '.', '_' and '-')")
    return name
