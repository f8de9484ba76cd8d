"""What the append path does to a batch for a topic's ``compression.type`` and
``message.timestamp.before/after.max.ms``; both are off (and cost nothing) at Kafka's
defaults, so the hot path stays verbatim.

Recompression follows Kafka's LogValidator: the records are re-encoded with the topic's
codec and level, numbered 0..n-1 from the batch's base offset, and keep their timestamps,
keys, values and headers; the producer id, epoch, base sequence and the transactional flag
are kept, so idempotence and transactions see the same batch. Control batches are never
compressed, as in Kafka.
"""

from __future__ import annotations

from streamkit.log.batch import TimestampType
from streamkit.log.errors import InvalidTimestampError
from streamkit.log.records import Record, build_batch, decode_batch

__all__ = ["check_timestamps", "recompress"]

_LONG_MAX = 9223372036854775807


def recompress(batch: bytes | memoryview, codec: int, level: int | None) -> bytes:
    """The same batch with its records compressed by ``codec`` at ``level``."""
    header, records = decode_batch(batch)
    # Kafka assigns consecutive offsets to a rebuilt batch (offset deltas 0..n-1).
    renumbered = [Record(r.key, r.value, r.timestamp, r.headers) for r in records]
    return build_batch(
        renumbered,
        base_offset=header.base_offset,
        compression=codec,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
        max_timestamp=header.max_timestamp,
        compression_level=level,
    )


def check_timestamps(batch: bytes | memoryview, max_timestamp: int, now_ms: int,
                     before_max_ms: int, after_max_ms: int) -> None:
    """Refuse a CreateTime batch with a record older than ``now - before_max_ms`` or newer
    than ``now + after_max_ms`` (Kafka: INVALID_TIMESTAMP for the whole batch)."""
    if after_max_ms < _LONG_MAX and max_timestamp > now_ms + after_max_ms:
        raise InvalidTimestampError(
            f"timestamp {max_timestamp} is more than message.timestamp.after.max.ms="
            f"{after_max_ms} after the broker's time {now_ms}")
    if before_max_ms < _LONG_MAX:
        header, records = decode_batch(batch)
        if header.timestamp_type != TimestampType.CREATE_TIME:
            return
        oldest = min((r.timestamp for r in records), default=max_timestamp)
        if oldest < now_ms - before_max_ms:
            raise InvalidTimestampError(
                f"timestamp {oldest} is more than message.timestamp.before.max.ms="
                f"{before_max_ms} before the broker's time {now_ms}")
