"""The wall clock the daemon states its lease in (and the backends their times).

`GRIDFAIR_CLOCK_OFFSET=<seconds>` moves it, as a host whose clock is wrong would: a test
cannot change the system clock (`tests/live/test_clock_live.py`).
"""

from __future__ import annotations

import os
import time

CLOCK_ENV = "GRIDFAIR_CLOCK_OFFSET"


def wall_clock() -> float:
    """`time.time()`, moved by `GRIDFAIR_CLOCK_OFFSET` seconds when a test sets it."""
    offset = os.environ.get(CLOCK_ENV)
    return time.time() + (float(offset) if offset else 0.0)
