"""A trace repeated end to end, generated on the fly: month-long workloads from a short trace.

`repeat_end_to_end` yields copy k of every task (k = 0, 1, ...) shifted by k x `period`, in
submit order, until the shifted submit time reaches the horizon; a copy keeps its user, size and
duration, and its id gets `@k` (copy 0 keeps the original id). Only one task exists per copy
when it is yielded, so the simulator's streaming mode (`Simulation(keep_tasks=False)`) runs a
month of copies in the memory of the tasks running and queued at once.

`repeated_trace_scenario` is the SDRF experiments' pool (`taskcsv.trace_pool_scenario`: one
aggregate node of r x the trace's mean usage, entitlements from the users' usage) fed with the
7-column task list repeated every `trace.span` seconds (first start to last finish, the span
the mean usage is taken over), so the repeated workload has the same mean usage per second as
the trace and the same r means the same load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.workloads.registry import Scenario
from gridfair.sim.workloads.taskcsv import capacity_ratio, read_tasks, trace_pool_scenario

DAY = 86_400.0


def repeat_end_to_end(tasks: Sequence[Task], period: float, horizon: float) -> Iterator[Task]:
    """Copies of `tasks` (in submit order) every `period` seconds, while a copy's submit time
    is below `horizon` seconds after the first task's; fresh Task objects, in submit order."""
    if period <= 0:
        raise InputError(f"the repeat period must be positive, got {period:g} s")
    if not tasks:
        return
    last = tasks[0].submit_time + horizon
    if tasks[-1].submit_time - tasks[0].submit_time >= period:
        raise InputError(f"the trace submits over {tasks[-1].submit_time - tasks[0].submit_time:g}"
                         f" s, longer than the repeat period {period:g} s: copies would overlap")
    copy = 0
    while True:
        shift = copy * period
        suffix = f"@{copy}" if copy else ""
        for index, task in enumerate(tasks):
            submit = task.submit_time + shift
            if submit >= last:
                return
            yield Task(task.id + suffix, task.user, submit, cpus=task.cpus, memory=task.memory,
                       work=task.work, duration=task.duration, deadline=task.deadline,
                       source_index=copy * len(tasks) + index)
        copy += 1


def repeated_trace_scenario(path: str | Path, days: float,
                            options: Mapping[str, Any]) -> Scenario:
    """The task list at `path` repeated end to end over `days` days, on the trace's pool."""
    if days <= 0:
        raise InputError(f"days must be positive, got {days:g}")
    capacity_ratio(options)
    trace = read_tasks(path)
    scenario = trace_pool_scenario(trace, options)
    return dataclasses.replace(scenario,
                               tasks=repeat_end_to_end(trace.tasks, trace.span, days * DAY))
