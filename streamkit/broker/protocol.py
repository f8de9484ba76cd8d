"""The Kafka wire protocol, sans-IO: the public face of ``codec``, ``framing`` and ``guard``.

Frame layout (all integers big-endian)::

    request (client -> broker)
      Size              int32    bytes that follow: header + body.
                                 MIN_REQUEST_SIZE (10) <= Size <= socket.request.max.bytes
      RequestHeader     v1 for non-flexible API versions, v2 for flexible ones
        api_key         int16
        api_version     int16
        correlation_id  int32    echoed in the response
        client_id       NULLABLE_STRING: int16 length (-1 = null) + UTF-8 bytes; this
                                 legacy encoding is kept even in header v2
        tagged_fields   v2 only: UVARINT count, then (UVARINT tag, UVARINT size, bytes)*
      RequestBody       kio schema of (api_key, api_version)

    response (broker -> client)
      Size              int32    bytes that follow
      ResponseHeader    v0: correlation_id int32
                        v1 (flexible versions): correlation_id int32 + tagged_fields
                        (UVARINT 0); ApiVersions responses ALWAYS use v0, so a client can
                        read one before it knows which versions the broker speaks
      ResponseBody      kio schema of (api_key, api_version)

Flexible versions (KIP-482) use compact strings/arrays (UVARINT length + 1, 0 = null)
and end every struct with tagged fields; non-flexible ones use int16/int32 lengths
(-1 = null).

Typical server loop::

    conn = Connection(max_request_size=config.socket_request_max_bytes)
    conn.receive_data(await reader.read(65536))
    while (request := conn.next_request()) is not None:    # FrameError -> close
        match disposition(request):
            case Disposition.HANDLE:
                writer.write(conn.encode_response(request, await handle(request)))
            case Disposition.REJECT_API_VERSIONS:
                writer.write(conn.encode_unsupported_api_versions(request))
            case Disposition.REJECT_PRODUCE:
                writer.write(conn.encode_unsupported_produce(request))
            case Disposition.CLOSE:
                close()
"""

from __future__ import annotations

from streamkit.broker.codec import (
    ADVERTISED_VERSIONS,
    API_SPECS,
    API_VERSIONS_KEY,
    DEFAULT_MAX_REQUEST_SIZE,
    FAST_PATH_APIS,
    MIN_REQUEST_SIZE,
    SUPPORTED_VERSIONS,
    ApiSpec,
    ApiVersionsResponse,
    DecodeError,
    Disposition,
    FrameError,
    LocalProtocolError,
    ProtocolError,
    Request,
    api_versions_response,
    decode_request,
    disposition,
    encode_reply,
    encode_response,
    get_spec,
    response_type_for,
    unsupported_api_versions_response,
    unsupported_produce_response,
)
from streamkit.broker.framing import Connection

__all__ = [
    "ADVERTISED_VERSIONS",
    "API_SPECS",
    "API_VERSIONS_KEY",
    "DEFAULT_MAX_REQUEST_SIZE",
    "FAST_PATH_APIS",
    "MIN_REQUEST_SIZE",
    "SUPPORTED_VERSIONS",
    "ApiSpec",
    "ApiVersionsResponse",
    "Connection",
    "DecodeError",
    "Disposition",
    "FrameError",
    "LocalProtocolError",
    "ProtocolError",
    "Request",
    "api_versions_response",
    "decode_request",
    "disposition",
    "encode_reply",
    "encode_response",
    "get_spec",
    "response_type_for",
    "unsupported_api_versions_response",
    "unsupported_produce_response",
]
