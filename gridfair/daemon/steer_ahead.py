"""Steering ahead: the job a busy slot runs next, decided before the slot frees (issue 44).

On a pool that keeps claims, the schedd starts the claim's user's next runnable job on the
slot the moment its job ends, without a negotiation (HTCondor's `FindRunnableJob`); while
gridfair holds its lease the schedds' gate (`START_VANILLA_UNIVERSE`,
`configs/htcondor-pool.config`) lets it start only a job live-steered to that slot. So each
cycle, after its own decisions, gridfair decides for every busy slot the job its policy gives
the slot next (`next_jobs`: the slots taken in the order their jobs started, each freed in
turn in the cycle's pool, which is thrown away afterwards, and given to the order's first
user's next job), and when that job is the same submitter's as the one running there (a claim
starts only its own user's jobs), steers it to the busy slot ahead of time (`AheadSteerings`).

A job steered ahead is none of the cycle's allocations: not journaled as an action, not in
flight, not the user's usage and no protection, until it starts; then the next snapshot shows
it running like any other. When the policy gives the slot to another user, nothing is steered
there: the claim finds no job the gate passes and the schedd releases it, and the slot is
negotiated like any freed one. A steering ahead the policy no longer wants (its user's share
moved, the slot is vacated) is withdrawn before the cycle's vacates, so a vacated job's claim
never starts it. A steering lives `safety.landing_timeout` like any, and is written again
while its slot is still busy once half of that is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from gridfair.ad_views import DYNAMIC, Job, JobStatus, Machine, Snapshot
from gridfair.core.pool import RUNNING, Pool
from gridfair.core.stages import OrderPolicy
from gridfair.daemon.backends import ActionFailed, PoolBackend

log = logging.getLogger("gridfair.daemon")


@dataclass(frozen=True, slots=True)
class NextJob:
    """`job` is steered ahead to `slot`, busy with `current` (the same submitter's job)."""

    job: Job
    slot: Machine
    current: Job


def submitter(job: Job) -> str:
    """Whose claim may start the job: the identity the backend charged it as (its
    authenticated user or accounting group), else its user."""
    return job.identity or job.user


def next_jobs(pool: Pool, order: OrderPolicy, snapshot: Snapshot, in_flight: Collection[str],
              now: float) -> list[NextJob]:
    """For each busy slot (running a job of the snapshot, not an allocation in flight), the
    job the policy gives it next, when that is the running job's submitter's and fits the
    slot as claimed. Consumes `pool`: its running jobs on those slots are finished, the next
    jobs started, in the order the running jobs started (the first to start is taken to end
    first), ties by slot name."""
    machines = snapshot.machines_by_name
    busy = sorted(
        (job for job in snapshot.jobs
         if job.status == JobStatus.RUNNING and job.machine in machines
         and job.id not in in_flight),
        key=lambda job: (job.start_time if job.start_time is not None else now, job.machine))
    jobs = snapshot.jobs_by_id
    steered: list[NextJob] = []
    for current in busy:
        task = pool.tasks.get(current.id)
        if task is None or task.state != RUNNING or task.node is None:
            continue
        node = task.node
        pool.finish(task, now)
        user = order.first(now)
        if user is None:
            break  # nobody has an idle job left: no busy slot has a next one
        head = pool.head(user)
        if head is None or not pool.fits_free(head, node):
            continue
        pool.start(head, node, now)
        job = jobs.get(head.id)
        slot = machines[current.machine]
        if job is None or submitter(job) != submitter(current):
            continue  # another user's: the claim ends, the slot is negotiated when freed
        if slot.slot_type == DYNAMIC and (head.cpus > task.cpus or head.memory > task.memory
                                          or head.gpus > task.gpus):
            continue  # larger than the dynamic slot claimed: only a new cut can hold it
        steered.append(NextJob(job, slot, current))
    return steered


@dataclass
class AheadSteerings:
    """The steerings ahead this daemon wrote and still wants: job id -> (slot, when it
    expires). Kept in memory; a restarted daemon takes on the steerings it finds in the pool
    (`adopt`) and withdraws the ones it no longer wants."""

    life: float
    written: dict[str, tuple[str, float]] = field(default_factory=dict)
    adopted: bool = False  # the steerings found in the pool at start taken on

    def adopt(self, backend: PoolBackend, in_flight: Collection[str]) -> None:
        """Once, at the first cycle that acts: take on every live steering the pool holds
        that is not one of the journal's allocations in flight, as if written here (with no
        life left), so the cycle's `stale` withdraws those it no longer wants and `to_write`
        renews those it does. A daemon that stopped or crashed left them there; forgotten,
        each could start its job on a kept claim until it expires, whatever the policy
        decided since. Tried again next cycle if the pool cannot be asked."""
        if self.adopted:
            return
        found = backend.steered_jobs()
        if found is None:
            return
        self.adopted = True
        for job_id, slot in found.items():
            if job_id not in in_flight:
                self.written.setdefault(job_id, (slot, 0.0))

    def stale(self, wanted: Iterable[NextJob], allocated: Collection[str],
              snapshot: Snapshot) -> list[str]:
        """The jobs steered ahead before and not steered ahead again nor allocated this
        cycle: to withdraw before the cycle's vacates (a vacated job's kept claim would start
        one). A job held since is one of them, though the snapshot (idle and running jobs)
        does not show it: released within the steering's life, it would take the slot when
        its claim ends, whatever the policy decided since. So is any other job the snapshot
        no longer shows (one gone has nothing to withdraw). Forgets the jobs that started."""
        jobs = snapshot.jobs_by_id
        still = {job.job.id for job in wanted}
        stale = []
        for job_id in list(self.written):
            job = jobs.get(job_id)
            if job is None:
                stale.append(job_id)
            elif job.status == JobStatus.RUNNING or job_id in allocated:
                del self.written[job_id]  # started (on its claim or elsewhere)
            elif job_id not in still:
                stale.append(job_id)
        return stale

    def to_write(self, wanted: Iterable[NextJob], now: float) -> list[NextJob]:
        """The next jobs whose steering ahead is not written yet, names another slot, or has
        less than half its life left."""
        return [next_job for next_job in wanted
                if (written := self.written.get(next_job.job.id)) is None
                or written[0] != next_job.slot.name or written[1] - now < self.life / 2]

    def withdraw(self, backend: PoolBackend, job_ids: Iterable[str]) -> None:
        """Withdraw these steerings ahead; one the pool refuses expires by itself."""
        for job_id in job_ids:
            self.written.pop(job_id, None)
            try:
                backend.withdraw(job_id)
            except ActionFailed as error:
                log.warning("steering ahead of %s not withdrawn (it expires by itself): %s",
                            job_id, error)

    def write(self, backend: PoolBackend, next_jobs: list[NextJob], now: float) -> int:
        """Steer each next job to its busy slot; returns how many were written."""
        if not next_jobs:
            return 0
        problems = backend.steer_ahead([(next_job.job, next_job.slot)
                                        for next_job in next_jobs])
        for next_job, problem in zip(next_jobs, problems, strict=True):
            if problem is None:
                self.written[next_job.job.id] = (next_job.slot.name, now + self.life)
            else:
                log.warning("job %s not steered ahead to %s: %s", next_job.job.id,
                            next_job.slot.name, problem)
        return sum(problem is None for problem in problems)


def ahead_notes(next_jobs: Iterable[NextJob]) -> list[str]:
    """The cycle's notes on its steerings ahead (recorded with the cycle's events)."""
    return [f"{next_job.job.id} steered ahead to {next_job.slot.name}, next after "
            f"{next_job.current.id} on its claim" for next_job in next_jobs]

