"""Records of the internal ``__consumer_offsets`` topic, in Kafka's own binary layouts.

    OffsetCommitKey  (version 1): int16 version, string group, string topic, int32 partition
    OffsetCommitValue (version 3): int16 version, int64 offset, int32 leader_epoch,
                                    string metadata, int64 commit_timestamp
    GroupMetadataKey (version 2): int16 version, string group
    GroupMetadataValue (version 3): int16 version, string protocol_type, int32 generation,
        nullable string protocol, nullable string leader, int64 current_state_timestamp,
        array of members: string member_id, nullable string group_instance_id,
        string client_id, string client_host, int32 rebalance_timeout, int32 session_timeout,
        bytes subscription, bytes assignment

Strings are int16 length + UTF-8 (-1 for null); bytes and arrays use int32 lengths. A null
record value is a tombstone. Using Kafka's layouts keeps the topic readable by Kafka's tools.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

__all__ = [
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitValue",
    "Reader",
    "Writer",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "partition_for_group",
]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def partition_for_group(group_id: str, partitions: int) -> int:
    """Kafka's choice: Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions, with
    Java's String.hashCode over UTF-16 units and Utils.abs(Integer.MIN_VALUE) == 0."""
    h = 0
    for unit in struct.unpack(f">{len(group_id.encode('utf-16-be')) // 2}H", group_id.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


class Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> Writer:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> Writer:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> Writer:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        self.i16(len(data))
        self.buf += data
        return self

    def blob(self, v: bytes) -> Writer:
        self.i32(len(v))
        self.buf += v
        return self

    # Flexible versions (KIP-482): unsigned varints, compact strings/bytes/arrays, tagged fields.

    def i8(self, v: int) -> Writer:
        self.buf += _I8.pack(v)
        return self

    def uvarint(self, v: int) -> Writer:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def compact_string(self, v: str | None) -> Writer:
        if v is None:
            return self.uvarint(0)
        return self.compact_bytes(v.encode("utf-8"))

    def compact_bytes(self, v: bytes) -> Writer:
        self.uvarint(len(v) + 1)
        self.buf += v
        return self

    def uuid(self, v: uuid.UUID) -> Writer:
        self.buf += v.bytes
        return self

    def no_tags(self) -> Writer:
        return self.uvarint(0)


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("__consumer_offsets record is truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode("utf-8")

    def blob(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self._take(n)

    def i8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def uvarint(self) -> int:
        out = shift = 0
        while True:
            byte = self._take(1)[0]
            out |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ValueError("__consumer_offsets record has a varint longer than 64 bits")

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode("utf-8")

    def compact_bytes(self) -> bytes:
        n = self.uvarint()
        return b"" if n == 0 else self._take(n - 1)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def tags(self) -> dict[int, bytes]:
        """A tagged-fields section: tag -> raw field bytes."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self._take(self.uvarint())
        return out


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp: int
    members: tuple[MemberMetadata, ...]


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(Writer().i16(1).string(group).string(topic).i32(partition).buf)


def encode_offset_value(v: OffsetCommitValue) -> bytes:
    w = Writer().i16(3).i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_timestamp)
    return bytes(w.buf)


def encode_group_key(group: str) -> bytes:
    return bytes(Writer().i16(2).string(group).buf)


def encode_group_value(v: GroupMetadataValue) -> bytes:
    w = Writer().i16(3).string(v.protocol_type).i32(v.generation_id).string(v.protocol_name)
    w.string(v.leader_id).i64(v.state_timestamp).i32(len(v.members))
    for m in v.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).blob(m.subscription).blob(m.assignment)
    return bytes(w.buf)


def decode_key(data: bytes) -> tuple[str, str, int] | tuple[str] | None:
    """(group, topic, partition) for an offset key, (group,) for a group key, else None."""
    r = Reader(data)
    version = r.i16()
    if version in (0, 1):
        group, topic = r.string(), r.string()
        return (group or "", topic or "", r.i32())
    if version == 2:
        return (r.string() or "",)
    return None


def decode_offset_value(data: bytes) -> OffsetCommitValue:
    r = Reader(data)
    version = r.i16()
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    r = Reader(data)
    version = r.i16()
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id, client_host = r.string() or "", r.string() or ""
        rebalance = r.i32() if version >= 1 else 0
        session = r.i32()
        members.append(
            MemberMetadata(member_id, instance, client_id, client_host, rebalance, session, r.blob(), r.blob())
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))
