"""When a look between cycles (`daemon.poll`) starts the next cycle.

A slot freed or a job started runs the cycle at once: a freed slot waits for it, and a start
on a kept claim has its slot's next job to be steered ahead. Jobs submitted run it once the
queue stops growing: users who submit together submit one after another (each
`condor_submit` takes a moment), and a cycle started on the first user's submission gives
that user every free slot, which nothing takes back between equal users (issue 44's
completion spread of 7, `docs/results/throughput.md`). So while each look finds more idle
jobs, the next look comes `SETTLE_LOOK` seconds later, and the cycle runs at the first look
that finds none, a slot change, or `SETTLE_LONGEST` seconds after the first submission seen
(a queue that grows steadily does not hold cycles back).
"""

from __future__ import annotations

from gridfair.daemon.backends import PoolChange

#: Seconds between looks while the queue grows (a `condor_submit` takes about half of one).
SETTLE_LOOK = 1.0
#: The longest a submission's cycle waits for the queue to stop growing.
SETTLE_LONGEST = 5.0


class ArrivalSettle:
    """Says, look by look, whether the cycle runs now (`after`) and when to look next."""

    def __init__(self, look: float = SETTLE_LOOK, longest: float = SETTLE_LONGEST) -> None:
        self.look, self.longest = look, longest
        self.since: float | None = None  # when the submissions now settling were first seen

    def after(self, change: PoolChange, now: float) -> bool:
        """Whether the look that saw `change` at `now` (monotonic seconds) runs the cycle."""
        if change & PoolChange.SLOT:
            self.since = None
            return True
        if change & PoolChange.SUBMITTED:
            if self.since is None:
                self.since = now
            if now - self.since < self.longest:
                return False
        elif self.since is None:
            return False
        self.since = None  # the queue stopped growing, or grew for too long
        return True

    def next_look(self, poll: float) -> float:
        """Seconds to the next look: `poll`, or sooner while submissions settle."""
        return poll if self.since is None else min(poll, self.look)
