"""What the console connects to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ConsoleSettings"]


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """``bootstrap_servers`` (Kafka's name) of the cluster; ``connect_url``, a Kafka Connect
    REST API (None: no Connect pages); ``app_urls``, stream workers' web ports
    (``http://host:port``). A Connect REST API or workers served over https with basic
    authentication are reached with ``http_user_info`` (``USER:PASSWORD``) and
    ``http_ca_location`` (the PEM file of the CAs that signed their certificates)."""

    bootstrap_servers: str
    connect_url: str | None = None
    app_urls: tuple[str, ...] = ()
    http_user_info: str | None = None
    http_ca_location: str | None = None

    def http_options(self) -> dict[str, Any]:
        """httpx arguments (auth, verify) of the console's calls to Connect and the workers."""
        from streamkit.http import http_client_options

        return http_client_options(self.http_user_info, self.http_ca_location)
