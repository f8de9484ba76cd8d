"""Changelog round trips and restore: the changelog a transaction emits rebuilds the store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.state import (
    ChangelogPartition,
    KVBackend,
    RocksDBBackend,
    StoreIdentityError,
    StorePartition,
)
from tests.state.conftest import BACKENDS, CHANGELOG, contents, open_backend


class FakeChangelog:
    """A changelog partition in a list: what the runtime would produce and consume."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None, int]] = []

    def produce(self, records: list[tuple[bytes, bytes | None]]) -> int | None:
        for key, value in records:
            self.records.append((key, value, len(self.records)))
        return len(self.records) - 1 if records else None

    def compacted(self) -> list[tuple[bytes, bytes | None, int]]:
        latest = {key: (key, value, offset) for key, value, offset in self.records}
        return sorted(latest.values(), key=lambda r: r[2])


def run_interval(
    partition: StorePartition, log: FakeChangelog, ops: list[tuple[bytes, bytes | None]]
) -> None:
    tx = partition.begin()
    for key, value in ops:
        if value is None:
            tx.delete(key)
        else:
            tx.set(key, value)
    offset = log.produce(tx.changelog_records())
    tx.commit(offset)


keys = st.binary(max_size=2)
intervals = st.lists(
    st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=3))), max_size=10), max_size=5
)


def wiped(backend: KVBackend) -> StorePartition:
    """A fresh partition over a reused backend (opening RocksDB per example is slow)."""
    backend.write([(key, None) for key, _ in backend.iter_all()])
    return StorePartition(backend, CHANGELOG)


@pytest.fixture(scope="module", params=BACKENDS)
def backend_pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KVBackend, KVBackend]]:
    root = tmp_path_factory.mktemp("pair")
    pair = (open_backend(request.param, root / "a"), open_backend(request.param, root / "b"))
    yield pair
    for backend in pair:
        backend.destroy()


@settings(max_examples=50, deadline=None)
@given(intervals=intervals, compact=st.booleans())
def test_changelog_round_trip(
    backend_pair: tuple[KVBackend, KVBackend],
    intervals: list[list[tuple[bytes, bytes | None]]],
    compact: bool,
) -> None:
    source, replica = wiped(backend_pair[0]), wiped(backend_pair[1])
    log = FakeChangelog()
    for ops in intervals:
        run_interval(source, log, ops)
    records = log.compacted() if compact else log.records
    replica.apply_changelog(records, batch_size=3)
    assert contents(replica) == contents(source)
    assert replica.changelog_offset == (records[-1][2] if records else None)
    assert source.changelog_offset == (log.records[-1][2] if log.records else None)


def test_restore_skips_what_is_already_applied(partition: StorePartition) -> None:
    records = [(b"k%d" % (i % 7), b"%d" % i, i) for i in range(50)]
    assert partition.apply_changelog(records[:20], batch_size=8) == 20
    assert partition.changelog_offset == 19
    # Re-fed from the start (a retried fetch): the first 20 are skipped, in whole chunks
    # and within the chunk that straddles offset 19.
    assert partition.apply_changelog(records, batch_size=8) == 30
    assert partition.changelog_offset == 49
    assert partition.apply_changelog(records) == 0
    expected: dict[bytes, bytes] = {}
    for key, value, _ in records:
        expected[key] = value
    assert contents(partition) == expected


def test_restore_applies_tombstones_and_empty_values(partition: StorePartition) -> None:
    partition.apply_changelog([(b"a", b"1", 0), (b"b", b"", 1), (b"a", None, 2), (b"c", None, 3)])
    assert contents(partition) == {b"b": b""}
    assert partition.changelog_offset == 3


def test_restore_then_process(partition: StorePartition) -> None:
    partition.apply_changelog([(b"a", b"1", 100)])
    tx = partition.begin()
    assert tx.get(b"a") == b"1"
    tx.set(b"a", b"2")
    tx.commit(101)
    assert partition.changelog_offset == 101


def test_bad_batch_size(partition: StorePartition) -> None:
    with pytest.raises(ValueError):
        partition.apply_changelog([], batch_size=0)


def test_offset_and_identity_persist(tmp_path: Path) -> None:
    path = tmp_path / "db"
    partition = StorePartition(RocksDBBackend(path), CHANGELOG)
    partition.apply_changelog([(b"a", b"1", 41)])
    partition.close()
    partition = StorePartition(RocksDBBackend(path), CHANGELOG)
    assert partition.changelog_offset == 41 and partition.get(b"a") == b"1"
    partition.close()
    # The directory mirrors another changelog: its offset means nothing there.
    with pytest.raises(StoreIdentityError):
        StorePartition(RocksDBBackend(path), ChangelogPartition(CHANGELOG.topic, 1))
    # Opening without a changelog (a tool inspecting the store) is allowed.
    partition = StorePartition(RocksDBBackend(path))
    assert partition.changelog_offset == 41
    partition.destroy()
