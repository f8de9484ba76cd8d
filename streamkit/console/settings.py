"""What the console connects to."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConsoleSettings"]


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """``bootstrap_servers`` (Kafka's name) of the cluster; ``connect_url``, a Kafka Connect
    REST API (None: no Connect pages); ``app_urls``, stream workers' web ports
    (``http://host:port``)."""

    bootstrap_servers: str
    connect_url: str | None = None
    app_urls: tuple[str, ...] = ()
