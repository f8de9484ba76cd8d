"""A REST API the console calls (Kafka Connect's, a Schema Registry's): both answer errors
as ``{"error_code": N, "message": ...}``. A service that does not answer is ``Unavailable``;
its own 4xx keeps its status and message (404 is ``NotFound``); its 5xx is a 502.

``HttpClients`` holds one ``httpx.AsyncClient`` per service the console calls (Connect,
the registry, each stream worker): the auth and SSL context are built once, and a page's
request reuses a kept-alive connection."""

from __future__ import annotations

from typing import Any

import httpx

from streamkit.console.errors import ConsoleError, NotFound, Unavailable

__all__ = ["HttpClients", "RestClient"]

_TIMEOUT_S = 10.0


class HttpClients:
    """One client per base URL, made on first use with ``options`` (httpx's auth and verify,
    built once per console); ``close`` (at the console's stop) closes them all."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self._options = dict(options or {})
        self._clients: dict[str, httpx.AsyncClient] = {}

    def get(self, url: str) -> httpx.AsyncClient:
        url = url.rstrip("/")
        client = self._clients.get(url)
        if client is None or client.is_closed:
            client = httpx.AsyncClient(base_url=url, timeout=_TIMEOUT_S, **self._options)
            self._clients[url] = client
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()


class RestClient:
    """``what`` names the service in the message of one that does not answer; its requests
    go over ``http``'s client for ``url``."""

    def __init__(self, url: str, what: str, content_type: str = "application/json",
                 http: HttpClients | None = None) -> None:
        self.url = url.rstrip("/")
        self.what = what
        self.content_type = content_type
        self._http = http or HttpClients()

    async def request(self, method: str, path: str, body: Any = None,
                      params: dict[str, str] | None = None) -> Any:
        try:
            response = await self._http.get(self.url).request(method, path, json=body, params=params,
                                                              headers={"Content-Type": self.content_type})
        except httpx.HTTPError as exc:
            raise Unavailable(f"{self.what} at {self.url} does not answer "
                              f"({type(exc).__name__}: {exc or 'no detail'})") from None
        if response.status_code >= 400:
            raise _error(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()


def _error(response: httpx.Response) -> ConsoleError:
    try:
        body = response.json()
        message = str(body.get("message") or body) if isinstance(body, dict) else str(body)
    except ValueError:
        body, message = {}, response.text[:500] or response.reason_phrase
    status = response.status_code
    detail = body if isinstance(body, dict) else {}
    if status == 404:
        return NotFound(message, detail=detail)
    return ConsoleError(message, status if status < 500 else 502, detail)
