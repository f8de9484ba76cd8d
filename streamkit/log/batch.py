"""Record batch v2 header: parse, validate, assign offsets, walk a buffer of batches.

Wire and disk layout (Kafka's "RecordBatch", magic 2), all big-endian:

    offset  size  field
    0       8     baseOffset              rewritten by the log on append
    8       4     batchLength             bytes after this field (total = batchLength + 12)
    12      4     partitionLeaderEpoch
    16      1     magic                   must be 2
    17      4     crc                     CRC-32C (Castagnoli) of bytes 21..end
    21      2     attributes              bits 0-2 codec, 3 timestamp type, 4 transactional,
                                          5 control, 6 delete-horizon present
    23      4     lastOffsetDelta
    27      8     baseTimestamp           the delete horizon when bit 6 is set (KIP-534)
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordCount
    61      ...   records (compressed as one block when the codec is not none)

The CRC does not cover baseOffset, batchLength or partitionLeaderEpoch, so the log assigns
offsets (and the leader epoch) by rewriting those bytes without recomputing it. Nothing here
looks at individual records: that lives in ``records.py`` and is off the append/read path.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple

from crc32c import crc32c

from streamkit.log.errors import BatchTooLargeError, CorruptBatchError, InvalidBatchError

__all__ = [
    "BATCH_OVERHEAD",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "BatchHeader",
    "Compression",
    "TimestampType",
    "check_batch",
    "crc_of",
    "iter_batch_spans",
    "parse_header",
    "peek_offsets",
    "validate_batch",
    "verify_integrity",
    "with_base_offset",
    "with_log_append_time",
]

MAGIC = 2
LOG_OVERHEAD = 12  # baseOffset + batchLength: what precedes the length-covered bytes
HEADER_SIZE = 61
BATCH_OVERHEAD = HEADER_SIZE
CRC_START = 21  # first byte covered by the CRC (attributes)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_ATTRS_AT = 21
_MAX_TS_AT = 35
_CRC_AT = 17

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The 61-byte header. A NamedTuple: built once per append, so it must be cheap."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def delete_horizon(self) -> int | None:
        """When compaction may drop this batch's tombstones (KIP-534): with the attribute
        bit set, baseTimestamp holds it and record timestamp deltas count from it."""
        return self.base_timestamp if self.attributes & _DELETE_HORIZON_BIT else None


def parse_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; raises CorruptBatchError if it is not all there."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(
            f"record batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} present"
        )
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def peek_offsets(buf: bytes | memoryview, pos: int) -> tuple[int, int, int]:
    """(base_offset, size, last_offset) of the batch at ``pos`` without a full parse."""
    base, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    (delta,) = _LAST_OFFSET_DELTA.unpack_from(buf, pos + 23)
    return base, length + LOG_OVERHEAD, base + delta


def crc_of(buf: bytes | bytearray | memoryview) -> int:
    """CRC-32C over the CRC-covered part of one whole batch."""
    return int(crc32c(memoryview(buf)[CRC_START:]))


def check_batch(buf: bytes | memoryview, max_size: int | None = None) -> tuple[int, ...]:
    """Validate one whole batch (see ``validate_batch``) and return its raw header fields.

    The append path calls this directly: it builds no objects beyond the unpacked tuple.
    """
    size = len(buf)
    if max_size is not None and size > max_size:
        raise BatchTooLargeError(f"record batch of {size} bytes exceeds the limit of {max_size}")
    if size < HEADER_SIZE:
        raise CorruptBatchError(f"record batch header needs {HEADER_SIZE} bytes, {size} present")
    fields = _HEADER.unpack_from(buf, 0)
    _b, length, _e, magic, crc, attributes, last_delta, _bt, _mt, _p, _pe, _s, count = fields
    if magic != MAGIC:
        raise InvalidBatchError(f"record batch magic {magic} is not supported (only 2)")
    if length + LOG_OVERHEAD != size:
        raise CorruptBatchError(
            f"record batch length field says {length + LOG_OVERHEAD} bytes but {size} are present"
        )
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    actual = crc32c(view[CRC_START:])
    if actual != crc:
        raise CorruptBatchError(
            f"record batch CRC-32C mismatch: header {crc:#010x}, computed {actual:#010x}"
        )
    if count != last_delta + 1 or count < 0:
        raise InvalidBatchError(
            f"record batch count {count} does not match last offset delta {last_delta}"
        )
    if count == 0:  # control batches too (Kafka refuses them): it would take no offset
        raise InvalidBatchError("record batch has no records")
    if attributes & _CODEC_MASK > 4:
        raise InvalidBatchError(f"unknown compression codec id {attributes & _CODEC_MASK}")
    return fields


def verify_integrity(buf: bytes | memoryview) -> BatchHeader:
    """Framing, magic and CRC-32C of one stored batch, and its header.

    Not the producer checks of ``check_batch``: a compacted batch keeps its lastOffsetDelta
    but holds fewer records, which is valid in the log (and in Kafka).
    """
    header = parse_header(buf)
    if header.magic != MAGIC:
        raise InvalidBatchError(f"record batch magic {header.magic} is not supported (only 2)")
    if header.size != len(buf):
        raise CorruptBatchError(
            f"record batch length field says {header.size} bytes but {len(buf)} are present"
        )
    actual = crc_of(buf)
    if actual != header.crc:
        raise CorruptBatchError(
            f"record batch CRC-32C mismatch: header {header.crc:#010x}, computed {actual:#010x}"
        )
    return header


def validate_batch(buf: bytes | memoryview, max_size: int | None = None) -> BatchHeader:
    """Check that ``buf`` is exactly one well-formed magic-2 batch and return its header.

    Checks size against ``max_size`` (BatchTooLargeError), framing (the length field matches
    the bytes present), magic, CRC-32C, and that the record count agrees with
    lastOffsetDelta (a producer's batch has consecutive offsets).
    """
    return BatchHeader._make(check_batch(buf, max_size))


def with_base_offset(buf: bytes | memoryview, base_offset: int) -> bytes:
    """A copy of the batch with its base offset replaced (the CRC stays valid)."""
    return _BASE_OFFSET.pack(base_offset) + bytes(memoryview(buf)[8:])


def with_log_append_time(buf: bytes | memoryview, timestamp_ms: int) -> bytes:
    """A copy with timestamp type LogAppendTime and maxTimestamp set, CRC recomputed.

    Kafka's rule for message.timestamp.type=LogAppendTime: consumers read every record's
    timestamp as the batch's maxTimestamp, so only the header changes.
    """
    out = bytearray(buf)
    (attrs,) = struct.unpack_from(">h", out, _ATTRS_AT)
    struct.pack_into(">h", out, _ATTRS_AT, attrs | _TIMESTAMP_TYPE_BIT)
    struct.pack_into(">q", out, _MAX_TS_AT, timestamp_ms)
    struct.pack_into(">I", out, _CRC_AT, crc_of(out))
    return bytes(out)


def iter_batch_spans(buf: bytes | memoryview, pos: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(position, size, base_offset, last_offset)`` for each whole batch in ``buf``.

    Stops silently at a trailing partial batch (a fetch may end mid-batch); it does not
    verify CRCs, which is the caller's choice (recovery does, reads do not).
    """
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        base, size, last = peek_offsets(buf, pos)
        if size < HEADER_SIZE or pos + size > end:
            return
        yield pos, size, base, last
        pos += size
