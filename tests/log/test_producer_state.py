"""Producer state: the idempotence state machine, and its rebuild after restarts from
snapshots plus batch headers (real partition directories, no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkit.log import ControlType, PartitionLog, build_control_batch
from streamkit.log.errors import InvalidBatchError
from streamkit.log.producer_state import (
    AppendOrigin,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerEntry,
    ProducerStateManager,
    UnknownProducerIdError,
    decode_snapshot,
    encode_snapshot,
    in_sequence,
    last_sequence,
)
from tests.log.conftest import T0, FakeClock, OpenLog, make_batch

CLIENT = AppendOrigin.CLIENT
MAX = 2**31 - 1
PID = 1000


def idem(n: int, seq: int, epoch: int = 0, pid: int = PID, **kwargs: object) -> bytes:
    return make_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kwargs)


def snapshots(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.snapshot"))


# -- the state machine --------------------------------------------------------------------


def test_sequence_arithmetic_wraps_at_int32_max() -> None:
    assert last_sequence(0, 4) == 4
    assert last_sequence(MAX - 1, 1) == MAX
    assert last_sequence(MAX - 1, 3) == 1  # MAX-1, MAX, 0, 1
    assert in_sequence(4, 5) and not in_sequence(4, 6) and not in_sequence(4, 4)
    assert in_sequence(MAX, 0) and not in_sequence(MAX, 1)
    assert in_sequence(-1, 0)  # nothing yet: the first batch starts at 0


def test_in_order_batches_and_a_retried_duplicate(open_log: OpenLog) -> None:
    log = open_log()
    first = idem(3, 0)
    assert log.append(first, origin=CLIENT)[:2] == (0, 2)
    assert log.append(idem(2, 3), origin=CLIENT)[:2] == (3, 4)
    log.append(make_batch(1), origin=CLIENT)  # no producer id: not tracked
    # the retry of the first batch: its original offsets, nothing appended
    assert log.append(first, origin=CLIENT)[:2] == (0, 2)
    assert log.append(idem(2, 3), origin=CLIENT)[:2] == (3, 4)
    assert log.log_end_offset == 6
    assert log.append(idem(1, 5), origin=CLIENT)[:2] == (6, 6)


def test_gaps_and_rewinds_are_out_of_order(open_log: OpenLog) -> None:
    log = open_log()
    log.append(idem(3, 0), origin=CLIENT)
    for seq in (4, 7, 1, 2):  # a gap, a bigger gap, overlapping but not a cached batch
        with pytest.raises(OutOfOrderSequenceError):
            log.append(idem(1, seq), origin=CLIENT)
    assert log.log_end_offset == 3


def test_only_the_last_five_batches_are_remembered(open_log: OpenLog) -> None:
    log = open_log()
    batches = [idem(1, seq) for seq in range(7)]
    for b in batches:
        log.append(b, origin=CLIENT)
    assert log.append(batches[2], origin=CLIENT)[:2] == (2, 2)
    with pytest.raises(OutOfOrderSequenceError):  # too old to be recognised
        log.append(batches[1], origin=CLIENT)


def test_epochs(open_log: OpenLog) -> None:
    log = open_log()
    log.append(idem(2, 0, epoch=3), origin=CLIENT)
    with pytest.raises(InvalidProducerEpochError):
        log.append(idem(1, 2, epoch=2), origin=CLIENT)
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch starts at 0
        log.append(idem(1, 2, epoch=4), origin=CLIENT)
    assert log.append(idem(1, 0, epoch=4), origin=CLIENT).base_offset == 2
    with pytest.raises(InvalidProducerEpochError):  # the old epoch is fenced now
        log.append(idem(1, 2, epoch=3), origin=CLIENT)
    assert log.append(idem(1, 1, epoch=4), origin=CLIENT).base_offset == 3
    assert log.log_end_offset == 4


def test_unknown_producer_must_start_at_zero(open_log: OpenLog) -> None:
    log = open_log()
    with pytest.raises(UnknownProducerIdError):
        log.append(idem(1, 5), origin=CLIENT)
    assert log.append(idem(1, 0), origin=CLIENT).base_offset == 0
    with pytest.raises(InvalidBatchError):  # a producer id without a sequence number
        log.append(idem(1, -1, pid=7), origin=CLIENT)
    # the broker's own writers are not held to sequences (Kafka's COORDINATOR origin)
    assert log.append(idem(1, 5, pid=8)).base_offset == 1


def test_sequences_wrap_around(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update(PID, 0, MAX - 2, 10, 12, T0, 0, T0)  # sequences MAX-2..MAX
    assert state.check(PID, 0, 0, 1, 0, CLIENT) is None  # continues at 0
    state.update(PID, 0, 0, 13, 14, T0, 0, T0)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(PID, 0, 0, 0, 0, CLIENT)
    state.update(PID, 0, 2, 15, 18, T0, 0, T0)  # 2..5
    # a batch that itself wraps: MAX-1, MAX, 0, 1
    state2 = ProducerStateManager(tmp_path)
    state2.update(PID, 0, MAX - 5, 0, 3, T0, 0, T0)  # MAX-5..MAX-2
    assert state2.check(PID, 0, MAX - 1, 3, 0, CLIENT) is None
    state2.update(PID, 0, MAX - 1, 4, 7, T0, 0, T0)
    assert state2.producers[PID].last_seq == 1
    duplicate = state2.check(PID, 0, MAX - 1, 3, 0, CLIENT)
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (4, 7)


def test_transaction_hooks(open_log: OpenLog) -> None:
    log = open_log()
    log.append(idem(2, 0, transactional=True), origin=CLIENT)
    entry = log.producers.producers[PID]
    assert entry.current_txn_first_offset == 0
    with pytest.raises(InvalidTxnStateError):
        log.append(idem(1, 2), origin=CLIENT)
    with pytest.raises(InvalidBatchError):  # markers come from the coordinator, never clients
        log.append(build_control_batch(ControlType.COMMIT, producer_id=PID, producer_epoch=0,
                                       coordinator_epoch=0, timestamp=T0), origin=CLIENT)
    log.append(build_control_batch(ControlType.COMMIT, producer_id=PID, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=T0))
    assert entry.current_txn_first_offset is None
    assert log.append(idem(1, 2), origin=CLIENT).base_offset == 3


def test_expiration(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log()
    log.append(idem(1, 0), origin=CLIENT)
    log.append(idem(1, 0, pid=2), origin=CLIENT)
    clock.advance(5000)
    log.append(idem(1, 1, pid=2), origin=CLIENT)
    clock.advance(6000)
    assert log.expire_producers(10_000) == 1  # PID unseen for 11 s, pid 2 for 6 s
    assert set(log.producers.producers) == {2}
    with pytest.raises(UnknownProducerIdError):
        log.append(idem(1, 1), origin=CLIENT)


def test_snapshot_round_trip(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for i in range(7):
        state.update(PID, 2, i * 2, 100 + i * 2, 101 + i * 2, T0 + i, 0, T0 + 50)
    state.update(5, 0, 0, 200, 200, T0, 0x10, T0)
    entries = state.producers
    data = encode_snapshot(201, entries.values())
    decoded = decode_snapshot(data, 201)
    assert decoded == entries
    assert decoded[5].current_txn_first_offset == 200 and len(decoded[PID].batches) == 5
    assert decode_snapshot(encode_snapshot(0, []), 0) == {}
    assert isinstance(decoded[PID], ProducerEntry)


# -- restarts -----------------------------------------------------------------------------


def _state(log: PartitionLog) -> dict[int, tuple[int, int, list[tuple[int, int, int, int]]]]:
    return {pid: (e.epoch, e.last_seq, [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches])
            for pid, e in log.producers.producers.items()}


def _fill(log: PartitionLog, producers: int = 3, batches: int = 4) -> list[bytes]:
    sent = []
    for i in range(batches):
        for pid in range(producers):
            b = idem(2, 2 * i, pid=pid)
            log.append(b, origin=CLIENT)
            sent.append(b)
    return sent


def test_clean_restart_keeps_the_state(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log()
    sent = _fill(log)
    before = _state(log)
    log.close()
    assert snapshots(part_dir)[-1].name == f"{log.log_end_offset:020d}.snapshot"
    assert len(snapshots(part_dir)) <= 2  # older ones are pruned
    log = open_log()
    assert _state(log) == before
    assert log.append(sent[-1], origin=CLIENT)[:2] == (22, 23)  # still recognised
    assert log.log_end_offset == 24


def test_crash_restart_replays_only_the_tail_past_the_snapshot(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log({"segment.bytes": 600})  # several rolls, each one a snapshot
    sent = _fill(log, producers=2, batches=10)
    before, end = _state(log), log.log_end_offset
    newest = max(int(p.name[:20]) for p in snapshots(part_dir))
    assert 0 < newest < end
    log.abandon()  # SIGKILL: no snapshot at the end
    log = open_log({"segment.bytes": 600})
    assert _state(log) == before
    # the same rebuild by hand, from that snapshot: only the batches past it are read
    for path in snapshots(part_dir):
        if int(path.name[:20]) > newest:
            path.unlink()
    replayed = ProducerStateManager(part_dir).load(log.segments, end, T0)
    assert replayed == (end - newest) // 2  # batches of two records
    for b in sent[-2:]:
        assert log.append(b, origin=CLIENT).last_offset < end


@pytest.mark.parametrize("damage", ["missing", "corrupt", "truncated", "wrong-name"])
def test_bad_snapshots_fall_back_to_the_headers(open_log: OpenLog, part_dir: Path, damage: str) -> None:
    log = open_log({"segment.bytes": 600})
    sent = _fill(log, producers=2, batches=10)
    before = _state(log)
    log.close()
    for path in snapshots(part_dir):
        if damage == "missing":
            path.unlink()
        elif damage == "corrupt":
            data = bytearray(path.read_bytes())
            data[-3] ^= 0x40
            path.write_bytes(bytes(data))
        elif damage == "truncated":
            path.write_bytes(path.read_bytes()[:-5])
        else:
            path.rename(path.with_name(f"{int(path.name[:20]) - 1:020d}.snapshot"))
    log = open_log({"segment.bytes": 600})
    assert _state(log) == before
    assert log.append(sent[-1], origin=CLIENT).last_offset == log.log_end_offset - 1
    assert log.log_end_offset == 40


def test_retention_keeps_live_producers(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log({"segment.bytes": 400})
    first = idem(2, 0)
    log.append(first, origin=CLIENT)
    log.append(idem(2, 2), origin=CLIENT)
    for i in range(10):
        log.append(idem(2, 2 * i, pid=77), origin=CLIENT)
    log.roll()
    log.delete_records_before(log.log_end_offset)  # every segment with PID's batches goes
    assert log.segments[0].base_offset == log.log_end_offset
    log.close()
    log = open_log({"segment.bytes": 400})
    assert log.append(idem(2, 4), origin=CLIENT).base_offset == 24  # PID continues
    assert log.append(first, origin=CLIENT)[:2] == (0, 1)  # and its old batch is known


def test_truncation_forgets_the_truncated_batches(open_log: OpenLog) -> None:
    log = open_log()
    log.append(idem(2, 0), origin=CLIENT)
    log.flush()
    log.close()
    log = open_log()
    log.append(idem(2, 2), origin=CLIENT)
    log.append(idem(2, 4), origin=CLIENT)
    log.truncate_to(2)
    assert log.producers.producers[PID].last_seq == 1
    assert log.append(idem(2, 2), origin=CLIENT).base_offset == 2  # not a duplicate any more
