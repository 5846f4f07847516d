"""The cyclic garbage collector, paused while a large, long-lived heap is worked on.

A daemon cycle over a big pool keeps about a million objects alive from cycle to cycle (the
kept pool, the memos of ads and views) and makes a few hundred thousand more (framed ads,
queue entries), most of which survive into the next cycle. Those survivors are what triggers
the collector's full collections, each of which walks the whole heap: at 10k slots / 100k
jobs they cost about half of a steady cycle. Reference counting frees what a cycle drops
without the collector; reference cycles made during it wait for the first collection after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's state is restored after it
    (so blocks nest)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
