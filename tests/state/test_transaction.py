"""Transaction semantics: read-your-writes, merged scans, the changelog, the lifecycle."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from streamkit.state import (
    InvalidChangelogOffsetError,
    StoreClosedError,
    StorePartition,
    TransactionStateError,
    TransactionStatus,
)
from tests.state.conftest import contents


def seed(partition: StorePartition, items: dict[bytes, bytes], offset: int = 0) -> None:
    tx = partition.begin()
    for key, value in items.items():
        tx.set(key, value)
    tx.commit(offset)


def test_read_your_writes(partition: StorePartition) -> None:
    seed(partition, {b"a": b"1", b"b": b"2"})
    tx = partition.begin()
    assert tx.get(b"a") == b"1"
    tx.set(b"a", b"10")
    tx.delete(b"b")
    tx.set(b"c", b"3")
    assert (tx.get(b"a"), tx.get(b"b"), tx.get(b"c")) == (b"10", None, b"3")
    assert tx.exists(b"a") and not tx.exists(b"b")
    # Uncommitted writes are invisible to committed reads.
    assert partition.get(b"a") == b"1" and partition.get(b"c") is None
    tx.commit(1)
    assert contents(partition) == {b"a": b"10", b"c": b"3"}
    assert partition.changelog_offset == 1


def test_iter_range_merges_cache_over_store(partition: StorePartition) -> None:
    seed(partition, {b"a": b"1", b"c": b"3", b"e": b"5", b"g": b"7"})
    tx = partition.begin()
    tx.set(b"b", b"2")  # new, between stored keys
    tx.set(b"c", b"30")  # updated
    tx.delete(b"e")  # deleted
    tx.delete(b"x")  # deleting a missing key changes nothing visible
    tx.set(b"h", b"8")  # after every stored key
    tx.set(b"0", b"0")  # before every stored key
    expected = [(b"0", b"0"), (b"a", b"1"), (b"b", b"2"), (b"c", b"30"), (b"g", b"7"), (b"h", b"8")]
    assert list(tx.iter_range()) == expected
    assert list(tx.iter_range(reverse=True)) == expected[::-1]
    assert list(tx.iter_range(b"b", b"g")) == expected[2:4]
    assert list(tx.iter_range(b"b", b"g", reverse=True)) == expected[2:4][::-1]
    # A write after a scan is seen by the next scan (the sorted cache index is updated).
    tx.set(b"d", b"4")
    tx.delete(b"a")
    assert list(tx.iter_range(b"a", b"e")) == [(b"b", b"2"), (b"c", b"30"), (b"d", b"4")]


def test_changelog_records_are_net_changes(partition: StorePartition) -> None:
    tx = partition.begin()
    tx.set(b"a", b"1")
    tx.set(b"b", b"1")
    tx.set(b"a", b"2")
    tx.delete(b"b")
    tx.delete(b"c")
    tx.set(b"c", b"3")
    assert tx.changelog_records() == [(b"a", b"2"), (b"b", None), (b"c", b"3")]
    assert tx.status is TransactionStatus.PREPARED


def test_prepared_transaction_refuses_writes_but_reads(partition: StorePartition) -> None:
    tx = partition.begin()
    tx.set(b"a", b"1")
    records = tx.changelog_records()
    with pytest.raises(TransactionStateError):
        tx.set(b"b", b"2")
    with pytest.raises(TransactionStateError):
        tx.delete(b"a")
    assert tx.get(b"a") == b"1"
    assert tx.changelog_records() == records
    tx.commit(7)
    assert partition.get(b"a") == b"1" and partition.changelog_offset == 7


def test_rollback_discards(partition: StorePartition) -> None:
    seed(partition, {b"a": b"1"})
    with partition.begin() as tx:
        tx.set(b"a", b"2")
        tx.set(b"b", b"2")
    assert tx.status is TransactionStatus.ROLLED_BACK
    assert contents(partition) == {b"a": b"1"}
    assert partition.changelog_offset == 0


def test_finished_transaction_refuses_everything(partition: StorePartition) -> None:
    tx = partition.begin()
    tx.commit()
    for op in (
        lambda: tx.get(b"a"),
        lambda: tx.set(b"a", b""),
        lambda: tx.iter_range(),
        lambda: tx.commit(),
        lambda: tx.changelog_records(),
    ):
        with pytest.raises(TransactionStateError):
            op()
    tx.rollback()  # a no-op once finished
    assert tx.status is TransactionStatus.COMMITTED


def test_one_open_transaction_per_partition(partition: StorePartition) -> None:
    tx = partition.begin()
    with pytest.raises(TransactionStateError):
        partition.begin()
    with pytest.raises(TransactionStateError):
        partition.apply_changelog([(b"a", b"1", 0)])
    tx.rollback()
    partition.begin().commit()


def test_offset_never_moves_backwards(partition: StorePartition) -> None:
    seed(partition, {b"a": b"1"}, offset=10)
    tx = partition.begin()
    tx.set(b"a", b"2")
    with pytest.raises(InvalidChangelogOffsetError):
        tx.commit(9)
    assert tx.status is TransactionStatus.FAILED
    assert partition.get(b"a") == b"1" and partition.changelog_offset == 10
    tx = partition.begin()  # the failed transaction released the partition
    tx.set(b"a", b"3")
    tx.commit(10)  # the same offset again is fine (nothing new was produced)
    tx = partition.begin()
    tx.set(b"a", b"4")
    tx.commit()  # None: data moves, offset stays
    assert partition.get(b"a") == b"4" and partition.changelog_offset == 10
    with pytest.raises(InvalidChangelogOffsetError):
        partition.begin().commit(-1)


def test_commit_without_changes_still_moves_the_offset(
    make_partition: Callable[[], StorePartition],
) -> None:
    partition = make_partition()
    partition.begin().commit(5)
    assert partition.changelog_offset == 5


def test_closing_the_partition_rolls_back(partition: StorePartition) -> None:
    tx = partition.begin()
    tx.set(b"a", b"1")
    partition.close()
    assert tx.status is TransactionStatus.ROLLED_BACK
    with pytest.raises(StoreClosedError):
        partition.begin()
    with pytest.raises(StoreClosedError):
        partition.get(b"a")


def test_cache_bytes_count_each_key_once_with_its_latest_value(partition: StorePartition) -> None:
    """What statestore.cache.max.bytes is checked against: the bytes the cache holds now, not
    the bytes ever written (a hot key rewritten a million times is one entry)."""
    seed(partition, {b"old": b"stored"})
    tx = partition.begin()
    assert tx.cache_bytes == 0
    tx.set(b"k", b"12345")
    assert tx.cache_bytes == 1 + 5
    for _ in range(100):
        tx.set(b"k", b"123")
    assert tx.cache_bytes == 1 + 3
    tx.delete(b"k")  # the tombstone keeps the key
    assert tx.cache_bytes == 1
    tx.set(b"k", b"xy")
    assert tx.cache_bytes == 1 + 2
    tx.delete(b"old")  # a stored key: its tombstone is cached
    assert tx.cache_bytes == 3 + 3
    tx.delete(b"old")
    assert tx.cache_bytes == 6
    tx.commit(1)
    assert tx.cache_bytes == 0
    assert partition.begin().cache_bytes == 0
