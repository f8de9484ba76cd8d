"""The leader epoch cache on its own (streamkit.log.leader_epochs): Kafka's rules for assign,
KIP-279's end offsets, both truncations, and the leader-epoch-checkpoint file, plus a
property test against a model that keeps the epoch of every offset."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.log.leader_epochs import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCache,
    format_checkpoint,
)

E = EpochEntry


def cache_of(*entries: tuple[int, int], path: Path | None = None) -> LeaderEpochCache:
    return LeaderEpochCache(path, [E(*e) for e in entries])


def test_assign_appends_new_epochs_and_ignores_older_ones() -> None:
    cache = cache_of()
    assert cache.latest_epoch == -1
    assert cache.assign(1, 0)
    assert cache.assign(3, 10)
    assert not cache.assign(3, 15)  # the same epoch goes on
    assert not cache.assign(2, 20)  # an older leader's stamp: epochs never go down
    assert cache.entries == [E(1, 0), E(3, 10)]
    assert cache.latest_epoch == 3


def test_assign_replaces_entries_that_hold_no_batch() -> None:
    """A leader elected at offset 10 that wrote nothing is replaced by the next one."""
    cache = cache_of((1, 0), (3, 10))
    assert cache.assign(4, 10)
    assert cache.entries == [E(1, 0), E(4, 10)]
    assert cache.assign(6, 5)  # starts below both: both go (Kafka's non-monotonic cleanup)
    assert cache.entries == [E(1, 0), E(6, 5)]


def test_assign_refuses_negative_values() -> None:
    cache = cache_of()
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        cache.assign(-1, 0)
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        cache.assign(0, -5)


@pytest.mark.parametrize(("requested", "expected"), [
    (-1, (-1, -1)),  # UNDEFINED_EPOCH
    (0, (-1, -1)),  # below the first epoch: unknown here
    (1, (1, 10)),
    (2, (1, 10)),  # not an epoch of this log: the largest below it, ending where 3 starts
    (3, (3, 20)),
    (4, (3, 20)),
    (5, (5, 30)),  # the latest ends at the log end offset
    (9, (5, 30)),
])
def test_end_offset_for(requested: int, expected: tuple[int, int]) -> None:
    cache = cache_of((1, 0), (3, 10), (5, 20))
    assert cache.end_offset_for(requested, 30) == expected


def test_end_offset_for_an_empty_cache() -> None:
    assert cache_of().end_offset_for(3, 100) == (-1, -1)


def test_epoch_for_offset() -> None:
    cache = cache_of((1, 5), (3, 10))
    assert [cache.epoch_for_offset(o) for o in (0, 5, 9, 10, 99)] == [-1, 1, 1, 3, 3]


@pytest.mark.parametrize(("offset", "expected"), [
    (25, [E(1, 0), E(3, 10), E(5, 20)]),
    (20, [E(1, 0), E(3, 10)]),
    (15, [E(1, 0), E(3, 10)]),
    (10, [E(1, 0)]),
    (0, []),
])
def test_truncate_from_end(offset: int, expected: list[EpochEntry]) -> None:
    cache = cache_of((1, 0), (3, 10), (5, 20))
    assert cache.truncate_from_end(offset) == (len(expected) != 3)
    assert cache.entries == expected
    assert cache.latest_epoch == (expected[-1].epoch if expected else -1)


@pytest.mark.parametrize(("offset", "expected"), [
    (0, [E(1, 0), E(3, 10), E(5, 20)]),
    (4, [E(1, 4), E(3, 10), E(5, 20)]),
    (10, [E(3, 10), E(5, 20)]),
    (15, [E(3, 15), E(5, 20)]),
    (20, [E(5, 20)]),
    (99, [E(5, 99)]),
])
def test_truncate_from_start(offset: int, expected: list[EpochEntry]) -> None:
    cache = cache_of((1, 0), (3, 10), (5, 20))
    assert cache.truncate_from_start(offset) == (offset != 0)
    assert cache.entries == expected


def test_truncate_from_start_below_the_first_entry_changes_nothing() -> None:
    cache = cache_of((3, 10))
    assert not cache.truncate_from_start(5)
    assert cache.entries == [E(3, 10)]


def test_the_file_is_kafkas_format_and_follows_every_change(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(path)
    assert not path.exists()  # nothing saved until something changes
    cache.assign(0, 0)
    cache.assign(2, 120)
    assert path.read_text() == "0\n2\n0 0\n2 120\n"
    cache.truncate_from_start(50)
    assert path.read_text() == "0\n2\n0 50\n2 120\n"
    cache.truncate_from_end(100)
    assert path.read_text() == "0\n1\n0 50\n"
    cache.clear()
    assert path.read_text() == "0\n0\n"
    loaded = LeaderEpochCache.load(tmp_path)
    assert loaded is not None and loaded.entries == []


def test_load_reads_a_file_written_by_kafka(tmp_path: Path) -> None:
    # Kafka's reader splits on any whitespace; a file it created but never wrote is empty.
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("0\n3\n0  0\n4\t1200\n7 5000\n")
    loaded = LeaderEpochCache.load(tmp_path)
    assert loaded is not None
    assert loaded.entries == [E(0, 0), E(4, 1200), E(7, 5000)] and loaded.latest_epoch == 7
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("")
    empty = LeaderEpochCache.load(tmp_path)
    assert empty is not None and empty.entries == []


@pytest.mark.parametrize("text", [
    "1\n1\n0 0\n",  # an unknown version
    "0\n2\n0 0\n",  # fewer entries than the count says
    "0\n1\n0 0 7\n",  # a malformed line
    "0\nx\n",
    "0\n1\n-3 0\n",  # a negative epoch
])
def test_load_gives_up_on_a_bad_file(tmp_path: Path, text: str) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(text)
    assert LeaderEpochCache.load(tmp_path) is None


def test_load_of_a_missing_file(tmp_path: Path) -> None:
    assert LeaderEpochCache.load(tmp_path) is None


# -- the model ----------------------------------------------------------------------------


class EpochModel:
    """A log as the epoch of every offset: what the cache summarises. ``pending`` is an
    epoch begun at the log end offset with no record yet (a leader just elected);
    ``anchor`` the epoch in effect at the log start once retention emptied the log."""

    def __init__(self) -> None:
        self.epochs: list[int] = []  # the effective epoch of offsets 0.., -1 before any
        self.start = 0
        self.pending: int | None = None
        self.anchor: int | None = None

    @property
    def end(self) -> int:
        return len(self.epochs)

    def timeline(self) -> list[tuple[int, int]]:
        """(offset, epoch) of every offset the log still holds that has an epoch."""
        out = [(o, self.epochs[o]) for o in range(self.start, self.end) if self.epochs[o] >= 0]
        if self.start == self.end and self.anchor is not None and self.pending is None:
            out.append((self.start, self.anchor))
        if self.pending is not None:
            out.append((self.end, self.pending))
        return out

    def latest(self) -> int:
        return max((e for _o, e in self.timeline()), default=-1)

    def append(self, count: int, epoch: int) -> None:
        self.epochs += [max(epoch, self.latest())] * count
        self.pending = self.anchor = None

    def elect(self, epoch: int) -> None:
        if epoch > self.latest():
            self.pending = epoch

    def truncate(self, offset: int) -> None:
        del self.epochs[offset:]
        self.pending = None
        if offset <= self.start:
            self.anchor = None

    def move_start(self, offset: int) -> None:
        if offset == self.end and self.start < self.end:
            self.anchor = max((e for o, e in self.timeline() if o < self.end), default=None)
        self.start = offset

    def entries(self) -> list[EpochEntry]:
        out: list[EpochEntry] = []
        for offset, epoch in self.timeline():
            if not out or out[-1].epoch != epoch:
                out.append(E(epoch, offset))
        return out

    def end_offset_for(self, requested: int) -> tuple[int, int]:
        timeline = self.timeline()
        known = [e for _o, e in timeline if e <= requested]
        if not known:
            return -1, -1
        epoch = max(known)
        return epoch, min((o for o, e in timeline if e > epoch), default=self.end)


_op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(-1, 12)),
    st.tuples(st.just("elect"), st.integers(0, 12), st.just(0)),
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("start"), st.floats(0, 1), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(_op, max_size=40))
def test_cache_matches_the_model(tmp_path_factory: pytest.TempPathFactory,
                                 ops: list[tuple[str, float, int]]) -> None:
    directory = tmp_path_factory.mktemp("epochs")
    cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
    model = EpochModel()
    for name, amount, epoch in ops:
        if name == "append":
            if epoch >= 0:  # the partition assigns a batch's stamp; -1 is no stamp
                cache.assign(epoch, model.end)
            model.append(int(amount), epoch)
        elif name == "elect":
            cache.assign(epoch, model.end)
            model.elect(epoch)
        elif name == "truncate":
            target = model.start + round((model.end - model.start) * amount)
            cache.truncate_from_end(target)
            model.truncate(target)
        else:
            target = model.start + round((model.end - model.start) * amount)
            cache.truncate_from_start(target)
            model.move_start(target)
        assert cache.entries == model.entries(), (name, amount, epoch)
        assert cache.latest_epoch == model.latest()
        for requested in range(-1, 14):
            assert cache.end_offset_for(requested, model.end) == model.end_offset_for(requested), requested
    saved = LeaderEpochCache.load(directory)
    assert (saved.entries if saved is not None else []) == cache.entries


def test_format_checkpoint_of_nothing() -> None:
    assert format_checkpoint([]) == "0\n0\n"
