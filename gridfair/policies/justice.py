"""Justice: deadline-aware fair share with admission control (paper 002, section II).

Job model. A job asks for `requested_cpus` slots (its `requestedTasks`) and runs for its optimal
run time T when given all of them; with k slots it runs `T x requested / k` (perfect
parallelism), so its work `requested x T` cpu-seconds is `task.cpus x task.duration` whatever it
is given. Its allocation is fixed once it starts. Its deadline is absolute (`task.deadline`); the
paper's relative `deadline` is `task.deadline - task.submit_time`.

TRACK_JOB (Algorithm 1), on every job that finishes (met or late; killed and dropped jobs are not
tracked, having no execution profile):
    deadlineCPUs = compTime / deadline            (compTime = its work, cpu-seconds)
    maxCPUs      = min(requestedTasks, capacity)
    minReqRate   = deadlineCPUs / maxCPUs, capped at 1 (see `JusticeEstimator.track_job`)
    MinCPUFrac, MaxCPUFrac = min, max of every minReqRate so far
    LastCPUFrac  = numCPUsAllocd / maxCPUs;  LastSuccess = it met its deadline
    error        = minReqRate - LastCPUFrac       (how far the given fraction was from the ideal)

A new job gets `alocCPUFrac = (LastCPUFrac + (MinCPUFrac if LastSuccess else MaxCPUFrac)) / 2`,
plus the weighted average of past errors (equal weights, or exponential smoothing trusting recent
errors more), clamped to [MinCPUFrac, 1]; it is given `ceil(alocCPUFrac x requestedTasks)` cpus,
at most the capacity and at least 1. Bootstrap: until a job has been tracked, every job is given
what it asks (at most the capacity) and admitted regardless of its deadline (it leaves the
queue only if its deadline passes before it starts).

Admission (`JusticeAdmit`): a sized job that would miss its deadline even if it started now is
dropped at once; a queued sized job is dropped as soon as its latest start (deadline minus its
run time, plus the slack) has passed; a running job past its deadline is terminated when its
`requestedTasks` exceed a threshold (default 10), so that smaller violators finish and feed
TRACK_JOB.
Queue order (`JusticeOrder`): fewer tasks first, then the longest time to deadline (the latest
deadline), then submission order.

Deadline comparisons allow `DEADLINE_SLACK` seconds, so that a run time computed as
`work / cpus` in floating point still meets a deadline it meets exactly.

The other deadline policies (`deadline_baselines`) share the helpers defined here.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gridfair.core.pool import CPUS, DONE, QUEUED, Node, Pool, Task, UserState
from gridfair.core.stages import (
    DROP,
    KILL,
    RESIZE,
    AdmitPolicy,
    Decision,
    OrderPolicy,
    option,
)
from gridfair.errors import ConfigError, InputError
from gridfair.policies.ranking import UserRanking

#: Seconds by which a finish may pass a deadline and still meet it (float rounding only: trace
#: times are whole seconds).
DEADLINE_SLACK = 1e-3
#: Relative tolerance of `whole_cpus`: a fraction that is an integer up to rounding stays one.
_CEIL_TOLERANCE = 1e-10

ERROR_WEIGHTINGS = ("equal", "exponential")
DEFAULT_KILL_ABOVE = 10
DEFAULT_SMOOTHING = 0.5


# ------------------------------------------------------------ deadline helpers


def whole_cpus(cpus: float) -> int:
    """`ceil(cpus)`, ignoring floating-point noise above an integer (2.0000000001 -> 2)."""
    return math.ceil(cpus - _CEIL_TOLERANCE * max(1.0, abs(cpus)))


def job_work(task: Task) -> float:
    """The job's work in cpu-seconds: the same under any allocation (perfect parallelism)."""
    return task.cpus * (task.duration or 0.0)


def resize(task: Task, cpus: int) -> None:
    """Give a queued job `cpus` slots: its run time stretches or shrinks to keep its work."""
    work = job_work(task)
    task.cpus = cpus
    task.duration = work / cpus


def max_cpus(task: Task, capacity: float) -> int:
    """The most a job can use: what it asks, at most the whole pool."""
    return max(1, min(int(task.requested_cpus), int(capacity)))


def ends_in_time(end: float, deadline: float) -> bool:
    return end <= deadline + DEADLINE_SLACK


def met_deadline(task: Task) -> bool:
    """Finished, and by its deadline."""
    return (task.state == DONE and task.deadline is not None
            and ends_in_time(task.finish_time, task.deadline))


def will_end_in_time(task: Task) -> bool:
    """A running job's current run ends by its deadline."""
    return ends_in_time(task.start_time + (task.duration or 0.0), task.deadline)


def require_deadline(task: Task, policy: str) -> None:
    if task.deadline is None or task.duration is None:
        raise InputError(f"policy {policy} needs jobs with a deadline and a run time; job "
                         f"{task.id} has none (give --deadlines TYPE with an SWF trace)")


class QueueWatch:
    """Queued jobs by a time after which they must leave the queue (a heap, lazy deletion).

    Ties between equal times go by the order the jobs were watched.
    """

    __slots__ = ("_heap", "_count")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Task]] = []
        self._count = 0

    def watch(self, task: Task, leave_after: float) -> None:
        heapq.heappush(self._heap, (leave_after, self._count, task))
        self._count += 1

    def expired(self, now: float) -> Iterator[Task]:
        """Queued jobs whose time is at or before `now`, earliest first; each only once."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            task = heapq.heappop(heap)[2]
            if task.state == QUEUED:
                yield task


class JobOrder(OrderPolicy):
    """A global job order over the per-user queues: the user whose next job has the least
    `task_key` goes first (ties: the earlier submitted job). The pool orders each user's queue
    by the same key, so the head of every queue is that user's best job."""

    def attach(self, pool: Pool) -> None:
        self.pool = pool
        self.ranking = UserRanking()

    def user_changed(self, user: UserState, now: float) -> None:
        key = None
        if user.active:
            head = self.pool.head(user)
            key = (self.task_key(head), head.seq)
        self.ranking.update(user, key)

    def first(self, now: float) -> UserState | None:
        return self.ranking.first()

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        head = self.pool.head(user)
        return (
            "{job} of {user} is next in {policy} order: {tasks} tasks, "
            "{to_deadline:.0f} s to its deadline, {cpus} cpus",
            {"job": head.id, "user": user.name, "policy": self.name,
             "tasks": head.requested_cpus, "to_deadline": -time_left_key(head) - now,
             "cpus": head.cpus},
        )


def time_left_key(task: Task) -> float:
    """Sorts the longest time to deadline (the latest deadline) first; no deadline is latest."""
    return -task.deadline if task.deadline is not None else -math.inf


def fewer_tasks_latest_deadline(task: Task) -> tuple[float, float]:
    """Justice's queue order: fewer tasks, then the longest time to deadline."""
    return (task.requested_cpus, time_left_key(task))


class JusticeOrder(JobOrder):
    name = "justice"
    task_key = staticmethod(fewer_tasks_latest_deadline)


# ------------------------------------------------------------------ TRACK_JOB


class JusticeEstimator:
    """TRACK_JOB's statistics and the allocation fraction they give a new job."""

    def __init__(self, error_weighting: str = "equal", smoothing: float = DEFAULT_SMOOTHING):
        if error_weighting not in ERROR_WEIGHTINGS:
            raise ConfigError(f"justice error weighting must be one of {ERROR_WEIGHTINGS}, "
                              f"got {error_weighting!r}")
        if not 0.0 < smoothing <= 1.0:
            raise ConfigError(f"justice smoothing must be in (0, 1], got {smoothing}")
        self.error_weighting = error_weighting
        self.smoothing = smoothing
        self.tracked = 0
        self.min_frac = 1.0
        self.max_frac = 0.0
        self.last_frac = 1.0
        self.last_success = True
        self.mean_error = 0.0

    @property
    def bootstrapping(self) -> bool:
        """No job has been tracked yet: there is no history to estimate from."""
        return self.tracked == 0

    def track_job(self, comp_time: float, requested_tasks: float, deadline: float,
                  cpus_allocated: float, success: bool, capacity: float) -> None:
        """Algorithm 1, with the job's estimation error folded into the error average.

        `deadline` is relative (seconds from submission). minReqRate is capped at 1: a job that
        could not have met its deadline with every slot it could use (possible once the
        capacity is cut below what the trace ran on) needed "all of it", and no allocation can
        exceed that; the paper's fractions are at most 1 under its feasible-deadline assumption.
        """
        deadline_cpus = comp_time / deadline if deadline > 0 else math.inf
        most = min(requested_tasks, capacity)
        min_req_rate = min(deadline_cpus / most, 1.0)
        self.min_frac = min(self.min_frac, min_req_rate)
        self.max_frac = max(self.max_frac, min_req_rate)
        self.last_frac = cpus_allocated / most
        self.last_success = success
        error = min_req_rate - self.last_frac
        self.tracked += 1
        if self.error_weighting == "equal" or self.tracked == 1:
            self.mean_error += (error - self.mean_error) / self.tracked
        else:
            self.mean_error += self.smoothing * (error - self.mean_error)

    def fraction(self) -> float:
        """alocCPUFrac for the next job (1 while bootstrapping)."""
        if self.bootstrapping:
            return 1.0
        toward = self.min_frac if self.last_success else self.max_frac
        estimate = (self.last_frac + toward) / 2 + self.mean_error
        return min(max(estimate, self.min_frac), 1.0)

    def cpus_for(self, requested_tasks: float, capacity: float) -> int:
        """ceil(alocCPUFrac x requestedTasks), at most the capacity, at least one slot."""
        wanted = whole_cpus(self.fraction() * requested_tasks)
        return max(1, min(wanted, int(capacity)))

    def figures(self) -> dict[str, float]:
        return {"min_frac": self.min_frac, "max_frac": self.max_frac,
                "last_frac": self.last_frac, "last_success": self.last_success,
                "mean_error": self.mean_error, "tracked": self.tracked}


# ------------------------------------------------------------------ admission


@dataclass(frozen=True)
class JusticeOptions:
    """Justice's admission options."""

    justice_kill_above: int = option(DEFAULT_KILL_ABOVE,
                                     "terminate jobs of more tasks than this past deadline")
    justice_error_weighting: str = option("equal", "how past runtime errors are weighed",
                                          choices=ERROR_WEIGHTINGS)
    justice_smoothing: float = option(DEFAULT_SMOOTHING, "the estimator's smoothing, in (0, 1]")


class JusticeAdmit(AdmitPolicy):
    """Sizes each job from TRACK_JOB's history, drops jobs that would miss their deadline,
    terminates big jobs that run past theirs."""

    name = "justice"
    Options = JusticeOptions

    @classmethod
    def from_options(cls, options: JusticeOptions) -> JusticeAdmit:
        return cls(kill_above=options.justice_kill_above,
                   error_weighting=options.justice_error_weighting,
                   smoothing=options.justice_smoothing)

    def __init__(self, *, kill_above: int = DEFAULT_KILL_ABOVE, error_weighting: str = "equal",
                 smoothing: float = DEFAULT_SMOOTHING) -> None:
        if kill_above < 0:
            raise ConfigError(f"justice kill threshold must be 0 or more tasks, got {kill_above}")
        self.kill_above = kill_above
        self.estimator = JusticeEstimator(error_weighting, smoothing)
        self.queue = QueueWatch()

    def attach(self, pool: Pool) -> None:
        self.pool = pool

    def capacity(self) -> float:
        # Read when needed, not at attach: nodes join the pool after the stages do.
        return self.pool.capacity[CPUS]

    def on_submit(self, task: Task, now: float) -> Decision | None:
        require_deadline(task, self.name)
        capacity = self.capacity()
        figures: dict[str, Any] = {"job": task.id, "requested": task.requested_cpus,
                                   "fraction": self.estimator.fraction()}
        if self.estimator.bootstrapping:
            cpus = max_cpus(task, capacity)
            resize(task, cpus)
            # Admitted whatever its deadline, but not started once the deadline has passed.
            self.queue.watch(task, task.deadline)
            return Decision(RESIZE, task, None, self.name,
                            "{job}: bootstrap, given {cpus} of the {requested} cpus it asks",
                            {**figures, "cpus": cpus})
        cpus = self.estimator.cpus_for(task.requested_cpus, capacity)
        resize(task, cpus)
        figures.update(cpus=cpus, run_time=task.duration, to_deadline=task.deadline - now,
                       **self.estimator.figures())
        if not ends_in_time(now + task.duration, task.deadline):
            return Decision(DROP, task, None, self.name,
                            "{job} dropped: with {cpus} of {requested} cpus (fraction "
                            "{fraction:.3f}) it runs {run_time:.0f} s, its deadline is "
                            "{to_deadline:.0f} s away", figures)
        # Leaves the queue once even a start now would end more than the slack too late.
        self.queue.watch(task, task.deadline - task.duration + DEADLINE_SLACK)
        return Decision(RESIZE, task, None, self.name,
                        "{job}: {cpus} of {requested} cpus (fraction {fraction:.3f}), runs "
                        "{run_time:.0f} s, deadline in {to_deadline:.0f} s", figures)

    def review(self, now: float) -> list[Decision]:
        return [
            Decision(DROP, task, None, self.name,
                     "{job} dropped from the queue: starting now it would end {late:.0f} s "
                     "after its deadline",
                     {"job": task.id, "late": now + task.duration - task.deadline})
            for task in self.queue.expired(now)
        ]

    def deadline_passed(self, task: Task, now: float) -> Decision | None:
        if will_end_in_time(task) or task.requested_cpus <= self.kill_above:
            return None
        return Decision(KILL, task, task.node, self.name,
                        "{job} terminated at its deadline: {tasks} tasks, above the "
                        "threshold of {threshold}",
                        {"job": task.id, "tasks": task.requested_cpus,
                         "threshold": self.kill_above})

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        if task.state != DONE:
            return
        self.estimator.track_job(
            comp_time=job_work(task),
            requested_tasks=task.requested_cpus,
            deadline=task.deadline - task.submit_time,
            cpus_allocated=task.cpus,
            success=met_deadline(task),
            capacity=self.capacity(),
        )
