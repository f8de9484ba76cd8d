"""A REST API the console calls (Kafka Connect's, a Schema Registry's): both answer errors
as ``{"error_code": N, "message": ...}``. A service that does not answer is ``Unavailable``;
its own 4xx keeps its status and message (404 is ``NotFound``); its 5xx is a 502."""

from __future__ import annotations

from typing import Any

import httpx

from streamkit.console.errors import ConsoleError, NotFound, Unavailable

__all__ = ["RestClient"]

_TIMEOUT_S = 10.0


class RestClient:
    """``what`` names the service in the message of one that does not answer."""

    def __init__(self, url: str, what: str, content_type: str = "application/json",
                 http_options: dict[str, Any] | None = None) -> None:
        self.url = url.rstrip("/")
        self.what = what
        self.content_type = content_type
        self._options = http_options or {}  # auth and verify of a REST API over https

    async def request(self, method: str, path: str, body: Any = None,
                      params: dict[str, str] | None = None) -> Any:
        try:
            async with httpx.AsyncClient(base_url=self.url, timeout=_TIMEOUT_S, **self._options) as client:
                response = await client.request(method, path, json=body, params=params,
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
