"""Per-partition coordination, without a broker: each coordinator (groups, transactions,
share groups) loads one partition of its internal topic when it starts owning it (a cluster
member that became its leader), answers COORDINATOR_LOAD_IN_PROGRESS meanwhile, and drops it
when it stops (NOT_COORDINATOR from then on). In-memory stores, fake clocks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from kio.schema.errors import ErrorCode

from streamkit.broker.group.group import JoinResult, SyncResult
from streamkit.broker.group.records import partition_for_group
from streamkit.broker.group.runtime import GroupRuntime
from streamkit.broker.ownership import OwnedPartitions
from streamkit.broker.share.coordinator import ShareCoordinator, ShareSettings
from streamkit.broker.share.partition import RecordState
from streamkit.broker.share.store import ShareStateStore
from streamkit.broker.txn.coordinator import MarkerJob
from streamkit.broker.txn.state import TxnState
from streamkit.log.batch import BatchHeader
from streamkit.log.records import Record, decode_batch

from .test_group_coordinator import PARTITIONS, Env, MemoryStore, _marker, commit_one, jreq
from .test_share import Clock as ShareClock
from .test_share import MemoryLog
from .test_txn_coordinator import Env as TxnEnv


class LiveStore(MemoryStore):
    """Batches read as the replay gets to them, as from a partition log: what is appended
    during a replay is read by it."""

    def batches(self, partition: int) -> Iterator[tuple[BatchHeader, list[Record]]]:
        stored = self.stored[partition]
        i = 0
        while i < len(stored):
            yield decode_batch(stored[i])
            i += 1


def _groups_in_two_partitions() -> tuple[str, str]:
    """Two group ids that hash to different partitions of __consumer_offsets."""
    a = "group-a"
    b = next(g for g in (f"group-{i}" for i in range(100))
             if partition_for_group(g, PARTITIONS) != partition_for_group(a, PARTITIONS))
    return a, b


def test_ownership_states_and_their_errors() -> None:
    owned = OwnedPartitions()
    assert owned.error(3) == ErrorCode.not_coordinator
    owned.start_loading(3)
    assert owned.error(3) == ErrorCode.coordinator_load_in_progress and owned.loading
    owned.activate(3)
    assert owned.error(3) == ErrorCode.none and not owned.loading and owned.active() == {3}
    assert owned.drop(3) and not owned.drop(3)
    assert owned.error(3) == ErrorCode.not_coordinator


def test_a_group_partition_is_dropped_and_loaded_alone() -> None:
    env = Env()
    a, b = _groups_in_two_partitions()
    pa, pb = env.co.partition_of(a), env.co.partition_of(b)
    for group in (a, b):
        assert env.co.commit(group, "", None, -1, commit_one(offset=7))[0] == ErrorCode.none
    env.co.commit_txn(a, "", None, -1, 5, 0, commit_one(partition=1, offset=9))  # pending in a's partition
    env.co.load()  # a single broker: everything owned
    assert env.co.owned.active() == set(range(PARTITIONS))

    assert env.co.unload_partition(pa) == {a}
    assert env.co.owned.error(pa) == ErrorCode.not_coordinator
    assert a not in env.co.offsets and a not in env.co.groups and not env.co.has_pending(a, ("t", 1))
    assert env.co.fetch(b, [("t", 0)])[("t", 0)].offset == 7  # type: ignore[union-attr]

    steps = env.co.load_partition(pa)
    assert env.co.owned.error(pa) == ErrorCode.coordinator_load_in_progress
    next(steps)  # replaying: nothing is visible until the partition is adopted whole
    assert a not in env.co.offsets
    for _ in steps:
        pass
    assert env.co.owned.error(pa) == ErrorCode.none
    assert env.co.fetch(a, [("t", 0)])[("t", 0)].offset == 7  # type: ignore[union-attr]
    assert env.co.has_pending(a, ("t", 1))
    assert env.co.owned.error(pb) == ErrorCode.none  # untouched


def test_a_marker_appended_while_loading_is_read() -> None:
    env = Env(LiveStore())
    group = "g"
    partition = env.co.partition_of(group)
    env.co.commit(group, "", None, -1, commit_one(offset=3))
    env.co.commit_txn(group, "", None, -1, 5, 0, commit_one(offset=8))
    fresh = Env(env.store).co
    steps = fresh.load_partition(partition)
    next(steps)
    # The transaction's marker reaches the partition while the coordinator is replaying it:
    # the marker path leaves it to the load (the partition is not active yet).
    assert not fresh.owned.is_active(partition)
    env.store.append(partition, _marker(5, commit=True))
    for _ in steps:
        pass
    assert fresh.fetch(group, [("t", 0)])[("t", 0)].offset == 8  # type: ignore[union-attr]
    assert not fresh.has_pending(group, ("t", 0))


def test_a_marker_settles_only_its_partitions_offsets() -> None:
    env = Env()
    a, b = _groups_in_two_partitions()
    for group in (a, b):
        env.co.commit_txn(group, "", None, -1, 5, 0, commit_one(offset=11))
    env.co.complete_txn(5, commit=True, partition=env.co.partition_of(a))
    assert env.co.fetch(a, [("t", 0)])[("t", 0)].offset == 11  # type: ignore[union-attr]
    assert env.co.fetch(b, [("t", 0)]) == {("t", 0): None} and env.co.has_pending(b, ("t", 0))
    env.co.complete_txn(5, commit=False, partition=env.co.partition_of(b))
    assert not env.co.has_pending(b, ("t", 0)) and env.co.fetch(b, [("t", 0)]) == {("t", 0): None}


def test_waiting_joins_of_a_dropped_partition_get_not_coordinator() -> None:
    async def scenario() -> tuple[JoinResult | SyncResult, JoinResult | SyncResult]:
        env = Env()
        env.co.load()
        a, b = _groups_in_two_partitions()
        runtime = GroupRuntime(env.co)
        waiting = {}
        for group in (a, b):
            member = env.admit(group)
            out = env.co.join(group, jreq(member))
            waiting[group] = asyncio.ensure_future(runtime.settle(group, "join", out))
        await asyncio.sleep(0)
        pa = env.co.partition_of(a)
        env.co.unload_partition(pa)
        runtime.fail_waiting(lambda g: env.co.partition_of(g) == pa, ErrorCode.not_coordinator)
        first = await asyncio.wait_for(waiting[a], 1)
        assert not waiting[b].done()  # b's partition is still coordinated here
        runtime.fail_waiting(lambda g: True, ErrorCode.not_coordinator)
        return first, await waiting[b]

    first, _ = asyncio.run(scenario())
    assert isinstance(first, JoinResult) and first.error == ErrorCode.not_coordinator


def test_a_transaction_partition_is_dropped_and_loaded_alone() -> None:
    env = TxnEnv()
    env.co.load()
    env.co.init_producer_id("t", 30_000)
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    partition = env.co.partition_for("t")
    env.co.unload_partition(partition)
    assert env.co.describe("t") is None and env.co.owned.error(partition) == ErrorCode.not_coordinator
    steps = env.co.load_partition(partition)
    assert env.co.owned.error(partition) == ErrorCode.coordinator_load_in_progress
    for _ in steps:
        pass
    md = env.co.describe("t")
    assert md is not None and md.state is TxnState.ONGOING and md.partitions == {("x", 0)}


def test_a_cluster_coordinator_sends_markers_and_completes_when_they_are_written() -> None:
    env = TxnEnv()
    sent: list[MarkerJob] = []
    env.co.send_markers = sent.append
    env.co.load()
    env.co.init_producer_id("t", 30_000)
    env.co.add_partitions("t", 100, 0, [("x", 0), ("y", 1)])
    assert env.co.end_txn("t", 100, 0, commit=True) == ErrorCode.none
    [job] = sent
    assert (job.commit, job.partitions, job.txn_partition) == (True, (("x", 0), ("y", 1)), env.co.partition_for("t"))
    assert env.markers.written == []  # the leaders write them
    assert env.co.describe("t").state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
    assert env.co.add_partitions("t", 100, 0, [("x", 0)]) == ErrorCode.concurrent_transactions
    assert env.co.markers_written(job)
    assert env.co.describe("t").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert not env.co.markers_written(job)  # done already: a late duplicate changes nothing


def test_a_coordinator_taking_over_mid_commit_sends_the_markers() -> None:
    env = TxnEnv()
    env.co.send_markers = lambda job: None  # the old coordinator dies before sending any
    env.co.load()
    env.co.init_producer_id("t", 30_000)
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    env.co.end_txn("t", 100, 0, commit=False)
    taking_over = TxnEnv(env.store, env.clock)
    sent: list[MarkerJob] = []
    taking_over.co.send_markers = sent.append
    for _ in taking_over.co.load_partition(env.co.partition_for("t")):
        pass
    assert [(j.transactional_id, j.commit, j.partitions) for j in sent] == [("t", False, (("x", 0),))]
    # A job of the old coordinator for another epoch completes nothing.
    stale = MarkerJob("t", 100, 7, False, (("x", 0),), sent[0].txn_partition)
    assert not taking_over.co.markers_written(stale)
    assert taking_over.co.markers_written(sent[0])
    assert taking_over.co.describe("t").state is TxnState.COMPLETE_ABORT  # type: ignore[union-attr]


def test_a_new_instance_waits_while_the_fenced_transaction_is_aborted() -> None:
    env = TxnEnv()
    sent: list[MarkerJob] = []
    env.co.send_markers = sent.append
    env.co.load()
    env.co.init_producer_id("t", 30_000)
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    assert env.co.init_producer_id("t", 30_000).error == ErrorCode.concurrent_transactions
    assert [(j.producer_epoch, j.commit) for j in sent] == [(1, False)]  # aborted at a bumped epoch
    env.co.markers_written(sent[0])
    r = env.co.init_producer_id("t", 30_000)
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.none, 100, 2)


def test_a_share_partition_is_dropped_and_loaded_alone() -> None:
    clock = ShareClock()
    log = MemoryLog()
    co = ShareCoordinator(ShareSettings(), ShareStateStore(log, 4, clock), clock)
    co.load()
    groups = [f"g{i}" for i in range(20)]
    a = groups[0]
    b = next(g for g in groups if co.partition_of(g) != co.partition_of(a))
    for group in (a, b):
        co.heartbeat(group, "m1", 0, ("t",), None, "c", "h", lambda _t: 1)
        co.session(group, "m1", 0)
        sp = co.partition((group, "t", 0), "id", lambda _reset: 0)
        sp.acquire("m1", 2, [(0, 4)])
        co.persist((group, "t", 0))
    pa = co.partition_of(a)
    co.unload_partition(pa)
    assert co.owned.error(pa) == ErrorCode.not_coordinator
    assert co.group(a) is None and (a, "t", 0) not in co.partitions and (a, "m1") not in co.sessions
    assert co.group(b) is not None and (b, "t", 0) in co.partitions
    steps = co.load_partition(pa)
    assert co.owned.error(pa) == ErrorCode.coordinator_load_in_progress
    for _ in steps:
        pass
    assert co.owned.error(pa) == ErrorCode.none
    # What member m1 held comes back available with its delivery count: locks do not move.
    assert co.partitions[(a, "t", 0)].state_of(0) == (RecordState.AVAILABLE, 1)
