"""The DSL's cached fixed windows (``window_cache``) against the store under them: what a
commit writes, what a rollback forgets, what the changelog restores."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.state.memory import MemoryBackend
from streamkit.state.partition import StorePartition
from streamkit.state.transaction import Transaction
from streamkit.state.windowed import WindowedTransaction
from streamkit.streams import window_cache
from streamkit.streams.window_cache import CachedWindows

SIZE = 1_000


class JsonCodec:
    def dumps(self, obj: Any) -> bytes:
        return orjson.dumps(obj)

    def loads(self, data: bytes) -> Any:
        return orjson.loads(data)


def counts(size: int = SIZE, advance: int = SIZE) -> CachedWindows:
    return CachedWindows(size, advance, 0, lambda: 0, lambda agg, _v: agg + 1, JsonCodec())


def stored(txn: Transaction) -> dict[tuple[bytes, int, int], Any]:
    return {(w.key, w.start_ms, w.end_ms): orjson.loads(w.value)
            for w in WindowedTransaction(txn).iter_all_windows()}


def commit(windows: CachedWindows, partition: int, txn: Transaction) -> tuple[Transaction, list[Any]]:
    """What the runtime does: flush, take the changelog records, commit, begin the next."""
    windows.flush(partition, txn)
    records = txn.changelog_records()
    txn.commit()
    return txn.partition.begin(), records


def test_a_window_closed_before_a_commit_reaches_neither_store_nor_changelog() -> None:
    windows, store = counts(), StorePartition(MemoryBackend())
    txn = store.begin()
    windows.use(0, txn)
    assert windows.update(b'"a"', 100, None, 100)
    assert windows.update(b'"a"', 200, None, 200)
    assert windows.expire(0, txn, 1_000) == [(b'"a"', 0, 1_000, 2)]
    _txn, records = commit(windows, 0, txn)
    assert records == []


def test_a_window_stored_then_closed_is_deleted_with_its_index_entry() -> None:
    windows, store = counts(), StorePartition(MemoryBackend())
    txn = store.begin()
    windows.use(0, txn)
    windows.update(b'"a"', 100, None, 100)
    txn, records = commit(windows, 0, txn)
    assert len(records) == 2  # the window and its by-end index entry
    assert windows.expire(0, txn, 1_000) == [(b'"a"', 0, 1_000, 1)]
    _txn, records = commit(windows, 0, txn)
    assert [value for _key, value in records] == [None, None]
    assert list(store.iter_range()) == []


def test_a_rolled_back_transaction_leaves_nothing_cached() -> None:
    windows, store = counts(), StorePartition(MemoryBackend())
    txn = store.begin()
    windows.use(0, txn)
    windows.update(b'"a"', 100, None, 100)
    txn, _records = commit(windows, 0, txn)
    windows.use(0, txn)
    windows.update(b'"a"', 150, None, 150)
    txn.rollback()
    txn = store.begin()
    windows.use(0, txn)
    windows.update(b'"a"', 160, None, 160)
    windows.flush(0, txn)
    assert stored(txn) == {(b'"a"', 0, 1_000): 2}


def test_a_store_partition_opened_again_is_read_again() -> None:
    """Revoked and assigned again: the partition's store may hold what another worker did."""
    windows, backend = counts(), MemoryBackend()
    txn = StorePartition(backend).begin()
    windows.use(0, txn)
    windows.update(b'"a"', 100, None, 100)
    commit(windows, 0, txn)
    elsewhere = StorePartition(backend).begin()
    WindowedTransaction(elsewhere).update_window(b'"a"', 0, 1_000, b"5")
    elsewhere.commit()
    txn = StorePartition(backend).begin()
    windows.use(0, txn)
    windows.update(b'"a"', 120, None, 120)
    windows.flush(0, txn)
    assert stored(txn) == {(b'"a"', 0, 1_000): 6}


OPS = st.lists(st.one_of(
    st.tuples(st.just("update"), st.sampled_from([b'"a"', b'"b"', b'"c"']), st.integers(0, 5_000)),
    st.tuples(st.just("close"), st.integers(0, 6_000)),
    st.tuples(st.just("commit")),
), max_size=60)


@settings(max_examples=80, deadline=None)
@given(ops=OPS, advance=st.sampled_from([SIZE, SIZE // 2]), limit=st.sampled_from([2, 1_000]))
def test_committed_windows_and_their_restore_equal_a_reference(ops: list[Any], advance: int, limit: int) -> None:
    """After every commit the store holds exactly the windows not closed yet, with their
    counts, and replaying the changelog into an empty store rebuilds the same keys; with
    a cache limit below the windows held, the cache gives way to store reads."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(window_cache, "MAX_CACHED", limit)
        windows, store = counts(SIZE, advance), StorePartition(MemoryBackend())
        replica: dict[bytes, bytes] = {}
        txn = store.begin()
        reference: dict[tuple[bytes, int, int], int] = {}
        closed = -1
        for op in ops:
            if op[0] == "update":
                _op, key, ts = op
                windows.use(0, txn)
                now = max(ts, closed)
                windows.update(key, ts, None, now)
                for start in range(ts - ts % advance - SIZE + advance, ts + 1, advance):
                    if start + SIZE > now:
                        reference[(key, start, start + SIZE)] = reference.get((key, start, start + SIZE), 0) + 1
            elif op[0] == "close":
                closed = max(closed, op[1])
                taken = windows.expire(0, txn, closed)
                if taken is None:
                    WindowedTransaction(txn).expire_windows(closed)
                else:
                    assert {(k, s, e): a for k, s, e, a in taken} == {
                        w: n for w, n in reference.items() if w[2] <= closed}
                reference = {w: n for w, n in reference.items() if w[2] > closed}
            else:
                txn, records = commit(windows, 0, txn)
                for key, value in records:
                    if value is None:
                        replica.pop(key, None)
                    else:
                        replica[key] = value
                assert stored(txn) == reference
                assert dict(store.iter_range()) == replica


def test_a_fresh_update_neither_mutates_nor_keeps_the_cached_aggregate() -> None:
    """A table's ``apply`` and assignments may mutate their argument or keep their result:
    they see a decoded copy, and what they return is cached as its encoding decodes, so
    the store gets what a write at the update would have written."""
    windows = CachedWindows(SIZE, SIZE, 0, list, lambda agg, value: [*agg, value], JsonCodec())
    txn = StorePartition(MemoryBackend()).begin()
    windows.use(0, txn)
    windows.update(b'"a"', 100, 1, 100)

    def fails(old: list[int], _value: Any) -> list[int]:
        old.append(99)
        raise ValueError("after mutating its argument")

    with pytest.raises(ValueError):
        windows.update(b'"a"', 100, None, 100, add=fails, fresh=True)
    kept: list[list[int]] = []

    def keeps(old: list[int], value: int) -> list[int]:
        old.append(value)
        kept.append(old)
        return old

    windows.update(b'"a"', 100, 2, 100, add=keeps, fresh=True)
    kept[0].append(3)  # the caller changes what it returned, after the update
    windows.flush(0, txn)
    assert stored(txn) == {(b'"a"', 0, 1_000): [1, 2]}
