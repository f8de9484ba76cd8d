"""Windowed state: per-key window order, and expiry by end time through the index."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.state import (
    KVBackend,
    MemoryBackend,
    StorePartition,
    Window,
    WindowedTransaction,
)
from streamkit.state.serialization import INT64_MAX, INT64_MIN
from tests.state.conftest import BACKENDS, CHANGELOG, contents, open_backend

T = 1_700_000_000_000


def test_windows_of_a_key_come_ordered_by_start(partition: StorePartition) -> None:
    tx = partition.begin()
    w = WindowedTransaction(tx)
    starts = [INT64_MIN, -(2**40), -10, -1, 0, 1, T, 2**62, INT64_MAX - 1]
    for start in reversed(starts):
        w.update_window(b"k", start, start + 1, b"%d" % start)
    w.update_window(b"k\x00", 0, 1, b"other key")  # a longer key that extends b"k"
    w.update_window(b"", 5, 6, b"empty key")
    assert [x.start_ms for x in w.iter_windows(b"k")] == starts
    assert [x.start_ms for x in w.iter_windows(b"k", reverse=True)] == starts[::-1]
    assert [x.start_ms for x in w.iter_windows(b"k", -10, 1)] == [-10, -1, 0]
    assert [x.start_ms for x in w.iter_windows(b"k", from_start_ms=T)] == starts[-3:]
    assert [x.start_ms for x in w.iter_windows(b"k", to_start_ms=-1)] == starts[:3]
    assert list(w.iter_windows(b"k\x00")) == [Window(b"k\x00", 0, 1, b"other key")]
    assert w.get_window(b"", 5, 6) == b"empty key"
    assert w.get_window(b"", 5, 7) is None
    # Same windows after a commit, read from the backend rather than the write cache.
    tx.commit(0)
    w = WindowedTransaction(partition.begin())
    assert [x.start_ms for x in w.iter_windows(b"k")] == starts


def test_same_start_orders_by_end_and_update_overwrites(partition: StorePartition) -> None:
    w = WindowedTransaction(partition.begin())
    w.update_window(b"k", 0, 20, b"a")
    w.update_window(b"k", 0, 10, b"b")
    w.update_window(b"k", 0, 10, b"c")
    assert list(w.iter_windows(b"k")) == [Window(b"k", 0, 10, b"c"), Window(b"k", 0, 20, b"a")]
    with pytest.raises(ValueError):
        w.update_window(b"k", 10, 0, b"x")


def test_expiry_emits_tombstones_and_survives_restore(partition: StorePartition) -> None:
    tx = partition.begin()
    w = WindowedTransaction(tx)
    for start in range(0, 100, 10):
        w.update_window(b"k", start, start + 10, b"%d" % start)
    records = tx.changelog_records()
    tx.commit(len(records) - 1)
    tx = partition.begin()
    w = WindowedTransaction(tx)
    expired = w.expire_windows(30)
    assert [(x.start_ms, x.end_ms, x.value) for x in expired] == [
        (0, 10, b"0"),
        (10, 20, b"10"),
        (20, 30, b"20"),
    ]
    tombstones = tx.changelog_records()
    assert len(tombstones) == 6 and all(value is None for _, value in tombstones)
    assert w.expire_windows(30) == []  # already gone, within the same transaction
    tx.commit(len(records) + len(tombstones) - 1)

    replica = StorePartition(MemoryBackend(), CHANGELOG)
    offsets = iter(range(10**6))
    replica.apply_changelog((k, v, next(offsets)) for k, v in records + tombstones)
    assert contents(replica) == contents(partition)
    w = WindowedTransaction(replica.begin())
    assert [x.start_ms for x in w.iter_windows(b"k")] == list(range(30, 100, 10))
    assert [x.end_ms for x in w.expire_windows(INT64_MAX)] == list(range(40, 110, 10))


def test_delete_window_removes_it_from_expiry(partition: StorePartition) -> None:
    w = WindowedTransaction(partition.begin())
    w.update_window(b"a", 0, 10, b"1")
    w.update_window(b"b", 0, 10, b"2")
    w.delete_window(b"a", 0, 10)
    assert w.get_window(b"a", 0, 10) is None
    assert w.expire_windows(10) == [Window(b"b", 0, 10, b"2")]


@pytest.fixture(scope="module", params=BACKENDS)
def shared_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KVBackend]:
    backend = open_backend(request.param, tmp_path_factory.mktemp("db"))
    yield backend
    backend.destroy()


times = st.one_of(
    st.integers(-50, 50), st.sampled_from([INT64_MIN, -(2**40), 2**40, INT64_MAX - 100])
)
windows = st.tuples(st.sampled_from([b"", b"a", b"ab", b"b"]), times, st.integers(0, 100))


@settings(max_examples=60, deadline=None)
@given(
    committed=st.lists(windows, max_size=15),
    pending=st.lists(windows, max_size=15),
    threshold=st.one_of(times, st.sampled_from([INT64_MIN, INT64_MAX])),
)
def test_expiry_removes_exactly_the_windows_ending_by_the_threshold(
    shared_backend: KVBackend,
    committed: list[tuple[bytes, int, int]],
    pending: list[tuple[bytes, int, int]],
    threshold: int,
) -> None:
    shared_backend.write([(key, None) for key, _ in shared_backend.iter_all()])
    partition = StorePartition(shared_backend, CHANGELOG)
    model: dict[tuple[bytes, int, int], bytes] = {}
    tx = partition.begin()
    for i, (key, start, length) in enumerate(committed):
        end = min(start + length, INT64_MAX)
        WindowedTransaction(tx).update_window(key, start, end, b"c%d" % i)
        model[key, start, end] = b"c%d" % i
    tx.commit(0)
    tx = partition.begin()
    w = WindowedTransaction(tx)
    for i, (key, start, length) in enumerate(pending):  # some in the write cache only
        end = min(start + length, INT64_MAX)
        w.update_window(key, start, end, b"p%d" % i)
        model[key, start, end] = b"p%d" % i

    expired = w.expire_windows(threshold)
    gone = {k: v for k, v in model.items() if k[2] <= threshold}
    assert sorted(expired, key=lambda x: x.end_ms) == expired  # ordered by end (only)
    assert {(x.key, x.start_ms, x.end_ms): x.value for x in expired} == gone
    remaining = {k: v for k, v in model.items() if k[2] > threshold}
    for key in {b"", b"a", b"ab", b"b"}:
        assert [(x.start_ms, x.end_ms, x.value) for x in w.iter_windows(key)] == sorted(
            (s, e, v) for (k, s, e), v in remaining.items() if k == key
        )
    tx.commit(1)
    # Nothing of an expired window is left behind, in either key space.
    assert len(contents(partition)) == 2 * len(remaining)
