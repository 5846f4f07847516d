"""From a snapshot to the negotiator's pool, and what changed since the last cycle.

`reconcile` compares the snapshot's jobs with the store's record of the previous cycle and
turns the differences into job events (submitted, started, vacated, moved, gone): the usage
history, the `explain` command and the journal's confirmations are built on them.

The negotiator's pool itself is rebuilt from each snapshot (`gridfair.classads.to_pool`,
replaying it as pool events with the policy stages listening): a fresh pool per cycle keeps
the daemon's view equal to the pool's, whatever happened in between; what must outlive a
cycle (decayed usage, commitments) is policy state, saved and restored by the daemon.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gridfair.model import Job, JobStatus, Snapshot

# Looked up, not computed: reconcile names the status of every job every cycle, and an
# enum's `.name` is a slow property.
STATUS_NAMES = {status: status.name.lower() for status in JobStatus}


@dataclass(slots=True)
class JobEvent:
    job: str
    user: str
    event: str  # submitted, started, vacated, moved, gone, seen-running
    machine: str | None


@dataclass
class Reconciliation:
    #: job id -> when its current state began (idle since / running since), for action keys.
    since: dict[str, float] = field(default_factory=dict)
    events: list[JobEvent] = field(default_factory=list)
    #: rows of the `jobs` table that changed, and ids of jobs that left the pool.
    changed: list[dict[str, Any]] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for event in self.events:
            counts[event.event] = counts.get(event.event, 0) + 1
        return counts


def reconcile(
    snapshot: Snapshot, known: Mapping[str, Mapping[str, Any]], cycle: int,
) -> Reconciliation:
    """What changed between the stored jobs (`known`) and the snapshot."""
    result = Reconciliation()
    on_slot = snapshot.job_slots
    seen: set[str] = set()
    for job in snapshot.jobs:
        seen.add(job.id)
        status = STATUS_NAMES[job.status]
        machine = on_slot.get(job.id, job.machine) if job.status == JobStatus.RUNNING else None
        before = known.get(job.id)
        if before is not None and before["since"] < job.qdate:
            before = None  # submitted after the state we knew began: another job, same id
        if before is not None and before["status"] == status and before["machine"] == machine:
            result.since[job.id] = before["since"]
            continue
        since = _since(job, before, snapshot.time)
        result.since[job.id] = since
        event = _event(before, status, machine)
        if event is not None:
            result.events.append(JobEvent(job.id, job.user, event, machine))
        result.changed.append({"id": job.id, "user": job.user, "status": status,
                               "machine": machine, "since": since, "last_seen": snapshot.time,
                               "cycle": cycle})
    for job_id, row in known.items():
        if job_id not in seen:
            result.gone.append(job_id)
            result.events.append(JobEvent(job_id, row["user"], "gone", row["machine"]))
    return result


def _since(job: Job, before: Mapping[str, Any] | None, now: float) -> float:
    if job.status == JobStatus.RUNNING and job.start_time:
        return job.start_time
    if before is None and job.status == JobStatus.IDLE:
        # Never seen: idle since submission, the same after a restart with a lost store.
        return job.qdate
    return now


def _event(before: Mapping[str, Any] | None, status: str, machine: str | None) -> str | None:
    running = status == "running"
    if before is None:
        return "seen-running" if running else ("submitted" if status == "idle" else status)
    if running and before["status"] == "running":
        return "moved"
    if running:
        return "started"
    if before["status"] == "running" and status == "idle":
        return "vacated"
    return status
