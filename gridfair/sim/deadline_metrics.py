"""Metrics of a run whose jobs have deadlines (the Justice paper, section V).

Fairness: Jain's index `(sum F_i)^2 / (n sum F_i^2)` over the jobs' fraction of demand
`F_i = min(A_i / D_i, 1)`, where D_i is the cpus the job asks for (`requested_cpus`) and A_i the
cpus it holds, averaged over the time it is in the system (from submission until it ends:
finished, killed or dropped; a job still queued at the end stays until the run's end):
- `jain_index`, as in the paper: over each 60 s window from the first submission, over the jobs
  in the system during the window (A_i averaged over their time in it), then the mean over the
  windows; a window with no job in it, or where every job has F = 0 (Jain's index is 0/0), is
  left out of the mean;
- `jain_index_run`: the same over one window spanning the whole run.
A job dropped on submission is never in the system, so it counts in neither; a job that waits
and is dropped counts with F = 0 while it waited. A job keeps its cpus for its whole run
(the deadline policies never preempt), so A_i is its cpus while running and 0 while queued.

Counts: deadlines met (finished by its deadline, within `DEADLINE_SLACK`), missed (finished
late), dropped, killed, unfinished (still queued at the end).
Utilization: cpu-seconds used by every run (killed runs included) over capacity x makespan;
useful utilization counts only the jobs that met their deadline.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from itertools import accumulate

from gridfair.core.pool import DONE, DROPPED, KILLED, QUEUED, Task
from gridfair.policies.justice import met_deadline
from gridfair.sim.engine import SimulationResult
from gridfair.sim.metrics import jain_index

WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class DeadlineSummary:
    jobs: int
    deadlines_met: int
    deadlines_met_fraction: float
    deadlines_missed: int
    jobs_dropped: int
    jobs_killed: int
    jobs_unfinished: int
    jain_index: float
    jain_index_run: float
    windows: int
    utilization: float
    useful_utilization: float

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Stay:
    """One job's time in the system, its running part and its F while running."""

    arrive: float
    start: float  # == leave when it never ran
    leave: float
    running_fraction: float  # min(cpus / requested, 1)

    def fraction_in(self, low: float, high: float) -> float | None:
        """F over [low, high): running time over time present, times the running F; None
        when the job is not in the system then."""
        present = min(high, self.leave) - max(low, self.arrive)
        if present <= 0:
            return None
        running = min(high, self.leave) - max(low, self.start)
        return self.running_fraction * max(running, 0.0) / present


def deadline_summary(result: SimulationResult, window: float = WINDOW_SECONDS) -> DeadlineSummary:
    tasks = [task for task in result.tasks if task.deadline is not None]
    capacity = sum(node.cpus for node in result.nodes)
    origin = min(task.submit_time for task in result.tasks)
    end = origin + result.makespan
    stays = [stay for stay in (_stay(task, end) for task in tasks) if stay is not None]
    met = [task for task in tasks if met_deadline(task)]
    states = [task.state for task in tasks]
    windowed, windows = _windowed_jain(stays, origin, end, window)
    cpu_seconds = capacity * result.makespan
    useful = math.fsum(task.cpus * (task.finish_time - task.first_start) for task in met)
    return DeadlineSummary(
        jobs=len(tasks),
        deadlines_met=len(met),
        deadlines_met_fraction=len(met) / len(tasks) if tasks else math.nan,
        deadlines_missed=states.count(DONE) - len(met),
        jobs_dropped=states.count(DROPPED),
        jobs_killed=states.count(KILLED),
        jobs_unfinished=states.count(QUEUED),
        jain_index=windowed,
        jain_index_run=jain_index([stay.fraction_in(-math.inf, math.inf) for stay in stays]),
        windows=windows,
        utilization=result.busy_cpu_seconds / cpu_seconds if cpu_seconds > 0 else math.nan,
        useful_utilization=useful / cpu_seconds if cpu_seconds > 0 else math.nan,
    )


def _stay(task: Task, end: float) -> _Stay | None:
    leave = task.finish_time if task.finish_time is not None else end
    if leave <= task.submit_time:
        return None  # dropped on arrival (or a zero-length stay): never in the system
    start = task.first_start if task.first_start is not None else leave
    return _Stay(task.submit_time, start, leave, min(task.cpus / task.requested_cpus, 1.0))


def _windowed_jain(stays: list[_Stay], origin: float, end: float,
                   window: float) -> tuple[float, int]:
    """Mean over windows of Jain's index, and how many windows it is over.

    Linear in jobs + windows: inside a phase (queued, running) a job's F is the same in every
    window the phase covers whole, so those windows get it through difference arrays; only the
    windows where the job arrives, starts or leaves are computed one by one.
    """
    count_windows = max(math.ceil((end - origin) / window), 1)
    size = count_windows + 1
    # Difference arrays of per-window job count, sum F and sum F^2 over windows covered whole.
    counts, sums, squares = [0] * size, [0.0] * size, [0.0] * size
    # Exact contributions of the boundary windows.
    exact_counts, exact_sums, exact_squares = [0] * size, [0.0] * size, [0.0] * size

    def index(time: float) -> int:
        return min(int((time - origin) // window), count_windows - 1)

    for stay in stays:
        edges = sorted({index(stay.arrive), index(stay.start), index(math.nextafter(
            stay.leave, -math.inf))})
        for position, k in enumerate(edges):
            value = stay.fraction_in(origin + k * window, origin + (k + 1) * window)
            if value is not None:
                exact_counts[k] += 1
                exact_sums[k] += value
                exact_squares[k] += value * value
            if position + 1 < len(edges) and edges[position + 1] > k + 1:
                low, high = k + 1, edges[position + 1]  # windows low..high-1, one phase
                middle = origin + (low + 0.5) * window
                value = stay.running_fraction if stay.start <= middle < stay.leave else 0.0
                counts[low] += 1
                counts[high] -= 1
                sums[low] += value
                sums[high] -= value
                squares[low] += value * value
                squares[high] -= value * value
    total = 0.0
    used = 0
    for k, (count, total_f, total_f2) in enumerate(zip(
            accumulate(counts), accumulate(sums), accumulate(squares), strict=True)):
        if k >= count_windows:
            break
        count += exact_counts[k]
        total_f += exact_sums[k]
        total_f2 += exact_squares[k]
        if count > 0 and total_f2 > 1e-12:
            total += total_f * total_f / (count * total_f2)
            used += 1
    return (total / used if used else math.nan), used
