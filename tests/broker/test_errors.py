"""Exception -> Kafka error code mapping."""

from __future__ import annotations

import pytest

from streamkit.broker.errors import BrokerError, ErrorCode, error_code_for
from streamkit.log.errors import (
    BatchTooLargeError,
    ConfigError,
    CorruptBatchError,
    InvalidBatchError,
    LogError,
    OffsetOutOfRangeError,
    UnsupportedCompressionError,
)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (CorruptBatchError("crc"), ErrorCode.corrupt_message),
        (InvalidBatchError("magic 1"), ErrorCode.invalid_record),
        (BatchTooLargeError("exceeds the limit"), ErrorCode.message_too_large),
        (UnsupportedCompressionError("codec 7"), ErrorCode.unsupported_compression_type),
        (OffsetOutOfRangeError(5, 10, 20), ErrorCode.offset_out_of_range),
        (ConfigError("retention.ms"), ErrorCode.invalid_config),
        (OSError("short write"), ErrorCode.kafka_storage_error),
        (LogError("other"), ErrorCode.unknown_server_error),
        (RuntimeError("bug"), ErrorCode.unknown_server_error),
        (BrokerError(ErrorCode.unknown_topic_or_partition), ErrorCode.unknown_topic_or_partition),
    ],
)
def test_error_code_for(exc: BaseException, code: ErrorCode) -> None:
    assert error_code_for(exc) is code


def test_subclasses_map_like_their_base() -> None:
    class Torn(CorruptBatchError): ...

    assert error_code_for(Torn()) is ErrorCode.corrupt_message


def test_codes_have_kafka_values() -> None:
    assert (ErrorCode.corrupt_message, ErrorCode.invalid_record, ErrorCode.message_too_large) == (
        2,
        87,
        10,
    )
    assert (
        ErrorCode.offset_out_of_range,
        ErrorCode.invalid_config,
        ErrorCode.unsupported_version,
    ) == (1, 40, 35)
    assert BrokerError(ErrorCode.not_coordinator).args == ("not_coordinator",)
