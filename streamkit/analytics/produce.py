"""Producing records (topic, partition, key, value, headers), for the Spark sink.

Delivery is checked before ``close`` returns: a record the broker refused fails the write
instead of vanishing. As with Spark's own Kafka sink, a retried task may produce its rows
again (at least once); Kafka's idempotent producer removes the duplicates a retried
*request* would cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer

__all__ = ["ProduceError", "RecordWriter", "as_bytes"]

_RESERVED = ("key.serializer", "value.serializer", "transactional.id")


class ProduceError(RuntimeError):
    """The broker refused a record, or a row cannot be sent as it is."""


def as_bytes(value: Any, column: str) -> bytes | None:
    """A key or value column's cell as bytes: binary as is, strings as UTF-8 (the two types
    Spark's Kafka sink accepts)."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise ProduceError(f"column {column!r} must be binary or string, not {type(value).__name__}")


class RecordWriter:
    """A producer that counts what it sends and raises the first delivery failure."""

    def __init__(self, client_config: Mapping[str, str]) -> None:
        for name in _RESERVED:
            if name in client_config:
                raise ProduceError(f"kafka.{name} is not supported by the streamkit sink")
        self._producer = Producer({"acks": "all", "linger.ms": 5, "enable.idempotence": True,
                                   "client.id": "streamkit-writer", **client_config})
        self._error: str | None = None
        self.sent = 0

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None and self._error is None:
            self._error = err.str()

    def send(self, topic: str, key: bytes | None, value: bytes | None, *,
             headers: list[tuple[str, bytes | None]] | None = None, partition: int | None = None) -> None:
        if self._error is not None:
            raise ProduceError(f"producing to {topic} failed: {self._error}")
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": self._delivered}
        if headers:
            kwargs["headers"] = headers
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError:
                self._producer.poll(0.05)  # the local queue is full: let deliveries drain it
            except KafkaException as exc:
                raise ProduceError(f"producing to {topic}: {exc.args[0].str()}") from None
        self.sent += 1
        self._producer.poll(0)

    def close(self, timeout_s: float = 60) -> int:
        """Wait until every record is acknowledged; the number sent."""
        remaining = self._producer.flush(timeout_s)
        if remaining:
            raise ProduceError(f"{remaining} records were not acknowledged within {timeout_s:.0f} s")
        if self._error is not None:
            raise ProduceError(f"producing failed: {self._error}")
        return self.sent
