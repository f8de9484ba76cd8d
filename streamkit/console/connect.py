"""A Kafka Connect REST API, as the console uses it (Apache Kafka's endpoints and error
bodies: ``{"error_code": N, "message": ...}``). A worker that does not answer is
``Unavailable``; Connect's own 4xx keeps its status and message."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from streamkit.console.errors import ConsoleError
from streamkit.console.rest import HttpClients, RestClient

__all__ = ["ConnectClient", "field_errors"]


class ConnectClient(RestClient):
    def __init__(self, url: str, http: HttpClients | None = None) -> None:
        super().__init__(url, "the Connect REST API", http=http)

    async def connectors(self) -> dict[str, Any]:
        found = await self.request("GET", "/connectors", params={"expand": "status,info"})
        return dict(found or {})

    async def connector(self, name: str) -> dict[str, Any]:
        n = quote(name, safe="")
        info = await self.request("GET", f"/connectors/{n}")
        status = await self.request("GET", f"/connectors/{n}/status")
        return {"info": info, "status": status}

    async def active_topics(self, name: str) -> list[str]:
        """The topics Connect saw the connector use (KIP-558)."""
        found = await self.request("GET", f"/connectors/{quote(name, safe='')}/topics") or {}
        return [str(t) for t in (found.get(name) or {}).get("topics", [])]

    async def plugins(self) -> list[dict[str, Any]]:
        return list(await self.request("GET", "/connector-plugins") or [])

    async def create(self, name: str, config: dict[str, Any]) -> Any:
        return await self.request("POST", "/connectors", {"name": name, "config": config})

    async def update(self, name: str, config: dict[str, Any]) -> Any:
        return await self.request("PUT", f"/connectors/{quote(name, safe='')}/config", config)

    async def validate(self, config: dict[str, Any]) -> dict[str, Any]:
        plugin = quote(str(config.get("connector.class", "")), safe="")
        return dict(await self.request("PUT", f"/connector-plugins/{plugin}/config/validate", config) or {})

    async def action(self, name: str, action: str, task: int | None = None) -> None:
        n = quote(name, safe="")
        if action == "delete":
            await self.request("DELETE", f"/connectors/{n}")
        elif action in ("pause", "resume", "stop"):
            await self.request("PUT", f"/connectors/{n}/{action}")
        elif action == "restart" and task is not None:
            await self.request("POST", f"/connectors/{n}/tasks/{task}/restart")
        elif action == "restart":
            await self.request("POST", f"/connectors/{n}/restart", params={"includeTasks": "true"})
        else:
            raise ConsoleError(f"unknown connector action {action!r}")


def field_errors(report: dict[str, Any]) -> dict[str, list[str]]:
    """The per-field errors of a config/validate answer (Kafka's ConfigInfos)."""
    out: dict[str, list[str]] = {}
    for entry in report.get("configs", []):
        value = entry.get("value") or {}
        errors = [str(e) for e in value.get("errors") or []]
        if errors:
            out[str(value.get("name"))] = errors
    return out
