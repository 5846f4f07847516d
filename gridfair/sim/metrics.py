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
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from gridfair.core.pool import DONE, DROPPED, KILLED, QUEUED, Task
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
    values = [value for value in values if value is not None and not math.isnan(value)]
    square_sum = sum(value * value for value in values)
    if not values or square_sum == 0:
        return math.nan
    return sum(values) ** 2 / (len(values) * square_sum)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def user_metrics(result: SimulationResult, base: str = "grid") -> list[UserMetrics]:
    """One row per user, providers first in order of appearance, then the others."""
    if base not in SATISFACTION_BASES:
        raise ValueError(f"satisfaction base must be one of {SATISFACTION_BASES}, got {base!r}")
    nodes = result.nodes
    total_power = sum(node.power for node in nodes)
    grid_cpu_power = total_power / sum(node.cpus for node in nodes)
    provided: dict[str, list[float]] = {}
    for node in nodes:
        if node.owner is not None:
            power_cpus = provided.setdefault(node.owner, [0.0, 0.0])
            power_cpus[0] += node.power
            power_cpus[1] += node.cpus
    by_user: dict[str, list[Task]] = {}
    for task in result.tasks:
        by_user.setdefault(task.user, []).append(task)
    names = list(provided) + [user for user in by_user if user not in provided]
    rows = []
    for name in names:
        tasks = by_user.get(name, [])
        power, cpus = provided.get(name, (0.0, 0.0))
        ideal_power = power / cpus if base == "own" and cpus else grid_cpu_power
        waits, turnarounds, slowdowns, satisfactions = [], [], [], []
        counts = {DONE: 0, DROPPED: 0, KILLED: 0, QUEUED: 0}
        preempted = 0
        lost = 0.0
        for task in tasks:
            preempted += task.preemptions
            lost += task.lost_work
            counts[task.state] = counts.get(task.state, 0) + 1
            if task.first_start is not None:
                waits.append(task.first_start - task.submit_time)
            if task.state != DONE:
                continue
            ideal = task.work / ideal_power if task.work is not None else task.duration or 0.0
            turnaround = task.finish_time - task.submit_time
            turnarounds.append(turnaround)
            if turnaround > 0:
                satisfactions.append(100.0 * ideal / turnaround)
                if ideal > 0:
                    slowdowns.append(turnaround / ideal)
        waits.sort()
        rows.append(UserMetrics(
            user=name,
            provided_mflops=power,
            provided_share=power / total_power if total_power else 0.0,
            submitted=len(tasks),
            completed=counts[DONE],
            dropped=counts[DROPPED],
            killed=counts[KILLED],
            queued=counts[QUEUED],
            preempted=preempted,
            lost_work=lost,
            satisfaction=_mean(satisfactions),
            mean_wait=_mean(waits),
            p50_wait=percentile(waits, 0.5),
            p95_wait=percentile(waits, 0.95),
            mean_turnaround=_mean(turnarounds),
            mean_slowdown=_mean(slowdowns),
        ))
    return rows


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


def run_summary(result: SimulationResult, users: Sequence[UserMetrics]) -> RunSummary:
    capacity_cpus = sum(node.cpus for node in result.nodes)
    waits = [t.first_start - t.submit_time for t in result.tasks if t.first_start is not None]
    return RunSummary(
        tasks=len(result.tasks),
        completed=sum(1 for task in result.tasks if task.state == DONE),
        makespan=result.makespan,
        utilization=(result.busy_cpu_seconds / (capacity_cpus * result.makespan)
                     if result.makespan > 0 else math.nan),
        vacates=result.vacates,
        jain_satisfaction=jain_index(user.satisfaction for user in users),
        mean_wait=_mean(waits),
        events=result.events,
        negotiations=result.negotiations,
        wall_seconds=result.wall_seconds,
    )
