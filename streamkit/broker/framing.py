"""Sans-IO connection state: bytes in, requests out; responses in, bytes out.

In the style of h11's ``Connection``: no sockets, no asyncio, no clocks.  The server
feeds whatever it read with :meth:`Connection.receive_data`, drains complete requests
with :meth:`Connection.next_request` (``None`` = need more bytes), and turns each
response into bytes with :meth:`Connection.encode_response`, in request order (Kafka
clients match responses by correlation id *and* expect them in order).

Any :class:`FrameError` (bad length prefix, undecodable frame) is sticky: the
connection is dead and the server must close it, as Kafka does.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Mapping
from typing import Any, Final

from kio.static.protocol import ResponsePayload

from streamkit.broker.codec import (
    DEFAULT_MAX_REQUEST_SIZE,
    MIN_REQUEST_SIZE,
    FrameError,
    LocalProtocolError,
    Request,
    decode_request,
    encode_reply,
    encode_response,
    unsupported_api_versions_response,
    unsupported_produce_response,
)

__all__ = ["Connection"]

_SIZE: Final = struct.Struct(">i")


class Connection:
    """The broker side of one client connection (sans-IO)."""

    def __init__(self, max_request_size: int = DEFAULT_MAX_REQUEST_SIZE, fast_path: bool = True) -> None:
        """``max_request_size`` is Kafka's ``socket.request.max.bytes``: the largest length
        prefix accepted (header + body, excluding the prefix itself). ``fast_path`` uses the
        compiled codecs of the hot APIs (off: kio's generic ones, the same bytes)."""
        self.fast_path = fast_path
        if max_request_size < MIN_REQUEST_SIZE:
            raise ValueError(f"max_request_size must be at least {MIN_REQUEST_SIZE}")
        self.max_request_size = max_request_size
        # Deleting from the front of a bytearray is amortised O(1) in CPython.
        self._buffer = bytearray()
        self._pending: deque[Request] = deque()
        self._error: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet consumed (a partial frame, at EOF: a truncated one)."""
        return len(self._buffer)

    @property
    def pending(self) -> int:
        """Requests returned by next_request() that still await a response or discard()."""
        return len(self._pending)

    @property
    def failed(self) -> bool:
        return self._error is not None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the socket (ignored once the connection has failed)."""
        if self._error is None:
            self._buffer += data

    def next_request(self) -> Request | None:
        """The next complete request, or ``None`` if more bytes are needed.

        Raises :class:`FrameError` (or its subclass ``DecodeError``) when the peer broke
        the protocol; every later call raises again.  The length prefix is validated as
        soon as its 4 bytes arrive, before any body byte is awaited, and nothing is ever
        allocated from it: the buffer only holds bytes actually received.
        """
        size = self._complete_frame(MIN_REQUEST_SIZE)
        if size is None:
            return None
        buffer = self._buffer
        try:
            # kio wants bytes or a *read-only* memoryview: decode in place, no copy.  The
            # views are released before the frame is deleted from the buffer.
            with (
                memoryview(buffer) as whole,
                whole[4 : 4 + size] as part,
                part.toreadonly() as frame,
            ):
                request = decode_request(frame, self.fast_path)
        except FrameError as exc:
            self._error = exc
            raise
        finally:
            del buffer[: 4 + size]
        self._pending.append(request)
        return request

    def next_frame(self) -> bytes | None:
        """The next size-prefixed frame's bytes, undecoded, or ``None`` if more bytes are
        needed: a SASL token sent bare after SaslHandshake v0 (Kafka's framing, no header)."""
        size = self._complete_frame(0)
        if size is None:
            return None
        frame = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return frame

    def _complete_frame(self, minimum: int) -> int | None:
        """The size of the complete frame at the front of the buffer, None while it is
        incomplete. The length prefix is validated as soon as its 4 bytes arrive."""
        if self._error is not None:
            raise FrameError(f"connection already failed: {self._error}")
        buffer = self._buffer
        if len(buffer) < 4:
            return None
        (size,) = _SIZE.unpack_from(buffer, 0)
        if size < minimum or size > self.max_request_size:
            self._error = FrameError(
                f"invalid request size {size} (accepted: {minimum}.."
                f"{self.max_request_size}, socket.request.max.bytes)"
            )
            raise self._error
        return size if len(buffer) >= 4 + size else None

    @staticmethod
    def encode_frame(data: bytes) -> bytes:
        """``data`` size-prefixed (a bare SASL token's answer)."""
        return _SIZE.pack(len(data)) + data

    def _complete(self, request: Request) -> None:
        if not self._pending or self._pending[0] is not request:
            raise LocalProtocolError(
                f"response for correlation id {request.correlation_id} is out of order "
                "or for a request this connection did not return"
            )
        self._pending.popleft()

    def encode_response(self, request: Request, body: ResponsePayload) -> bytes:
        """The response frame for the oldest pending request (see codec.encode_response)."""
        data = encode_response(request, body)  # validate before consuming the slot
        self._complete(request)
        return data

    def encode_reply(self, request: Request, reply: Mapping[str, Any]) -> bytes:
        """The response frame for the oldest pending request, from a handler's reply (see
        codec.encode_reply)."""
        data = encode_reply(request, reply, self.fast_path)
        self._complete(request)
        return data

    def encode_unsupported_api_versions(self, request: Request) -> bytes:
        """Answer an ApiVersions request whose version we don't serve (Disposition.REJECT_API_VERSIONS)."""
        data = unsupported_api_versions_response(request)
        self._complete(request)
        return data

    def encode_unsupported_produce(self, request: Request) -> bytes:
        """Answer a Produce v0-v2 request (Disposition.REJECT_PRODUCE)."""
        data = unsupported_produce_response(request)
        self._complete(request)
        return data

    def discard(self, request: Request) -> None:
        """Mark a request that gets no response (Produce with acks=0)."""
        self._complete(request)
