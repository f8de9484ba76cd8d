"""Kafka error codes: the one place the broker turns exceptions into wire error codes.

``ErrorCode`` is kio's enum (an ``IntEnum`` with a ``retriable`` attribute); member names
are the lower-case Kafka names (``ErrorCode.offset_out_of_range``, ``ErrorCode.none``...).

Handlers either raise a :class:`BrokerError` carrying the code they want, or let a
``streamkit.log`` exception propagate; :func:`error_code_for` maps both.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode

from streamkit.log.errors import (
    BatchTooLargeError,
    ConfigError,
    CorruptBatchError,
    InvalidBatchError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    UnsupportedCompressionError,
)
from streamkit.log.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)

__all__ = ["EXCEPTION_CODES", "BrokerError", "ErrorCode", "error_code_for"]


class BrokerError(Exception):
    """An error a handler reports to the client with a specific Kafka error code."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message


# Looked up along the exception's MRO, so subclasses map like their nearest listed base
# (BatchTooLargeError is an InvalidBatchError but has its own code).
EXCEPTION_CODES: Final[dict[type[BaseException], ErrorCode]] = {
    CorruptBatchError: ErrorCode.corrupt_message,
    BatchTooLargeError: ErrorCode.message_too_large,
    InvalidTimestampError: ErrorCode.invalid_timestamp,
    InvalidBatchError: ErrorCode.invalid_record,
    UnsupportedCompressionError: ErrorCode.unsupported_compression_type,
    OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    ConfigError: ErrorCode.invalid_config,
    OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    # Kafka answers a Produce from an older epoch with INVALID_PRODUCER_EPOCH in every Produce
    # version since 2.7 (KIP-588); PRODUCER_FENCED is for the transaction APIs.
    InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
    UnknownProducerIdError: ErrorCode.unknown_producer_id,
    InvalidTxnStateError: ErrorCode.invalid_txn_state,
    # A failing disk (short write, EIO...) is what Kafka reports as KAFKA_STORAGE_ERROR.
    OSError: ErrorCode.kafka_storage_error,
}


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code for ``exc``; ``UNKNOWN_SERVER_ERROR`` when nothing matches."""
    if isinstance(exc, BrokerError):
        return exc.error_code
    for cls in type(exc).__mro__:
        code = EXCEPTION_CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.unknown_server_error
