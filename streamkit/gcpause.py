"""Pausing Python's cyclic garbage collector while a batch of objects is built.

Building a batch of records allocates thousands of container objects that hold no reference
cycles and outlive the build (they are returned). The cyclic collector runs every few hundred
allocations and walks every young object each time; the survivors it promotes then make full
collections, which walk the whole heap, come around far more often. Over a batch that is most
of the time spent. Paused, the batch costs one young collection after it, and reference
counting still frees everything as usual.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off inside the block; back on after it unless it was off before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
