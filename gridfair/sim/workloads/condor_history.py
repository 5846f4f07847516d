"""A pool's own HTCondor job history as a workload, replayed on the pool's own slots.

`gridfair simulate --workload HISTORY --machines SLOTS --policy P`: HISTORY is a history file
(rotated copies too: give the directory), `condor_history -long` or `-json` output, recognised
from its content (`gridfair.classads.history`); without `--workload`, `--pool HOST` reads
every schedd's history live, within `--since` / `--until`. SLOTS is a `condor_status -long` /
`-json` dump, or the live collector of `--pool` (`gridfair.sim.pool_grid`).

How a history becomes tasks (each rule that leaves a job out counts it, by reason):
- who: the job's submitter read as the daemon reads it (`views.job_view`: the authenticated
  User, and the accounting group it names), charged to a grid owner as the daemon charges it
  (`SubmitterMap.charge`: `--uid-domain`, default any domain, since a history is the pool's
  own schedds'; `--submitter-map`; `--trust-accounting-groups`). An identity that maps to no
  owner runs as itself, providing nothing (a note names them); `--unmapped drop` leaves its
  jobs out;
- which: a completed job (JobStatus 4) is a task; a job removed after it ran (JobStatus 3, a
  start recorded) is a task of the work its last run did (it held its slot that long); a job
  removed before it ever ran, and any other status, is left out; the same job twice (the
  same GlobalJobId, e.g. in overlapping files) is read once; a job id used again by another
  job becomes `id@n`;
- when: submitted at its QDate, the first job's at 0; `--since` / `--until` keep the jobs
  submitted in that window;
- how much: its last run's seconds x the power per cpu of the slot it ran on (LastRemoteHost;
  a dynamic slot is its partitionable slot) x the cpus it asked for, so replayed on its own
  slot it runs as long as it did. A slot missing from the snapshot takes its power from the
  ad's `MachineAttr<power>0` (the pool's SYSTEM_JOB_MACHINE_ATTRS) when recorded (a note
  counts these); with neither, the job is left out;
- evicted runs: a job started n times had n - 1 runs evicted (vanilla jobs start again from
  the beginning); its work is its last run's; as it happened, the evictions are its
  preemptions and their wall time lost work;
- fit: a job asking for more cpus, memory or GPUs than any slot of the grid has is left out
  (it would wait forever); GPUs are a resource of the pool's nodes and tasks, as cpus are.

"As it happened" (`Scenario.recorded`): the same tasks with the history's own times (first
start JobStartDate, end CompletionDate, or EnteredCurrentStatus for a removed job, which
counts as killed), for `gridfair compare` to put beside the policies.
"""

from __future__ import annotations

import time
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridfair.ad_views import JobStatus, SkippedAd
from gridfair.classads.history import (
    HistoryJob,
    history_attributes,
    history_of_ads,
    looks_like_history,
    read_history,
)
from gridfair.classads.live_reads import schedd_history
from gridfair.classads.submitters import ANY_DOMAIN, SubmitterMap
from gridfair.classads.views import AdConfig
from gridfair.core.pool import DONE, KILLED, Task
from gridfair.errors import InputError
from gridfair.moments import parse_moment
from gridfair.sim.engine import SimulationResult
from gridfair.sim.grid import Grid
from gridfair.sim.pool_grid import SLOTS, SlotIndex
from gridfair.sim.share_curve import ShareCurve, bin_width
from gridfair.sim.workloads.common import count, describe_skipped
from gridfair.sim.workloads.registry import FORMAT_SNIFFERS, WORKLOAD_FORMATS, Scenario

FORMAT = "condor-history"
#: Why a job is left out, by the rule that leaves it out.
OUTSIDE_WINDOW = "job submitted outside --since/--until"
NEVER_RAN = "job removed before it ever ran"
NO_RUN = "job with no run recorded (no JobCurrentStartDate or run time)"
REPEATED = "repeated record of a job (same GlobalJobId)"
TOO_BIG = "job asking for more cpus, memory or GPUs than any slot has"
DROPPED = "job of an identity charged to no owner (--unmapped drop)"
#: Notes: jobs used, with a caveat.
POWER_FROM_AD = "job that ran on a slot not in the machines snapshot: its power from the " \
                "job ad's MachineAttr"


@dataclass
class _Jobs:
    """The usable jobs, as columns (a history of a million jobs must not be a million
    objects), in the order read; `order` is submit order."""

    ids: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    qdate: array = field(default_factory=lambda: array("d"))
    cpus: array = field(default_factory=lambda: array("d"))
    memory: array = field(default_factory=lambda: array("d"))
    rate: array = field(default_factory=lambda: array("d"))  # MFlop/s of its last run
    last_run: array = field(default_factory=lambda: array("d"))
    first_start: array = field(default_factory=lambda: array("d"))
    last_start: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    wall: array = field(default_factory=lambda: array("d"))
    starts: array = field(default_factory=lambda: array("l"))
    completed: bytearray = field(default_factory=bytearray)
    gpus: array = field(default_factory=lambda: array("d"))
    order: list[int] = field(default_factory=list)
    start: float = 0.0  # the first QDate: time 0

    def add(self, job: HistoryJob, job_id: str, user: str, rate: float) -> None:
        self.ids.append(job_id)
        self.users.append(user)
        self.qdate.append(job.qdate)
        self.cpus.append(job.cpus)
        self.memory.append(job.memory)
        self.rate.append(rate)
        assert job.last_run is not None and job.last_start is not None
        self.last_run.append(job.last_run)
        self.first_start.append(job.first_start or job.last_start)
        self.last_start.append(job.last_start)
        self.end.append(job.end if job.end is not None else job.last_start + job.last_run)
        self.wall.append(max(job.wall_time, job.last_run))
        self.starts.append(max(job.starts, 1))
        self.completed.append(job.status is JobStatus.COMPLETED)
        self.gpus.append(job.gpus)

    def sort(self, limit: int | None) -> None:
        """Submit order (QDate, then cluster and proc as numbers: the same order whichever
        way the history lists them), the first `limit` kept."""
        def key(index: int) -> tuple[float, tuple[int, ...]]:
            number = self.ids[index].partition("@")[0]
            return self.qdate[index], tuple(map(int, number.split(".")))

        self.order = sorted(range(len(self.ids)), key=key)[:limit]
        self.start = self.qdate[self.order[0]]

    def task(self, position: int) -> Task:
        index = self.order[position]
        return Task(self.ids[index], self.users[index], self.qdate[index] - self.start,
                    cpus=self.cpus[index], memory=self.memory[index], gpus=self.gpus[index],
                    work=self.last_run[index] * self.rate[index], source_index=position)


class HistoryTasks:
    """The history's tasks in submit order, made as the simulation takes them."""

    def __init__(self, jobs: _Jobs) -> None:
        self.jobs = jobs

    def __len__(self) -> int:
        return len(self.jobs.order)

    def __iter__(self) -> Iterator[Task]:
        return map(self.jobs.task, range(len(self.jobs.order)))


def history_scenario(path: Path | None, grid: Grid | None,
                     options: Mapping[str, Any]) -> Scenario:
    """The scenario of a history (a file or directory at `path`; None: the live schedds of
    `options["pool"]`) on a pool grid."""
    source = str(path) if path is not None else f"the history of pool {options.get('pool')}"
    if grid is None:
        raise InputError("a history is replayed on the pool's slots: give --machines FILE "
                         "(condor_status -long or -json) or --pool HOST (its collector)",
                         source=source)
    config = AdConfig.with_attributes(options.get("owner_attr"), options.get("power_attr"))
    submitters = SubmitterMap.of(options.get("uid_domain") or ANY_DOMAIN,
                                 options.get("submitter_map"),
                                 bool(options.get("trust_accounting_groups")))
    now = time.time()
    since = parse_moment(options["since"], now, "--since") if options.get("since") else None
    until = parse_moment(options["until"], now, "--until") if options.get("until") else None
    if path is not None:
        records = read_history([path], config.power_sources)
    else:
        records = _live_history(options.get("pool"), since, until, config)
    reading = _Reading(grid, submitters, since, until, options.get("unmapped") or "keep")
    jobs = reading.collect(records, config)
    if not jobs.ids:
        raise InputError("no job of the history can be replayed"
                         + (f" (left out: {describe_skipped(reading.skipped)})"
                            if reading.skipped else ""), source=source)
    jobs.sort(options.get("limit"))
    return Scenario(grid.nodes(), HistoryTasks(jobs), skipped=reading.skipped,
                    notes=reading.notes(), recorded=lambda: recorded_run(jobs, grid),
                    curve_width=bin_width(max(jobs.end) - jobs.start))


def _live_history(pool: str | None, since: float | None, until: float | None,
                  config: AdConfig) -> Iterator[HistoryJob | SkippedAd]:
    """Every schedd's history, newest first, read back to the window's start."""
    window = [f"QDate >= {since:.0f}"] if since is not None else []
    window += [f"QDate < {until:.0f}"] if until is not None else []
    stop = f"EnteredCurrentStatus < {since:.0f}" if since is not None else None
    attributes = history_attributes(config.power_sources)
    for source, ads, problem in schedd_history(pool, " && ".join(window) or "true", stop,
                                               attributes):
        if problem is not None:
            yield SkippedAd(source, 0, "", problem)
        yield from history_of_ads(ads, source, config.power_sources)


class _Reading:
    """The rules, applied job by job, and what they left out or noted."""

    def __init__(self, grid: Grid, submitters: SubmitterMap, since: float | None,
                 until: float | None, unmapped: str) -> None:
        self.grid = grid
        self.owners = grid.owners()
        self.owner_set = set(self.owners)
        self.index: SlotIndex | None = grid.settings.get(SLOTS)
        self.node_power = {spec.name: spec.mflops / spec.cpus for spec in grid.machines}
        self.largest = (max(spec.cpus for spec in grid.machines),
                        max(spec.memory for spec in grid.machines),
                        max(spec.gpus for spec in grid.machines))
        self.submitters = submitters
        self.since, self.until, self.unmapped = since, until, unmapped
        self.skipped: dict[str, int] = {}
        self.unread: dict[str, list[Any]] = {}  # kind -> [count, the first such ad]
        self.missing_slots: Counter[str] = Counter()
        self.unmapped_users: Counter[str] = Counter()
        self.power_from_ad = 0
        self.owner_of: dict[tuple[str, str | None], str] = {}

    def collect(self, records: Iterator[HistoryJob | SkippedAd], config: AdConfig) -> _Jobs:
        jobs = _Jobs()
        seen_global: set[str] = set()
        used_ids: Counter[str] = Counter()
        power_names = "/".join(f"MachineAttr{name}0" for name, _ in config.power_sources)
        for record in records:
            if isinstance(record, SkippedAd):
                self.unread.setdefault(_kind(record), [0, record])[0] += 1
                continue
            reason = self._left_out(record, seen_global)
            if reason is not None:
                count(self.skipped, reason)
                continue
            rate = self._rate(record)
            if rate is None:
                self.missing_slots[record.slot or "none"] += 1
                continue
            user = self._owner(record.user, record.group)
            if user is None:
                count(self.skipped, DROPPED)
                continue
            used_ids[record.id] += 1
            job_id = record.id if used_ids[record.id] == 1 else \
                f"{record.id}@{used_ids[record.id]}"
            jobs.add(record, job_id, user, rate)
        for kind, (number, first) in self.unread.items():
            count(self.skipped, f"{kind} (first: {first.line()})", number)
        if self.missing_slots:
            shown = ", ".join(f"{slot} ({number})"
                              for slot, number in self.missing_slots.most_common(3))
            count(self.skipped, f"job that ran on a slot not in the machines snapshot "
                                f"({shown}) whose ad records no {power_names}",
                  sum(self.missing_slots.values()))
        return jobs

    def _left_out(self, job: HistoryJob, seen_global: set[str]) -> str | None:
        """Why the job is not replayed (the rules above), or None."""
        if (self.since is not None and job.qdate < self.since) or (
                self.until is not None and job.qdate >= self.until):
            return OUTSIDE_WINDOW
        if job.global_id is not None:
            if job.global_id in seen_global:
                return REPEATED
            seen_global.add(job.global_id)
        if job.status is JobStatus.REMOVING and job.last_start is None:
            return NEVER_RAN
        if job.status not in (JobStatus.COMPLETED, JobStatus.REMOVING):
            return f"job that left the queue {job.status.name.lower()} (not completed " \
                   "or removed)"
        if job.last_start is None or job.last_run is None:
            return NO_RUN
        cpus, memory, gpus = self.largest
        if job.cpus > cpus or job.memory > memory or job.gpus > gpus:
            return TOO_BIG
        return None

    def _rate(self, job: HistoryJob) -> float | None:
        """MFlop/s of the job's last run: its slot's power per cpu x its cpus; None when the
        slot is not in the grid and the ad did not record its power."""
        node = self.index.node_of(job.slot) if self.index is not None and job.slot else None
        if node is None and job.slot in self.node_power:
            node = job.slot  # a grid from a file, whose names are the slots'
        if node is not None:
            return self.node_power[node] * job.cpus
        if job.slot_power is None:
            return None
        self.power_from_ad += 1
        return job.slot_power / (job.slot_cpus or job.cpus) * job.cpus

    def _owner(self, user: str, group: str | None) -> str | None:
        """The owner a job of `user` naming `group` is charged to, the identity itself if
        none (None: dropped)."""
        owner = self.owner_of.get((user, group))
        if owner is None:
            owner = self.owner_of[user, group] = self.submitters.charge(
                user, group, self.owner_set).owner
        if owner in self.owner_set:
            return owner
        if self.unmapped == "drop":
            return None
        self.unmapped_users[owner] += 1
        return owner

    def notes(self) -> dict[str, int]:
        notes: dict[str, int] = {}
        if self.unmapped_users:
            shown = ", ".join(f"{user} ({number})"
                              for user, number in self.unmapped_users.most_common(5))
            count(notes, f"job of an identity charged to no owner, run as itself and "
                         f"providing nothing: {shown}", sum(self.unmapped_users.values()))
        count(notes, POWER_FROM_AD, self.power_from_ad)
        return notes


#: Kinds of unreadable ads, by a word of their reason (`history` names them so).
UNREADABLE_KINDS = (("times run backwards", "job whose times run backwards"),
                    ("truncated", "ad cut short at the end of a file"),
                    ("job epoch history", "job epoch record (one per run), not a job"),
                    ("cannot read its history", "schedd whose history cannot be read"))


def _kind(skipped: SkippedAd) -> str:
    return next((kind for word, kind in UNREADABLE_KINDS if word in skipped.reason),
                "ad that cannot be read")


def recorded_run(jobs: _Jobs, grid: Grid) -> tuple[list[Task], SimulationResult, ShareCurve]:
    """The history as it happened: its tasks with their recorded times (in submit order),
    the run's totals as a simulation reports them, and its curve of shares."""
    nodes = grid.nodes()
    start = jobs.start
    curve = ShareCurve(nodes, bin_width(max(jobs.end) - start))
    tasks = []
    busy = 0.0
    vacates = 0
    for position, index in enumerate(jobs.order):
        task = jobs.task(position)
        task.first_start = jobs.first_start[index] - start
        task.start_time = jobs.last_start[index] - start
        task.finish_time = jobs.end[index] - start
        task.state = DONE if jobs.completed[index] else KILLED
        task.preemptions = jobs.starts[index] - 1
        task.lost_work = (jobs.wall[index] - jobs.last_run[index]) * jobs.rate[index]
        busy += jobs.wall[index] * task.cpus
        vacates += task.preemptions
        curve.add_run(task.user, task.start_time, task.start_time + jobs.last_run[index],
                      jobs.rate[index])
        curve.add_task_wait(task)
        tasks.append(task)
    makespan = max(task.finish_time for task in tasks)
    result = SimulationResult(tasks, nodes, makespan, busy, 0, 0, vacates, 0.0,
                              submitted=len(tasks))
    return tasks, result, curve


WORKLOAD_FORMATS[FORMAT] = history_scenario
FORMAT_SNIFFERS[FORMAT] = looks_like_history
