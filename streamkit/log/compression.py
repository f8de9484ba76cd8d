"""Compression codecs of record batches: none, gzip, snappy, lz4, zstd (Kafka's ids 0-4).

Only compaction, timestamp lookups and tests decompress; the append and read paths never do.
Snappy is written in the xerial framing the Java client uses (every Kafka client reads it)
and read in either that framing or raw blocks (what librdkafka writes).
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

from streamkit.log.batch import Compression
from streamkit.log.errors import CorruptBatchError, UnsupportedCompressionError

__all__ = ["compress", "decompress"]

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """``level`` is the codec's level (compression.*.level); None keeps the fast defaults
    compaction has always used (gzip 6, cramjam's lz4 and zstd defaults)."""
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return gzip.compress(data, compresslevel=6 if level is None else level, mtime=0)
    if codec == Compression.SNAPPY:
        return _xerial_compress(data)
    if codec == Compression.LZ4:
        # Independent blocks: Kafka's Java client and broker reject a frame without the
        # BLOCK_INDEPENDENCE flag ("Dependent block stream is unsupported"), cramjam's default.
        options = {} if level is None else {"level": level}
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False, **options)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == Compression.ZSTD:
        if level is None:
            return bytes(cramjam.zstd.compress(data))
        return bytes(cramjam.zstd.compress(data, level=level))
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            # wbits 47 accepts both gzip and zlib headers, as Kafka clients may send either.
            return zlib.decompress(bytes(data), 47)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except (zlib.error, cramjam.DecompressionError, ValueError, struct.error) as exc:
        raise CorruptBatchError(f"cannot decompress records ({Compression(codec).name}): {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = []
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if len(data) - pos < 4:
            raise CorruptBatchError("truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptBatchError("xerial snappy block overruns the data")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(out)
