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

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import compress
from operator import is_not, not_, or_
from typing import Any, NamedTuple

from gridfair.ad_views import JOB_ID, Job, JobStatus, Snapshot
from gridfair.classads.kept_pool import JobsChanged

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
    """A row of the store's `jobs` table, as a cycle writes it."""

    id: str
    user: str
    status: str  # a `STATUS_NAMES` value
    machine: str | None
    since: float  # when its current state began
    last_seen: float
    cycle: int
    identity: str | None


class KnownJob(NamedTuple):
    """What reconciling needs of a job's stored row."""

    user: str
    status: str  # a `STATUS_NAMES` value
    machine: str | None
    since: float


class KnownJobs:
    """The store's `jobs` table as the daemon keeps it between cycles: read from the store's
    rows once (`from_rows`), then the snapshot last reconciled, whose views say each job's
    user, status and slot as the table does. Of `since` only what a job's view does not say
    is held (`default_since`): a job idle since its QDate or running since its
    `JobCurrentStartDate` costs nothing beyond its view, not a row of its own a job."""

    __slots__ = ("_rows", "_snapshot", "_since")

    def __init__(self, snapshot: Snapshot | None = None,
                 since: dict[str, float] | None = None,
                 rows: dict[str, KnownJob] | None = None) -> None:
        self._snapshot = snapshot
        self._since = since if since is not None else {}
        self._rows = rows

    @classmethod
    def from_rows(cls, rows: Mapping[str, Mapping[str, Any]]) -> KnownJobs:
        """The jobs of the store's rows (`Store.known_jobs`), as after a restart."""
        return cls(rows={job_id: KnownJob(row["user"], row["status"], row["machine"],
                                          row["since"]) for job_id, row in rows.items()})

    def get(self, job_id: str) -> KnownJob | None:
        if self._rows is not None:
            return self._rows.get(job_id)
        snapshot = self._snapshot
        job = snapshot.jobs_by_id.get(job_id) if snapshot is not None else None
        if job is None:
            return None
        since = self._since.get(job_id)
        return KnownJob(job.user, STATUS_NAMES[job.status], _machine(job, snapshot.job_slots),
                        default_since(job) if since is None else since)

    def since_of(self, job_id: str) -> float:
        """When a known job's current state began (a KeyError for a job not known)."""
        if self._rows is not None:
            return self._rows[job_id].since
        since = self._since.get(job_id)
        if since is not None:
            return since
        job = self._snapshot.jobs_by_id[job_id] if self._snapshot is not None else None
        since = default_since(job) if job is not None else None
        if since is None:
            raise KeyError(job_id)
        return since

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot the known jobs are those of, or None (read from the store)."""
        return self._snapshot

    def ids(self) -> Iterable[str]:
        """The known jobs' ids, in stored order."""
        if self._rows is not None:
            return self._rows
        return self._snapshot.jobs_by_id if self._snapshot is not None else ()

    @property
    def held_since(self) -> Mapping[str, float]:
        """The `since` held apart from the views: the jobs whose view does not say it."""
        return self._since


def default_since(job: Job) -> float | None:
    """When the job's current state began as its view alone says: running since it started
    (when the ad says), idle since its submission; None for any other."""
    if job.status is JobStatus.RUNNING:
        return job.start_time or None
    return job.qdate if job.status is JobStatus.IDLE else None


def _machine(job: Job, on_slot: Mapping[str, str]) -> str | None:
    return on_slot.get(job.id, job.machine) if job.status is JobStatus.RUNNING else None


class Reconciliation:
    """What changed: the jobs whose row changed (`rows` writes them), those that left, the
    events, and the known jobs as of this snapshot (`after`)."""

    __slots__ = ("snapshot", "cycle", "before", "after", "changed", "gone", "looked_at",
                 "_counts", "_looked")

    def __init__(self, snapshot: Snapshot, cycle: int, before: KnownJobs, after: KnownJobs,
                 changed: list[Job], gone: list[str], looked: list[str],
                 counts: Counter[str]) -> None:
        self.snapshot, self.cycle = snapshot, cycle
        self.before, self.after = before, after
        #: views of the jobs whose row of the `jobs` table changed, and ids of jobs that left.
        self.changed, self.gone = changed, gone
        self.looked_at = len(looked)  # jobs compared with their row (the rest passed over)
        self._looked = looked
        self._counts = counts

    def jobs_changed(self) -> JobsChanged:
        """The jobs whose view is not the very one of the snapshot last reconciled, and those
        gone, for the kept pool (`JobsChanged`; every job when there was none before)."""
        since = self.before.snapshot
        return JobsChanged(since, self.snapshot, [*self._looked, *self.gone])

    def since_of(self, job_id: str) -> float:
        """When the job's current state began, for action keys."""
        return self.after.since_of(job_id)

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def rows(self) -> Iterator[JobRow]:
        """The changed rows of the `jobs` table, made as they are read (a first cycle on a big
        pool changes every row: held as views, not as rows)."""
        time, cycle, on_slot, after = (self.snapshot.time, self.cycle,
                                       self.snapshot.job_slots, self.after)
        for job in self.changed:
            yield JobRow(job.id, job.user, STATUS_NAMES[job.status], _machine(job, on_slot),
                         after.since_of(job.id), time, cycle, job.identity)

    @property
    def events(self) -> Iterator[JobEvent]:
        """The job events, made as they are read: one a changed row whose job did something
        (a first cycle on a big pool has one a job), then one a job that left."""
        on_slot, before = self.snapshot.job_slots, self.before
        for job in self.changed:
            machine = _machine(job, on_slot)
            event = _event(_before(before, job), STATUS_NAMES[job.status], machine)
            if event is not None:
                yield JobEvent(job.id, job.user, event, machine)
        for job_id in self.gone:
            row = before.get(job_id)
            assert row is not None
            yield JobEvent(job_id, row.user, "gone", row.machine)


def reconcile(snapshot: Snapshot, known: KnownJobs, cycle: int, *,
              pass_over: bool = True) -> Reconciliation:
    """What changed between the stored jobs (`known`) and the snapshot; `known` is left as
    it was, the result's `after` is the known jobs as of this snapshot.

    When `known` are the jobs of the snapshot last reconciled (`KnownJobs.snapshot`), a job
    whose view is the very object it was then (views are immutable, and a reader hands out
    the same one for an unchanged ad) and that is on the same slot cannot have changed, and
    is passed over (unless `pass_over` is false): its row stands."""
    previous = known.snapshot if pass_over else None
    on_slot = snapshot.job_slots
    present = snapshot.jobs_by_id
    held = known.held_since
    # The `since` the views do not say, of the jobs still here (few: see `default_since`).
    since_after = {job_id: since for job_id, since in held.items() if job_id in present}
    changed: list[Job] = []
    counts: Counter[str] = Counter()
    looked: list[str] = []
    for job in _changed_since(snapshot, previous):
        looked.append(job.id)
        status = STATUS_NAMES[job.status]
        machine = _machine(job, on_slot)
        before = _before(known, job)
        if before is not None and before.status == status and before.machine == machine:
            since = before.since
        else:
            since = _since(job, before, snapshot.time)
            event = _event(before, status, machine)
            if event is not None:
                counts[event] += 1
            changed.append(job)
        if since == default_since(job):
            since_after.pop(job.id, None)
        else:
            since_after[job.id] = since
    gone = list(compress(known.ids(), map(not_, map(present.__contains__, known.ids()))))
    if gone:
        counts["gone"] = len(gone)
    return Reconciliation(snapshot, cycle, known, KnownJobs(snapshot, since_after), changed,
                          gone, looked, counts)


def _before(known: KnownJobs, job: Job) -> KnownJob | None:
    """The job's known row, unless the job was submitted after the state it tells began:
    another job with the same id."""
    before = known.get(job.id)
    return None if before is not None and before.since < job.qdate else before


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


def _since(job: Job, before: KnownJob | None, now: float) -> float:
    if job.status == JobStatus.RUNNING and job.start_time:
        return job.start_time
    if before is None and job.status == JobStatus.IDLE:
        # Never seen: idle since submission, the same after a restart with a lost store.
        return job.qdate
    return now


def _event(before: KnownJob | None, status: str, machine: str | None) -> str | None:
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
