"""Bookkeeping shared by the owner-share policies (OSEP, HOSEP): who is below its share and
wants more, who is above it, and each user's running tasks in victim order.

The rules themselves (what "below" means, which victim, when a preemption is allowed) live
in `osep.py` and `hosep.py`; this base only keeps their indexes current from pool events.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from gridfair.core.pool import Node, Pool, Task, UserState
from gridfair.core.stages import PreemptPolicy
from gridfair.policies.ranking import RunningTasks, UserRanking

# How many of the victim user's tasks to try when the receiver's job does not fit on the
# first one's machine (memory, Requirements); bounds the cost of a decision.
VICTIM_CANDIDATES = 16

#: How much the convergence guard's sum must fall by, at least. A move that leaves
#: Phi = sum_x Provided_x PowerDiff_x^2 where it was in exact arithmetic (B takes back 25 MFlops
#: from A: -0.2 + 0.0 against 0.4 + -0.6) can round to a fall in floating point (0.4 + -0.6 is
#: -0.19999999999999996), and a move that does not lower Phi can be undone by the next.
PHI_TOLERANCE = 1e-9


def phi_falls(receiver_diff: float, receiver_after: float, victim_diff: float,
              victim_after: float) -> bool:
    """HOSEP's convergence guard for a move of one machine's power between receiver a and
    victim b: PowerDiff_a + PowerDiff_a' < PowerDiff_b + PowerDiff_b' (primes: after the
    move), which is Phi falling, by more than `PHI_TOLERANCE` (a tie does not pass). A victim
    who provides nothing has PowerDiff +inf: always passes."""
    return (victim_diff + victim_after) - (receiver_diff + receiver_after) > PHI_TOLERANCE


class OwnerSharePreempt(PreemptPolicy):
    """Keeps `deficit` (receivers, most deprived first) and `excess` (victims, most over
    first) rankings and each user's running tasks sorted by `victim_key`."""

    def attach(self, pool: Pool) -> None:
        self.pool = pool
        self.deficit = UserRanking()
        self.excess = UserRanking()
        self.running = RunningTasks(self.victim_key)

    @abstractmethod
    def deficit_key(self, user: UserState) -> Any | None:
        """Rank of a user owed more than it holds and with idle work; None if it is not."""

    @abstractmethod
    def excess_key(self, user: UserState) -> Any | None:
        """Rank of a user holding more than its share; None if it does not."""

    @staticmethod
    @abstractmethod
    def victim_key(task: Task, node: Node | None = None) -> Any:
        """Order of a user's running tasks as victims, least costly first."""

    def user_changed(self, user: UserState, now: float) -> None:
        self.deficit.update(user, self.deficit_key(user))
        self.excess.update(user, self.excess_key(user))

    def task_started(self, task: Task, now: float) -> None:
        self.running.started(task)

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        self.running.stopped(task, node)
