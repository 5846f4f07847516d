"""An SWF trace as jobs with deadlines on one machine: the Justice setting (paper 002).

Rules:
- the pool is one aggregate node of `capacity` processors (`--capacity PROCS`; default the
  trace's `MaxProcs` header, else `MaxNodes`); fewer than one processor is an error;
- every usable SWF job becomes one job of the Justice model (`deadline_job`): it asks for its
  requested processors (field 8, else the allocated ones, field 5), runs its trace run time
  (field 4) when given all of them, and is given at most the capacity to start with;
- its deadline is `submit + x * run time`, x from the deadline type (`--deadlines TYPE`, seeded
  by `--seed`; see `gridfair.sim.deadlines`); without a type, jobs have no deadline;
- users are the SWF user ids (`u<id>`); the first job arrives at time 0, the others keep their
  trace offsets;
- jobs with an unknown or zero run time or an unknown processor count are skipped, and so are
  the reader's malformed lines (the first few named by line number); both are counted in
  `Scenario.skipped`;
- `--tasks-out` writes the simulated run as an SWF file (`simulated_swf_writer`): each job's
  trace fields, with its trace submit time, its simulated wait (field 3), run time (field 4),
  slots given (field 5) and outcome as SWF status (field 11: 1 finished, 0 killed, 5 dropped or
  never started; wait, run time and slots are -1 for a job that never ran).

This module is the `swf` workload format: without a GRID it builds the scenario above; with a
GRID it hands the trace to the grid reader (`swf_grid`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import astuple
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from gridfair.core.pool import DONE, KILLED, Node, Task
from gridfair.errors import InputError
from gridfair.sim.deadlines import deadline_factors, deadline_job
from gridfair.sim.grid import Grid
from gridfair.sim.workloads.registry import (
    WORKLOAD_FORMATS,
    Scenario,
    TaskFile,
    TaskWriter,
)
from gridfair.sim.workloads.swf import FIELDS, SwfJob, SwfTrace, read_swf
from gridfair.sim.workloads.swf_grid import swf_scenario as swf_grid_scenario
from gridfair.sim.workloads.swf_grid import swf_user

NODE_NAME = "cluster"
#: SWF status codes of the simulated outcomes.
SWF_COMPLETED, SWF_FAILED, SWF_CANCELLED = 1, 0, 5
_WAIT, _RUN, _ALLOCATED, _STATUS = (FIELDS.index(name) for name in (
    "wait_time", "run_time", "allocated_procs", "status"))


def trace_capacity(trace: SwfTrace, capacity: Any | None) -> int:
    """The pool's processors: `capacity` if given, else the trace's MaxProcs or MaxNodes."""
    if capacity is None:
        capacity = trace.header_int("MaxProcs") or trace.header_int("MaxNodes")
        if capacity is None:
            raise InputError("the SWF trace has no MaxProcs or MaxNodes header: give "
                             "--capacity PROCS", source=trace.source)
    if isinstance(capacity, bool) or not isinstance(capacity, int | float) or capacity < 1:
        raise InputError(f"capacity must be at least one processor, got {capacity!r}")
    if capacity != int(capacity):
        raise InputError(f"capacity must be a whole number of processors, got {capacity!r}")
    return int(capacity)


def justice_scenario(trace: SwfTrace, capacity: int, deadlines: str | None,
                     seed: int) -> Scenario:
    """The trace's usable jobs on one node of `capacity` processors, with deadlines."""
    skipped: dict[str, int] = {}
    if trace.skipped:
        skipped[f"malformed SWF line ({trace.skip_details()})"] = len(trace.skipped)
    jobs = []
    for job in trace.jobs:
        if job.run_time <= 0:
            reason = "job with an unknown or zero run time"
        elif job.processors < 1:
            reason = "job with an unknown processor count"
        else:
            jobs.append(job)
            continue
        skipped[reason] = skipped.get(reason, 0) + 1
    if not jobs:
        raise InputError("no job of the SWF trace has a known run time and processor count",
                         source=trace.source)
    factors = (deadline_factors(deadlines, len(jobs), seed) if deadlines is not None
               else [None] * len(jobs))
    first = jobs[0].submit_time
    tasks: list[Task] = []
    used_ids: set[str] = set()
    for job, factor in zip(jobs, factors, strict=True):
        task_id = str(job.job_id)
        if task_id in used_ids:  # cleaned logs have unique ids; stay unique if one is not
            task_id = f"{job.job_id}@{job.line}"
        used_ids.add(task_id)
        tasks.append(deadline_job(task_id, swf_user(job), job.submit_time - first,
                                  job.processors, job.run_time, factor, capacity,
                                  source_index=len(tasks)))
    node = Node(NODE_NAME, owner=None, power=float(capacity), cpus=float(capacity))
    return Scenario([node], tasks, skipped=skipped,
                    task_writer=simulated_swf_writer(jobs, trace.source, capacity))


def simulated_swf_writer(jobs: Sequence[SwfJob], source: str, capacity: int) -> TaskWriter:
    """`--tasks-out` for the jobs built from `jobs` (task `source_index` = position): the
    simulated run as an SWF file, one line per job in trace order."""

    def start(out: TextIO) -> Callable[[Task], None]:
        out.write(f"; Simulated by gridfair from: {source}\n; MaxProcs: {capacity}\n"
                  "; Status: 1 finished, 0 killed at its deadline, 5 dropped or never started\n")

        def line(task: Task) -> None:
            fields = list(astuple(jobs[task.source_index])[1:])  # without the line number
            ran = task.first_start is not None
            fields[_WAIT] = task.first_start - task.submit_time if ran else -1
            # A job that started has ended: allocations are fixed and runs are never vacated.
            fields[_RUN] = task.finish_time - task.first_start if ran else -1
            fields[_ALLOCATED] = task.cpus if ran else -1
            fields[_STATUS] = (SWF_COMPLETED if task.state == DONE else
                               SWF_FAILED if task.state == KILLED else SWF_CANCELLED)
            out.write(" ".join(f"{value:.10g}" for value in fields) + "\n")

        return line

    return partial(TaskFile, start=start)


def swf_format(path: Path, grid: Grid | None, options: Mapping[str, Any]) -> Scenario:
    """The `swf` workload format: the Justice setting without a GRID, the grid reader with one."""
    if grid is not None:
        return swf_grid_scenario(path, grid, options)
    trace = read_swf(path)
    capacity = trace_capacity(trace, options.get("capacity"))
    return justice_scenario(trace, capacity, options.get("deadlines"),
                            int(options.get("seed", 1)))


WORKLOAD_FORMATS["swf"] = swf_format
