"""A trace repeated end to end, generated on the fly: month-long workloads from a short trace.

`RepeatedTasks` yields copy k of every task (k = 0, 1, ...) shifted by k x `period`, in
submit order, until the shifted submit time reaches the horizon; a copy keeps its user, size and
duration, and its id gets `@k` (copy 0 keeps the original id). Only one task exists per copy
when it is yielded, so the simulator's streaming mode (`Simulation(keep_tasks=False)`) runs a
month of copies in the memory of the tasks running and queued at once; and since a copy is made
again from its position alone, a queued copy that is not at the head of its user's queue is kept
as that one integer (`engine.DeferredWorkload`), not as a Task.

`repeated_trace_scenario` is the SDRF experiments' pool (`taskcsv.trace_pool_scenario`: one
aggregate node of r x the trace's mean usage, entitlements from the users' usage) fed with the
7-column task list repeated every `trace.span` seconds (first start to last finish, the span
the mean usage is taken over), so the repeated workload has the same mean usage per second as
the trace and the same r means the same load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from gridfair.core.native import mypyc_attr
from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.engine import DeferredWorkload
from gridfair.sim.workloads.registry import Scenario
from gridfair.sim.workloads.taskcsv import capacity_ratio, read_tasks, trace_pool_scenario

DAY = 86_400.0


@mypyc_attr(allow_interpreted_subclasses=True)
class RepeatedTasks(DeferredWorkload):
    """Copies of `tasks` (in submit order) every `period` seconds, while a copy's submit time
    is below `horizon` seconds after the first task's; fresh Task objects, in submit order.

    Copy k of task i has the handle k x len(tasks) + i (also its `source_index`), from which
    `make_task` makes it again: the simulator keeps a queued copy as that one integer."""

    def __init__(self, tasks: Sequence[Task], period: float, horizon: float) -> None:
        if period <= 0:
            raise InputError(f"the repeat period must be positive, got {period:g} s")
        if tasks and tasks[-1].submit_time - tasks[0].submit_time >= period:
            raise InputError(f"the trace submits over "
                             f"{tasks[-1].submit_time - tasks[0].submit_time:g} s, longer than "
                             f"the repeat period {period:g} s: copies would overlap")
        self.tasks = tasks
        self.period = period
        self.last = tasks[0].submit_time + horizon if tasks else 0.0

    def arrivals(self) -> Iterator[tuple[float, str, int]]:
        tasks, period, last = self.tasks, self.period, self.last
        size = len(tasks)
        copy = 0
        while size:
            shift = copy * period
            handle = copy * size
            for task in tasks:
                submit = task.submit_time + shift
                if submit >= last:
                    return
                yield submit, task.user, handle
                handle += 1
            copy += 1

    def make_task(self, handle: int) -> Task:
        copy, index = divmod(handle, len(self.tasks))
        task = self.tasks[index]
        return Task(f"{task.id}@{copy}" if copy else task.id, task.user,
                    task.submit_time + copy * self.period, cpus=task.cpus, memory=task.memory,
                    work=task.work, duration=task.duration, deadline=task.deadline,
                    source_index=handle)

    def __iter__(self) -> Iterator[Task]:
        # map, not a generator expression: compiled (setup.py), that would be a list
        return map(self.make_task, map(itemgetter(2), self.arrivals()))


def repeated_trace_scenario(path: str | Path, days: float,
                            options: Mapping[str, Any]) -> Scenario:
    """The task list at `path` repeated end to end over `days` days, on the trace's pool."""
    if days <= 0:
        raise InputError(f"days must be positive, got {days:g}")
    capacity_ratio(options)
    trace = read_tasks(path)
    tasks = trace.tasks
    assert isinstance(tasks, list)  # read_tasks reads them into one
    scenario = trace_pool_scenario(trace, options)
    return dataclasses.replace(scenario,
                               tasks=RepeatedTasks(tasks, trace.span, days * DAY))
