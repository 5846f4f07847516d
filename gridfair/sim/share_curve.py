"""Shares over time and the share error of a run, for comparing a pool's history as it
happened with the policies replayed on it.

A user's allocated power at a moment is what its running tasks hold (a task on node n holds
n's power per cpu x its cpus, as the pool counts it). Runs and waits are added as intervals
and integrated into bins of a fixed width: a run costs the bins it spans, not a visit per
event, and the curve of a month is a few hundred numbers per user.

Share error (owner share, `gridfair.core.shares.share_error`): at each moment, the power
owners were owed and waited for, as a fraction of the grid's power:

    sum over users of min(max(0, provided - allocated), waiting cpus x mean power per cpu)
    / total power

An owner below its share with jobs waiting adds the smaller of what it lacks and what its
waiting jobs could use; an owner at or above its share, a user who provides nothing, or a user
with nothing waiting adds nothing. 0 is a pool that always served its owners first. Per bin,
allocated and waiting are the bin's means; the run's figure is the mean over the bins up to
its last completion, each weighted by the time it covers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gridfair.core.pool import Node, PoolListener, Task
from gridfair.core.shares import share_error

#: Bins a history's curve is cut into (`bin_width`).
BINS = 200


def bin_width(span: float, bins: int = BINS) -> float:
    """The width of `bins` bins over `span` seconds (1 s for a span of nothing)."""
    return span / bins if span > 0 else 1.0


def _add(series: list[float], start: float, end: float, amount: float, width: float) -> None:
    """Integrate `amount` (per second) over [start, end) into bins of `width`."""
    if end <= start:
        return
    first, last = int(start // width), int(end // width)
    if len(series) <= last:
        series.extend([0.0] * (last + 1 - len(series)))
    if first == last:
        series[first] += amount * (end - start)
        return
    series[first] += amount * ((first + 1) * width - start)
    for index in range(first + 1, last):
        series[index] += amount * width
    series[last] += amount * (end - last * width)


class ShareCurve(PoolListener):
    """Allocated power and waiting cpus per user over time; listens to a simulation's pool
    (`task_started`, `task_stopped`), or is fed a recorded run's intervals (`add_run`,
    `add_wait`)."""

    def __init__(self, nodes: Sequence[Node], width: float) -> None:
        self.width = width
        self.total_power = math.fsum(node.power for node in nodes)
        self.power_per_cpu = self.total_power / sum(node.cpus for node in nodes)
        self.provided: dict[str, float] = {}
        for node in nodes:
            if node.owner is not None:
                self.provided[node.owner] = self.provided.get(node.owner, 0.0) + node.power
        self.allocated: dict[str, list[float]] = {}  # user -> MFlop-seconds per bin
        self.waiting: dict[str, list[float]] = {}  # user -> cpu-seconds waiting per bin
        self._never_started: list[tuple[str, float, float]] = []  # (user, submit, cpus)

    def add_run(self, user: str, start: float, end: float, power: float) -> None:
        """A run holding `power` MFlops from `start` to `end`."""
        _add(self.allocated.setdefault(user, []), start, end, power, self.width)

    def add_wait(self, user: str, start: float, end: float, cpus: float) -> None:
        """A job of `cpus` waiting from `start` to `end`."""
        _add(self.waiting.setdefault(user, []), start, end, cpus, self.width)

    def add_task_wait(self, task: Task) -> None:
        """A task's wait from its submission to its first start (or to the run's end, for a
        task that never started: `series` adds it then)."""
        if task.first_start is None:
            self._never_started.append((task.user, task.submit_time, task.cpus))
        else:
            self.add_wait(task.user, task.submit_time, task.first_start, task.cpus)

    # ------------------------------------------------------------ the pool's events
    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        self.add_run(task.user, task.start_time, now, node.power_per_cpu * task.cpus)

    # ------------------------------------------------------------ the figures
    def series(self, end: float) -> dict[str, Any]:
        """Per-bin shares and share error up to `end` (the run's last completion), and the
        mean share error: plain lists and numbers (JSON)."""
        for user, submit, cpus in self._never_started:
            self.add_wait(user, submit, end, cpus)
        self._never_started.clear()
        width = self.width
        bins = max(1, math.ceil(end / width)) if end > 0 else 1
        covered = [min(width, end - index * width) if end > 0 else width
                   for index in range(bins)]
        users = sorted(set(self.allocated) | set(self.waiting) | set(self.provided))
        shares = {user: [_at(self.allocated.get(user), index) / (covered[index]
                                                                 * self.total_power)
                         for index in range(bins)] for user in users}
        errors = [share_error(((provided, _at(self.allocated.get(user), index) / covered[index],
                                _at(self.waiting.get(user), index) / covered[index])
                               for user, provided in self.provided.items()),
                              self.power_per_cpu, self.total_power)
                  for index in range(bins)]
        mean = (math.fsum(error * span for error, span in zip(errors, covered, strict=True))
                / math.fsum(covered))
        return {"width": width, "times": [index * width for index in range(bins)],
                "shares": shares, "share_error": errors, "mean_share_error": mean,
                "provided": {user: power / self.total_power
                             for user, power in self.provided.items()}}


def _at(series: list[float] | None, index: int) -> float:
    return series[index] if series is not None and index < len(series) else 0.0
