"""What a pool did, from its own records: each job's runs and lifetime (from HTCondor's job
event log) and how the daemon's carried-out allocations fared against them (from its journal).

For the live benchmarks and checks, which must not take the daemon's word for what landed:
the event log is written by the schedd's shadows, independently of gridfair.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a job on a slot, from its execute event to its eviction (or the end)."""

    job: str
    user: str
    slot: str
    start: float
    end: float | None
    evicted: bool


def read_runs(event_log: Path, users: Mapping[str, str], until: float) -> list[Run]:
    """The runs in a job event log; `users` maps a job id to its submitter. Runs still going at
    `until` end there, not evicted."""
    import htcondor2

    open_runs: dict[str, tuple[str, float]] = {}
    runs = []
    for event in htcondor2.JobEventLog(str(event_log)).events(stop_after=0):
        job = f"{event.cluster}.{event.proc}"
        if event.type == htcondor2.JobEventType.EXECUTE:
            open_runs[job] = (str(event.get("SlotName", "")), float(event.timestamp))
        elif event.type in (htcondor2.JobEventType.JOB_EVICTED,
                            htcondor2.JobEventType.JOB_TERMINATED,
                            htcondor2.JobEventType.JOB_ABORTED) and job in open_runs:
            slot, start = open_runs.pop(job)
            runs.append(Run(job, users[job], slot, start, float(event.timestamp),
                            event.type == htcondor2.JobEventType.JOB_EVICTED))
    runs += [Run(job, users[job], slot, start, None, False)
             for job, (slot, start) in open_runs.items() if start <= until]
    return runs


@dataclass(frozen=True, slots=True)
class Landing:
    """How the daemon's carried-out allocations fared, from its journal and the event log."""

    decided: int  # allocations the pool accepted (each attempt of an action counts)
    landed: int  # whose job's next start was on the chosen slot
    landed_in_time: int  # ... within `within` seconds of the pool accepting it
    latencies: tuple[float, ...]  # acceptance -> start on the chosen slot, of the landed
    journal: Mapping[str, int]  # the daemon's own verdicts: landed / not landed / in flight


def landing(store: Path, runs: Sequence[Run], within: float) -> Landing:
    """Every allocation the daemon carried out (each `confirmed` entry of its action log),
    against the job's next start in the event log."""
    with sqlite3.connect(store) as db:
        accepted = list(db.execute(
            "select a.job, a.machine, l.time from action_log l join actions a on a.key = l.key "
            "where a.kind = 'allocate' and l.state = 'confirmed'"))
        verdicts = dict(db.execute(
            "select case when state = 'landed' then 'landed' when error like 'not landed%' "
            "then 'not landed' when state = 'confirmed' then 'in flight' else state end, "
            "count(*) from actions where kind = 'allocate' group by 1"))
    landed = in_time = 0
    latencies = []
    for job, machine, at in accepted:
        # Event log times are whole seconds: a start in the acceptance's second counts.
        starts = sorted((run.start, run.slot) for run in runs
                        if run.job == job and run.start >= int(at))
        if starts and starts[0][1] == machine:
            landed += 1
            latency = max(0.0, starts[0][0] - at)
            latencies.append(latency)
            in_time += latency <= within
    return Landing(len(accepted), landed, in_time, tuple(latencies), verdicts)


@dataclass(frozen=True, slots=True)
class Lifetime:
    """A job from its submission to its end (terminated, or removed), from the event log."""

    submitted: float
    ended: float | None
    completed: bool  # ended by terminating, not by being removed


def read_lifetimes(event_log: Path) -> dict[str, Lifetime]:
    """Every job the event log saw submitted: when, and when and how it ended."""
    import htcondor2

    submitted: dict[str, float] = {}
    ended: dict[str, tuple[float, bool]] = {}
    for event in htcondor2.JobEventLog(str(event_log)).events(stop_after=0):
        job = f"{event.cluster}.{event.proc}"
        if event.type == htcondor2.JobEventType.SUBMIT:
            submitted[job] = float(event.timestamp)
        elif event.type in (htcondor2.JobEventType.JOB_TERMINATED,
                            htcondor2.JobEventType.JOB_ABORTED):
            ended[job] = (float(event.timestamp),
                          event.type == htcondor2.JobEventType.JOB_TERMINATED)
    return {job: Lifetime(at, *ended.get(job, (None, False))) for job, at in submitted.items()}
