"""Errors raised by the partition log.

The broker maps each of these to one Kafka error code (see ``streamkit.broker.errors``);
the log itself knows nothing of the wire.
"""

from __future__ import annotations

__all__ = [
    "BatchTooLargeError",
    "ConfigError",
    "CorruptBatchError",
    "InvalidBatchError",
    "InvalidTimestampError",
    "LogError",
    "OffsetOutOfRangeError",
    "UnexpectedAppendOffsetError",
    "UnsupportedCompressionError",
]


class LogError(Exception):
    """Base class for partition-log errors."""


class CorruptBatchError(LogError):
    """A record batch failed framing or CRC-32C validation (Kafka: CORRUPT_MESSAGE)."""


class InvalidBatchError(LogError):
    """A well-framed batch that the log refuses: wrong magic, bad counts (Kafka: INVALID_RECORD)."""


class BatchTooLargeError(InvalidBatchError):
    """A batch larger than max.message.bytes (Kafka: MESSAGE_TOO_LARGE)."""


class InvalidTimestampError(InvalidBatchError):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms (Kafka:
    INVALID_TIMESTAMP)."""


class UnsupportedCompressionError(LogError):
    """A compression codec id outside none/gzip/snappy/lz4/zstd."""


class OffsetOutOfRangeError(LogError):
    """A read below the log start offset or above the log end offset."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnexpectedAppendOffsetError(LogError):
    """A replicated batch whose offsets do not follow the log end offset, or the previous
    batch of the same append (Kafka: UnexpectedAppendOffsetException): the follower's fetch
    position and its log disagree."""

    def __init__(self, base_offset: int, expected_at_least: int) -> None:
        super().__init__(
            f"replicated batch at offset {base_offset} is below the next offset {expected_at_least}"
        )
        self.base_offset = base_offset
        self.expected_at_least = expected_at_least


class ConfigError(LogError):
    """A topic/log configuration value that is unknown or out of range."""
