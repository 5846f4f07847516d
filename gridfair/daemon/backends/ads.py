"""Slot and job ClassAds to a snapshot, for the `files` and `htcondor` backends.

The views themselves are `gridfair.classads.views` (owner from `GridOwner`, power from
`MFlops`, else `KFlops / 1000`, else `Mips`, as the power of the whole slot); this module only
adds what the daemon needs on top:
- the projections its queries ask the collector and the schedds for;
- a running job known only from its slot's ad (`JobId`, `RemoteUser`: another schedd's job,
  or a dump of `condor_status` alone) becomes a `Job`, so it can be reconciled, journaled and
  vacated like the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from gridfair.ad_views import AdWarning, Job, JobStatus, Machine, SkippedAd, Snapshot, index_jobs
from gridfair.classads.reader import SourcedAd, readable
from gridfair.classads.views import AdConfig, jobs_from_ads, machines_from_ads

#: What the daemon reads of a slot ad (the collector query's projection).
SLOT_ATTRIBUTES = (
    "Name", "Cpus", "Memory", "State", "Activity", "JobId", "RemoteUser", "RemoteOwner",
    "JobStart", "MFlops", "KFlops", "Mips", "Requirements", "Rank", "Arch", "OpSys", "Disk",
    "SlotType", "GlobalJobId", "AccountingGroup", "TotalSlotCpus", "TotalSlotMemory",
    "TotalSlotGPUs", "GPUs",
)
#: What the daemon reads of a job ad (the schedd query's projection).
JOB_ATTRIBUTES = (
    "ClusterId", "ProcId", "Owner", "User", "AcctGroup", "AcctGroupUser", "AccountingGroup",
    "JobStatus", "QDate", "RequestCpus", "RequestMemory", "RequestDisk", "DiskUsage",
    "JobCurrentStartDate", "RemoteHost", "Requirements", "JobPrio", "RequestGPUs",
    "JobRunCount",
)


def job_of_slot(machine: Machine) -> Job:
    """A running job known only from its slot's ad: its user, accounting group (charged to
    it when the pool validates groups, as its idle jobs are) and the slot's cpus, memory and
    GPUs."""
    assert machine.running_job is not None and machine.running_user is not None
    start = readable(machine.ad).get("JobStart") if machine.ad is not None else None
    start = float(start) if isinstance(start, int | float) else None
    return Job(
        id=machine.running_job,
        user=machine.running_user,
        status=JobStatus.RUNNING,
        qdate=start or 0.0,
        request_cpus=machine.cpus,
        request_memory=machine.memory,
        request_gpus=machine.gpus,
        group=machine.running_group,
        start_time=start,
        machine=machine.name,
    )


def snapshot_from_ads(
    time: float,
    slot_ads: Iterable[SourcedAd],
    job_ads: Iterable[SourcedAd],
    config: AdConfig,
    skipped: Iterable[SkippedAd] = (),
    warnings: Iterable[AdWarning] = (),
) -> Snapshot:
    """The pool the ads describe; unusable ads are skipped with their reasons."""
    machines, bad_slots = machines_from_ads(slot_ads, config, lenient=True)
    jobs, bad_jobs = jobs_from_ads(job_ads, lenient=True)
    return snapshot_of(time, machines, jobs, (*skipped, *bad_slots, *bad_jobs),
                       warnings=warnings)


def running_as_slots_say(jobs: Iterable[Job],
                         machines: Iterable[Machine]) -> tuple[list[Job], list[SkippedAd]]:
    """The jobs, each running job where the slot whose ad names it (`JobId`) is: a job ad's
    `JobStatus` and `RemoteHost` are its owner's to edit, a slot's ad is the startd's. A job
    whose ad says it runs and that no slot names is skipped, with the reason."""
    slot_of = {machine.running_job: machine.name for machine in machines if machine.running_job}
    kept: list[Job] = []
    skipped: list[SkippedAd] = []
    for job in jobs:
        if job.status is not JobStatus.RUNNING:
            kept.append(job)
            continue
        slot = slot_of.get(job.id)
        if slot is None:
            skipped.append(SkippedAd("schedd", 0, job.id, "its ad says it runs, and no slot's "
                                     "ad names it: not counted as running"))
        else:
            kept.append(job if job.machine == slot else dataclasses.replace(job, machine=slot))
    return kept, skipped


def snapshot_of(time: float, machines: list[Machine], jobs: list[Job],
                skipped: Iterable[SkippedAd],
                jobs_by_id: dict[str, Job] | None = None,
                warnings: Iterable[AdWarning] = ()) -> Snapshot:
    """The snapshot of these views, with the running jobs known only from their slots'
    ads added (after the jobs read). `jobs_by_id`, the caller's `index_jobs(jobs)` if it has
    it, is completed and becomes the snapshot's index."""
    known = index_jobs(jobs) if jobs_by_id is None else jobs_by_id
    for machine in machines:
        if (machine.state == "Claimed" and machine.running_job and machine.running_user
                and machine.running_job not in known):
            job = job_of_slot(machine)
            jobs.append(job)
            known[job.id] = job
    return Snapshot.indexed(time, tuple(machines), tuple(jobs), tuple(skipped), known,
                            tuple(warnings))
