"""Named points in a cycle where a test can stop the daemon, to prove crash safety for real.

`GRIDFAIR_FAULT=<action>:<point>[:<cycle>]` with action `crash` (the process sends itself
SIGKILL) or `pause` (it writes `<store>.paused` and sleeps, for the test to SIGKILL it from
outside). `<cycle>` is the process's n-th cycle (default 1). Unset, every point is a no-op. (A wrong
wall clock is `clock.py`'s `GRIDFAIR_CLOCK_OFFSET`.)
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from gridfair.errors import ConfigError

POINTS = (
    "after_snapshot", "after_plan", "after_issue", "after_vacate", "after_issue_allocations",
    "after_actions", "before_finish",
)
#: Inside a chunk of pruning (`gridfair.daemon.retention`), after the cycle is recorded.
PRUNE_POINTS = ("during_prune",)
ENV = "GRIDFAIR_FAULT"


class FaultPoints:
    def __init__(self, spec: str | None, store: Path) -> None:
        self.action = self.point = None
        self.cycle = 1
        self.marker = store.with_name(store.name + ".paused")
        if not spec:
            return
        parts = spec.split(":")
        if len(parts) not in (2, 3) or parts[0] not in ("crash", "pause") or parts[1] not in (
                *POINTS, *PRUNE_POINTS):
            raise ConfigError(f"{ENV}={spec!r}: expected crash|pause:<point>[:<cycle>], "
                              f"points: {', '.join((*POINTS, *PRUNE_POINTS))}")
        self.action, self.point = parts[0], parts[1]
        if len(parts) == 3:
            self.cycle = int(parts[2])

    @classmethod
    def from_environment(cls, store: Path) -> FaultPoints:
        return cls(os.environ.get(ENV), store)

    def reached(self, point: str, cycle_number: int) -> None:
        if point != self.point or cycle_number != self.cycle:
            return
        if self.action == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        # Written whole, then renamed: a test polling for the marker never reads it half-written.
        partial = self.marker.with_name(self.marker.name + ".tmp")
        partial.write_text(point)
        partial.replace(self.marker)
        while True:  # until the test kills us
            time.sleep(0.05)
