"""Per-API codecs: the (api_key, api_version) table, request decoding, response encoding.

Everything here is a pure function of bytes and kio objects; :mod:`.framing` adds the
per-connection buffering on top.  See :mod:`streamkit.broker.protocol` for the frame
layout.
"""

from __future__ import annotations

import datetime
import enum
import io
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v1.response import ApiVersion as ApiVersionV1
from kio.schema.api_versions.v1.response import ApiVersionsResponse as ApiVersionsResponseV1
from kio.schema.api_versions.v2.response import ApiVersion as ApiVersionV2
from kio.schema.api_versions.v2.response import ApiVersionsResponse as ApiVersionsResponseV2
from kio.schema.api_versions.v3.response import ApiVersion as ApiVersionV3
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsResponseV3
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import Reader
from kio.serial.writers import Writer
from kio.static.primitive import i16, i32Timedelta
from kio.static.protocol import RequestPayload, ResponsePayload

from streamkit.broker.build import build
from streamkit.broker.compiled_codec import Encoder, compile_encoder, encode_frame
from streamkit.broker.compiled_guard import compile_guard
from streamkit.broker.errors import ErrorCode
from streamkit.broker.guard import Buf, GuardError, Skip, body_guard, read_uvarint
from streamkit.broker.legacy_produce import (
    LEGACY_PRODUCE_VERSIONS,
    LegacyProduce,
    encode_unsupported,
    parse_legacy_produce,
)

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

API_VERSIONS_KEY: Final = 18
DEFAULT_MAX_REQUEST_SIZE: Final = 104_857_600  # Kafka's socket.request.max.bytes default
# Smallest request header: api_key(2) + api_version(2) + correlation_id(4) + null client_id(2).
# (Header v0, without client_id, is only used by ControlledShutdown v0, which we don't serve.)
MIN_REQUEST_SIZE: Final = 10

# api_key -> (min_version, max_version) that streamkit serves.  Each range is the target
# range intersected with what kio 0.6.5 ships (all targets are fully available); every
# version is loaded below at import and a missing schema fails the import.
SUPPORTED_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    0: (3, 9),  # Produce (v9 flexible; v10+ adds tags we don't need yet)
    1: (4, 12),  # Fetch (v13+ identifies topics by id)
    2: (1, 7),  # ListOffsets
    3: (1, 12),  # Metadata
    8: (2, 9),  # OffsetCommit (v9: member epochs of KIP-848 consumer groups)
    9: (1, 9),  # OffsetFetch (v9: member id and epoch of KIP-848 consumer groups)
    10: (0, 4),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups (v5: group types, KIP-848)
    17: (0, 1),  # SaslHandshake (v0: the SASL tokens follow bare; v1: in SaslAuthenticate)
    18: (0, 3),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 4),  # InitProducerId
    23: (2, 4),  # OffsetForLeaderEpoch (KIP-101/279/320; v3+ carries the replica id)
    24: (0, 3),  # AddPartitionsToTxn (v4+ is the broker-to-broker batch form)
    25: (0, 3),  # AddOffsetsToTxn (v4+: transaction version 2, per-transaction epochs)
    26: (0, 3),  # EndTxn (v4+: transaction version 2)
    27: (1, 1),  # WriteTxnMarkers (between brokers; v2 adds the transaction version)
    28: (0, 3),  # TxnOffsetCommit (v4+: transaction version 2)
    29: (1, 3),  # DescribeAcls (v1+: pattern types, KIP-290)
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders (v1+: preferred or unclean)
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments (KIP-455)
    46: (0, 0),  # ListPartitionReassignments
    48: (0, 1),  # DescribeClientQuotas (KIP-546)
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    60: (0, 0),  # DescribeCluster
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions (v2 adds a regular-expression filter)
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848; v1 adds regex subscriptions)
    69: (0, 1),  # ConsumerGroupDescribe
    76: (1, 1),  # ShareGroupHeartbeat (KIP-932; v0 was the early-access form)
    77: (1, 1),  # ShareGroupDescribe
    78: (1, 2),  # ShareFetch
    79: (1, 2),  # ShareAcknowledge
    90: (0, 1),  # DescribeShareGroupOffsets
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
}

# The APIs every client sends all the time, whose responses are encoded by code compiled
# from their kio schemas (streamkit.broker.compiled_codec) rather than by build() + kio's
# writer: Produce, Fetch, ListOffsets, Metadata, Heartbeat.
FAST_PATH_APIS: Final = frozenset({0, 1, 2, 3, 12})

# What every ApiVersions answer lists (each version's reply and the v0 UNSUPPORTED_VERSION
# fallback alike): SUPPORTED_VERSIONS, except that Produce is listed from v0. Apache Kafka
# 4.0 does the same (KAFKA-18659): librdkafka before 2.8 (e.g. kcat 1.7 / librdkafka 2.0.2
# as Debian and Ubuntu ship it) only compresses with gzip, snappy or lz4 when the broker
# lists Produce v0, and otherwise silently sends every batch uncompressed (librdkafka#4956).
# Clients pick the highest common version, so nobody chooses v0-v2; one that does gets
# UNSUPPORTED_VERSION for every partition (see streamkit.broker.legacy_produce).
ADVERTISED_VERSIONS: Final[dict[int, tuple[int, int]]] = {**SUPPORTED_VERSIONS, 0: (0, SUPPORTED_VERSIONS[0][1])}

ApiVersionsResponse: TypeAlias = (
    ApiVersionsResponseV0 | ApiVersionsResponseV1 | ApiVersionsResponseV2 | ApiVersionsResponseV3
)
_API_VERSION_ENTRY: Final[dict[int, type[Any]]] = {
    0: ApiVersionV0,
    1: ApiVersionV1,
    2: ApiVersionV2,
    3: ApiVersionV3,
}

_FIXED_HEADER: Final = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


class ProtocolError(Exception):
    """Base class of this package's protocol errors."""


class FrameError(ProtocolError):
    """The peer broke the protocol; the server must close the connection.

    ``api_key``/``api_version``/``correlation_id`` are set when the header was readable.
    """

    def __init__(
        self,
        message: str,
        *,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class DecodeError(FrameError):
    """A complete frame whose header or body could not be decoded."""


class LocalProtocolError(ProtocolError):
    """Our side misused the API (wrong response type, response out of order...)."""


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """Everything needed to decode one request version and encode its response."""

    api_key: int
    api_version: int
    name: str  # "Metadata", "Produce"...
    flexible: bool
    request_type: type[RequestPayload]
    request_header_type: type[Any]  # kio RequestHeader v1 or v2
    request_header_version: int  # 1 or 2
    request_reader: Reader[Any]
    request_guard: Skip  # bounds pre-scan, see streamkit.broker.guard
    response_type: type[ResponsePayload]
    response_header_version: int  # 0 or 1; always 0 for ApiVersions
    response_writer: Writer[Any]
    # FAST_PATH_APIS only: (from a handler's plain reply, from a kio object) encoders, and
    # request_guard compiled to straight-line code (streamkit.broker.compiled_guard).
    compiled: tuple[Encoder, Encoder] | None = None
    compiled_guard: Skip | None = None


def _build_spec(api_key: int, version: int) -> ApiSpec:
    # Raises kio.index.UnknownEntity if kio lacks the schema (tests/broker/test_protocol.py
    # builds every supported version).
    request_type = load_request_schema(api_key, version)
    response_type = load_response_schema(api_key, version)
    header_type = request_type.__header_schema__
    response_header_version = int(response_type.__header_schema__.__version__)
    if api_key == API_VERSIONS_KEY and response_header_version != 0:
        raise RuntimeError("kio: ApiVersions responses must use header v0")
    return ApiSpec(
        api_key=api_key,
        api_version=version,
        name=request_type.__name__.removesuffix("Request"),
        flexible=bool(request_type.__flexible__),
        request_type=request_type,
        request_header_type=header_type,
        request_header_version=int(header_type.__version__),
        request_reader=entity_reader(request_type),
        request_guard=body_guard(request_type),
        response_type=response_type,
        response_header_version=response_header_version,
        response_writer=entity_writer(response_type),
        compiled=compile_encoder(response_type) if api_key in FAST_PATH_APIS else None,
        compiled_guard=compile_guard(request_type) if api_key in FAST_PATH_APIS else None,
    )


class _Specs(Mapping[tuple[int, int], ApiSpec]):
    """Every supported (api_key, api_version)'s codec, built on first use: importing kio's
    ~400 schema modules and compiling their codecs up front took most of a broker's start
    (4.5 CPU-s; tens of seconds on a loaded machine), while a client uses a dozen versions."""

    def __init__(self) -> None:
        self._keys = [(key, version) for key, (low, high) in SUPPORTED_VERSIONS.items()
                      for version in range(low, high + 1)]
        self._known = frozenset(self._keys)
        self._built: dict[tuple[int, int], ApiSpec] = {}

    def __getitem__(self, key: tuple[int, int]) -> ApiSpec:
        spec = self._built.get(key)
        if spec is None:
            if key not in self._known:
                raise KeyError(key)
            spec = self._built[key] = _build_spec(*key)
        return spec

    def __contains__(self, key: object) -> bool:
        return key in self._known

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, key: tuple[int, int], default: Any = None) -> Any:  # per request: no KeyError
        spec = self._built.get(key)
        if spec is None and key in self._known:
            spec = self[key]
        return default if spec is None else spec


API_SPECS: Final[Mapping[tuple[int, int], ApiSpec]] = _Specs()


def get_spec(api_key: int, api_version: int) -> ApiSpec | None:
    """The codec for a supported (api_key, api_version), else ``None``."""
    return API_SPECS.get((api_key, api_version))


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request.

    ``body`` is the kio request object (an instance of
    ``get_spec(api_key, api_version).request_type``), or ``None`` when ``supported`` is
    false (unknown api_key or version outside SUPPORTED_VERSIONS: only the header could
    be read; see :func:`disposition`).  It is typed ``Any`` on purpose: handlers read
    fields duck-typed across the versions of one API, and kio's ``RequestPayload``
    protocol declares no fields, so a precise type would only force casts.
    ``raw_size`` is the frame's length prefix: header + body bytes, not counting the
    4-byte prefix itself.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    raw_size: int
    supported: bool = True


def _read_client_id(frame: Buf, pos: int, end: int) -> tuple[str | None, int]:
    # Always the legacy NULLABLE_STRING encoding, in header v1 and v2 alike.
    if pos + 2 > end:
        raise GuardError("truncated client_id length")
    (length,) = _I16.unpack_from(frame, pos)
    pos += 2
    if length == -1:
        return None, pos
    if length < 0 or length > end - pos:
        raise GuardError(f"invalid client_id length {length}")
    # Java's String(bytes, UTF_8) replaces malformed input; do the same.
    return bytes(frame[pos : pos + length]).decode("utf-8", "replace"), pos + length


def _skip_header_tags(frame: Buf, pos: int, end: int) -> int:
    # RequestHeader v2 defines no tagged fields; per the spec unknown tags are skipped.
    count, pos = read_uvarint(frame, pos, end)
    for _ in range(count):
        _tag, pos = read_uvarint(frame, pos, end)
        size, pos = read_uvarint(frame, pos, end)
        if size > end - pos:
            raise GuardError("truncated header tagged field")
        pos += size
    return pos


def decode_request(frame: Buf, fast: bool = True) -> Request:
    """Decode one frame (header + body, *without* the 4-byte length prefix).

    ``frame`` must be ``bytes`` or a read-only memoryview (kio refuses writable buffers).
    Raises :class:`DecodeError` for anything malformed. With ``fast`` the FAST_PATH_APIS'
    bodies are pre-scanned by their compiled guards (the same checks, see
    :mod:`streamkit.broker.compiled_guard`); kio's native reader decodes every body.
    """
    end = len(frame)
    if end < MIN_REQUEST_SIZE:
        raise DecodeError(f"request of {end} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(frame, 0)
    spec = API_SPECS.get((api_key, api_version))
    try:
        client_id, pos = _read_client_id(frame, 8, end)
        if spec is None:
            legacy = None
            if api_key == 0 and api_version in LEGACY_PRODUCE_VERSIONS:
                legacy = parse_legacy_produce(frame, pos, end)
            return Request(api_key, api_version, correlation_id, client_id, legacy, end, False)
        if spec.request_header_version >= 2:
            pos = _skip_header_tags(frame, pos, end)
        guard = spec.compiled_guard if fast and spec.compiled_guard is not None else spec.request_guard
        body_end = guard(frame, pos, end)
    except GuardError as exc:
        raise DecodeError(f"malformed request: {exc}", **_ids(api_key, api_version, correlation_id)) from exc
    # Bytes after a complete body are ignored, as Kafka's parser does: librdkafka 2.x sends
    # three extra bytes after some Metadata v12 requests, and Kafka accepts them.
    try:
        body, consumed = spec.request_reader(frame, pos)
    except Exception as exc:  # kio raises DecodeError, ValueError, KeyError, UnicodeError...
        raise DecodeError(
            f"kio failed to decode {spec.name} v{api_version}: {exc!r}",
            **_ids(api_key, api_version, correlation_id),
        ) from exc
    if pos + consumed != body_end:  # cannot happen if the guard mirrors kio; cheap to check
        raise DecodeError(f"kio consumed {consumed} of {body_end - pos} body bytes",
                          **_ids(api_key, api_version, correlation_id))
    return Request(api_key, api_version, correlation_id, client_id, body, end, True)


def _ids(api_key: int, api_version: int, correlation_id: int) -> dict[str, int]:
    return {"api_key": api_key, "api_version": api_version, "correlation_id": correlation_id}


class Disposition(enum.Enum):
    """What the server does with a decoded request."""

    HANDLE = "handle"  # supported: dispatch to the API handler
    REJECT_API_VERSIONS = "reject_api_versions"  # send unsupported_api_versions_response()
    REJECT_PRODUCE = "reject_produce"  # Produce v0-v2: send unsupported_produce_response()
    CLOSE = "close"  # unknown API or unsupported version: close the connection (as Kafka)


def disposition(request: Request) -> Disposition:
    if request.supported:
        return Disposition.HANDLE
    if request.api_key == API_VERSIONS_KEY:
        return Disposition.REJECT_API_VERSIONS
    if isinstance(request.body, LegacyProduce) and request.body.acks != 0:
        return Disposition.REJECT_PRODUCE
    return Disposition.CLOSE


def response_type_for(request: Request) -> type[ResponsePayload]:
    """The kio response class matching the request's api_key and version."""
    spec = API_SPECS.get((request.api_key, request.api_version))
    if spec is None:
        raise LocalProtocolError(
            f"no response schema for api {request.api_key} v{request.api_version}"
        )
    return spec.response_type


def _encode(correlation_id: int, header_version: int, writer: Writer[Any], body: object) -> bytes:
    out = io.BytesIO()
    out.write(b"\0\0\0\0")  # size, patched below
    out.write(_I32.pack(correlation_id))
    if header_version >= 1:
        out.write(b"\0")  # response header v1: empty tagged fields
    writer(out, body)
    with out.getbuffer() as view:
        _I32.pack_into(view, 0, len(view) - 4)
    return out.getvalue()


def encode_response(request: Request, body: ResponsePayload) -> bytes:
    """The size-prefixed response frame for ``request``.

    ``body`` must be an instance of ``response_type_for(request)``; kio writer errors
    (``TypeError``, ``kio.serial.errors.OutOfBoundValue``...) propagate unchanged.
    """
    spec = API_SPECS.get((request.api_key, request.api_version))
    if spec is None:
        raise LocalProtocolError(
            f"cannot answer unsupported api {request.api_key} v{request.api_version}"
        )
    if type(body) is not spec.response_type:
        raise LocalProtocolError(
            f"{spec.name} v{request.api_version} needs {spec.response_type.__module__}."
            f"{spec.response_type.__qualname__}, got {type(body).__module__}.{type(body).__qualname__}"
        )
    return _encode(request.correlation_id, spec.response_header_version, spec.response_writer, body)


def encode_reply(request: Request, reply: Mapping[str, Any], fast: bool = True) -> bytes:
    """The size-prefixed response frame for ``request`` from a handler's reply: its plain
    data (see :mod:`streamkit.broker.build`), or a kio object under ``"__body__"``.

    With ``fast`` (and a request of FAST_PATH_APIS) the compiled encoder writes it; else
    ``build`` + :func:`encode_response`. Both give the same bytes.
    """
    spec = API_SPECS.get((request.api_key, request.api_version))
    if spec is None:
        raise LocalProtocolError(
            f"cannot answer unsupported api {request.api_key} v{request.api_version}"
        )
    body = reply.get("__body__")
    if not fast or spec.compiled is None:
        return encode_response(request, body or build(spec.response_type, reply))
    from_plain, from_kio = spec.compiled
    if body is None:
        return encode_frame(request.correlation_id, spec.response_header_version, from_plain, reply)
    if type(body) is not spec.response_type:
        return encode_response(request, body)  # raises LocalProtocolError, naming both types
    return encode_frame(request.correlation_id, spec.response_header_version, from_kio, body)


def api_versions_response(
    api_version: int,
    *,
    error_code: ErrorCode = ErrorCode.none,
    throttle_time_ms: int = 0,
    supported: Mapping[int, tuple[int, int]] = ADVERTISED_VERSIONS,
) -> ApiVersionsResponse:
    """An ApiVersions response body (of ``api_version``) listing ``supported``."""
    entry = _API_VERSION_ENTRY[api_version]
    api_keys = tuple(
        entry(api_key=i16(key), min_version=i16(low), max_version=i16(high))
        for key, (low, high) in sorted(supported.items())
    )
    if api_version == 0:
        return ApiVersionsResponseV0(error_code=error_code, api_keys=api_keys)
    throttle = i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_time_ms))
    cls = {1: ApiVersionsResponseV1, 2: ApiVersionsResponseV2, 3: ApiVersionsResponseV3}[
        api_version
    ]
    response: ApiVersionsResponse = cls(
        error_code=error_code, api_keys=api_keys, throttle_time=throttle
    )
    return response


_API_VERSIONS_V0_WRITER: Final[Writer[Any]] = entity_writer(ApiVersionsResponseV0)


def unsupported_api_versions_response(request: Request) -> bytes:
    """Kafka's answer to an ApiVersions request of a version it does not know (KIP-511).

    An ApiVersions **v0** body with UNSUPPORTED_VERSION (35) and our supported ranges,
    under response header v0, so any client can parse it and retry with a version we
    serve.  (Kafka lists only the ApiVersions range; listing all is a harmless superset.)
    The ranges are ADVERTISED_VERSIONS, as in every other ApiVersions answer.
    """
    if request.api_key != API_VERSIONS_KEY:
        raise LocalProtocolError("unsupported_api_versions_response() is for ApiVersions only")
    body = api_versions_response(0, error_code=ErrorCode.unsupported_version)
    return _encode(request.correlation_id, 0, _API_VERSIONS_V0_WRITER, body)


def unsupported_produce_response(request: Request) -> bytes:
    """UNSUPPORTED_VERSION for every partition of a Produce v0-v2 request (REJECT_PRODUCE)."""
    if not isinstance(request.body, LegacyProduce):
        raise LocalProtocolError("unsupported_produce_response() is for Produce v0-v2 only")
    return encode_unsupported(request.correlation_id, request.api_version, request.body)
