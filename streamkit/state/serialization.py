"""Key layouts for ordered range scans.

The store deals only in bytes; these helpers build keys whose *bytewise* order is the
order the caller wants to scan in. Turning values into bytes is the streams layer's job
(``streamkit.streams.codecs``, the one set of codecs).

Integers are 64-bit signed, encoded big-endian with the sign bit flipped (``n + 2**63`` as
unsigned), so bytewise order equals numeric order for negative values too.

Layouts (``len`` is a 4-byte big-endian length, ``i64`` the encoding above):

* ``prefix_key(prefix, key)  = len(prefix) + prefix + key``: every key of one prefix is
  contiguous, and no prefix's range contains another's (``b"a"`` vs ``b"ab"``).
* ``window_key(key, s, e)    = len(key) + key + i64(s) + i64(e)``: one key's windows are
  contiguous and ordered by start, then end.
* ``window_expiry_key(key, s, e) = i64(e) + key + i64(s)``: all windows ordered by end, so
  "every window ending at or before T" is one range scan. The key needs no length here:
  the fixed-width fields at both ends delimit it.
"""

from __future__ import annotations

import struct

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "decode_int64",
    "encode_int64",
    "next_prefix",
    "parse_prefix_key",
    "parse_window_expiry_key",
    "parse_window_key",
    "prefix_key",
    "prefix_range",
    "window_expiry_key",
    "window_key",
    "window_key_prefix",
]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_BIAS = 1 << 63

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_U64_PAIR = struct.Struct(">QQ")


def encode_int64(n: int) -> bytes:
    """8 bytes whose bytewise order is the numeric order of ``n``."""
    try:
        return _U64.pack(n + _BIAS)
    except struct.error:
        raise ValueError(f"{n} does not fit in a signed 64-bit integer") from None


def decode_int64(data: bytes) -> int:
    (u,) = _U64.unpack(data)
    return int(u) - _BIAS


def next_prefix(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``
    (the exclusive upper bound of a prefix scan), or None when there is none
    (``prefix`` is empty or all ``0xff``)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def _length(data: bytes) -> bytes:
    try:
        return _U32.pack(len(data))
    except struct.error:
        raise ValueError(f"a key part of {len(data)} bytes is too long") from None


def prefix_key(prefix: bytes, key: bytes) -> bytes:
    """``key`` in the namespace ``prefix`` (see the module docstring for the layout)."""
    return _length(prefix) + prefix + key


def parse_prefix_key(data: bytes) -> tuple[bytes, bytes]:
    """``(prefix, key)`` back from ``prefix_key``."""
    if len(data) < 4:
        raise ValueError("not a prefixed key: shorter than its length field")
    (n,) = _U32.unpack_from(data)
    if len(data) < 4 + n:
        raise ValueError("not a prefixed key: the prefix is cut short")
    return data[4 : 4 + n], data[4 + n :]


def prefix_range(prefix: bytes) -> tuple[bytes, bytes]:
    """``(lo, hi)`` bounds of every ``prefix_key(prefix, ...)``: ``lo <= k < hi``."""
    lo = _length(prefix) + prefix
    hi = next_prefix(lo)
    # lo starts with a 4-byte length below 2**32 - 1 in practice, so it is never all 0xff.
    if hi is None:
        raise ValueError("prefix too long")
    return lo, hi


def window_key_prefix(key: bytes) -> bytes:
    """The common prefix of all ``window_key(key, ...)``."""
    return _length(key) + key


def window_key(key: bytes, start_ms: int, end_ms: int) -> bytes:
    """The key of window ``[start_ms, end_ms)`` of ``key``, ordered by (key, start, end)."""
    try:
        return _length(key) + key + _U64_PAIR.pack(start_ms + _BIAS, end_ms + _BIAS)
    except struct.error:
        raise ValueError(f"window ({start_ms}, {end_ms}) is outside signed 64-bit") from None


def parse_window_key(data: bytes) -> tuple[bytes, int, int]:
    """``(key, start_ms, end_ms)`` back from ``window_key``."""
    if len(data) < 20:
        raise ValueError("not a window key: too short")
    (n,) = _U32.unpack_from(data)
    if len(data) != 4 + n + 16:
        raise ValueError("not a window key: its length does not match its key length")
    start, end = _U64_PAIR.unpack_from(data, 4 + n)
    return data[4 : 4 + n], int(start) - _BIAS, int(end) - _BIAS


def window_expiry_key(key: bytes, start_ms: int, end_ms: int) -> bytes:
    """The secondary key of the same window, ordered by end first."""
    try:
        return _U64.pack(end_ms + _BIAS) + key + _U64.pack(start_ms + _BIAS)
    except struct.error:
        raise ValueError(f"window ({start_ms}, {end_ms}) is outside signed 64-bit") from None


def parse_window_expiry_key(data: bytes) -> tuple[bytes, int, int]:
    """``(key, start_ms, end_ms)`` back from ``window_expiry_key``."""
    if len(data) < 16:
        raise ValueError("not a window expiry key: too short")
    (end,) = _U64.unpack_from(data)
    (start,) = _U64.unpack_from(data, len(data) - 8)
    return data[8:-8], int(start) - _BIAS, int(end) - _BIAS
