"""The transaction coordinator as pure logic: the state table, fencing, EndTxn retries,
timeouts, expiration, and its reload from __transaction_state (memory store, fake clock)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pytest
from kio.schema.errors import ErrorCode

from streamkit.broker.txn.coordinator import TransactionCoordinator, TxnSettings
from streamkit.broker.txn.records import TxnLogValue, decode_txn_value, encode_txn_value
from streamkit.broker.txn.state import (
    TRANSITIONS,
    IllegalTransition,
    TxnEvent,
    TxnState,
    next_state,
)
from streamkit.log.records import Record, decode_batch

PARTITIONS = 3


class MemoryStore:
    def __init__(self) -> None:
        self.stored: dict[int, list[bytes]] = defaultdict(list)

    def append(self, partition: int, batch: bytes) -> None:
        assert 0 <= partition < PARTITIONS
        self.stored[partition].append(batch)

    def records(self, partition: int) -> Iterable[Record]:
        return [r for b in self.stored.get(partition, []) for r in decode_batch(b)[1]]


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[str, int, int, int, bool]] = []

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool) -> None:
        self.written.append((topic, partition, producer_id, producer_epoch, commit))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Env:
    def __init__(self, store: MemoryStore | None = None, clock: Clock | None = None) -> None:
        self.store = store or MemoryStore()
        self.markers = Markers()
        self.clock = clock or Clock()
        self._next = iter(range(100, 10_000))
        self.co = TransactionCoordinator(TxnSettings(max_timeout_ms=60_000, id_expiration_ms=100_000,
                                                     offsets_partitions=5),
                                         PARTITIONS, self.store, self.markers,
                                         lambda: next(self._next), self.clock)

    def reopen(self) -> Env:
        env = Env(self.store, self.clock)
        env.co.load()
        return env


@pytest.fixture
def env() -> Env:
    return Env()


def test_state_table_rules() -> None:
    assert next_state(TxnState.ONGOING, TxnEvent.COMMIT) is TxnState.PREPARE_COMMIT
    assert next_state(TxnState.PREPARE_ABORT, TxnEvent.MARKERS_WRITTEN) is TxnState.COMPLETE_ABORT
    with pytest.raises(IllegalTransition):
        next_state(TxnState.ONGOING, TxnEvent.INIT)  # an open transaction is aborted first
    with pytest.raises(IllegalTransition):
        next_state(TxnState.PREPARE_COMMIT, TxnEvent.ADD)
    assert not any(state is TxnState.DEAD for state, _event in TRANSITIONS)  # Dead is final
    assert TxnState.PREPARE_COMMIT.kafka_name == "PrepareCommit"


def test_value_layout_round_trip() -> None:
    value = TxnLogValue(7, 3, 60_000, TxnState.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)}), 5, 4)
    assert decode_txn_value(encode_txn_value(value)) == value


def test_init_commit_abort_cycle(env: Env) -> None:
    r = env.co.init_producer_id("t", 30_000)
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.none, 100, 0)
    assert env.co.add_partitions("t", 100, 0, [("x", 0), ("x", 1)]) == ErrorCode.none
    assert env.co.describe("t").state is TxnState.ONGOING
    assert env.co.end_txn("t", 100, 0, commit=True) == ErrorCode.none
    assert env.markers.written == [("x", 0, 100, 0, True), ("x", 1, 100, 0, True)]
    assert env.co.describe("t").state is TxnState.COMPLETE_COMMIT
    # a retried EndTxn (lost answer) succeeds and writes nothing more
    assert env.co.end_txn("t", 100, 0, commit=True) == ErrorCode.none
    assert env.co.end_txn("t", 100, 0, commit=False) == ErrorCode.invalid_txn_state
    assert len(env.markers.written) == 2
    # the next transaction starts afresh with only its own partitions
    assert env.co.add_partitions("t", 100, 0, [("y", 0)]) == ErrorCode.none
    assert env.co.end_txn("t", 100, 0, commit=False) == ErrorCode.none
    assert env.markers.written[-1] == ("y", 0, 100, 0, False)


def test_errors_clients_expect(env: Env) -> None:
    assert env.co.init_producer_id("t", 120_000).error == ErrorCode.invalid_transaction_timeout
    assert env.co.init_producer_id("", 1000).error == ErrorCode.invalid_request
    assert env.co.add_partitions("nope", 1, 0, [("x", 0)]) == ErrorCode.invalid_producer_id_mapping
    env.co.init_producer_id("t", 1000)
    assert env.co.add_partitions("t", 999, 0, [("x", 0)]) == ErrorCode.invalid_producer_id_mapping
    assert env.co.end_txn("t", 100, 0, commit=True) == ErrorCode.invalid_txn_state  # nothing open
    assert env.co.check_ongoing("t", 100, 0, ("x", 0)) == ErrorCode.invalid_txn_state
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    assert env.co.check_ongoing("t", 100, 0, ("x", 0)) == ErrorCode.none
    assert env.co.check_ongoing("t", 100, 0, ("x", 1)) == ErrorCode.invalid_txn_state  # not added


def test_new_instance_fences_and_aborts_the_open_transaction(env: Env) -> None:
    env.co.init_producer_id("t", 30_000)
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    r = env.co.init_producer_id("t", 30_000)  # a second instance with the same transactional.id
    assert r.error == ErrorCode.none and r.producer_id == 100 and r.producer_epoch == 2
    # the old transaction was aborted at a bumped epoch: its partitions refuse epoch 0 now
    assert env.markers.written == [("x", 0, 100, 1, False)]
    assert env.co.add_partitions("t", 100, 0, [("x", 0)]) == ErrorCode.producer_fenced
    assert env.co.end_txn("t", 100, 0, commit=True) == ErrorCode.producer_fenced
    assert env.co.check_ongoing("t", 100, 0, ("x", 0)) == ErrorCode.invalid_producer_epoch
    # KIP-360: a producer asking for a bump with a stale epoch is fenced as well
    assert env.co.init_producer_id("t", 30_000, 100, 0).error == ErrorCode.producer_fenced
    assert env.co.init_producer_id("t", 30_000, 100, 2).producer_epoch == 3


def test_epoch_exhaustion_moves_to_a_new_producer_id(env: Env) -> None:
    env.co.init_producer_id("t", 1000)
    env.co.describe("t").producer_epoch = 32766
    r = env.co.init_producer_id("t", 1000)
    assert (r.producer_id, r.producer_epoch) == (101, 0)


def test_timed_out_transaction_is_aborted_and_fenced(env: Env) -> None:
    env.co.init_producer_id("t", 5_000)
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    env.clock.now += 5_000
    assert env.co.abort_timed_out() == []
    env.clock.now += 1
    assert env.co.abort_timed_out() == ["t"]
    assert env.markers.written == [("x", 0, 100, 1, False)]
    assert env.co.end_txn("t", 100, 0, commit=True) == ErrorCode.producer_fenced


def test_timeout_survives_reload(env: Env) -> None:
    env.co.init_producer_id("t", 5_000)
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    again = env.reopen()
    assert again.co.describe("t").state is TxnState.ONGOING
    again.clock.now += 5_001
    assert again.co.abort_timed_out() == ["t"]
    assert again.markers.written == [("x", 0, 100, 1, False)]


def test_reload_finishes_a_prepared_commit(env: Env) -> None:
    env.co.init_producer_id("t", 5_000)
    env.co.add_partitions("t", 100, 0, [("x", 0), ("x", 1)])

    class Crash(Exception):
        pass

    def crash(*args: object) -> None:
        raise Crash

    env.markers.write_marker = crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        env.co.end_txn("t", 100, 0, commit=True)  # PrepareCommit persisted, no marker written
    again = env.reopen()
    assert again.markers.written == [("x", 0, 100, 0, True), ("x", 1, 100, 0, True)]
    assert again.co.describe("t").state is TxnState.COMPLETE_COMMIT
    assert again.reopen().markers.written == []  # complete now: nothing to redo


def test_add_offsets_adds_the_group_partition(env: Env) -> None:
    env.co.init_producer_id("t", 5_000)
    assert env.co.add_offsets("t", 100, 0, "") == ErrorCode.invalid_group_id
    assert env.co.add_offsets("t", 100, 0, "group") == ErrorCode.none
    assert env.co.describe("t").partitions == {env.co.offsets_partition("group")}
    assert env.co.offsets_partition("group")[0] == "__consumer_offsets"


def test_idle_ids_expire_but_not_open_transactions(env: Env) -> None:
    env.co.init_producer_id("idle", 5_000)
    assert env.co.init_producer_id("busy", 50_000).error == ErrorCode.none
    env.co.add_partitions("busy", 101, 0, [("x", 0)])
    env.clock.now += 100_000
    assert env.co.expire_ids() == ["idle"]
    assert env.co.describe("idle") is None and env.co.describe("busy") is not None
    assert env.reopen().co.describe("idle") is None  # the tombstone is persisted


def test_list_filters(env: Env) -> None:
    env.co.init_producer_id("a", 5_000)
    env.co.init_producer_id("b", 5_000)
    env.co.add_partitions("b", 101, 0, [("x", 0)])
    assert [m.transactional_id for m in env.co.list({"Ongoing"})] == ["b"]
    assert [m.transactional_id for m in env.co.list(None, {100})] == ["a"]


def test_delayed_end_txn_of_an_old_instance_never_ends_the_new_transaction(env: Env) -> None:
    env.co.init_producer_id("t", 30_000)
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    new = env.co.init_producer_id("t", 30_000)  # the old instance's transaction is aborted
    env.co.add_partitions("t", 100, new.producer_epoch, [("x", 1)])
    written = list(env.markers.written)
    # the old instance's EndTxn(commit), delayed in the network, arrives now
    assert env.co.end_txn("t", 100, 0, commit=True) == ErrorCode.producer_fenced
    assert env.co.describe("t").state is TxnState.ONGOING
    assert env.co.describe("t").partitions == {("x", 1)}
    assert env.markers.written == written


def test_retried_epoch_bump_gets_the_same_answer(env: Env) -> None:
    env.co.init_producer_id("t", 30_000)
    env.co.add_partitions("t", 100, 0, [("x", 0)])
    first = env.co.init_producer_id("t", 30_000, 100, 0)  # KIP-360 bump from inside a transaction
    assert first.error == ErrorCode.none and first.producer_epoch == 2
    retry = env.co.init_producer_id("t", 30_000, 100, 0)  # its answer was lost
    assert (retry.error, retry.producer_epoch) == (ErrorCode.none, 2)
    assert env.co.init_producer_id("t", 30_000, 100, 1).error == ErrorCode.producer_fenced
