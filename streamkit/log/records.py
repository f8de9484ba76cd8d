"""Records inside a v2 batch: decode them, and build whole batches.

Record layout (inside the batch body, after decompression), varints are zigzag:

    length: varint          bytes that follow
    attributes: int8        unused, 0
    timestampDelta: varlong against the batch's baseTimestamp
    offsetDelta: varint     against the batch's baseOffset
    keyLength: varint       -1 for a null key
    key: bytes
    valueLength: varint     -1 for a null value (a tombstone)
    value: bytes
    headerCount: varint
    headers: [keyLength varint, key utf-8, valueLength varint, value bytes]

Decoding is for compaction, timestamp lookups, internal topics and tests; the broker's
produce and fetch paths never call into this module.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from streamkit.log.batch import (
    HEADER_SIZE,
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    Compression,
    TimestampType,
    crc_of,
    verify_integrity,
)
from streamkit.log.compression import compress, decompress
from streamkit.log.errors import CorruptBatchError

__all__ = [
    "ControlType",
    "Record",
    "build_batch",
    "build_control_batch",
    "control_type_of",
    "decode_batch",
    "decode_control_key",
    "read_varint",
    "write_varint",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


class ControlType:
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One record. ``offset`` is absolute once decoded from a stored batch."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset: int = 0
    offset_delta: int | None = field(default=None, compare=False)


def write_varint(value: int, out: bytearray) -> None:
    """Append ``value`` as a zigzag varint (64-bit range)."""
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at ``pos``; return (value, next position)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptBatchError("record varint runs past the end of the batch")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptBatchError("record varint is longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), pos


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise CorruptBatchError("record field runs past the end of the batch")
    return buf[pos:end], end


def decode_batch(buf: bytes | memoryview, verify: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Decode one whole batch into its header and records (absolute offsets and timestamps)."""
    # A stored batch may be compacted (fewer records than lastOffsetDelta + 1), so verify
    # integrity only, not the producer checks of validate_batch.
    header = verify_integrity(buf) if verify else BatchHeader._make(_HEADER.unpack_from(buf, 0))
    body = decompress(header.compression, memoryview(buf)[HEADER_SIZE : header.size])
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    records: list[Record] = []
    pos = 0
    for _ in range(header.record_count):
        length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise CorruptBatchError("record length runs past the end of the batch")
        pos += 1  # record attributes
        ts_delta, pos = read_varint(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key, pos = _read_bytes(body, pos)
        value, pos = _read_bytes(body, pos)
        count, pos = read_varint(body, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(count):
            hkey, pos = _read_bytes(body, pos)
            hval, pos = _read_bytes(body, pos)
            headers.append(((hkey or b"").decode("utf-8", "replace"), hval))
        if pos != end:
            raise CorruptBatchError("record length does not match its fields")
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        records.append(
            Record(
                key=key,
                value=value,
                timestamp=timestamp,
                headers=tuple(headers),
                offset=header.base_offset + offset_delta,
                offset_delta=offset_delta,
            )
        )
    return header, records


def _encode_record(record: Record, base_timestamp: int, offset_delta: int, out: bytearray) -> None:
    body = bytearray(b"\x00")
    write_varint(record.timestamp - base_timestamp, body)
    write_varint(offset_delta, body)
    for blob in (record.key, record.value):
        if blob is None:
            write_varint(-1, body)
        else:
            write_varint(len(blob), body)
            body += blob
    write_varint(len(record.headers), body)
    for hkey, hval in record.headers:
        encoded = hkey.encode("utf-8")
        write_varint(len(encoded), body)
        body += encoded
        if hval is None:
            write_varint(-1, body)
        else:
            write_varint(len(hval), body)
            body += hval
    write_varint(len(body), out)
    out += body


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Build one v2 batch. Records keep their ``offset_delta`` when set (compaction keeps
    offsets); otherwise they are numbered 0..n-1 in order. ``delete_horizon`` (compaction's
    KIP-534 stamp) goes into baseTimestamp with attribute bit 6; record timestamps are
    unchanged, their deltas counting from it."""
    if not records and not control and last_offset_delta is None:
        raise ValueError("a record batch needs at least one record")
    base_ts = records[0].timestamp if records else (max_timestamp or 0)
    if delete_horizon is not None:
        base_ts = delete_horizon
    body = bytearray()
    deltas: list[int] = []
    for i, record in enumerate(records):
        delta = i if record.offset_delta is None else record.offset_delta
        deltas.append(delta)
        _encode_record(record, base_ts, delta, body)
    payload = compress(compression, bytes(body), compression_level)
    if last_offset_delta is None:
        last_offset_delta = max(deltas) if deltas else 0
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=base_ts)
    attributes = (
        int(compression)
        | (0x08 if timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
        | (0x10 if transactional else 0)
        | (0x20 if control else 0)
        | (0x40 if delete_horizon is not None else 0)
    )
    batch = bytearray(
        _HEADER.pack(
            base_offset,
            HEADER_SIZE - 12 + len(payload),
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            last_offset_delta,
            base_ts,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    batch += payload
    struct.pack_into(">I", batch, 17, crc_of(batch))
    return bytes(batch)


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
) -> bytes:
    """A transaction marker (COMMIT or ABORT) batch as the transaction coordinator writes it."""
    record = Record(
        key=_CONTROL_KEY.pack(0, control_type),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def decode_control_key(key: bytes) -> int:
    """The ControlType of a control record's key."""
    if len(key) < _CONTROL_KEY.size:
        raise CorruptBatchError("control record key is shorter than 4 bytes")
    _version, control_type = _CONTROL_KEY.unpack_from(key, 0)
    return int(control_type)


def control_type_of(batch: bytes | memoryview) -> int:
    """The ControlType of a whole control batch (ABORT 0, COMMIT 1; -1 when it has no
    record, which Kafka's cleaner leaves behind)."""
    _header, records = decode_batch(bytes(batch), verify=False)
    if not records or records[0].key is None:
        return -1
    return decode_control_key(records[0].key)


def records_of(batches: Iterable[bytes]) -> list[Record]:
    """All records of several whole batches, in order (a test and tooling helper)."""
    out: list[Record] = []
    for batch in batches:
        out.extend(decode_batch(batch)[1])
    return out
