"""The partition log under replication: the leader epoch cache kept by appends, recovery,
truncation and log-start moves; a follower's ``append_replica``; the high watermark of a
replicated partition and its checkpoint. The single-broker path is the rest of tests/log."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.log import (
    ControlType,
    CorruptBatchError,
    EpochEntry,
    PartitionLog,
    UnexpectedAppendOffsetError,
    build_batch,
    build_control_batch,
)
from streamkit.log.batch import parse_header
from streamkit.log.checkpoint import CHECKPOINT, Checkpoint
from streamkit.log.leader_epochs import LEADER_EPOCH_CHECKPOINT
from streamkit.log.manager import LogManager
from streamkit.log.producer_state import AppendOrigin, UnknownProducerIdError
from streamkit.log.records import Record

from .conftest import (
    T0,
    FakeClock,
    OpenLog,
    config,
    consume,
    cut_file,
    make_records,
    read_batches,
    segment_files,
)

E = EpochEntry
CLIENT, COORDINATOR = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR
SMALL_SEGMENTS = {"segment.bytes": 400, "index.interval.bytes": 100}


def batch(n: int = 2, *, tag: str = "", **kwargs: Any) -> bytes:
    return build_batch(make_records(n, tag=tag), **kwargs)


def fill_epochs(log: PartitionLog, plan: list[tuple[int, int]]) -> None:
    """Append as a leader: ``plan`` is (epoch, batches of 2 records)."""
    for epoch, count in plan:
        log.start_leader_epoch(epoch)
        for i in range(count):
            log.append(batch(tag=f"{epoch}.{i}"), leader_epoch=epoch)


def rebuilt_entries(directory: Path, tmp_path: Path) -> list[EpochEntry]:
    """The cache a copy of the partition rebuilds from its batches alone."""
    copy = tmp_path / "rebuilt-0"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(directory, copy)
    (copy / LEADER_EPOCH_CHECKPOINT).unlink()
    log = PartitionLog.open(copy, config(SMALL_SEGMENTS))
    try:
        return log.leader_epoch_cache.entries
    finally:
        log.close()


# -- the cache kept by the log ---------------------------------------------------------


def test_leader_appends_stamp_batches_and_fill_the_cache(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log()
    fill_epochs(log, [(0, 2)])
    log.start_leader_epoch(3)  # elected: the epoch starts at the log end offset
    assert log.leader_epoch_cache.entries == [E(0, 0), E(3, 4)]
    log.append(batch(tag="x"), leader_epoch=3)
    assert [parse_header(b).partition_leader_epoch for b in read_batches(log)] == [0, 0, 3]
    assert (part_dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n3 4\n"
    assert log.latest_epoch == 3
    assert log.end_offset_for_epoch(0) == (0, 4)
    assert log.end_offset_for_epoch(2) == (0, 4)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(7) == (3, 6)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    # a batch's own stamp counts when the append gives none; -1 (clients') is no epoch
    log.append(batch(partition_leader_epoch=5))
    log.append(batch())
    assert log.leader_epoch_cache.entries == [E(0, 0), E(3, 4), E(5, 6)]


def test_single_broker_appends_keep_the_high_watermark_at_the_end(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log()
    assert (part_dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n0\n"  # never rebuilt again
    for i in range(3):
        log.append(batch(tag=str(i)))
        assert log.high_watermark == log.log_end_offset == 2 * (i + 1)
    assert log.leader_epoch_cache.entries == []
    log.set_high_watermark(2)
    log.close()
    log = open_log()
    assert log.high_watermark == log.log_end_offset == 6  # no saved value is used


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_missing_or_unreadable_file_is_rebuilt_from_the_batches(
        open_log: OpenLog, part_dir: Path, damage: str) -> None:
    log = open_log(SMALL_SEGMENTS)
    fill_epochs(log, [(1, 3), (2, 4), (5, 3)])
    log.delete_records_before(9)  # inside epoch 2's second batch
    expected = [E(2, 9), E(5, 14)]
    assert log.leader_epoch_cache.entries == expected and len(log.segments) > 2
    log.close()
    path = part_dir / LEADER_EPOCH_CHECKPOINT
    if damage == "missing":
        path.unlink()
    else:
        path.write_text("0\n3\n1 0\n")
    log = open_log(SMALL_SEGMENTS)
    assert log.leader_epoch_cache.entries == expected
    assert path.read_text() == "0\n2\n2 9\n5 14\n"


def test_a_crash_that_cuts_an_epochs_first_batch_drops_the_epoch(
        open_log: OpenLog, part_dir: Path, tmp_path: Path) -> None:
    log = open_log(SMALL_SEGMENTS)
    fill_epochs(log, [(1, 3), (4, 1)])
    assert log.leader_epoch_cache.entries == [E(1, 0), E(4, 6)]
    active = log.segments[-1]
    log.abandon()
    cut_file(active.path, active.size - 1)  # the torn write of epoch 4's only batch
    log = open_log(SMALL_SEGMENTS)
    assert log.log_end_offset == 6
    assert log.leader_epoch_cache.entries == [E(1, 0)]
    assert (part_dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n1 0\n"
    assert rebuilt_entries(part_dir, tmp_path) == [E(1, 0)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=6),
       cut=st.floats(0, 1))
def test_after_any_crash_the_cache_equals_a_rebuild(tmp_path: Path, plan: list[tuple[int, int]],
                                                    cut: float) -> None:
    """Leaders of rising epochs append; the process dies and the disk keeps any prefix of
    the newest segment: the cache opened from the file is the one the batches give."""
    directory = tmp_path / "p-0"
    shutil.rmtree(directory, ignore_errors=True)
    log = PartitionLog.open(directory, config(SMALL_SEGMENTS), clock=FakeClock())
    epoch = 0
    for step, count in plan:
        epoch += step
        fill_epochs(log, [(epoch, count)])
    active = log.segments[-1]
    log.abandon()
    cut_file(active.path, int(active.size * cut))
    log = PartitionLog.open(directory, config(SMALL_SEGMENTS), clock=FakeClock())
    entries = log.leader_epoch_cache.entries
    log.close()
    assert entries == rebuilt_entries(directory, tmp_path)


def test_truncate_to_cuts_the_cache(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log(SMALL_SEGMENTS)
    fill_epochs(log, [(1, 2), (2, 2), (3, 2)])  # epochs start at 0, 4, 8
    log.truncate_to(8)
    assert log.leader_epoch_cache.entries == [E(1, 0), E(2, 4)]
    log.truncate_to(5)  # inside the batch at 4: the whole batch goes, and epoch 2 with it
    assert log.log_end_offset == 4
    assert log.leader_epoch_cache.entries == [E(1, 0)]
    assert log.end_offset_for_epoch(2) == (1, 4)
    log.close()
    assert open_log(SMALL_SEGMENTS).leader_epoch_cache.entries == [E(1, 0)]


def test_truncate_to_the_end_drops_an_epoch_never_written(open_log: OpenLog) -> None:
    """Elected, deposed before writing anything: another leader may own that epoch's
    offsets, so truncation (even to or past the end) forgets it (Kafka's truncateTo)."""
    log = open_log()
    fill_epochs(log, [(1, 2)])
    log.start_leader_epoch(4)
    assert log.leader_epoch_cache.entries == [E(1, 0), E(4, 4)]
    log.truncate_to(10)
    assert log.leader_epoch_cache.entries == [E(1, 0)]
    assert log.log_end_offset == 4


def test_moving_the_log_start_raises_the_first_entry(open_log: OpenLog) -> None:
    settings_ = {"segment.bytes": 250, "retention.bytes": 500}  # two batches a segment
    log = open_log(settings_)
    fill_epochs(log, [(1, 3), (2, 3), (3, 4)])  # epochs start at 0, 6, 12
    log.delete_records_before(3)
    assert log.leader_epoch_cache.entries == [E(1, 3), E(2, 6), E(3, 12)]
    assert log.apply_retention() > 0
    start = log.log_start_offset
    assert start == 8  # the base of a segment inside epoch 2
    assert log.leader_epoch_cache.entries == [E(2, start), E(3, 12)]
    log.close()
    assert open_log(settings_).leader_epoch_cache.entries == [E(2, start), E(3, 12)]


def test_deleting_a_partition_deletes_its_epochs(tmp_path: Path) -> None:
    manager = LogManager(tmp_path / "data")
    plog = manager.create("t", 0, config())
    plog.start_leader_epoch(2)
    assert (plog.directory / LEADER_EPOCH_CHECKPOINT).exists()
    manager.delete("t", 0)
    assert not list((tmp_path / "data").rglob(LEADER_EPOCH_CHECKPOINT))
    fresh = manager.create("t", 0, config())
    assert fresh.leader_epoch_cache.entries == []
    manager.close()


# -- append_replica ----------------------------------------------------------------------


def leader_chunk(*specs: tuple[int, int, int]) -> bytes:
    """Batches as a leader's log holds them: (base offset, records, leader epoch)."""
    return b"".join(batch(n, tag=str(base), base_offset=base, partition_leader_epoch=epoch)
                    for base, n, epoch in specs)


def test_append_replica_stores_the_leaders_batches_at_their_offsets(open_log: OpenLog) -> None:
    log = open_log(replicated=True)
    chunk = leader_chunk((0, 2, 0), (5, 2, 0), (10, 3, 2))  # compaction left gaps
    assert log.append_replica(chunk) == (0, 12, 3)
    assert log.log_end_offset == 13
    assert b"".join(consume(log)) == chunk  # byte for byte, offsets included
    assert log.read(3, 1 << 20) == chunk[len(leader_chunk((0, 2, 0))):]  # 3 is in a gap
    assert log.leader_epoch_cache.entries == [E(0, 0), E(2, 10)]
    assert log.high_watermark == 0  # only set_high_watermark moves it
    assert log.append_replica(leader_chunk((20, 1, 3))) == (20, 20, 1)
    assert log.leader_epoch_cache.entries == [E(0, 0), E(2, 10), E(3, 20)]
    assert log.append_replica(b"") == (-1, -1, 0)


def test_append_replica_never_moves_the_high_watermark(open_log: OpenLog) -> None:
    log = open_log()  # even on a partition not marked replicated
    log.append_replica(leader_chunk((0, 2, 0)))
    assert log.high_watermark == 0 and log.log_end_offset == 2


def test_a_gap_at_a_roll_starts_the_segment_at_the_batch(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log(SMALL_SEGMENTS, replicated=True)
    specs = [(i * 10, 2, 1) for i in range(8)]  # two records every ten offsets
    chunk = leader_chunk(*specs)
    log.append_replica(chunk)
    assert len(log.segments) > 2
    assert all(seg.base_offset % 10 == 0 for seg in log.segments)
    assert b"".join(consume(log)) == chunk
    log.close()
    log = open_log(SMALL_SEGMENTS, replicated=True)
    assert b"".join(consume(log)) == chunk and log.log_end_offset == 72
    assert [int(p.name[:20]) for p in segment_files(part_dir)] == [s.base_offset for s in log.segments]


@pytest.mark.parametrize(("chunk", "error", "message"), [
    (leader_chunk((2, 2, 0)), UnexpectedAppendOffsetError, "offset 2 is below the next offset 4"),
    (leader_chunk((4, 2, 0), (5, 1, 0)), UnexpectedAppendOffsetError, "offset 5 is below the next offset 6"),
    (leader_chunk((4, 2, 0)) + b"\x00" * 20, CorruptBatchError, "claims 12 bytes, less than a header"),
    (leader_chunk((4, 2, 0)) + b"\x00" * 7, CorruptBatchError, "7 bytes after the last whole batch"),
    (leader_chunk((4, 2, 0))[:-1], CorruptBatchError, "bytes after the last whole batch at position 0"),
])
def test_append_replica_refuses_offsets_out_of_order_and_torn_chunks(
        open_log: OpenLog, chunk: bytes, error: type[Exception], message: str) -> None:
    log = open_log(replicated=True)
    log.append_replica(leader_chunk((0, 4, 0)))
    with pytest.raises(error, match=message):
        log.append_replica(chunk)
    assert log.log_end_offset == 4 and len(read_batches(log)) == 1  # nothing of it appended


def test_append_replica_refuses_a_corrupt_batch_before_writing_any(open_log: OpenLog) -> None:
    log = open_log(replicated=True)
    chunk = bytearray(leader_chunk((0, 2, 0), (2, 2, 0)))
    second = len(leader_chunk((0, 2, 0)))
    chunk[second + 70] ^= 0xFF  # a record byte of the second batch
    with pytest.raises(CorruptBatchError, match="CRC-32C"):
        log.append_replica(bytes(chunk))
    assert log.log_end_offset == 0


def test_append_replica_keeps_what_the_leader_decided(open_log: OpenLog) -> None:
    """No recompression, timestamp checks, LogAppendTime stamping or size limit: the leader
    applied its topic configs already, and the follower must hold the same bytes."""
    log = open_log({"compression.type": "gzip", "message.timestamp.type": "LogAppendTime",
                    "message.timestamp.after.max.ms": 0, "max.message.bytes": 100}, replicated=True)
    future = build_batch([Record(b"k", b"v" * 200, T0 + 10**9)], partition_leader_epoch=1)
    compacted = build_batch([Record(b"k", b"w", T0, offset_delta=3)], base_offset=1,
                            last_offset_delta=3, partition_leader_epoch=1)  # 1 record of 4 offsets
    chunk = future + compacted
    assert log.append_replica(chunk) == (0, 4, 2)
    assert b"".join(read_batches(log)) == chunk


# -- the same log on a leader and on its follower -----------------------------------------


class Txn:
    def __init__(self, pid: int) -> None:
        self.pid, self.seq = pid, 0

    def batch(self, n: int, transactional: bool = True) -> bytes:
        out = build_batch(make_records(n, tag=f"p{self.pid}s{self.seq}"), producer_id=self.pid,
                          producer_epoch=0, base_sequence=self.seq, transactional=transactional)
        self.seq += n
        return out

    def marker(self, control: ControlType) -> bytes:
        return build_control_batch(control, producer_id=self.pid, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=T0)


def _lead(log: PartitionLog) -> dict[str, bytes]:
    """A leader's history across two epochs: plain, idempotent and transactional batches,
    an aborted and a committed transaction, one still open at the end."""
    idem, t20, t21, t22 = Txn(10), Txn(20), Txn(21), Txn(22)
    log.start_leader_epoch(1)
    log.append(batch(tag="plain"), leader_epoch=1)
    retry = idem.batch(2, transactional=False)
    log.append(retry, leader_epoch=1, origin=CLIENT)
    log.append(t20.batch(2), leader_epoch=1, origin=CLIENT)
    log.append(t21.batch(1), leader_epoch=1, origin=CLIENT)
    log.append(t20.batch(3), leader_epoch=1, origin=CLIENT)
    log.start_leader_epoch(2)
    log.append(t20.marker(ControlType.ABORT), leader_epoch=2, origin=COORDINATOR)
    log.append(idem.batch(1, transactional=False), leader_epoch=2, origin=CLIENT)
    log.append(t21.marker(ControlType.COMMIT), leader_epoch=2, origin=COORDINATOR)
    log.append(t22.batch(2), leader_epoch=2, origin=CLIENT)
    log.append(batch(tag="after"), leader_epoch=2)
    return {"retry": retry, "t22-next": t22.batch(1)}


def _follow(leader: PartitionLog, follower: PartitionLog, max_bytes: int) -> None:
    """What a replica fetcher does: fetch from the follower's end, append what comes."""
    while follower.log_end_offset < leader.log_end_offset:
        data, _next = leader.read_chunk(follower.log_end_offset, max_bytes)
        follower.append_replica(data)
    follower.set_high_watermark(leader.high_watermark)


def _observed(log: PartitionLog) -> dict[str, Any]:
    return {
        "producers": log.producers.producers,
        "ongoing": log.producers.ongoing,
        "hw": log.high_watermark,
        "lso": log.last_stable_offset,
        "aborted": log.aborted_transactions(0, log.log_end_offset),
        "aborted-from-7": log.aborted_transactions(7, log.log_end_offset),
        "bytes": read_batches(log),
        "epochs": log.leader_epoch_cache.entries,
    }


@pytest.mark.parametrize("max_bytes", [1, 300, 1 << 20])
def test_a_follower_holds_the_leaders_producer_state_and_transactions(
        tmp_path: Path, clock: FakeClock, max_bytes: int) -> None:
    leader = PartitionLog.open(tmp_path / "leader-0", config(SMALL_SEGMENTS), clock, replicated=True)
    follower = PartitionLog.open(tmp_path / "follower-0", config(SMALL_SEGMENTS), clock, replicated=True)
    retries = _lead(leader)
    leader.set_high_watermark(leader.log_end_offset)
    _follow(leader, follower, max_bytes)
    expected = _observed(leader)
    assert expected["aborted"] and expected["ongoing"]  # the history has both
    assert expected["lso"] < expected["hw"] == leader.log_end_offset  # t22 holds it back
    assert _observed(follower) == expected
    for hw in (3, 9, 14):
        leader.set_high_watermark(hw)
        follower.set_high_watermark(hw)
        assert follower.last_stable_offset == leader.last_stable_offset
    # the follower takes over: a producer's retry is answered from its state
    end = follower.log_end_offset
    original = leader.append(retries["retry"], origin=CLIENT)
    assert follower.append(retries["retry"], origin=CLIENT) == original
    assert follower.log_end_offset == end
    follower.append(retries["t22-next"], leader_epoch=3, origin=CLIENT)  # its sequence goes on
    with pytest.raises(UnknownProducerIdError):
        follower.append(build_batch(make_records(1), producer_id=99, producer_epoch=0, base_sequence=5),
                        origin=CLIENT)
    leader.close()
    follower.close()


def test_a_follower_restarted_after_a_crash_keeps_the_same_state(tmp_path: Path, clock: FakeClock) -> None:
    leader = PartitionLog.open(tmp_path / "leader-0", config(SMALL_SEGMENTS), clock, replicated=True)
    follower = PartitionLog.open(tmp_path / "follower-0", config(SMALL_SEGMENTS), clock, replicated=True)
    _lead(leader)
    leader.set_high_watermark(leader.log_end_offset)
    _follow(leader, follower, 300)
    follower.checkpoint_high_watermark()
    expected = _observed(leader)
    follower.abandon()
    follower = PartitionLog.open(tmp_path / "follower-0", config(SMALL_SEGMENTS), clock, replicated=True)
    assert _observed(follower) == expected
    leader.close()
    follower.close()


# -- the high watermark of a replicated partition ----------------------------------------


def test_replicated_appends_leave_the_high_watermark_to_the_replication(open_log: OpenLog) -> None:
    log = open_log(replicated=True)
    log.append(batch(), leader_epoch=0)
    log.append(batch(), leader_epoch=0)
    assert log.high_watermark == 0 and log.log_end_offset == 4
    log.set_high_watermark(2)
    assert log.high_watermark == log.last_stable_offset == 2
    assert log.read(0, 1 << 20, max_offset=log.high_watermark) == read_batches(log)[0]


def test_a_replicated_partition_reopens_at_its_saved_high_watermark(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log(replicated=True)
    for _ in range(3):
        log.append(batch(), leader_epoch=0)
    log.set_high_watermark(4)
    log.close()
    assert Checkpoint.read(part_dir) == Checkpoint(6, 0, 0, -1, 4)
    log = open_log(replicated=True)
    assert (log.high_watermark, log.log_end_offset) == (4, 6)
    log.close()
    log = open_log()  # the same directory on a single broker: the high watermark is the end
    assert log.high_watermark == 6


def test_the_high_watermark_checkpoint_survives_a_crash(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log(replicated=True)
    for _ in range(4):
        log.append(batch(), leader_epoch=0)
    log.set_high_watermark(6)
    assert log.checkpoint_high_watermark()
    assert not log.checkpoint_high_watermark()  # unchanged: nothing written
    log.set_high_watermark(8)  # not checkpointed yet
    active = log.segments[-1]
    log.abandon()
    log = open_log(replicated=True)
    assert log.high_watermark == 6  # saved values lag, never lead
    log.set_high_watermark(8)
    log.checkpoint_high_watermark()
    log.abandon()
    cut_file(active.path, active.size - 1)  # the disk lost the last batch
    log = open_log(replicated=True)
    assert log.log_end_offset == 6 and log.high_watermark == 6  # capped at the end


def test_a_checkpoint_without_a_high_watermark_opens_at_the_log_start(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log(replicated=True)
    log.append(batch(), leader_epoch=0)
    log.close()
    lines = (part_dir / CHECKPOINT).read_text().splitlines()
    (part_dir / CHECKPOINT).write_text("\n".join(x for x in lines if not x.startswith("high-watermark")) + "\n")
    log = open_log(replicated=True)
    assert log.high_watermark == log.log_start_offset == 0


def test_the_manager_opens_replicated_partitions_and_saves_their_high_watermarks(tmp_path: Path) -> None:
    manager = LogManager(tmp_path / "data", clock=FakeClock(), replicated=True)
    plog = manager.create("t", 0, config())
    assert plog.replicated
    plog.append(batch(), leader_epoch=0)
    plog.set_high_watermark(2)
    assert manager.checkpoint_high_watermarks() == 1
    assert manager.checkpoint_high_watermarks() == 0
    saved = Checkpoint.read(plog.directory)
    assert saved is not None and saved.high_watermark == 2
    manager.close()
    manager = LogManager(tmp_path / "data", clock=FakeClock(), replicated=True)
    assert manager.open_all(lambda _topic: config()) == [("t", 0)]
    reopened = manager.get("t", 0)
    assert reopened is not None and reopened.replicated and reopened.high_watermark == 2
    manager.close()


# -- starting over -----------------------------------------------------------------------


def test_truncate_fully_and_start_at(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log(SMALL_SEGMENTS, replicated=True)
    fill_epochs(log, [(1, 4)])
    log.append(Txn(7).batch(1), leader_epoch=1, origin=CLIENT)
    log.set_high_watermark(6)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (100, 100, 100)
    assert log.leader_epoch_cache.entries == [] and log.producers.producers == {}
    assert log.last_stable_offset == 100
    assert [p.name for p in part_dir.glob("*.snapshot")] == [f"{100:020d}.snapshot"]  # the old ones went
    assert log.append_replica(leader_chunk((100, 2, 3))) == (100, 101, 1)
    log.close()
    log = open_log(SMALL_SEGMENTS, replicated=True)
    assert (log.log_start_offset, log.log_end_offset) == (100, 102)
    assert log.leader_epoch_cache.entries == [E(3, 100)] and log.producers.producers == {}
    with pytest.raises(ValueError, match="negative offset"):
        log.truncate_fully_and_start_at(-1)
