"""Fixtures shared by the state-store tests: every backend-level behaviour is checked on
both backends through the same parametrized fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streamkit.state import (
    ChangelogPartition,
    KVBackend,
    MemoryBackend,
    RocksDBBackend,
    StorePartition,
)

BACKENDS = ["memory", "rocksdb"]
CHANGELOG = ChangelogPartition("app-table-changelog", 0)


def open_backend(kind: str, path: Path) -> KVBackend:
    if kind == "memory":
        return MemoryBackend()
    return RocksDBBackend(path)


@pytest.fixture(params=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_backend(backend_kind: str, tmp_path: Path) -> Iterator[Callable[[], KVBackend]]:
    """Opens fresh backends of the current kind (each in its own directory); closes them
    all at teardown."""
    opened: list[KVBackend] = []

    def make() -> KVBackend:
        backend = open_backend(backend_kind, tmp_path / f"db{len(opened)}")
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        backend.close()


@pytest.fixture
def backend(make_backend: Callable[[], KVBackend]) -> KVBackend:
    return make_backend()


@pytest.fixture
def make_partition(
    make_backend: Callable[[], KVBackend],
) -> Callable[[], StorePartition]:
    return lambda: StorePartition(make_backend(), CHANGELOG)


@pytest.fixture
def partition(make_partition: Callable[[], StorePartition]) -> StorePartition:
    return make_partition()


def contents(partition: StorePartition) -> dict[bytes, bytes]:
    return dict(partition.iter_range())
