"""Records of the internal ``__transaction_state`` topic, in Kafka's own binary layouts.

    TransactionLogKey (version 0): int16 version, string transactional_id
    TransactionLogValue (version 0): int16 version, int64 producer_id, int16 producer_epoch,
        int32 transaction_timeout_ms, int8 state, nullable array of partitions by topic
        (string topic, array of int32 partition), int64 last_update_ms, int64 start_ms

Strings are int16 length + UTF-8; arrays use int32 lengths (-1 for null). A null value is
a tombstone (the transactional.id expired). The state byte is ``TxnState.value``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from streamkit.broker.txn.state import TxnState

__all__ = ["TxnLogValue", "decode_txn_key", "decode_txn_value", "encode_txn_key", "encode_txn_value"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")
_VALUE_TAIL = struct.Struct(">qq")


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _I16.pack(len(data)) + data


def encode_txn_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def decode_txn_key(data: bytes) -> str | None:
    """The transactional.id of a key, or None for a key of another (newer) layout."""
    (version,) = _I16.unpack_from(data, 0)
    if version != 0:
        return None
    (n,) = _I16.unpack_from(data, 2)
    return data[4 : 4 + n].decode("utf-8")


def encode_txn_value(v: TxnLogValue) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(0, v.producer_id, v.producer_epoch, v.timeout_ms, v.state.value))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out += _I32.pack(len(by_topic))
    for topic, partitions in by_topic.items():
        out += _string(topic) + _I32.pack(len(partitions))
        out += b"".join(_I32.pack(p) for p in partitions)
    out += _VALUE_TAIL.pack(v.last_update_ms, v.start_ms)
    return bytes(out)


def decode_txn_value(data: bytes) -> TxnLogValue:
    try:
        version, pid, epoch, timeout, state = _VALUE_HEAD.unpack_from(data, 0)
        if version not in (0, 1):
            raise ValueError(f"unknown __transaction_state value version {version}")
        pos = _VALUE_HEAD.size
        (topics,) = _I32.unpack_from(data, pos)
        pos += 4
        partitions: set[tuple[str, int]] = set()
        for _ in range(max(topics, 0)):
            (n,) = _I16.unpack_from(data, pos)
            topic = data[pos + 2 : pos + 2 + n].decode("utf-8")
            pos += 2 + n
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            for _ in range(count):
                partitions.add((topic, _I32.unpack_from(data, pos)[0]))
                pos += 4
        last_update, start = _VALUE_TAIL.unpack_from(data, pos)
    except struct.error as exc:
        raise ValueError(f"__transaction_state value is truncated: {exc}") from exc
    return TxnLogValue(pid, epoch, timeout, TxnState(state), frozenset(partitions), last_update, start)
