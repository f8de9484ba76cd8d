"""The KVBackend contract, run against both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.state import KVBackend, MemoryBackend, RocksDBBackend, StoreClosedError
from tests.state.conftest import open_backend

KEYS = [
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x01",
    b"a",
    b"ab",
    b"abc",
    b"b",
    b"\xfe",
    b"\xff",
    b"\xff\xff",
]


def fill(backend: KVBackend) -> dict[bytes, bytes]:
    model = {key: b"v" + key for key in KEYS}
    backend.write(list(model.items()))
    return model


def test_get_write_delete(backend: KVBackend) -> None:
    assert backend.get(b"k") is None
    backend.write([(b"k", b"1"), (b"j", b"")])
    assert backend.get(b"k") == b"1"
    assert backend.get(b"j") == b""  # an empty value is a value, not a delete
    backend.write([(b"k", None), (b"missing", None)])
    assert backend.get(b"k") is None
    assert list(backend.iter_all()) == [(b"j", b"")]


def test_later_change_in_a_batch_wins(backend: KVBackend) -> None:
    backend.write(
        [(b"k", b"1"), (b"k", b"2"), (b"d", b"x"), (b"d", None), (b"r", None), (b"r", b"3")]
    )
    assert list(backend.iter_all()) == [(b"k", b"2"), (b"r", b"3")]


@pytest.mark.parametrize(
    ("lo", "hi"),
    [
        (b"", b"\xff\xff\xff"),
        (b"a", b"b"),
        (b"ab", b"ab\x00"),
        (b"\x00", b"\x01"),
        (b"b", b"a"),
        (b"a", b"a"),
        (b"\xfe", b"\xff\xff"),
        (b"", b"\x00"),
    ],
)
def test_iter_range_bounds(backend: KVBackend, lo: bytes, hi: bytes) -> None:
    model = fill(backend)
    expected = sorted((k, v) for k, v in model.items() if lo <= k < hi)
    assert list(backend.iter_range(lo, hi)) == expected
    assert list(backend.iter_range(lo, hi, reverse=True)) == expected[::-1]


def test_iter_range_outlives_its_bound_objects(backend: KVBackend) -> None:
    # Regression: rocksdict keeps a pointer to the upper bound's buffer; a scan used after
    # the bound bytes were collected (and their memory reused) ran past the bound.
    backend.write([(bytes([1]) + bytes([i]) * 20, b"x") for i in range(40)])

    def scan(reverse: bool) -> Iterator[tuple[bytes, bytes]]:
        lo = bytes([1]) + bytes([5]) * 20
        hi = bytes([1]) + bytes([10]) * 20
        return backend.iter_range(lo, hi, reverse)

    forward, backward = scan(False), scan(True)
    junk = [bytes([30 + i % 10]) * 21 for i in range(2000)]  # reuse the freed memory
    assert len(list(forward)) == 5
    assert len(list(backward)) == 5
    del junk


def test_iter_all_is_ordered(backend: KVBackend) -> None:
    model = fill(backend)
    assert list(backend.iter_all()) == sorted(model.items())


def test_closed_backend_refuses(backend: KVBackend) -> None:
    fill(backend)
    backend.close()
    backend.close()  # idempotent
    with pytest.raises(StoreClosedError):
        backend.get(b"a")
    with pytest.raises(StoreClosedError):
        backend.write([(b"a", b"1")])
    with pytest.raises(StoreClosedError):
        backend.iter_range(b"", b"\xff")
    with pytest.raises(StoreClosedError):
        backend.iter_all()


def test_close_cuts_off_open_scans(backend_kind: str, tmp_path: Path) -> None:
    backend = open_backend(backend_kind, tmp_path / "db")
    fill(backend)
    started = backend.iter_range(b"", b"\xff\xff\xff")
    next(started)
    unstarted = backend.iter_all()
    backend.close()
    for scan in (started, unstarted):
        with pytest.raises(StoreClosedError):
            next(scan)
    # A live scan must not keep RocksDB's LOCK: the partition can be opened again at once.
    open_backend(backend_kind, tmp_path / "db").close()


def test_rocksdb_persists_and_destroy_deletes(tmp_path: Path) -> None:
    path = tmp_path / "db"
    backend = RocksDBBackend(path)
    model = fill(backend)
    backend.close()
    backend = RocksDBBackend(path)
    assert dict(backend.iter_all()) == model
    backend.destroy()
    assert not path.exists()
    assert dict(RocksDBBackend(path).iter_all()) == {}


def test_memory_close_drops_data() -> None:
    backend = MemoryBackend()
    fill(backend)
    backend.destroy()
    with pytest.raises(StoreClosedError):
        backend.get(b"a")


def test_rocksdb_refuses_a_second_opener(tmp_path: Path) -> None:
    from streamkit.state import StateError

    backend = RocksDBBackend(tmp_path / "db")
    with pytest.raises(StateError):
        RocksDBBackend(tmp_path / "db")
    backend.close()


# Keys from a tiny alphabet so that writes collide and ranges hit edges often.
keys = st.binary(max_size=3).map(lambda b: bytes(x % 3 * 0x7F for x in b))
changes = st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=2))), max_size=12)
ranges = st.tuples(keys, keys, st.booleans())


@pytest.fixture(scope="module", params=["memory", "rocksdb"])
def shared_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KVBackend]:
    # One database for all examples (opening RocksDB costs tens of milliseconds); each
    # example starts by deleting everything, which exercises deletes too.
    backend = open_backend(str(request.param), tmp_path_factory.mktemp("db"))
    yield backend
    backend.destroy()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.tuples(changes, ranges), min_size=1, max_size=8))
def test_backend_matches_a_dict(
    shared_backend: KVBackend,
    steps: list[tuple[list[tuple[bytes, bytes | None]], tuple[bytes, bytes, bool]]],
) -> None:
    backend = shared_backend
    backend.write([(key, None) for key, _ in backend.iter_all()])
    model: dict[bytes, bytes] = {}
    for batch, (lo, hi, reverse) in steps:
        backend.write(batch)
        for key, value in batch:
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        expected = sorted((k, v) for k, v in model.items() if lo <= k < hi)
        if reverse:
            expected.reverse()
        assert list(backend.iter_range(lo, hi, reverse)) == expected
        for key in {lo, hi}:
            assert backend.get(key) == model.get(key)
    assert list(backend.iter_all()) == sorted(model.items())
