"""The inter-broker client: Fetch (as a replica), OffsetForLeaderEpoch and WriteTxnMarkers
from one broker to another, over the Kafka protocol with kio's codecs.

A few request types on one connection per peer broker: requests are pipelined, answers
matched by correlation id (Kafka answers in request order per connection). A broken
connection fails every request in flight with ``BrokerUnavailable``; the next request
reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import logging
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from streamkit.broker.build import build

__all__ = ["BrokerUnavailable", "PeerClient"]

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class BrokerUnavailable(ConnectionError):
    """The peer broker could not be reached or dropped the connection."""


class PeerClient:
    """One pipelined connection to a peer broker (see the module docstring)."""

    def __init__(self, host: str, port: int, client_id: str, connect_timeout_ms: int = 10_000) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout_ms = connect_timeout_ms
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], type[Any], int]] = {}
        self._ids = itertools.count(1)
        self._connecting: asyncio.Lock = asyncio.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def request(self, api_key: int, version: int, body: dict[str, Any],
                      timeout_ms: int = 30_000) -> Any:
        """Send a request built from ``body`` (``streamkit.broker.build``'s plain data) and
        return the kio response object."""
        request_type = load_request_schema(api_key, version)
        response_type = load_response_schema(api_key, version)
        writer = await self._connected()
        correlation_id = next(self._ids)
        header_type = request_type.__header_schema__
        header = build(header_type, {"request_api_key": i16(api_key), "request_api_version": i16(version),
                                     "correlation_id": i32(correlation_id), "client_id": self.client_id})
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        entity_writer(header_type)(buf, header)
        entity_writer(request_type)(buf, build(request_type, body))
        frame = buf.getbuffer()
        frame[:4] = _LENGTH.pack(len(frame) - 4)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        header_version = int(response_type.__header_schema__.__version__)
        self._pending[correlation_id] = (future, response_type, header_version)
        try:
            writer.write(bytes(frame))
            await writer.drain()
        except (ConnectionError, OSError) as exc:
            self._pending.pop(correlation_id, None)
            self._broken(exc, writer)
            raise BrokerUnavailable(f"broker {self.address}: {exc}") from exc
        try:
            return await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            self._pending.pop(correlation_id, None)
            self._broken(TimeoutError(f"no answer within {timeout_ms} ms"), writer)
            raise BrokerUnavailable(f"broker {self.address} did not answer within {timeout_ms} ms") from None

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port),
                                                        self.connect_timeout_ms / 1000)
            except (OSError, TimeoutError) as exc:
                raise BrokerUnavailable(f"cannot reach broker {self.address} ({exc or type(exc).__name__})") from exc
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader, writer), name=f"peer-{self.address}")
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = _LENGTH.unpack(await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
                pending = self._pending.pop(correlation_id, None)
                if pending is None:
                    continue  # timed out already
                future, response_type, header_version = pending
                pos = 4
                if header_version >= 1:
                    pos += _skip_tags(frame, pos)
                try:
                    body, _consumed = entity_reader(response_type)(frame, pos)
                except Exception as exc:
                    if not future.done():
                        future.set_exception(BrokerUnavailable(f"undecodable answer from {self.address}: {exc!r}"))
                    continue
                if not future.done():
                    future.set_result(body)
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError, asyncio.IncompleteReadError) as exc:
            self._broken(exc, writer)

    def _broken(self, exc: BaseException, writer: asyncio.StreamWriter | None) -> None:
        """Close ``writer``'s connection and fail what is in flight on it. A connection
        that is already gone does nothing: its reader sees the end of its stream after a
        new connection may have been made, whose requests must not fail with it."""
        if writer is None or writer is not self._writer:
            return
        self._writer = None
        writer.close()
        pending, self._pending = self._pending, {}
        for future, _t, _v in pending.values():
            if not future.done():
                future.set_exception(BrokerUnavailable(f"broker {self.address}: {exc or type(exc).__name__}"))

    def abort(self, reason: str) -> None:
        """Drop the connection now, failing the requests in flight with BrokerUnavailable
        (a long-polling fetch that should start over)."""
        self._broken(ConnectionError(reason), self._writer)

    async def close(self) -> None:
        task, self._reader_task = self._reader_task, None
        self._broken(ConnectionError("closed"), self._writer)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _skip_tags(frame: bytes, pos: int) -> int:
    """Bytes taken by a tagged-fields section at ``pos`` (response header v1)."""
    start = pos
    count, pos = _uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = _uvarint(frame, pos)
        size, pos = _uvarint(frame, pos)
        pos += size
    return pos - start


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
