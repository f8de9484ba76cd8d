"""What the console connects to, and how."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConsoleSettings"]


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """``bootstrap_servers`` (Kafka's name) of the cluster; ``connect_url``, a Kafka Connect
    REST API (None: no Connect pages); ``app_urls``, stream workers' web ports
    (``http://host:port``); ``schema_registry_url``, a Schema Registry (None: no schema pages);
    ``client_config``, Kafka's client security settings (``security.protocol``, ``sasl.*``,
    ``ssl.*``) for every connection to the brokers. A Connect REST API, workers or a registry
    served over https with basic authentication are reached with ``http_user_info``
    (``USER:PASSWORD``) and ``http_ca_location`` (the PEM file of the CAs that signed their
    certificates)."""

    bootstrap_servers: str
    connect_url: str | None = None
    app_urls: tuple[str, ...] = ()
    schema_registry_url: str | None = None
    client_config: Mapping[str, str] = field(default_factory=dict)
    http_user_info: str | None = None
    http_ca_location: str | None = None

    def security(self) -> dict[str, Any]:
        """aiokafka's arguments for ``client_config``; ClientError names a bad setting."""
        from streamkit.clients.security import aiokafka_security

        return aiokafka_security(self.client_config)

    def http_options(self) -> dict[str, Any]:
        """httpx arguments (auth, verify) of the console's calls to Connect, the workers and
        the registry."""
        from streamkit.http import http_client_options

        return http_client_options(self.http_user_info, self.http_ca_location)
