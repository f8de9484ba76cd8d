"""A follower's truncation before it fetches from a new leader (KIP-101/279), on real
partition logs: it asks where its latest leader epoch ends on the leader
(OffsetForLeaderEpoch, answered as the broker's handler answers it:
``PartitionLog.end_offset_for_epoch``), cuts its divergent tail, and then holds exactly
the leader's log, batches and epochs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from streamkit.broker.cluster.fetcher import _Followed, _LeaderFetcher
from streamkit.broker.cluster.replica import Replica
from streamkit.log import EpochEntry, PartitionLog
from tests.log.conftest import T0, FakeClock, config, read_batches
from tests.log.test_replication import batch

E = EpochEntry


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[PartitionLog, PartitionLog]]:
    """Two replicas of one partition, on two "brokers" (closed at the end)."""
    logs = tuple(PartitionLog.open(tmp_path / b / "t-0", config(), clock=FakeClock(T0), replicated=True)
                 for b in ("b0", "b1"))
    yield logs  # type: ignore[misc]
    for log in logs:
        log.close()


def _lead(log: PartitionLog, epoch: int, batches: int, tag: str) -> None:
    log.start_leader_epoch(epoch)
    for i in range(batches):
        log.append(batch(tag=f"{tag}{i}"), leader_epoch=epoch)


def _follow(follower: PartitionLog, leader: PartitionLog, leader_epoch: int) -> None:
    """What the fetcher does for a partition it starts to follow: truncate, then fetch."""
    epoch, end = leader.end_offset_for_epoch(follower.latest_epoch)  # the leader's answer
    replica = Replica("t", 0, follower, (0, 1))
    _LeaderFetcher._truncate_one(SimpleNamespace(leader=0), _Followed(replica, leader_epoch),  # type: ignore[arg-type]
                                 epoch, end)
    for data in read_batches(leader, follower.log_end_offset):
        follower.append_replica(data)


def test_an_old_leaders_unreplicated_tail_is_cut_and_replaced_by_the_new_leaders(
        pair: tuple[PartitionLog, PartitionLog]) -> None:
    old, new = pair
    _lead(old, 0, 2, "a")  # offsets 0-3, replicated to the other broker
    for data in read_batches(old):
        new.append_replica(data)
    _lead(old, 1, 2, "lost")  # offsets 4-7: the old leader alone had them
    _lead(new, 2, 3, "b")  # the new leader's term starts at offset 4
    assert old.log_end_offset == 8 and new.log_end_offset == 10
    _follow(old, new, 2)
    assert read_batches(old) == read_batches(new)
    assert old.leader_epoch_cache.entries == new.leader_epoch_cache.entries == [E(0, 0), E(2, 4)]


def test_a_follower_that_only_lags_keeps_its_log(pair: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = pair
    _lead(leader, 0, 2, "a")
    for data in read_batches(leader):
        follower.append_replica(data)
    _lead(leader, 0, 2, "more")
    _lead(leader, 1, 1, "c")
    kept = read_batches(follower)
    _follow(follower, leader, 1)
    assert read_batches(follower)[:len(kept)] == kept
    assert read_batches(follower) == read_batches(leader)
    assert follower.leader_epoch_cache.entries == [E(0, 0), E(1, 8)]


def test_a_follower_whose_epochs_the_leader_does_not_know_keeps_only_its_high_watermark(
        pair: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = pair
    _lead(follower, 3, 2, "x")
    follower.set_high_watermark(2)
    _lead(leader, 5, 1, "y")
    # The leader's largest epoch at or below 3: none, so (-1, -1).
    assert leader.end_offset_for_epoch(3) == (-1, -1)
    replica = Replica("t", 0, follower, (0, 1))
    _LeaderFetcher._truncate_one(SimpleNamespace(leader=0), _Followed(replica, 5), -1, -1)  # type: ignore[arg-type]
    assert follower.log_end_offset == 2
