"""An SWF trace (Parallel Workloads Archive) run on a grid of owned machines.

The trace is read by `gridfair.sim.workloads.swf.read_swf`; this module decides how its jobs
become grid tasks, the way iSPD's SWF-to-trace conversion does, with each step an option:
- users: SWF user ids (`u<id>`) are mapped to the grid's owners (`--user-map`, default
  `busiest`: the k busiest users become the k owners; see `common.py`);
- arrival: the first job arrives at 0 and inter-arrival times are divided by `--compress`
  (a year-long trace on a 20-machine grid needs it);
- size: a job of run time r becomes r x `--reference-power` MFlop (default: the grid's mean
  power per cpu, so a job runs about its traced time on an average machine); by default it is
  one single-cpu task, as iSPD converts it; `--swf-procs cpus` asks for its processors instead
  (r x reference power per processor, a job larger than every machine is skipped);
- which jobs: run time > `--min-run-time` (default 0: unknown or zero run times are skipped),
  status any or `--swf-status completed`; `--limit N` keeps the first N usable jobs.
Skipped jobs are counted by reason, and the reader's malformed lines too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.grid import Grid
from gridfair.sim.workloads.common import count, grid_scenario
from gridfair.sim.workloads.registry import FORMAT_BY_SUFFIX, WORKLOAD_FORMATS, Scenario
from gridfair.sim.workloads.swf import SwfJob, read_swf

SWF_STATUSES = ("any", "completed")
SWF_PROCS = ("one", "cpus")
COMPLETED = 1  # SWF status of a job that ended normally


def swf_user(job: SwfJob) -> str:
    return f"u{job.user_id}"


def usable_jobs(jobs: list[SwfJob], options: Mapping[str, Any], skipped: dict[str, int]
                ) -> list[SwfJob]:
    """The jobs that become tasks, in file order, counting the others in `skipped`."""
    min_run_time = float(options.get("min_run_time") or 0.0)
    status = options.get("swf_status") or "any"
    if status not in SWF_STATUSES:
        raise InputError(f"--swf-status must be one of {', '.join(SWF_STATUSES)}, "
                         f"got {status!r}")
    limit = options.get("limit")
    chosen: list[SwfJob] = []
    for job in jobs:
        if job.run_time <= 0 or job.run_time < min_run_time:
            count(skipped, "job with unknown run time or shorter than --min-run-time")
        elif status == "completed" and job.status != COMPLETED:
            count(skipped, "job that did not complete (--swf-status completed)")
        else:
            chosen.append(job)
            if limit is not None and len(chosen) == limit:
                break
    return chosen


def swf_scenario(path: Path, grid: Grid | None, options: Mapping[str, Any]) -> Scenario:
    """SWF jobs as tasks on the grid's machines (the `swf` format when a GRID is given)."""
    if grid is None:
        raise InputError("an SWF trace without a GRID needs the pool from --capacity (the "
                         "Justice setting); give a GRID to run it on owned machines",
                         source=str(path))
    trace = read_swf(path)
    skipped: dict[str, int] = {}
    count(skipped, "malformed SWF line", len(trace.skipped))
    jobs = usable_jobs(trace.jobs, options, skipped)
    if not jobs:
        raise InputError("no job of the SWF trace is usable (all have unknown run times or "
                         "are filtered out)", source=str(path))
    compress = float(options.get("compress") or 1.0)
    if compress <= 0:
        raise InputError(f"--compress must be positive, got {compress:g}")
    reference = float(options.get("reference_power") or grid.mean_power())
    if reference <= 0:
        raise InputError(f"--reference-power must be positive, got {reference:g}")
    procs = options.get("swf_procs") or "one"
    if procs not in SWF_PROCS:
        raise InputError(f"--swf-procs must be one of {', '.join(SWF_PROCS)}, got {procs!r}")
    largest = max(machine.cpus for machine in grid.machines)
    first = jobs[0].submit_time

    def build(user_of: Mapping[str, str | None]) -> tuple[list[Task], list[float]]:
        tasks: list[Task] = []
        used_ids: set[str] = set()
        for job in jobs:
            account = user_of[swf_user(job)]
            if account is None:
                continue
            cpus = 1
            if procs == "cpus":
                cpus = job.processors
                if cpus < 1 or cpus > largest:
                    count(skipped, "job asking for unknown processors or more than any "
                                   "machine has (--swf-procs cpus)")
                    continue
            task_id = str(job.job_id)
            if task_id in used_ids:  # cleaned logs have unique ids; stay safe if not
                task_id = f"{job.job_id}@{job.line}"
            used_ids.add(task_id)
            tasks.append(Task(task_id, account, (job.submit_time - first) / compress,
                              cpus=cpus, work=job.run_time * reference * cpus,
                              source_index=len(tasks)))
        return tasks, [0.0] * len(tasks)

    return grid_scenario(path, grid, options, users=[swf_user(job) for job in jobs],
                         build=build, skipped=skipped, default_user_map="busiest")


WORKLOAD_FORMATS.setdefault("swf", swf_scenario)
WORKLOAD_FORMATS["swf-grid"] = swf_scenario
for _suffix in (".swf", ".swf.gz"):
    FORMAT_BY_SUFFIX.setdefault(_suffix, "swf")
