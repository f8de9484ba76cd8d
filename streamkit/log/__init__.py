"""The durable partition log: segments of Kafka record batches (v2) stored verbatim."""

from streamkit.log.batch import (
    BatchHeader,
    Compression,
    TimestampType,
    parse_header,
    validate_batch,
)
from streamkit.log.cleaner import CleanResult, LogCleaner, clean
from streamkit.log.config import TOPIC_CONFIGS, LogConfig
from streamkit.log.errors import (
    ConfigError,
    CorruptBatchError,
    InvalidBatchError,
    LogError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
    UnsupportedCompressionError,
)
from streamkit.log.leader_epochs import EpochEntry, LeaderEpochCache
from streamkit.log.partition import AppendResult, PartitionLog, ReplicaAppendResult, wall_clock_ms
from streamkit.log.records import (
    ControlType,
    Record,
    build_batch,
    build_control_batch,
    decode_batch,
)

__all__ = [
    "TOPIC_CONFIGS",
    "AppendResult",
    "BatchHeader",
    "CleanResult",
    "Compression",
    "ConfigError",
    "ControlType",
    "CorruptBatchError",
    "EpochEntry",
    "InvalidBatchError",
    "LeaderEpochCache",
    "LogCleaner",
    "LogConfig",
    "LogError",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "Record",
    "ReplicaAppendResult",
    "TimestampType",
    "UnexpectedAppendOffsetError",
    "UnsupportedCompressionError",
    "build_batch",
    "build_control_batch",
    "clean",
    "decode_batch",
    "parse_header",
    "validate_batch",
    "wall_clock_ms",
]
