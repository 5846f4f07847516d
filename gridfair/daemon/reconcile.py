"""From a snapshot to the negotiator's pool, and what changed since the last cycle.

`reconcile` compares the snapshot's jobs with the store's record of the previous cycle and
turns the differences into job events (submitted, started, vacated, moved, gone): the usage
history, the `explain` command and the journal's confirmations are built on them.

The negotiator's pool itself is made from each snapshot elsewhere: laid out from the objects
kept since the last cycle (`gridfair.classads.kept_pool`) or rebuilt by replaying the
snapshot (`gridfair.classads.to_pool`) for stages that need every event; what must outlive a
cycle (decayed usage, commitments) is policy state, saved and restored by the daemon.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from operator import is_not, not_, or_
from typing import NamedTuple

from gridfair.model import JOB_ID, Job, JobStatus, Snapshot

# Looked up, not computed: reconcile names the status of every job every cycle, and an
# enum's `.name` is a slow property.
STATUS_NAMES = {status: status.name.lower() for status in JobStatus}


@dataclass(slots=True)
class JobEvent:
    job: str
    user: str
    event: str  # submitted, started, vacated, moved, gone, seen-running
    machine: str | None


class JobRow(NamedTuple):
    """A row of the store's `jobs` table, as a cycle writes it and the daemon keeps it in
    memory until the next (`CycleRunner._known`): a tuple, a third of a dict's size a job."""

    id: str
    user: str
    status: str  # a `STATUS_NAMES` value
    machine: str | None
    since: float  # when its current state began
    last_seen: float
    cycle: int
    identity: str | None


@dataclass
class Reconciliation:
    #: job id -> when its current state began (idle since / running since), for the jobs
    #: looked at; the others' is their stored row's (`since_of`).
    since: dict[str, float] = field(default_factory=dict)
    events: list[JobEvent] = field(default_factory=list)
    #: rows of the `jobs` table that changed, and ids of jobs that left the pool.
    changed: list[JobRow] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    known: Mapping[str, JobRow] = field(default_factory=dict)

    def since_of(self, job_id: str) -> float:
        """When the job's current state began, for action keys."""
        since = self.since.get(job_id)
        return since if since is not None else self.known[job_id].since

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for event in self.events:
            counts[event.event] = counts.get(event.event, 0) + 1
        return counts


def reconcile(
    snapshot: Snapshot, known: Mapping[str, JobRow], cycle: int,
    previous: Snapshot | None = None,
) -> Reconciliation:
    """What changed between the stored jobs (`known`) and the snapshot.

    `previous` is the snapshot `known` was last reconciled with, if the caller has it: a job
    whose view is the very object it was then (views are immutable, and a reader hands out
    the same one for an unchanged ad) and that is on the same slot cannot have changed, and
    is passed over; its row stands."""
    result = Reconciliation(known=known)
    on_slot = snapshot.job_slots
    for job in _changed_since(snapshot, previous):
        status = STATUS_NAMES[job.status]
        machine = on_slot.get(job.id, job.machine) if job.status == JobStatus.RUNNING else None
        before = known.get(job.id)
        if before is not None and before.since < job.qdate:
            before = None  # submitted after the state we knew began: another job, same id
        if before is not None and before.status == status and before.machine == machine:
            result.since[job.id] = before.since
            continue
        since = _since(job, before, snapshot.time)
        result.since[job.id] = since
        event = _event(before, status, machine)
        if event is not None:
            result.events.append(JobEvent(job.id, job.user, event, machine))
        result.changed.append(JobRow(job.id, job.user, status, machine, since, snapshot.time,
                                     cycle, job.identity))
    present = snapshot.jobs_by_id
    for job_id in list(compress(known, map(not_, map(present.__contains__, known)))):
        row = known[job_id]  # in stored order
        result.gone.append(job_id)
        result.events.append(JobEvent(job_id, row.user, "gone", row.machine))
    return result


def _changed_since(snapshot: Snapshot, previous: Snapshot | None) -> Iterable[Job]:
    """The snapshot's jobs, less those that are the very view they were in `previous` and
    on the same slot; found over every job at once, in C (`map`, `compress`)."""
    if previous is None:
        return snapshot.jobs
    jobs = snapshot.jobs
    ids = list(map(JOB_ID, jobs))
    new_view = map(is_not, map(previous.jobs_by_id.get, ids), jobs)
    # Only a job on a slot now or then can have changed slots: found among those alone.
    slots_now, slots_then = snapshot.job_slots, previous.job_slots
    moved = {job_id for job_id, slot in slots_now.items() if slots_then.get(job_id) != slot}
    moved.update(job_id for job_id in slots_then if job_id not in slots_now)
    if not moved:
        return compress(jobs, new_view)
    return compress(jobs, map(or_, new_view, map(moved.__contains__, ids)))


def _since(job: Job, before: JobRow | None, now: float) -> float:
    if job.status == JobStatus.RUNNING and job.start_time:
        return job.start_time
    if before is None and job.status == JobStatus.IDLE:
        # Never seen: idle since submission, the same after a restart with a lost store.
        return job.qdate
    return now


def _event(before: JobRow | None, status: str, machine: str | None) -> str | None:
    running = status == "running"
    if before is None:
        return "seen-running" if running else ("submitted" if status == "idle" else status)
    if running and before.status == "running":
        return "moved"
    if running:
        return "started"
    if before.status == "running" and status == "idle":
        return "vacated"
    return status
