"""A snapshot of ClassAds as the core's runtime pool, with a negotiator over it.

Nodes are added in snapshot order (their index is the tie-break), idle and running jobs are
submitted in queue order (QDate, then ClusterId.ProcId), and running jobs are started on their
slots, so per-user totals (provided and allocated MFlops, running, idle) are those of the pool
at the snapshot's time. A claimed slot holds its whole capacity, as an HTCondor claim does.

What a slot is doing decides whether it is free:
- Unclaimed: free;
- Claimed with a job of the jobs read: that job runs there;
- Claimed by a user whose job was not read (another schedd's): a stand-in task of that user
  runs there, so the slot counts in the user's allocation;
- anything else (Owner, Matched, Preempting, Drained, a claim without a user): not free, and
  still counted in its owner's provided power.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gridfair.classads.matching import AutoclusterMatcher
from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Pool, Task
from gridfair.core.stages import Decision
from gridfair.model import Job, JobStatus, Machine, SkippedAd, Snapshot

if TYPE_CHECKING:
    from gridfair.policies.registry import Stages

CLAIMED = "Claimed"
UNCLAIMED = "Unclaimed"


@dataclass(frozen=True, slots=True)
class LoadedPool:
    """The negotiator over the snapshot's pool, the admission decisions taken as the idle jobs
    were submitted, and the running jobs that could not be placed on a slot."""

    negotiator: Negotiator
    admissions: tuple[Decision, ...]
    unplaced: tuple[SkippedAd, ...]

    @property
    def pool(self) -> Pool:
        return self.negotiator.pool


def node_from_machine(machine: Machine, *, available: bool = True) -> Node:
    node = Node(machine.name, machine.owner, machine.power, machine.cpus, machine.memory,
                machine.load, ad=machine.ad)
    if not available:
        node.free_cpus = node.free_memory = 0.0  # before add_node: never in the free index
    return node


def task_from_job(job: Job) -> Task:
    return Task(job.id, job.user, job.qdate, cpus=job.request_cpus, memory=job.request_memory,
                ad=job.ad)


def queue_order(job: Job) -> tuple[float, tuple[int, ...]]:
    """QDate, then the id as numbers (so 10.0 comes after 9.0)."""
    return job.qdate, tuple(map(int, job.id.split(".")))


def pool_from_snapshot(
    snapshot: Snapshot,
    stages: Stages,
    *,
    matcher: Callable[[Task, Node], bool] | None = None,
    checkpointing: bool = False,
) -> LoadedPool:
    """The pool of `snapshot` under `stages`, matching with `matcher` (by default ClassAd
    Requirements through autoclusters), ready for `negotiator.cycle(snapshot.time)`."""
    pool = Pool(
        task_key=stages.order.task_key,
        exact_accounting=stages.order.exact_accounting,
        checkpointing=checkpointing,
        matcher=matcher if matcher is not None else AutoclusterMatcher(),
    )
    negotiator = Negotiator(pool, stages.order, stages.preempt, stages.admit)
    now = snapshot.time
    jobs = sorted(snapshot.jobs, key=queue_order)
    placed, unplaced = place_running(snapshot.machines, jobs)
    occupant = {slot: job for job, slot in placed.items()}

    for machine in snapshot.machines:
        busy = machine.state == CLAIMED and (machine.name in occupant
                                             or machine.running_user is not None)
        available = machine.state == UNCLAIMED or busy
        pool.add_node(node_from_machine(machine, available=available))
    job_ids = {job.id for job in jobs}
    admissions = []
    for job in jobs:
        if job.status is JobStatus.IDLE:
            decision = negotiator.submit(task_from_job(job), now)
            if decision is not None:
                admissions.append(decision)
    for machine in snapshot.machines:
        if machine.state != CLAIMED:
            continue
        node = pool.nodes_by_name[machine.name]
        job = occupant.get(machine.name)
        if job is not None:
            _start_on(pool, task_from_job(job), node, now, job.start_time)
        elif machine.running_user is not None:
            # Named after the slot's JobId unless a job read has that id (a snapshot taken
            # as the job changed state).
            known = machine.running_job is None or machine.running_job in job_ids
            stand_in = Task(f"claim@{machine.name}" if known else machine.running_job,
                            machine.running_user, now)
            _start_on(pool, stand_in, node, now, None)
    return LoadedPool(negotiator, tuple(admissions), tuple(unplaced))


def place_running(
    machines: tuple[Machine, ...], jobs: list[Job]
) -> tuple[dict[Job, str], list[SkippedAd]]:
    """Running job -> claimed slot: the slot whose JobId names it, else its RemoteHost."""
    claimed = {machine.name: machine for machine in machines if machine.state == CLAIMED}
    slot_by_job_id = {machine.running_job: machine.name for machine in claimed.values()
                      if machine.running_job is not None}
    placed: dict[Job, str] = {}
    taken: set[str] = set()
    unplaced: list[SkippedAd] = []
    for job in jobs:
        if job.status is not JobStatus.RUNNING:
            continue
        slot = slot_by_job_id.get(job.id) or job.machine
        if slot is None:
            reason = "running, but no slot names it (no JobId on a slot, no RemoteHost)"
        elif slot not in claimed:
            reason = f"running on {slot}, which is not a claimed slot among the machines read"
        elif slot in taken:
            reason = f"running on {slot}, which another job already holds"
        else:
            placed[job] = slot
            taken.add(slot)
            continue
        unplaced.append(SkippedAd("jobs", 0, job.id, reason))
    return placed, unplaced


def _start_on(pool: Pool, task: Task, node: Node, now: float, started: float | None) -> None:
    # The claim holds the whole slot, whatever the job asked for. Running jobs were admitted
    # when they were submitted: they go straight to the pool, past any admission stage.
    task.cpus, task.memory = node.free_cpus, node.free_memory
    pool.submit(task, now)
    pool.start(task, node, started if started is not None else now)
