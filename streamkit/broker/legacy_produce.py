"""Produce v0-v2: advertised, never served, answered with UNSUPPORTED_VERSION.

Why advertised: librdkafka before 2.8 (kcat 1.7 on librdkafka 2.0 as Debian ships it) only
compresses when the broker lists Produce v0 (librdkafka#4956), so ApiVersions lists Produce
from v0, as Apache Kafka 4.0 does (KAFKA-18659). Clients pick the highest common version,
so nobody sends v0-v2 in practice; v0-v2 carry only the old message formats (magic 0/1),
which the log does not store, and kio has no schemas for them.

Why answered rather than closed: a client that does send one learns why its request failed.
Kafka 4.0 closes the connection instead; an error per partition is kinder and costs little.
The body is read just far enough to name the topics and partitions (bounded by the bytes
present, records skipped unread); an ``acks=0`` request expects no answer, so it still
closes the connection.

Layouts (non-flexible, big-endian)::

    request   acks int16, timeout_ms int32,
              [topic: name string, [partition: index int32, records bytes]]
    response  [topic: name string, [partition: index int32, error_code int16,
                                    base_offset int64, log_append_time int64 (v2)]],
              throttle_time_ms int32 (v1+)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from streamkit.broker.errors import ErrorCode
from streamkit.broker.guard import Buf, GuardError

__all__ = ["LEGACY_PRODUCE_VERSIONS", "LegacyProduce", "encode_unsupported", "parse_legacy_produce"]

LEGACY_PRODUCE_VERSIONS: Final = range(0, 3)

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_PARTITION_V0: Final = struct.Struct(">ihq")
_PARTITION_V2: Final = struct.Struct(">ihqq")


@dataclass(frozen=True, slots=True)
class LegacyProduce:
    """What a Produce v0-v2 request names: enough to answer it."""

    acks: int
    topics: tuple[tuple[str, tuple[int, ...]], ...]


class _Reader:
    def __init__(self, frame: Buf, pos: int, end: int) -> None:
        self.frame, self.pos, self.end = frame, pos, end

    def take(self, size: int) -> int:
        if size < 0 or size > self.end - self.pos:
            raise GuardError(f"Produce v0-v2 body truncated at byte {self.pos}")
        start = self.pos
        self.pos += size
        return start

    def i16(self) -> int:
        return int(_I16.unpack_from(self.frame, self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack_from(self.frame, self.take(4))[0])

    def count(self, min_item_size: int) -> int:
        n = self.i32()
        if n < -1 or n * min_item_size > self.end - self.pos:
            raise GuardError(f"Produce v0-v2 array of {n} elements in {self.end - self.pos} bytes")
        return max(n, 0)


def parse_legacy_produce(frame: Buf, pos: int, end: int) -> LegacyProduce:
    """The topics and partitions of a Produce v0-v2 body at ``frame[pos:end]``."""
    r = _Reader(frame, pos, end)
    acks = r.i16()
    r.i32()  # timeout_ms
    topics = []
    for _ in range(r.count(2 + 4)):
        length = r.i16()
        start = r.take(length)
        name = bytes(frame[start : start + length]).decode("utf-8", "replace")
        partitions = []
        for _ in range(r.count(4 + 4)):
            partitions.append(r.i32())
            size = r.i32()
            if size != -1:
                r.take(size)
        topics.append((name, tuple(partitions)))
    return LegacyProduce(acks, tuple(topics))


def encode_unsupported(correlation_id: int, api_version: int, request: LegacyProduce) -> bytes:
    """The size-prefixed response (header v0) giving every partition UNSUPPORTED_VERSION."""
    code = int(ErrorCode.unsupported_version)
    out = bytearray(b"\0\0\0\0")
    out += _I32.pack(correlation_id)
    out += _I32.pack(len(request.topics))
    for name, partitions in request.topics:
        raw = name.encode()
        out += _I16.pack(len(raw)) + raw
        out += _I32.pack(len(partitions))
        for index in partitions:
            if api_version >= 2:
                out += _PARTITION_V2.pack(index, code, -1, -1)
            else:
                out += _PARTITION_V0.pack(index, code, -1)
    if api_version >= 1:
        out += _I32.pack(0)  # throttle_time_ms
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
