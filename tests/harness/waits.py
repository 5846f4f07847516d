"""Per-user waits accumulated online, one task at a time as it ends: what a streamed run of
millions of tasks keeps (`bench/google_month.py`) in memory per user, not per task."""

from __future__ import annotations

import math
from functools import reduce
from operator import add

from gridfair.core.pool import DONE, Task


class UserWaits:
    """Per-user waits and completions accumulated online, one task at a time as it ends
    (`Simulation(on_task_done=...)`), in memory per user, not per task.

    Fed the tasks of a run in any order, its means equal `user_metrics`'s up to float
    summation order (the list path sums in submit order)."""

    def __init__(self) -> None:
        self.by_user: dict[str, list[float]] = {}  # user -> [tasks, started, wait sum, done]

    def add(self, task: Task) -> None:
        totals = self.by_user.get(task.user)
        if totals is None:
            totals = self.by_user[task.user] = [0, 0, 0.0, 0]
        totals[0] += 1
        if task.first_start is not None:
            totals[1] += 1
            totals[2] += task.first_start - task.submit_time
        if task.state == DONE:
            totals[3] += 1

    @property
    def tasks(self) -> int:
        return sum(int(totals[0]) for totals in self.by_user.values())

    @property
    def completed(self) -> int:
        return sum(int(totals[3]) for totals in self.by_user.values())

    def mean_wait(self, user: str) -> float:
        _, started, wait_sum, _ = self.by_user[user]
        return wait_sum / started if started else math.nan

    def users_mean_wait(self) -> float:
        """The SDRF paper's figure: the mean over users of each user's mean wait (users whose
        tasks never started are left out)."""
        waits = [self.mean_wait(user) for user, totals in self.by_user.items() if totals[1]]
        return _mean(waits)


def _mean(values: list[float]) -> float:
    # Summed left to right, as `sim.metrics` sums its means.
    return reduce(add, values, 0.0) / len(values) if values else math.nan
