"""Requests that aiokafka has no class for (KIP-848's ConsumerGroupDescribe, KIP-932's share
group APIs), encoded by kio and sent over an aiokafka connection: the connection does what
every client of the command does, TLS and the SASL login of its security settings
(``streamkit.clients.security``), so these calls reach a SASL_SSL-only listener too.

    async with kio_connection(bootstrap, command_security(), timeout_s) as call:
        response = await call(ShareGroupDescribeRequest(...))
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from streamkit.clients.errors import BrokerUnreachable, ClientError, connect_failure
from streamkit.clients.lifecycle import bootstrap_addresses

__all__ = ["KioCall", "kio_connection"]

KioCall = Callable[[Any], Awaitable[Any]]


def _encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


class _Encoded:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def encode(self) -> bytes:
        return self._data


class _KioRequest:
    """A kio request in the shape aiokafka's connection sends and answers: ``prepare``,
    ``build_request_header``, ``encode``, ``parse_response_header``, ``RESPONSE_TYPE``."""

    def __init__(self, body: Any, client_id: str) -> None:
        self.body = body
        self.client_id = client_id
        response = load_response_schema(type(body).__api_key__, type(body).__version__)
        self._response = response
        self.RESPONSE_TYPE = self  # decode() below reads the body
        self.API_KEY = type(body).__api_key__

    def prepare(self, _versions: Mapping[int, tuple[int, int]]) -> _KioRequest:
        return self

    def build_request_header(self, correlation_id: int, client_id: str) -> _Encoded:
        header = type(self.body).__header_schema__(
            request_api_key=i16(type(self.body).__api_key__), request_api_version=i16(type(self.body).__version__),
            correlation_id=i32(correlation_id), client_id=self.client_id or client_id)
        return _Encoded(_encode(header))

    def encode(self) -> bytes:
        return _encode(self.body)

    def parse_response_header(self, buffer: io.BytesIO) -> Any:
        data = buffer.getvalue()
        header, used = entity_reader(self._response.__header_schema__)(data, buffer.tell())
        buffer.seek(used)
        return header

    def decode(self, buffer: io.BytesIO) -> Any:
        return entity_reader(self._response)(buffer.getvalue(), buffer.tell())[0]


@contextlib.asynccontextmanager
async def kio_connection(bootstrap: str, security: Mapping[str, Any], timeout_s: float,
                         client_id: str = "streamkit-cli") -> AsyncIterator[KioCall]:
    """One connection to the first broker of ``bootstrap`` (or ``host:port`` itself) with
    aiokafka's ``security`` arguments; ``call(request)`` sends a kio request and returns its
    decoded response. An unreachable broker is ``BrokerUnreachable``; a refused login or TLS
    handshake a ``ClientError`` with the broker's reason."""
    from aiokafka.conn import create_conn

    from streamkit.clients.security import login_refused

    host, port = bootstrap_addresses(bootstrap)[0]
    try:
        conn = await create_conn(host, port, client_id=client_id, request_timeout_ms=int(timeout_s * 1000),
                                 **security)
    except Exception as exc:  # aiokafka wraps every failure its own way: say why in one line
        refused = await login_refused(bootstrap, security, timeout_s) if security else None
        if refused is not None:
            protocol = security.get("security_protocol", "PLAINTEXT")
            who = f" as {security.get('sasl_plain_username')} ({security.get('sasl_mechanism')})" \
                if str(protocol).startswith("SASL_") else ""
            raise ClientError(f"cannot connect to {bootstrap} over {protocol}{who}: {refused}") from None
        raise BrokerUnreachable(bootstrap, connect_failure(exc, timeout_s)) from None

    async def call(body: Any) -> Any:
        return await conn.send(_KioRequest(body, client_id))

    try:
        yield call
    finally:
        conn.close()
