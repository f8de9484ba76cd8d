"""gc_paused: the cyclic GC is off inside the block and back as it was after it; ``promote``
moves what the block built to the oldest generation without a collection walking it."""

from __future__ import annotations

import gc

from streamkit.gcpause import gc_paused


class Node:
    def __init__(self) -> None:
        self.next: Node | None = None


def in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation))


def test_off_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_promote_moves_the_batch_to_the_oldest_generation() -> None:
    gc.collect()
    with gc_paused():  # no collection moves the batch while it is looked at
        with gc_paused(promote=True):
            batch = [Node() for _ in range(1000)]
            assert in_generation(batch[0], 0)
        assert gc.get_count()[0] < 1000
        assert in_generation(batch[0], 2) and not in_generation(batch[0], 0)
        assert gc.get_freeze_count() == 0


def test_promoted_cycles_are_still_collected() -> None:
    import weakref

    with gc_paused(promote=True):
        a, b = Node(), Node()
        a.next, b.next = b, a
        ref = weakref.ref(a)
    del a, b
    gc.collect()
    assert ref() is None


def test_promote_leaves_a_freeze_alone() -> None:
    gc.freeze()
    try:
        with gc_paused():  # no collection moves the batch while it is looked at
            with gc_paused(promote=True):
                batch = [Node() for _ in range(10)]
            assert gc.get_freeze_count() > 0  # an unfreeze would have emptied it
            assert in_generation(batch[0], 0)
    finally:
        gc.unfreeze()
