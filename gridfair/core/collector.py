"""The cyclic garbage collector, paused while a large, long-lived heap is worked on.

A daemon cycle over a big pool keeps about a million objects alive from cycle to cycle (the
kept pool, the memos of ads and views) and makes a few hundred thousand more (framed ads,
queue entries), most of which survive into the next cycle. Those survivors are what triggers
the collector's full collections, each of which walks the whole heap: at 10k slots / 100k
jobs they cost about half of a steady cycle. Reference counting frees what a cycle drops
without the collector; reference cycles made during it wait for the first collection after.

A daemon cycle makes no cyclic garbage (its pool is closed when the cycle is done with it,
`Pool.close`), so walking its survivors after every cycle finds nothing: `CycleCollector`
moves them out of the collector's sight instead (`gc.freeze`), and hands everything back every
`sweep_every` cycles, so that whatever did become cyclic garbage meanwhile is still freed.
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


class CycleCollector:
    """The collector around the cycles of a long-running loop (`cycle()`): paused during a
    cycle; after a cycle that left at least `freeze_after` new objects alive (a big pool's;
    a small one's cost nothing to walk), those are frozen; every `sweep_every`-th cycle the
    frozen objects go back to the collector."""

    def __init__(self, *, freeze_after: int = 20_000, sweep_every: int = 50) -> None:
        self.freeze_after = freeze_after
        self.sweep_every = sweep_every
        self.cycles = 0
        self.frozen = 0  # cycles whose survivors were frozen

    @contextmanager
    def cycle(self) -> Iterator[None]:
        self.cycles += 1
        with collector_paused():
            try:
                yield
            finally:
                if self.cycles % self.sweep_every == 0:
                    gc.unfreeze()
                elif gc.get_count()[0] >= self.freeze_after:
                    gc.freeze()
                    self.frozen += 1
