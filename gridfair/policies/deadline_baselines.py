"""The Justice paper's baselines (paper 002, section III): Baseline FS, Reactive FS, Oracle.

Same job model as `justice`: a job asks for `requested_cpus` slots, runs `T x requested / k`
with k of them, keeps its allocation for its whole run.

- Baseline FS (`FairShareOrder`, no admission stage): fair share between users, as the Mesos
  and YARN allocators do: the free slots go to the waiting user who holds the fewest cpus now
  (ties: the user seen first in the pool), FIFO within a user. Each job gets what it asks (at
  most the pool's capacity, which the scenario sets). Every job runs, whatever its deadline.
- Reactive FS (`FairShareOrder` + `ReactiveAdmit`): also terminates a running job when its
  deadline passes, and drops a queued job once its deadline has come (starting then, it would
  be terminated at once).
- Oracle (`OracleOrder` + `OracleAdmit`): knows each job's run time, so gives it exactly the
  minimum it needs to end by its deadline if it starts now, `ceil(work / (deadline - now))`
  (work = requested x T cpu-seconds), sized when it is chosen. Queued jobs wait in order of
  fewer required cpus (the minimum at submission), then the longest time to deadline, then
  submission order; a job is dropped when its deadline becomes unreachable even with every slot
  it can use, `min(requested, capacity)` (at once, if it already is at submission).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridfair.core.pool import CPUS, Pool, Task, UserState
from gridfair.core.stages import DROP, KILL, AdmitPolicy, Decision, OrderPolicy
from gridfair.policies.justice import (
    DEADLINE_SLACK,
    JobOrder,
    QueueWatch,
    job_work,
    max_cpus,
    require_deadline,
    resize,
    time_left_key,
    whole_cpus,
    will_end_in_time,
)
from gridfair.policies.ranking import UserRanking


class FairShareOrder(OrderPolicy):
    """Baseline FS: the waiting user holding the fewest cpus first (ties: first seen)."""

    name = "fair-share"

    def attach(self, pool: Pool) -> None:
        self.ranking = UserRanking()

    def user_changed(self, user: UserState, now: float) -> None:
        self.ranking.update(user, user.usage[CPUS] if user.active else None)

    def first(self, now: float) -> UserState | None:
        return self.ranking.first()

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        return ("{user} holds the fewest cpus ({cpus:g}) among waiting users",
                {"user": user.name, "cpus": user.usage[CPUS]})

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        return {"cpus": user.usage[CPUS]}


class ReactiveAdmit(AdmitPolicy):
    """Reactive FS: terminate at the deadline; drop queued jobs whose deadline has come."""

    name = "reactive"

    def __init__(self) -> None:
        self.queue = QueueWatch()

    def on_submit(self, task: Task, now: float) -> Decision | None:
        require_deadline(task, self.name)
        self.queue.watch(task, task.deadline)
        return None

    def review(self, now: float) -> list[Decision]:
        return [
            Decision(DROP, task, None, self.name,
                     "{job} dropped from the queue: its deadline passed {late:.0f} s ago",
                     {"job": task.id, "late": now - task.deadline})
            for task in self.queue.expired(now)
        ]

    def deadline_passed(self, task: Task, now: float) -> Decision | None:
        if will_end_in_time(task):
            return None
        return Decision(KILL, task, task.node, self.name,
                        "{job} terminated: its deadline passed while it ran",
                        {"job": task.id})


def submission_minimum(task: Task) -> tuple[int, float]:
    """Oracle's queue order: fewer required cpus (at submission), then the longest time to
    deadline."""
    window = task.deadline - task.submit_time
    need = whole_cpus(job_work(task) / window) if window > 0 else int(task.requested_cpus)
    return (need, time_left_key(task))


class OracleOrder(JobOrder):
    """Oracle's queue order; the chosen job is sized to its minimum at that moment."""

    name = "oracle"
    task_key = staticmethod(submission_minimum)

    def first(self, now: float) -> UserState | None:
        user = self.ranking.first()
        task = self.pool.head(user) if user is not None else None
        if task is not None:
            resize(task, oracle_minimum(task, now, self.pool.capacity[CPUS]))
        return user


def oracle_minimum(task: Task, now: float, capacity: float) -> int:
    """The fewest cpus with which `task`, started now, ends by its deadline: at least 1, at
    most what it can use (when even that is too few, it gets all of it)."""
    most = max_cpus(task, capacity)
    left = task.deadline - now
    if left <= 0:
        return most
    return max(1, min(whole_cpus(job_work(task) / left), most))


class OracleAdmit(AdmitPolicy):
    """Oracle's admission: drop a job once its deadline is out of reach."""

    name = "oracle"

    def __init__(self) -> None:
        self.queue = QueueWatch()

    def attach(self, pool: Pool) -> None:
        self.pool = pool

    def on_submit(self, task: Task, now: float) -> Decision | None:
        require_deadline(task, self.name)
        most = max_cpus(task, self.pool.capacity[CPUS])
        latest_start = task.deadline - job_work(task) / most
        if latest_start + DEADLINE_SLACK <= now:
            return Decision(DROP, task, None, self.name,
                            "{job} dropped: even with {cpus} cpus it would end {late:.0f} s "
                            "after its deadline", {"job": task.id, "cpus": most,
                                                   "late": now - latest_start})
        self.queue.watch(task, latest_start + DEADLINE_SLACK)
        return None

    def review(self, now: float) -> list[Decision]:
        return [
            Decision(DROP, task, None, self.name,
                     "{job} dropped from the queue: its deadline is out of reach even with "
                     "every slot it can use", {"job": task.id})
            for task in self.queue.expired(now)
        ]
