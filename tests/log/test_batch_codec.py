"""The record batch v2 codec against batches that real Kafka client libraries build and read.

Writers: aiokafka's ``DefaultRecordBatchBuilder`` (its Cython build and its pure-Python one)
and kafka-python's. Readers: aiokafka's ``DefaultRecordBatch`` / ``MemoryRecords`` and
kafka-python's ``DefaultRecordBatch``. Every codec: none, gzip, snappy, lz4, zstd.

kafka-python compresses snappy/lz4/zstd only through python-snappy, lz4 and zstandard
(not cramjam, and they are in the ``dev`` extra); where those are not installed its tests
for that codec go through ``require_service``: they skip on a laptop with the reason shown
in the summary (``-ra``), and fail where STREAMKIT_REQUIRE_SERVICES=1 (CI).
"""

from __future__ import annotations

import importlib
import struct
import warnings
import zlib
from pathlib import Path
from types import ModuleType

import cramjam
import pytest
from aiokafka.record import default_records as aiokafka_records
from aiokafka.record.control_record import ControlRecord as AiokafkaControlRecord
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import decode_varint as aiokafka_decode_varint
from aiokafka.record.util import encode_varint as aiokafka_encode_varint
from hypothesis import given
from hypothesis import strategies as st

from streamkit.log import (
    Compression,
    ControlType,
    CorruptBatchError,
    InvalidBatchError,
    PartitionLog,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_batch,
    validate_batch,
)
from streamkit.log.batch import (
    HEADER_SIZE,
    crc_of,
    iter_batch_spans,
    parse_header,
    verify_integrity,
    with_base_offset,
    with_log_append_time,
)
from streamkit.log.compression import compress, decompress
from streamkit.log.errors import BatchTooLargeError, UnsupportedCompressionError
from streamkit.log.records import decode_control_key, read_varint, write_varint
from tests import conftest as root_conftest

from .conftest import T0, config, split_batches


def _import_kafka_python() -> tuple[ModuleType, ModuleType]:
    with warnings.catch_warnings():
        # kafka-python 3 loads its JSON schemas with importlib.resources.read_text, which
        # warns (DeprecationWarning) on import; warnings are errors in this suite.
        warnings.filterwarnings(
            "ignore", r"\w+ is deprecated. Use files\(\) instead", DeprecationWarning
        )
        codec = importlib.import_module("kafka.codec")
        records = importlib.import_module("kafka.record.default_records")
    return codec, records


kafka_python_codec, kafka_python_records = _import_kafka_python()

CODECS = list(Compression)
PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE = 4242, 7, 1000

# (key, value, timestamp, headers): null key, null value (tombstone), empty key and value,
# timestamps out of order (negative deltas), null/empty/non-ASCII headers; then enough
# repetitive records that every codec shrinks the batch (clients otherwise send it plain).
INPUT: list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]] = [
    (b"key-0", b"value-0" * 20, T0, [("h1", b"a"), ("h2", None)]),
    (None, b"v" * 100, T0 + 5, []),
    (b"k2", None, T0 - 3, [("", b"")]),
    (b"", b"", T0 + 1000, [("unicode-\u00e9", b"\x00\xff")]),
] + [(f"key-{i}".encode(), b"payload " * 30, T0 + 10 + i, [("n", str(i).encode())]) for i in range(4, 40)]

EXPECTED = [
    Record(key=k, value=v, timestamp=ts, headers=tuple(h), offset=i)
    for i, (k, v, ts, h) in enumerate(INPUT)
]


def _kafka_python_can(codec: int) -> bool:
    return {
        Compression.NONE: True,
        Compression.GZIP: kafka_python_codec.has_gzip(),
        Compression.SNAPPY: kafka_python_codec.has_snappy(),
        Compression.LZ4: kafka_python_codec.has_lz4(),
        Compression.ZSTD: kafka_python_codec.has_zstd(),
    }[Compression(codec)]


def _require_kafka_python(codec: int) -> None:
    """Skip (or, with STREAMKIT_REQUIRE_SERVICES=1, fail) when kafka-python lacks the codec."""
    if _kafka_python_can(codec):
        return
    needs = {Compression.SNAPPY: "python-snappy", Compression.LZ4: "lz4",
             Compression.ZSTD: "zstandard"}[Compression(codec)]
    root_conftest.require_service(
        False, f"kafka-python's {Compression(codec).name} codec (the {needs} package; it does not use cramjam)"
    )


def test_missing_kafka_python_codec_fails_where_services_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    """In CI a missing codec package must fail the codec tests, never skip them quietly."""
    monkeypatch.setattr(kafka_python_codec, "has_snappy", lambda: False)
    monkeypatch.setattr(root_conftest, "REQUIRE_SERVICES", True)
    with pytest.raises(pytest.fail.Exception, match="python-snappy"):
        _require_kafka_python(Compression.SNAPPY)
    monkeypatch.setattr(root_conftest, "REQUIRE_SERVICES", False)
    with pytest.raises(pytest.skip.Exception, match="python-snappy"):
        _require_kafka_python(Compression.SNAPPY)


AIOKAFKA_BUILDERS = {
    "aiokafka-cython": aiokafka_records.DefaultRecordBatchBuilder,
    "aiokafka-python": aiokafka_records._DefaultRecordBatchBuilderPy,
}
AIOKAFKA_READERS = {
    "aiokafka-cython": aiokafka_records.DefaultRecordBatch,
    "aiokafka-python": aiokafka_records._DefaultRecordBatchPy,
}


def _client_batch(builder_cls: type, codec: int, transactional: bool) -> bytes:
    builder = builder_cls(
        2, codec, int(transactional), PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE, 1 << 20
    )
    for i, (key, value, ts, headers) in enumerate(INPUT):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    return bytes(builder.build())


def _check_client_batch(buf: bytes, codec: int, transactional: bool) -> None:
    header = validate_batch(buf)
    assert header.magic == 2
    assert header.compression == codec, "the client fell back to no compression"
    assert header.record_count == len(INPUT)
    assert header.last_offset_delta == len(INPUT) - 1
    assert header.base_timestamp == INPUT[0][2]
    assert header.max_timestamp == max(ts for _k, _v, ts, _h in INPUT)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE,
    )
    assert header.is_transactional is transactional
    assert not header.is_control
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert header.attributes == codec | (0x10 if transactional else 0)
    got_header, records = decode_batch(buf)
    assert got_header == header
    assert records == EXPECTED
    assert [r.offset_delta for r in records] == list(range(len(INPUT)))


def _check_stored(tmp_path: Path, buf: bytes) -> None:
    """Appended after other data, the client's batch is stored byte for byte except its
    base offset, and its records decode at the assigned offsets."""
    log = PartitionLog.open(tmp_path / "p-0", config())
    try:
        log.append(build_batch([Record(b"x", b"y", T0)] * 3))
        result = log.append(buf)
        assert (result.base_offset, result.last_offset) == (3, 3 + len(INPUT) - 1)
        stored = log.read(3, 1)
        assert stored[8:] == buf[8:]
        assert parse_header(stored).base_offset == 3
        assert [r.offset for r in decode_batch(stored)[1]] == list(range(3, 3 + len(INPUT)))
    finally:
        log.close()


# -- batches built by clients, read by streamkit ------------------------------------------


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: Compression(c).name.lower())
@pytest.mark.parametrize("builder", list(AIOKAFKA_BUILDERS))
def test_aiokafka_built_batch_decodes(tmp_path: Path, builder: str, codec: int, transactional: bool) -> None:
    buf = _client_batch(AIOKAFKA_BUILDERS[builder], codec, transactional)
    _check_client_batch(buf, codec, transactional)
    _check_stored(tmp_path, buf)


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: Compression(c).name.lower())
def test_kafka_python_built_batch_decodes(tmp_path: Path, codec: int, transactional: bool) -> None:
    _require_kafka_python(codec)
    buf = _client_batch(kafka_python_records.DefaultRecordBatchBuilder, codec, transactional)
    _check_client_batch(buf, codec, transactional)
    _check_stored(tmp_path, buf)


# -- batches built by streamkit, read by clients ------------------------------------------

OURS_KW = dict(
    base_offset=42,
    producer_id=PRODUCER_ID,
    producer_epoch=PRODUCER_EPOCH,
    base_sequence=BASE_SEQUENCE,
)


def _check_client_view(batch, codec: int, timestamp_type: int = 0) -> None:  # type: ignore[no-untyped-def]
    assert batch.validate_crc()
    assert batch.base_offset == 42
    assert batch.magic == 2
    assert batch.compression_type == codec
    assert batch.timestamp_type == timestamp_type
    assert batch.last_offset_delta == len(INPUT) - 1
    assert batch.first_timestamp == INPUT[0][2]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE,
    )
    assert not batch.is_transactional
    assert not batch.is_control_batch


def _client_records(batch) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]


EXPECTED_TUPLES = [(42 + i, ts, k, v, [tuple(x) for x in h]) for i, (k, v, ts, h) in enumerate(INPUT)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: Compression(c).name.lower())
@pytest.mark.parametrize("reader", list(AIOKAFKA_READERS))
def test_streamkit_batch_reads_in_aiokafka(reader: str, codec: int) -> None:
    ours = build_batch(EXPECTED, compression=codec, **OURS_KW)
    assert validate_batch(ours).compression == codec
    batch = AIOKAFKA_READERS[reader](ours)
    _check_client_view(batch, codec)
    assert batch.max_timestamp == max(ts for _k, _v, ts, _h in INPUT)
    assert _client_records(batch) == EXPECTED_TUPLES


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: Compression(c).name.lower())
def test_streamkit_batch_reads_in_kafka_python(codec: int) -> None:
    _require_kafka_python(codec)
    ours = build_batch(EXPECTED, compression=codec, **OURS_KW)
    batch = kafka_python_records.DefaultRecordBatch(ours)
    _check_client_view(batch, codec)
    assert batch.records_count == len(INPUT)
    assert _client_records(batch) == EXPECTED_TUPLES


def _client_readers(codec: int) -> list[type]:
    """Every client batch reader that can decompress ``codec`` here; in CI (see
    ``_require_kafka_python``) kafka-python's must be among them."""
    readers: list[type] = list(AIOKAFKA_READERS.values())
    if _kafka_python_can(codec):
        readers.append(kafka_python_records.DefaultRecordBatch)
    elif root_conftest.REQUIRE_SERVICES:
        _require_kafka_python(codec)  # fails
    return readers


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: Compression(c).name.lower())
def test_log_append_time_batch_reads_in_clients(codec: int) -> None:
    stamped = with_log_append_time(build_batch(EXPECTED, compression=codec, **OURS_KW), T0 + 99_999)
    for reader in _client_readers(codec):
        batch = reader(stamped)
        _check_client_view(batch, codec, timestamp_type=1)
        assert batch.max_timestamp == T0 + 99_999
        assert {r.timestamp for r in batch} == {T0 + 99_999}


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: Compression(c).name.lower())
def test_delete_horizon_batch_reads_in_clients(codec: int) -> None:
    """A batch compaction stamped with a delete horizon (KIP-534: attribute bit 6, the
    horizon in baseTimestamp, record deltas from it) gives clients the original record
    timestamps."""
    horizon = T0 + 86_400_000
    stamped = build_batch(EXPECTED, compression=codec, delete_horizon=horizon, **OURS_KW)
    header = validate_batch(stamped)
    assert (header.has_delete_horizon, header.delete_horizon, header.base_timestamp) == (True, horizon, horizon)
    assert header.max_timestamp == max(ts for _k, _v, ts, _h in INPUT)
    assert decode_batch(stamped)[1] == [Record(k, v, ts, tuple(h), offset=42 + i)
                                        for i, (k, v, ts, h) in enumerate(INPUT)]
    for reader in _client_readers(codec):
        assert _client_records(reader(stamped)) == EXPECTED_TUPLES


def test_log_read_output_is_a_fetch_response_clients_parse(tmp_path: Path) -> None:
    """What PartitionLog.read returns (several batches, mixed codecs) is what a Fetch
    response carries; aiokafka's MemoryRecords walks it batch by batch."""
    log = PartitionLog.open(tmp_path / "p-0", config())
    try:
        for codec in CODECS:
            log.append(build_batch(EXPECTED[:10], compression=codec))
        data = log.read(0, 1 << 20)
    finally:
        log.close()
    records = MemoryRecords(data)
    offsets = []
    codecs = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        codecs.append(batch.compression_type)
        offsets.extend(r.offset for r in batch)
    assert codecs == CODECS
    assert offsets == list(range(10 * len(CODECS)))


# -- control batches -----------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ControlType.COMMIT, ControlType.ABORT])
def test_control_batch_round_trip(control_type: int) -> None:
    buf = build_control_batch(
        control_type, producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH,
        coordinator_epoch=13, timestamp=T0, base_offset=5,
    )
    header, records = decode_batch(buf)
    assert validate_batch(buf) == header
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (PRODUCER_ID, PRODUCER_EPOCH)
    assert header.record_count == 1 and header.base_offset == 5
    (record,) = records
    assert decode_control_key(record.key) == control_type
    assert struct.unpack(">hi", record.value) == (0, 13)
    assert (record.offset, record.timestamp) == (5, T0)

    for reader in AIOKAFKA_READERS.values():
        batch = reader(buf)
        assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
        (client_record,) = list(batch)
        assert AiokafkaControlRecord.parse(client_record.key) == AiokafkaControlRecord(0, control_type)
    (kp_record,) = list(kafka_python_records.DefaultRecordBatch(buf))
    assert kp_record.type == control_type
    assert kp_record.commit is (control_type == ControlType.COMMIT)


def test_decode_control_key_rejects_short_key() -> None:
    with pytest.raises(CorruptBatchError):
        decode_control_key(b"\x00\x01")


# -- validation and corruption --------------------------------------------------------------


def _batch() -> bytes:
    return build_batch(EXPECTED[:5], compression=Compression.GZIP, base_offset=0)


def _with(buf: bytes, at: int, fmt: str, value: int, fix_crc: bool) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt, out, at, value)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc_of(out))
    return bytes(out)


def test_every_crc_covered_byte_is_checked() -> None:
    buf = _batch()
    assert validate_batch(buf).record_count == 5
    for pos in range(21, len(buf)):
        corrupt = bytearray(buf)
        corrupt[pos] ^= 0x01
        with pytest.raises(CorruptBatchError, match="CRC"):
            validate_batch(bytes(corrupt))
        with pytest.raises(CorruptBatchError, match="CRC"):
            verify_integrity(bytes(corrupt))


def test_crc_field_itself_is_checked() -> None:
    buf = _batch()
    for pos in range(17, 21):
        corrupt = bytearray(buf)
        corrupt[pos] ^= 0x80
        with pytest.raises(CorruptBatchError):
            validate_batch(bytes(corrupt))


@pytest.mark.parametrize("delta", [-1, 1, 1000, -(10**6)])
def test_wrong_length_field_is_corrupt(delta: int) -> None:
    buf = _batch()
    (length,) = struct.unpack_from(">i", buf, 8)
    with pytest.raises(CorruptBatchError, match="length"):
        validate_batch(_with(buf, 8, ">i", length + delta, fix_crc=False))


def test_truncated_and_extended_buffers_are_corrupt() -> None:
    buf = _batch()
    for cut in (0, 10, HEADER_SIZE - 1, HEADER_SIZE, len(buf) - 1):
        with pytest.raises(CorruptBatchError):
            validate_batch(buf[:cut])
    with pytest.raises(CorruptBatchError):
        validate_batch(buf + b"\x00")
    with pytest.raises(CorruptBatchError):
        validate_batch(buf + buf)  # two batches are not one


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_other_magic_is_invalid(magic: int) -> None:
    buf = bytearray(_batch())
    buf[16] = magic  # not CRC-covered
    with pytest.raises(InvalidBatchError, match="magic"):
        validate_batch(bytes(buf))
    with pytest.raises(InvalidBatchError, match="magic"):
        decode_batch(bytes(buf))


def test_max_size() -> None:
    buf = _batch()
    assert validate_batch(buf, max_size=len(buf)).size == len(buf)
    with pytest.raises(BatchTooLargeError):
        validate_batch(buf, max_size=len(buf) - 1)
    assert issubclass(BatchTooLargeError, InvalidBatchError)


def test_count_must_match_last_offset_delta() -> None:
    buf = _batch()
    with pytest.raises(InvalidBatchError, match="count"):
        validate_batch(_with(buf, 57, ">i", 4, fix_crc=True))
    with pytest.raises(InvalidBatchError, match="count"):
        validate_batch(_with(buf, 23, ">i", 5, fix_crc=True))


def test_empty_batches_are_refused_control_ones_too() -> None:
    """Kafka refuses a batch with no records: it would take no offset, and the next batch
    would get the same base offset."""
    empty_control = build_batch(
        [], control=True, transactional=True, producer_id=1, producer_epoch=0,
        last_offset_delta=-1, max_timestamp=T0,
    )
    assert parse_header(empty_control).record_count == 0
    with pytest.raises(InvalidBatchError, match="no records"):
        validate_batch(empty_control)


def test_unknown_codec_is_invalid() -> None:
    buf = build_batch(EXPECTED[:2])
    bad = _with(buf, 21, ">h", 5, fix_crc=True)
    with pytest.raises(InvalidBatchError, match="codec"):
        validate_batch(bad)
    with pytest.raises(UnsupportedCompressionError):
        decode_batch(bad, verify=False)


def test_body_that_lies_about_its_records_is_corrupt() -> None:
    """A CRC-valid batch whose record count exceeds the records present fails to decode."""
    buf = build_batch(EXPECTED[:2])
    lying = _with(_with(buf, 57, ">i", 3, fix_crc=False), 23, ">i", 2, fix_crc=True)
    with pytest.raises(CorruptBatchError):
        decode_batch(lying)
    cut = bytearray(buf[:-3])
    struct.pack_into(">i", cut, 8, len(cut) - 12)
    struct.pack_into(">I", cut, 17, crc_of(cut))
    with pytest.raises(CorruptBatchError):
        decode_batch(bytes(cut))


def test_with_base_offset_keeps_crc_valid() -> None:
    buf = _batch()
    moved = with_base_offset(buf, 123_456_789_012)
    header = validate_batch(moved)
    assert header.base_offset == 123_456_789_012
    assert header.crc == parse_header(buf).crc
    assert moved[8:] == buf[8:]
    assert [r.offset for r in decode_batch(moved)[1]] == [123_456_789_012 + i for i in range(5)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: Compression(c).name.lower())
def test_with_log_append_time(codec: int) -> None:
    buf = build_batch(EXPECTED[:6], compression=codec)
    stamped = with_log_append_time(buf, T0 + 777)
    header = validate_batch(stamped)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == T0 + 777
    assert header.compression == codec
    assert header.crc != parse_header(buf).crc
    records = decode_batch(stamped)[1]
    assert [r.timestamp for r in records] == [T0 + 777] * 6
    assert [(r.key, r.value, r.headers, r.offset) for r in records] == [
        (r.key, r.value, r.headers, r.offset) for r in EXPECTED[:6]
    ]
    # the original is untouched (the function copies)
    assert decode_batch(buf)[1] == EXPECTED[:6]


def test_build_batch_records_out_of_order_timestamps() -> None:
    records = [Record(b"a", b"1", T0 + 50), Record(b"b", b"2", T0), Record(b"c", b"3", T0 + 100)]
    header, decoded = decode_batch(build_batch(records))
    assert header.base_timestamp == T0 + 50
    assert header.max_timestamp == T0 + 100
    assert [r.timestamp for r in decoded] == [T0 + 50, T0, T0 + 100]


def test_iter_batch_spans_stops_at_partial_batch() -> None:
    a, b = build_batch(EXPECTED[:1]), build_batch(EXPECTED[1:3], base_offset=1)
    data = a + b
    assert list(iter_batch_spans(data)) == [(0, len(a), 0, 0), (len(a), len(b), 1, 2)]
    for cut in range(len(a), len(data)):
        assert [s[0] for s in iter_batch_spans(data[:cut])] == [0]
    assert list(iter_batch_spans(data[: len(a) - 1])) == []
    assert split_batches(data) == [a, b]


# -- compression details that interoperability depends on ----------------------------------


def test_lz4_frames_have_independent_blocks() -> None:
    """Kafka's Java client (KafkaLZ4BlockInputStream) refuses an LZ4 frame whose
    BLOCK_INDEPENDENCE flag is clear ("Dependent block stream is unsupported")."""
    for size in (10, 70_000, 300_000):  # one block and several 64 KiB blocks
        data = bytes(range(256)) * (size // 256) + b"tail"
        frame = compress(Compression.LZ4, data)
        assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
        flg = frame[4]
        assert flg >> 6 == 1, "frame version must be 01"
        assert flg & 0x20, "BLOCK_INDEPENDENCE must be set"
        assert decompress(Compression.LZ4, frame) == data
    big = [Record(b"k", bytes(range(256)) * 400, T0)]
    batch = build_batch(big, compression=Compression.LZ4)
    (client_record,) = list(AIOKAFKA_READERS["aiokafka-cython"](batch))
    assert client_record.value == big[0].value


def test_snappy_is_written_xerial_and_read_raw_or_xerial() -> None:
    data = b"snappy data " * 10_000  # more than one 32 KiB xerial block
    framed = compress(Compression.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    assert decompress(Compression.SNAPPY, framed) == data
    raw = bytes(cramjam.snappy.compress_raw(data))  # what librdkafka sends
    assert decompress(Compression.SNAPPY, raw) == data

    body = build_batch(EXPECTED[:5])[HEADER_SIZE:]
    out = bytearray(build_batch(EXPECTED[:5])[:HEADER_SIZE]) + bytes(cramjam.snappy.compress_raw(body))
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, Compression.SNAPPY)
    struct.pack_into(">I", out, 17, crc_of(out))
    assert decode_batch(bytes(out))[1] == EXPECTED[:5]


def test_gzip_accepts_zlib_wrapping() -> None:
    data = b"gzip " * 1000
    assert decompress(Compression.GZIP, compress(Compression.GZIP, data)) == data
    assert decompress(Compression.GZIP, zlib.compress(data)) == data


@pytest.mark.parametrize("codec", [c for c in CODECS if c != Compression.NONE],
                         ids=lambda c: Compression(c).name.lower())
def test_garbage_compressed_body_is_corrupt(codec: int) -> None:
    with pytest.raises(CorruptBatchError):
        decompress(codec, b"\x00\x01 definitely not compressed data \xff" * 3)


def test_unknown_codec_ids() -> None:
    with pytest.raises(UnsupportedCompressionError):
        compress(7, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(7, b"x")


# -- varints -------------------------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.lists(INT64, min_size=1, max_size=8))
def test_varint_round_trip(values: list[int]) -> None:
    buf = bytearray()
    for v in values:
        write_varint(v, buf)
    pos = 0
    for v in values:
        got, pos = read_varint(bytes(buf), pos)
        assert got == v
    assert pos == len(buf)


@given(INT64)
def test_varint_bytes_match_aiokafka(value: int) -> None:
    ours = bytearray()
    write_varint(value, ours)
    theirs = bytearray()
    aiokafka_encode_varint(value, theirs.append)
    assert bytes(ours) == bytes(theirs)
    assert aiokafka_decode_varint(bytearray(ours), 0) == (value, len(ours))
    assert 1 <= len(ours) <= 10


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
     (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"), (-(2**63), b"\xff" * 9 + b"\x01")],
)
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    buf = bytearray()
    write_varint(value, buf)
    assert bytes(buf) == encoded
    assert read_varint(encoded, 0) == (value, len(encoded))


def test_varint_errors() -> None:
    with pytest.raises(CorruptBatchError, match="longer than 10"):
        read_varint(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(CorruptBatchError, match="past the end"):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptBatchError, match="past the end"):
        read_varint(b"", 0)
