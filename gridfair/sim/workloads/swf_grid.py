"""An SWF trace (Parallel Workloads Archive) run on a grid of owned machines.

The trace is read line by line (`gridfair.sim.workloads.swf.SwfLines`), twice: a first pass
counts what the user mapping and the skip report need and keeps no job, then the tasks are read
again as the simulation takes them (`SwfGridTasks`). Usable jobs must be in submit order, as
the archive's logs are. This module decides how jobs become grid tasks, the way iSPD's
SWF-to-trace conversion does, with each step an option:
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

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.grid import Grid
from gridfair.sim.workloads.common import SWF_PROCS, SWF_STATUSES, count, grid_scenario
from gridfair.sim.workloads.registry import WORKLOAD_FORMATS, Scenario
from gridfair.sim.workloads.swf import SwfJob, SwfLines

COMPLETED = 1  # SWF status of a job that ended normally
#: Why a job is left out, by the test that leaves it out.
TOO_SHORT = "job with unknown run time or shorter than --min-run-time"
NOT_COMPLETED = "job that did not complete (--swf-status completed)"
TOO_WIDE = "job asking for unknown processors or more than any machine has (--swf-procs cpus)"
#: Job ids kept as a byte each up to this one (16 MB); larger ids go to a set.
DENSE_IDS = 1 << 24


def swf_user(job: SwfJob) -> str:
    return f"u{job.user_id}"


@dataclass(frozen=True)
class JobChoice:
    """Which jobs of the trace become tasks, and how (the options, checked)."""

    min_run_time: float
    completed_only: bool
    limit: int | None
    cpus_asked: bool  # --swf-procs cpus
    largest: int  # cpus of the grid's largest machine
    compress: float
    reference: float  # MFlops a second of run time is worth, per cpu

    @classmethod
    def of(cls, options: Mapping[str, Any], grid: Grid) -> JobChoice:
        status = options.get("swf_status") or "any"
        if status not in SWF_STATUSES:
            raise InputError(f"--swf-status must be one of {', '.join(SWF_STATUSES)}, "
                             f"got {status!r}")
        compress = float(options.get("compress") or 1.0)
        if compress <= 0:
            raise InputError(f"--compress must be positive, got {compress:g}")
        reference = float(options.get("reference_power") or grid.mean_power())
        if reference <= 0:
            raise InputError(f"--reference-power must be positive, got {reference:g}")
        procs = options.get("swf_procs") or "one"
        if procs not in SWF_PROCS:
            raise InputError(f"--swf-procs must be one of {', '.join(SWF_PROCS)}, "
                             f"got {procs!r}")
        return cls(float(options.get("min_run_time") or 0.0), status == "completed",
                   options.get("limit"), procs == "cpus",
                   max(machine.cpus for machine in grid.machines), compress, reference)

    def usable(self, jobs: Iterator[SwfJob]) -> Iterator[tuple[SwfJob, str | None]]:
        """The jobs that become tasks, in file order, up to the limit, each with why it is
        left out after all (`TOO_WIDE`) or None; the others' reasons are yielded as
        (None, reason)."""
        chosen = 0
        for job in jobs:
            if job.run_time <= 0 or job.run_time < self.min_run_time:
                yield None, TOO_SHORT
            elif self.completed_only and job.status != COMPLETED:
                yield None, NOT_COMPLETED
            else:
                yield job, TOO_WIDE if self.cpus_asked and not (
                    1 <= job.processors <= self.largest) else None
                chosen += 1
                if self.limit is not None and chosen == self.limit:
                    return


@dataclass
class _Scan:
    """What the first pass over the trace finds: each user's usable jobs and how many of
    them are too wide, the first submit time, the largest job id, and the skips."""

    jobs_per_user: Counter[str] = field(default_factory=Counter)
    too_wide_per_user: Counter[str] = field(default_factory=Counter)
    first_submit: float | None = None
    largest_id: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


def _scan(lines: SwfLines, choice: JobChoice) -> _Scan:
    scan = _Scan()
    last_submit = -float("inf")
    for job, reason in choice.usable(iter(lines)):
        if job is None:
            count(scan.skipped, reason)
            continue
        if job.submit_time < last_submit:
            raise InputError(f"submit time {job.submit_time:g} is before the previous job's "
                             f"({last_submit:g}): an SWF trace is in submit order",
                             source=lines.source, line=job.line)
        last_submit = job.submit_time
        if scan.first_submit is None:
            scan.first_submit = job.submit_time
        user = swf_user(job)
        scan.jobs_per_user[user] += 1
        if reason is not None:
            scan.too_wide_per_user[user] += 1
        scan.largest_id = max(scan.largest_id, job.job_id)
    # Reported in the order the list reader counted them: malformed lines first.
    scan.skipped = {**({"malformed SWF line": len(lines.skipped)} if lines.skipped else {}),
                    **scan.skipped}
    return scan


class SwfGridTasks:
    """The trace's tasks for a user mapping, read from the file each time they are iterated
    over (in file order, which is submit order): a simulation holds only the tasks queued and
    running. A job id used twice becomes `id@line` for the later ones, as cleaned logs never
    need (the ids seen: a byte each up to the largest id or `DENSE_IDS`, a set for others)."""

    def __init__(self, lines: SwfLines, choice: JobChoice, user_of: Mapping[str, str | None],
                 first_submit: float, count: int, largest_id: int) -> None:
        self.lines, self.choice, self.user_of = lines, choice, user_of
        self.first_submit, self.count, self.largest_id = first_submit, count, largest_id

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Task]:
        choice, user_of, first = self.choice, self.user_of, self.first_submit
        seen = bytearray(min(self.largest_id, DENSE_IDS) + 1)  # SWF numbers jobs 1, 2, ...
        seen_elsewhere: set[int] = set()  # SWF's "unknown" (-1), and ids past `seen`
        index = 0
        for job, reason in choice.usable(iter(self.lines)):
            if job is None or reason is not None:
                continue
            account = user_of[swf_user(job)]
            if account is None:
                continue
            job_id = job.job_id
            if 0 <= job_id < len(seen):
                repeated = seen[job_id]
                seen[job_id] = 1
            else:
                repeated = job_id in seen_elsewhere
                seen_elsewhere.add(job_id)
            cpus = job.processors if choice.cpus_asked else 1
            yield Task(f"{job_id}@{job.line}" if repeated else str(job_id), account,
                       (job.submit_time - first) / choice.compress, cpus=cpus,
                       work=job.run_time * choice.reference * cpus, source_index=index)
            index += 1
        if index != self.count:
            raise InputError("the SWF file changed after it was checked",
                             source=self.lines.source)


def swf_scenario(path: Path, grid: Grid | None, options: Mapping[str, Any]) -> Scenario:
    """SWF jobs as tasks on the grid's machines (the `swf` format when a GRID is given): the
    trace is checked and counted in a first pass that keeps no job, then streamed."""
    if grid is None:
        raise InputError("an SWF trace without a GRID needs the pool from --capacity (the "
                         "Justice setting); give a GRID to run it on owned machines",
                         source=str(path))
    lines = SwfLines(path)
    choice = JobChoice.of(options, grid)
    scan = _scan(lines, choice)
    if scan.first_submit is None:
        raise InputError("no job of the SWF trace is usable (all have unknown run times or "
                         "are filtered out)", source=str(path))

    def build(user_of: Mapping[str, str | None]) -> tuple[SwfGridTasks, list[float]]:
        too_wide = sum(number for user, number in scan.too_wide_per_user.items()
                       if user_of[user] is not None)
        count(scan.skipped, TOO_WIDE, too_wide)
        tasks = sum(number for user, number in scan.jobs_per_user.items()
                    if user_of[user] is not None) - too_wide
        return SwfGridTasks(lines, choice, user_of, scan.first_submit, tasks,
                            scan.largest_id), [0.0] * tasks

    return grid_scenario(path, grid, options, users=scan.jobs_per_user, build=build,
                         skipped=scan.skipped, default_user_map="busiest")


WORKLOAD_FORMATS["swf-grid"] = swf_scenario
