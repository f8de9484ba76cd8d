"""Store: a table's partitions in their directories, opened lazily."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkit.state import (
    ChangelogPartition,
    MemoryBackend,
    RocksDBBackend,
    Store,
    StoreClosedError,
    backend_factory,
)


def test_rocksdb_partitions_live_in_their_directories(tmp_path: Path) -> None:
    with Store(tmp_path, "app", "counts") as store:
        assert store.partitions() == []
        part = store.partition(3)
        assert store.partition(3) is part  # opened once
        assert isinstance(part.backend, RocksDBBackend)
        assert part.changelog == ChangelogPartition("app-counts-changelog", 3)
        assert (tmp_path / "app" / "counts" / "3").is_dir()
        store.partition(1)
        assert store.partitions() == [1, 3]
        tx = part.begin()
        tx.set(b"k", b"v")
        tx.commit(12)


def test_revoke_keeps_files_destroy_deletes_them(tmp_path: Path) -> None:
    store = Store(tmp_path, "app", "t")
    part = store.partition(0)
    part.apply_changelog([(b"k", b"v", 5)])
    store.revoke(0)
    store.revoke(0)  # not open: no-op
    assert part.closed and store.partitions() == []
    reopened = store.partition(0)
    assert reopened.get(b"k") == b"v" and reopened.changelog_offset == 5
    store.destroy(0)
    assert not store.partition_path(0).exists()
    assert store.partition(0).changelog_offset is None
    store.revoke(0)
    store.destroy(0)  # destroying a closed partition deletes its files too
    assert not store.partition_path(0).exists()
    store.close()
    with pytest.raises(StoreClosedError):
        store.partition(0)


def test_memory_store_forgets_on_revoke(tmp_path: Path) -> None:
    store = Store(tmp_path, "app", "t", backend="memory")
    part = store.partition(0)
    assert isinstance(part.backend, MemoryBackend)
    part.apply_changelog([(b"k", b"v", 0)])
    store.revoke(0)
    assert store.partition(0).get(b"k") is None  # restore again from the changelog
    assert not (tmp_path / "app").exists()
    store.close()


def test_custom_backend_factory_and_changelog_name(tmp_path: Path) -> None:
    opened: list[Path] = []

    def factory(path: Path) -> MemoryBackend:
        opened.append(path)
        return MemoryBackend()

    store = Store(tmp_path, "app", "t", backend=factory, changelog="custom-changelog")
    assert store.partition(2).changelog == ChangelogPartition("custom-changelog", 2)
    assert opened == [tmp_path / "app" / "t" / "2"]
    store.close()


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "ä"])
def test_names_must_be_safe_path_components(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        Store(tmp_path, name, "t")
    with pytest.raises(ValueError):
        Store(tmp_path, "app", name)


def test_unknown_backend_and_bad_partition(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        backend_factory("leveldb")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Store(tmp_path, "app", "t").partition(-1)
