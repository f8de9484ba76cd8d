"""Share groups (KIP-932) as pure logic: share-partition states, membership, sessions, store."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from streamkit.broker.errors import ErrorCode
from streamkit.broker.share import (
    AckType,
    InvalidAcknowledgement,
    RecordState,
    ShareCoordinator,
    ShareGroup,
    SharePartition,
    ShareSettings,
    ShareStateStore,
    assign_uniform,
)
from streamkit.log.records import Record, decode_batch


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


class MemoryLog:
    """An internal topic's partitions as lists of batches (the store's narrow contract)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = {}

    def append(self, partition: int, batch: bytes) -> None:
        self.batches.setdefault(partition, []).append(batch)

    def records(self, partition: int) -> Iterable[Record]:
        for batch in self.batches.get(partition, []):
            yield from decode_batch(batch)[1]


def _sp(clock: Clock, start: int = 0, limit: int = 3) -> SharePartition:
    return SharePartition(start, clock, lock_ms=30_000, delivery_limit=limit)


def _singles(first: int, last: int) -> list[tuple[int, int]]:
    """A log of one-record batches (acquisition takes whole batches)."""
    return [(o, o) for o in range(first, last + 1)]


def _offsets(ranges: list) -> list[int]:
    return [o for r in ranges for o in range(r.first_offset, r.last_offset + 1)]


# -- share-partition ---------------------------------------------------------------------


def test_acquire_spreads_records_and_accept_moves_the_start() -> None:
    clock = Clock()
    sp = _sp(clock)
    a = sp.acquire("a", 3, _singles(0, 9))
    b = sp.acquire("b", 3, _singles(0, 9))
    assert _offsets(a) == [0, 1, 2]
    assert _offsets(b) == [3, 4, 5]
    assert sp.state_of(4) == (RecordState.ACQUIRED, 1)
    sp.acknowledge("b", 3, 5, (AckType.ACCEPT,))
    assert sp.start_offset == 0  # 0..2 still in flight
    sp.acknowledge("a", 0, 2, (AckType.ACCEPT,))
    assert sp.start_offset == 6 and sp.end_offset == 6


def test_only_the_holder_may_acknowledge_and_a_bad_batch_changes_nothing() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 5, [(0, 4)])
    with pytest.raises(InvalidAcknowledgement):
        sp.acknowledge("b", 0, 0, (AckType.ACCEPT,))
    with pytest.raises(InvalidAcknowledgement):
        sp.acknowledge("a", 3, 6, (AckType.ACCEPT,))  # 5 and 6 were never acquired
    assert sp.state_of(3) == (RecordState.ACQUIRED, 1)


def test_release_redelivers_and_reject_archives() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 3, [(0, 2)])
    sp.acknowledge("a", 0, 2, (AckType.RELEASE, AckType.REJECT, AckType.ACCEPT))
    assert sp.state_of(0) == (RecordState.AVAILABLE, 1)
    assert sp.state_of(1)[0] is RecordState.ARCHIVED
    again = sp.acquire("b", 10, [])
    assert [(r.first_offset, r.delivery_count) for r in again] == [(0, 2)]


def test_lock_expiry_makes_records_available_to_others() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 2, [(0, 1)])
    assert sp.acquire("b", 2, []) == []
    clock.now += 30_000
    got = sp.acquire("b", 2, [])
    assert _offsets(got) == [0, 1] and got[0].delivery_count == 2
    with pytest.raises(InvalidAcknowledgement):
        sp.acknowledge("a", 0, 1, (AckType.ACCEPT,))  # a's lock is gone


def test_delivery_count_limit_archives_a_poison_record() -> None:
    clock = Clock()
    sp = _sp(clock, limit=3)
    sp.acquire("a", 1, _singles(0, 1))
    for _ in range(2):
        sp.acknowledge("a", 0, 0, (AckType.RELEASE,))
        sp.acquire("a", 1, [])
    assert sp.state_of(0) == (RecordState.ACQUIRED, 3)
    sp.acknowledge("a", 0, 0, (AckType.RELEASE,))
    assert sp.start_offset == 1  # archived, so the window moved past it
    assert _offsets(sp.acquire("a", 5, [(0, 1)])) == [1]


def test_member_gone_releases_only_its_records() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 2, _singles(0, 3))
    sp.acquire("b", 2, _singles(0, 3))
    assert sp.release_member("a") == 2
    assert sp.state_of(0)[0] is RecordState.AVAILABLE
    assert sp.state_of(2)[0] is RecordState.ACQUIRED


def test_skipped_offsets_and_gaps_are_archived_never_delivered() -> None:
    clock = Clock()
    sp = _sp(clock)
    got = sp.acquire("a", 10, [(0, 1), (5, 6)], skipped=[(2, 2)])
    assert _offsets(got) == [0, 1, 5, 6]
    assert sp.state_of(2)[0] is RecordState.ARCHIVED  # a control record
    assert sp.state_of(3)[0] is RecordState.ARCHIVED  # a compacted gap
    sp.acknowledge("a", 0, 6, (AckType.ACCEPT,) * 2 + (AckType.GAP,) * 3 + (AckType.ACCEPT,) * 2)
    assert sp.start_offset == 7


def test_snapshot_restores_acquired_as_available_with_the_count() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 4, [(10, 13)])
    sp.acknowledge("a", 11, 11, (AckType.ACCEPT,))
    again = _sp(clock)
    again.restore(sp.snapshot())
    assert again.state_of(10) == (RecordState.AVAILABLE, 1)
    assert again.state_of(11)[0] is RecordState.ACKNOWLEDGED
    assert _offsets(again.acquire("b", 10, [(14, 14)])) == [10, 12, 13, 14]


def test_in_flight_limit_caps_the_window() -> None:
    clock = Clock()
    sp = SharePartition(0, clock, 30_000, 5, max_in_flight=3)
    batches = [(0, 1), (2, 4), (5, 9)]
    # the batch that crosses the limit is taken whole, the next one is not
    assert _offsets(sp.acquire("a", 10, batches)) == [0, 1, 2, 3, 4]
    assert sp.acquire("b", 10, batches) == []
    sp.acknowledge("a", 1, 4, (AckType.ACCEPT,))
    # four locks free, but offset 0 holds the window [0, 5) full: nothing new is read
    assert sp.acquire("b", 10, batches) == []
    sp.acknowledge("a", 0, 0, (AckType.ACCEPT,))
    assert _offsets(sp.acquire("b", 10, batches)) == [5, 6, 7, 8, 9]


def test_max_records_ends_at_a_batch_boundary_and_never_splits_a_batch() -> None:
    clock = Clock()
    sp = _sp(clock)
    batches = [(0, 4), (5, 9), (10, 14), (15, 19)]
    assert _offsets(sp.acquire("a", 3, batches)) == list(range(5))  # a batch bigger than the cap: whole
    assert _offsets(sp.acquire("b", 6, batches)) == list(range(5, 15))  # the batch reaching 6 is whole
    assert _offsets(sp.acquire("c", 5, batches)) == list(range(15, 20))  # exactly one batch
    sp.acknowledge("b", 7, 7, (AckType.RELEASE,))
    sp.acknowledge("a", 0, 4, (AckType.RELEASE,))
    # redeliveries take whole runs too: 0..4, then 7 (released from b's batch on its own)
    assert _offsets(sp.acquire("d", 2, [])) == list(range(5))
    assert _offsets(sp.acquire("d", 2, [])) == [7]


def test_state_is_held_per_run_not_per_record() -> None:
    clock = Clock()
    sp = SharePartition(0, clock, lock_ms=30_000, delivery_limit=3, max_in_flight=200_000)
    got = sp.acquire("a", 100_000, [(0, 49_999), (50_000, 99_999)])
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [(0, 99_999, 1)]
    assert sp.run_count() == 2  # one per batch
    sp.acknowledge("a", 10, 19, (AckType.RELEASE,))  # splits the first batch in three
    assert sp.run_count() == 4
    assert sp.state_of(15) == (RecordState.AVAILABLE, 1) and sp.state_of(20) == (RecordState.ACQUIRED, 1)
    sp.acknowledge("a", 0, 9, (AckType.ACCEPT,))
    sp.acknowledge("a", 20, 99_999, (AckType.ACCEPT,))
    assert sp.run_count() == 2  # 10..19 available, then the settled rest merged into one
    assert (sp.start_offset, sp.end_offset) == (10, 100_000)
    assert sp.done_in_window() == 99_980
    assert sp.snapshot()["runs"] == [[10, 19, RecordState.AVAILABLE, 1], [20, 99_999, RecordState.ACKNOWLEDGED, 1]]


# -- membership ----------------------------------------------------------------------------


def test_uniform_assignment_shares_a_partition_between_members() -> None:
    got = assign_uniform({"a": ("t",), "b": ("t",), "c": ("t",)}, lambda _t: 1)
    assert got == {"a": {"t": (0,)}, "b": {"t": (0,)}, "c": {"t": (0,)}}
    got = assign_uniform({"a": ("t",), "b": ("t",)}, lambda _t: 4)
    assert got == {"a": {"t": (0, 2)}, "b": {"t": (1, 3)}}


def test_member_epochs_fencing_and_session_timeout() -> None:
    clock = Clock()
    group = ShareGroup("g", clock, session_timeout_ms=10_000)
    parts = {"t": 2}.get
    first = group.heartbeat("a", 0, ("t",), None, "c", "h", parts)
    assert first.error == ErrorCode.none and first.assignment == {"t": (0, 1)}
    second = group.heartbeat("b", 0, ("t",), None, "c", "h", parts)
    assert second.member_epoch > first.member_epoch
    stale = group.heartbeat("a", first.member_epoch + 7, None, None, "c", "h", parts)
    assert stale.error == ErrorCode.fenced_member_epoch
    moved = group.heartbeat("a", first.member_epoch, None, None, "c", "h", parts)
    assert moved.member_epoch == second.member_epoch and moved.assignment == {"t": (0,)}
    assert group.heartbeat("x", 3, None, None, "c", "h", parts).error == ErrorCode.unknown_member_id
    clock.now += 10_001
    assert sorted(group.expire()) == ["a", "b"]
    assert group.state == "Empty"


# -- coordinator: sessions and durability --------------------------------------------------


def test_a_topic_created_again_under_its_name_moves_the_assignment() -> None:
    clock = Clock()
    group = ShareGroup("g", clock, 45_000)
    ids = {"t": "id-1"}
    first = group.heartbeat("a", 0, ("t",), None, "c", "h", {"t": 1}.get, ids.get)
    assert first.assignment == {"t": (0,)}
    assert group.heartbeat("a", first.member_epoch, None, None, "c", "h", {"t": 1}.get, ids.get).assignment is None
    ids["t"] = "id-2"  # deleted and created again between two heartbeats: same name, same partitions
    moved = group.heartbeat("a", first.member_epoch, None, None, "c", "h", {"t": 1}.get, ids.get)
    assert moved.member_epoch > first.member_epoch
    assert moved.assignment == {"t": (0,)}  # sent again: the handler answers it with the new topic id


def test_share_partition_state_belongs_to_a_topic_id() -> None:
    clock = Clock()
    log = MemoryLog()
    co = _coordinator(clock, log)
    old = co.partition(("g", "t", 0), "id-1", lambda _reset: 0)
    old.acquire("a", 10, [(0, 5)])
    old.acknowledge("a", 0, 5, (AckType.ACCEPT,))
    co.persist(("g", "t", 0))
    reloaded = _coordinator(clock, log)
    reloaded.load()
    assert reloaded.partition(("g", "t", 0), "id-1", lambda _reset: 0).start_offset == 6
    fresh = reloaded.partition(("g", "t", 0), "id-2", lambda _reset: 0)
    assert (fresh.start_offset, fresh.end_offset) == (0, 0)
    assert _offsets(fresh.acquire("a", 10, [(0, 2)])) == [0, 1, 2]


def _coordinator(clock: Clock, log: MemoryLog) -> ShareCoordinator:
    return ShareCoordinator(ShareSettings(), ShareStateStore(log, 4, clock), clock)


def test_share_session_epochs() -> None:
    clock = Clock()
    co = _coordinator(clock, MemoryLog())
    assert co.session("g", "a", 1)[0] == ErrorCode.share_session_not_found
    assert co.session("g", "a", 0)[0] == ErrorCode.none
    assert co.session("g", "a", 2)[0] == ErrorCode.invalid_share_session_epoch
    assert co.session("g", "a", 1)[0] == ErrorCode.none
    assert co.session("g", "a", 2)[0] == ErrorCode.none


def test_closing_a_session_releases_the_members_records() -> None:
    clock = Clock()
    co = _coordinator(clock, MemoryLog())
    co.session("g", "a", 0)
    sp = co.partition(("g", "t", 0), "id", lambda _reset: 0)
    sp.acquire("a", 5, [(0, 4)])
    co.close_session("g", "a")
    assert sp.state_of(0)[0] is RecordState.AVAILABLE


def test_state_survives_a_reload_from_the_store() -> None:
    clock = Clock()
    log = MemoryLog()
    co = _coordinator(clock, log)
    sp = co.partition(("g", "t", 0), "id", lambda reset: 0 if reset == "earliest" else 5)
    assert sp.start_offset == 5  # share.auto.offset.reset=latest
    sp.acquire("a", 3, [(5, 9)])
    sp.acknowledge("a", 5, 6, (AckType.ACCEPT,))
    co.persist(("g", "t", 0))
    co.delete(("g", "u", 0))  # nothing there: no write
    reloaded = _coordinator(clock, log)
    assert reloaded.load() == 1
    again = reloaded.partitions[("g", "t", 0)]
    assert again.start_offset == 7
    assert again.state_of(7) == (RecordState.AVAILABLE, 1)
    reloaded.delete(("g", "t", 0))
    assert _coordinator(clock, log).load() == 0


def test_group_configs_override_broker_defaults() -> None:
    clock = Clock()
    co = ShareCoordinator(ShareSettings(), ShareStateStore(MemoryLog(), 4, clock), clock,
                          lambda g: {"share.auto.offset.reset": "earliest",
                                     "share.record.lock.duration.ms": "5000"} if g == "e" else {})
    assert co.partition(("e", "t", 0), "id", lambda reset: 0 if reset == "earliest" else 9).start_offset == 0
    assert co.partition(("l", "t", 0), "id", lambda reset: 0 if reset == "earliest" else 9).start_offset == 9
    assert co.partitions[("e", "t", 0)].lock_ms == 5000


def _states(sp: SharePartition, upto: int) -> list[tuple[RecordState, int]]:
    """Each offset's (state, count), an ACQUIRED one as the AVAILABLE it reloads as."""
    out = []
    for o in range(upto):
        state, count = sp.state_of(o)
        out.append((RecordState.AVAILABLE if state is RecordState.ACQUIRED else state, count))
    return out


@pytest.mark.parametrize("snapshot_every", [1, 3, 500])
def test_snapshots_and_deltas_replay_to_the_same_state(snapshot_every: int) -> None:
    clock = Clock()
    log = MemoryLog()
    key = ("g", "t", 0)

    def coordinator() -> ShareCoordinator:
        return ShareCoordinator(ShareSettings(), ShareStateStore(log, 4, clock, snapshot_every), clock)

    co = coordinator()
    sp = co.partition(key, "id", lambda _reset: 0)
    for step in range(12):
        got = sp.acquire(f"m{step % 3}", 4, _singles(0, 59), skipped=[(60, 61)] if step == 11 else [])
        if step % 3 == 0:
            sp.acknowledge(f"m{step % 3}", got[0].first_offset, got[0].first_offset, (AckType.RELEASE,))
        elif step % 3 == 1:
            for r in got:
                sp.acknowledge(f"m{step % 3}", r.first_offset, r.last_offset, (AckType.ACCEPT,))
        if step == 7:
            clock.now += 30_000  # everything held expires
            sp.expire_locks()
        co.persist(key)
    reloaded = coordinator()
    assert reloaded.load() == 1
    again = reloaded.partitions[key]
    assert (again.start_offset, again.end_offset) == (sp.start_offset, sp.end_offset)
    assert _states(again, 62) == _states(sp, 62)
    # a persisted change after the reload continues the same cycle
    again.acquire("z", 1, [])
    reloaded.persist(key)
    third = coordinator()
    third.load()
    assert _states(third.partitions[key], 62) == _states(again, 62)


def test_a_member_past_its_session_timeout_loses_its_records_and_session() -> None:
    clock = Clock()
    co = ShareCoordinator(ShareSettings(session_timeout_ms=5_000), ShareStateStore(MemoryLog(), 4, clock), clock)
    parts = {"t": 1}.get
    assert co.heartbeat("g", "a", 0, ("t",), None, "c", "h", parts).error == ErrorCode.none
    assert co.heartbeat("g", "b", 0, ("t",), None, "c", "h", parts).error == ErrorCode.none
    co.session("g", "a", 0)
    sp = co.partition(("g", "t", 0), "id", lambda _reset: 0)
    sp.acquire("a", 3, [(0, 2)])
    clock.now += 4_000
    co.heartbeat("g", "b", co.groups["g"].members["b"].epoch, None, None, "c", "h", parts)
    clock.now += 2_000  # a silent for 6 s, b for 2 s
    assert co.expire_members() == [("g", "a")]
    assert sp.state_of(0) == (RecordState.AVAILABLE, 1)
    assert co.session("g", "a", 1)[0] == ErrorCode.share_session_not_found
    assert not co.is_member("g", "a") and co.is_member("g", "b")


def test_records_that_did_not_fit_in_the_response_are_not_counted_as_delivered() -> None:
    clock = Clock()
    sp = _sp(clock)
    got = sp.acquire("a", 10, [(0, 9)])
    kept = sp.unacquire("a", 6, got)
    assert _offsets(kept) == list(range(6))
    assert sp.state_of(6) == (RecordState.AVAILABLE, 0)
    assert sp.state_of(5) == (RecordState.ACQUIRED, 1)
    assert _offsets(sp.acquire("b", 10, [])) == [6, 7, 8, 9]


def test_deleting_a_share_group_needs_it_empty_and_removes_its_state() -> None:
    clock = Clock()
    log = MemoryLog()
    co = _coordinator(clock, log)
    co.heartbeat("g", "a", 0, ("t",), None, "c", "h", {"t": 1}.get)
    co.partition(("g", "t", 0), "id", lambda _reset: 0)
    assert co.delete_group("g") == ErrorCode.non_empty_group
    co.heartbeat("g", "a", -1, None, None, "c", "h", {"t": 1}.get)
    assert co.delete_group("g") == ErrorCode.none
    assert co.delete_group("g") == ErrorCode.group_id_not_found
    assert _coordinator(clock, log).load() == 0


def test_a_batch_of_changes_is_one_append_with_one_record_per_share_partition() -> None:
    clock = Clock()
    log = MemoryLog()
    co = _coordinator(clock, log)
    keys = [("g", "t", 0), ("g", "t", 1)]
    parts = [co.partition(k, "id", lambda _reset: 0) for k in keys]
    before = sum(len(b) for b in log.batches.values())
    with co.batched():
        for key, sp in zip(keys, parts, strict=True):
            got = sp.acquire("a", 10, [(0, 4), (5, 9)])
            co.persist(key)
            sp.acknowledge("a", got[0].first_offset, got[0].last_offset, (AckType.ACCEPT,))
            co.persist(key)
        assert sum(len(b) for b in log.batches.values()) == before  # nothing written yet
    [batch] = [b for p in log.batches.values() for b in p][before:]
    records = decode_batch(batch)[1]
    assert len(records) == 2  # one delta per share-partition
    reloaded = _coordinator(clock, log)
    assert reloaded.load() == 2
    assert all(reloaded.partitions[k].start_offset == 10 for k in keys)
