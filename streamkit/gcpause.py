"""Pausing Python's cyclic garbage collector while a batch of objects is built.

Building a batch of records allocates thousands of container objects that hold no reference
cycles. The cyclic collector runs every few hundred allocations and walks every young object
each time; the survivors it promotes then make full collections, which walk the whole heap,
come around far more often. Over a batch that is most of the time spent. Paused, the batch
costs one young collection after it (or none, with ``promote``), and reference counting still
frees everything as usual.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused(*, promote: bool = False) -> Iterator[None]:
    """The cyclic GC off inside the block; back on after it unless it was off before.

    ``promote``: for a batch that outlives the block (returned to the caller), move it to the
    oldest generation on the way out instead of having the next young collection walk all of
    it: ``gc.freeze()`` then ``gc.unfreeze()`` moves every tracked object there in constant
    time and resets the young count. Objects are not freed or kept any differently: a cycle
    among them is collected by the next full collection. Skipped when something is frozen
    already (a process preparing to fork), which ``unfreeze`` would undo.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if promote and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()
