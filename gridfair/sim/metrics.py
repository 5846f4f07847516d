"""Per-user and per-run metrics of a simulation.

User Satisfaction (HOSEP paper, Eq. 1, 2, Def. 5): for task j of user i, arriving at AT_j and
completing at CT_j, US_ij = 100 x ideal_j / (CT_j - AT_j), where ideal_j is the task's run time
on an ideal machine; US_i is the mean over the user's completed tasks. Def. 5 has two readings:
- `grid` (default): the ideal machine has the mean power of one cpu of the grid (what iSPD
  computes, and what produced the paper's Fig. 4; it makes users comparable);
- `own`: the ideal machine has the mean power of one cpu of the machines the user provides
  (Def. 5's text); a user who provides nothing is measured against the grid's mean.
A task with a fixed duration has that duration as its ideal run time under both readings.

Waiting time is first start minus submission; turnaround is completion minus submission;
slowdown is turnaround over the ideal run time. Percentiles are nearest-rank.
Jain's index over users' satisfaction: (sum x)^2 / (n sum x^2).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import reduce
from operator import add

from gridfair.core.pool import DONE, DROPPED, KILLED, QUEUED, Node, Task
from gridfair.sim.engine import SimulationResult

SATISFACTION_BASES = ("grid", "own")


@dataclass(frozen=True)
class UserMetrics:
    user: str
    provided_mflops: float
    provided_share: float
    submitted: int
    completed: int
    dropped: int
    killed: int
    queued: int
    preempted: int  # vacates suffered by the user's tasks
    lost_work: float  # MFlop (or seconds, for timed tasks) thrown away by vacates
    satisfaction: float
    mean_wait: float
    p50_wait: float
    p95_wait: float
    mean_turnaround: float
    mean_slowdown: float

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RunSummary:
    tasks: int
    completed: int
    makespan: float
    utilization: float
    vacates: int
    jain_satisfaction: float
    mean_wait: float
    events: int
    negotiations: int
    wall_seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (nan for none)."""
    if not sorted_values:
        return math.nan
    rank = max(math.ceil(fraction * len(sorted_values)), 1)
    return sorted_values[rank - 1]


def jain_index(values: Iterable[float | None]) -> float:
    """(sum x)^2 / (n sum x^2) over the values present (None and NaN are left out)."""
    present = [value for value in values if value is not None and not math.isnan(value)]
    square_sum = math.fsum(value * value for value in present)
    if not present or square_sum == 0:
        return math.nan
    return math.fsum(present) ** 2 / (len(present) * square_sum)


def _mean(values: Sequence[float]) -> float:
    # Summed left to right, as `RunMetrics` sums online (builtin sum() compensates on 3.12+).
    return reduce(add, values, 0.0) / len(values) if values else math.nan


class _UserTotals:
    """One user's running figures, in the order its tasks were added."""

    __slots__ = ("submitted", "counts", "preempted", "lost", "waits", "turnarounds",
                 "turnaround_sum", "satisfactions", "satisfaction_sum", "slowdowns",
                 "slowdown_sum")

    def __init__(self) -> None:
        self.submitted = 0
        self.counts = {DONE: 0, DROPPED: 0, KILLED: 0, QUEUED: 0}
        self.preempted = 0
        self.lost = 0.0
        self.waits = array("d")  # every wait, for the percentiles
        self.turnarounds = self.satisfactions = self.slowdowns = 0
        self.turnaround_sum = self.satisfaction_sum = self.slowdown_sum = 0.0


class RunMetrics:
    """Per-user and run-wide figures accumulated one task at a time (`add`), in arrival order:
    a kept run's `result.tasks`, or a streamed run's tasks put back in that order
    (`task_stream.InOrder(arrival_key, ...)`). Sums run in that order, so both give the same
    figures to the last bit. Memory: a float per task (its wait, for the percentiles) and the
    totals per user."""

    def __init__(self, nodes: Sequence[Node], base: str = "grid") -> None:
        if base not in SATISFACTION_BASES:
            raise ValueError(f"satisfaction base must be one of {SATISFACTION_BASES}, "
                             f"got {base!r}")
        self.total_power = math.fsum(node.power for node in nodes)
        grid_cpu_power = self.total_power / sum(node.cpus for node in nodes)
        self.provided: dict[str, list[float]] = {}
        for node in nodes:
            if node.owner is not None:
                power_cpus = self.provided.setdefault(node.owner, [0.0, 0.0])
                power_cpus[0] += node.power
                power_cpus[1] += node.cpus
        self.ideal_power = {user: power / cpus if base == "own" and cpus else grid_cpu_power
                            for user, (power, cpus) in self.provided.items()}
        self.grid_cpu_power = grid_cpu_power
        self.by_user: dict[str, _UserTotals] = {}
        self.tasks = self.completed = self.waited = 0
        self.wait_sum = 0.0

    def add(self, task: Task) -> None:
        totals = self.by_user.get(task.user)
        if totals is None:
            totals = self.by_user[task.user] = _UserTotals()
        self.tasks += 1
        totals.submitted += 1
        totals.preempted += task.preemptions
        totals.lost += task.lost_work
        totals.counts[task.state] = totals.counts.get(task.state, 0) + 1
        if task.first_start is not None:
            wait = task.first_start - task.submit_time
            totals.waits.append(wait)
            self.wait_sum += wait
            self.waited += 1
        if task.state != DONE:
            return
        self.completed += 1
        ideal = (task.work / self.ideal_power.get(task.user, self.grid_cpu_power)
                 if task.work is not None else task.duration or 0.0)
        assert task.finish_time is not None  # done
        turnaround = task.finish_time - task.submit_time
        totals.turnarounds += 1
        totals.turnaround_sum += turnaround
        if turnaround > 0:
            totals.satisfactions += 1
            totals.satisfaction_sum += 100.0 * ideal / turnaround
            if ideal > 0:
                totals.slowdowns += 1
                totals.slowdown_sum += turnaround / ideal

    def users(self) -> list[UserMetrics]:
        """One row per user, providers first in the order the nodes name them, then the
        others in order of appearance."""
        names = list(self.provided) + [user for user in self.by_user if user not in self.provided]
        rows = []
        for name in names:
            totals = self.by_user.get(name) or _UserTotals()
            power, _ = self.provided.get(name, (0.0, 0.0))
            waits = sorted(totals.waits)
            rows.append(UserMetrics(
                user=name,
                provided_mflops=power,
                provided_share=power / self.total_power if self.total_power else 0.0,
                submitted=totals.submitted,
                completed=totals.counts[DONE],
                dropped=totals.counts[DROPPED],
                killed=totals.counts[KILLED],
                queued=totals.counts[QUEUED],
                preempted=totals.preempted,
                lost_work=totals.lost,
                satisfaction=_ratio(totals.satisfaction_sum, totals.satisfactions),
                mean_wait=_mean(waits),
                p50_wait=percentile(waits, 0.5),
                p95_wait=percentile(waits, 0.95),
                mean_turnaround=_ratio(totals.turnaround_sum, totals.turnarounds),
                mean_slowdown=_ratio(totals.slowdown_sum, totals.slowdowns),
            ))
        return rows

    def summary(self, result: SimulationResult, users: Sequence[UserMetrics]) -> RunSummary:
        capacity_cpus = sum(node.cpus for node in result.nodes)
        return RunSummary(
            tasks=self.tasks,
            completed=self.completed,
            makespan=result.makespan,
            utilization=(result.busy_cpu_seconds / (capacity_cpus * result.makespan)
                         if result.makespan > 0 else math.nan),
            vacates=result.vacates,
            jain_satisfaction=jain_index(user.satisfaction for user in users),
            mean_wait=_ratio(self.wait_sum, self.waited),
            events=result.events,
            negotiations=result.negotiations,
            wall_seconds=result.wall_seconds,
        )


def _ratio(total: float, count: int) -> float:
    return total / count if count else math.nan


def kept_metrics(result: SimulationResult, base: str = "grid") -> RunMetrics:
    """The metrics of a run that kept its tasks (`result.tasks`, in arrival order)."""
    metrics = RunMetrics(result.nodes, base)
    for task in result.tasks:
        metrics.add(task)
    return metrics


def user_metrics(result: SimulationResult, base: str = "grid") -> list[UserMetrics]:
    """One row per user of a run that kept its tasks (`RunMetrics.users`)."""
    return kept_metrics(result, base).users()


def run_summary(result: SimulationResult, users: Sequence[UserMetrics]) -> RunSummary:
    """The run-wide figures of a run that kept its tasks (`RunMetrics.summary`)."""
    return kept_metrics(result).summary(result, users)
