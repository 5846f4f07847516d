"""A snapshot of ClassAds as the core's runtime pool, with a negotiator over it.

Nodes are added in snapshot order (their index is the tie-break), idle and running jobs are
submitted in queue order (QDate, then ClusterId.ProcId), and running jobs are started on their
slots, so per-user totals (provided and allocated MFlops, running, idle) are those of the pool
at the snapshot's time (`lay_out`, shared with the daemon's kept pool).

A node is a static slot or a partitionable slot (a whole machine: its TotalSlotCpus, memory,
GPUs and power); a dynamic slot is not a node but a share of its partitionable slot's, held by
the job that runs in it. A claimed static slot holds its whole capacity, as an HTCondor claim
does; a dynamic slot holds its own CPUs, memory and GPUs. What a slot is doing decides
whether it is free:
- Unclaimed: free (a partitionable slot: what its dynamic slots leave);
- Claimed with a job of the jobs read: that job runs there;
- Claimed by a user whose job was not read (another schedd's): a stand-in task of that user
  runs there, so the slot counts in the user's allocation;
- anything else (Owner, Matched, Preempting, Drained, a claim without a user): not free, and
  still counted in its owner's provided power.
A job may also run on a partitionable slot itself (the daemon's view of an allocation in
flight, `gridfair.daemon.inflight`), holding what it asks for. A dynamic slot whose
partitionable slot is not in the snapshot is skipped, with its job, and the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

from gridfair.ad_views import (
    DYNAMIC,
    PARTITIONABLE,
    Job,
    JobStatus,
    Machine,
    SkippedAd,
    Snapshot,
    whole_slot,
)
from gridfair.classads.matching import AutoclusterMatcher
from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Pool, Task
from gridfair.core.stages import Decision

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
                machine.load, ad=machine.ad, gpus=machine.gpus)
    if not available:  # before add_node: never in the free index
        node.free_cpus = node.free_memory = node.free_gpus = 0.0
    return node


def close(node: Node, held: tuple[float, float, float]) -> None:
    """A node that takes no new job keeps room for exactly what runs on it, `held` (cpus,
    memory, GPUs: `Layout.held_on_closed`; the dynamic slots of a partitionable slot its
    owner took back), so it is full once they start."""
    node.free_cpus, node.free_memory, node.free_gpus = held


def task_from_job(job: Job) -> Task:
    return Task(job.id, job.user, job.qdate, cpus=job.request_cpus, memory=job.request_memory,
                gpus=job.request_gpus, ad=job.ad)


def queue_order(job: Job) -> tuple[float, ...]:
    """QDate, then the id as numbers (so 10.0 comes after 9.0), as one flat tuple."""
    return (job.qdate, *map(int, job.id.split(".")))


@dataclass(frozen=True, slots=True)
class Running:
    """Something running on a node, and what of the node it holds: a job of the jobs read,
    or (`job` None) a stand-in for a claim whose job was not read."""

    node: str
    slot: str  # the slot it runs in: the node, or a dynamic slot of it
    job: Job | None
    cpus: float
    memory: float
    gpus: float
    stand_in: tuple[str, str] | None = None  # (task id, user) of a stand-in
    whole: bool = False  # a static slot's claim: it holds the node, whatever its size


@dataclass(frozen=True, slots=True)
class Layout:
    """Where everything runs: the nodes (machines that are not dynamic slots, in snapshot
    order, each with whether it takes jobs now), what runs on them in slot order, and the
    slots and running jobs that could not be placed, with why."""

    nodes: tuple[tuple[Machine, bool], ...]
    running: tuple[Running, ...]
    unplaced: tuple[SkippedAd, ...]

    def matcher(self, match: Callable[[Task, Node], bool]) -> Callable[[Task, Node], bool]:
        """`match`, refusing every job to the nodes that take none now (a partitionable slot
        its owner took back, or drained, still holds what runs in its dynamic slots): neither
        a free allocation nor a preemption may put one there."""
        closed = self._closed()
        if not closed:
            return match
        return lambda task, node: node.name not in closed and match(task, node)

    def held_on_closed(self) -> dict[str, tuple[float, float, float]]:
        """What runs on each node that takes no job now (cpus, memory, GPUs), summed in one
        pass over what runs (none when every node takes jobs)."""
        closed = self._closed()
        held: dict[str, tuple[float, float, float]] = dict.fromkeys(closed, (0.0, 0.0, 0.0))
        if closed:
            for share in self.running:
                if share.node in closed:
                    cpus, memory, gpus = held[share.node]
                    held[share.node] = (cpus + share.cpus, memory + share.memory,
                                        gpus + share.gpus)
        return held

    def _closed(self) -> frozenset[str]:
        return frozenset(machine.name for machine, available in self.nodes if not available)


def lay_out(machines: tuple[Machine, ...], running_jobs: list[Job],
            job_ids: Collection[str]) -> Layout:
    """The layout of a snapshot: `running_jobs` in queue order, `job_ids` every job read."""
    by_name = {machine.name: machine for machine in machines}
    placed, unplaced = place_running(machines, running_jobs)
    occupant = {slot: job for job, slot in placed.items() if by_name[slot].slot_type
                != PARTITIONABLE}
    on_partitionable: dict[str, list[Job]] = {}
    for job, slot in placed.items():
        if by_name[slot].slot_type == PARTITIONABLE:
            on_partitionable.setdefault(slot, []).append(job)
    nodes: list[tuple[Machine, bool]] = []
    running: list[Running] = []
    for machine in machines:
        if machine.slot_type == DYNAMIC:
            parent = by_name.get(machine.parent or "")
            if parent is None or parent.slot_type != PARTITIONABLE:
                unplaced.append(SkippedAd("machines", 0, machine.name, f"dynamic slot of "
                                          f"{machine.parent}, which is not among the "
                                          "partitionable slots read"))
                continue
            share = _claim(machine, occupant, job_ids, parent.name, whole=False)
            if share is not None:
                running.append(share)
            continue
        busy = machine.state == CLAIMED and (machine.name in occupant
                                             or machine.running_user is not None)
        nodes.append((machine, machine.state == UNCLAIMED or busy))
        if machine.slot_type == PARTITIONABLE:
            running += [Running(machine.name, machine.name, job, job.request_cpus,
                                job.request_memory, job.request_gpus)
                        for job in on_partitionable.get(machine.name, ())]
        elif machine.state == CLAIMED:
            share = _claim(machine, occupant, job_ids, machine.name, whole=True)
            if share is not None:
                running.append(share)
    return Layout(tuple(nodes), tuple(running), tuple(unplaced))


def _claim(machine: Machine, occupant: dict[str, Job], job_ids: Collection[str], node: str, *,
           whole: bool) -> Running | None:
    """What runs on a claimed static or dynamic slot: its job, a stand-in for its user's
    claim, or nothing (a claim without a user)."""
    if machine.state != CLAIMED:
        return None
    job = occupant.get(machine.name)
    if job is not None:
        return Running(node, machine.name, job, machine.cpus, machine.memory, machine.gpus,
                       whole=whole)
    if machine.running_user is None:
        return None
    # Named after the slot's JobId unless a job read has that id (a snapshot taken as the
    # job changed state).
    known = machine.running_job is None or machine.running_job in job_ids
    task_id = f"claim@{machine.name}" if known else machine.running_job
    return Running(node, machine.name, None, machine.cpus, machine.memory, machine.gpus,
                   stand_in=(task_id, machine.running_user), whole=whole)


def pool_from_snapshot(
    snapshot: Snapshot,
    stages: Stages,
    *,
    matcher: Callable[[Task, Node], bool] | None = None,
    checkpointing: bool = False,
    served: Mapping[str, float] | None = None,
) -> LoadedPool:
    """The pool of `snapshot` under `stages`, matching with `matcher` (by default ClassAd
    Requirements through autoclusters), ready for `negotiator.cycle(snapshot.time)`; with
    `served`, users indexed least served first (`enrol_in_rotation`)."""
    now = snapshot.time
    jobs = sorted(snapshot.jobs, key=queue_order)
    job_ids = {job.id for job in jobs}
    layout = lay_out(snapshot.machines,
                     [job for job in jobs if job.status is JobStatus.RUNNING], job_ids)
    pool = Pool(
        task_key=stages.order.task_key,
        exact_accounting=stages.order.exact_accounting,
        checkpointing=checkpointing,
        matcher=layout.matcher(matcher if matcher is not None else AutoclusterMatcher()),
    )
    if served is not None:
        enrol_in_rotation(pool, (machine.owner for machine, _ in layout.nodes),
                          (job.user for job in jobs if job.status is JobStatus.IDLE),
                          (share.job for share in layout.running if share.job is not None),
                          served)
    negotiator = Negotiator(pool, stages.order, stages.preempt, stages.admit,
                            allocation=stages.allocation, placement=stages.placement)
    held = layout.held_on_closed()
    for machine, available in layout.nodes:
        node = node_from_machine(machine)
        if not available:
            close(node, held[machine.name])
        pool.add_node(node)
    admissions = []
    for job in jobs:
        if job.status is JobStatus.IDLE:
            decision = negotiator.submit(task_from_job(job), now)
            if decision is not None:
                admissions.append(decision)
    for share in layout.running:
        node = pool.nodes_by_name[share.node]
        if share.job is not None:
            task, started = task_from_job(share.job), share.job.start_time
        else:
            task, started = Task(share.stand_in[0], share.stand_in[1], now), None
        _start_on(pool, task, node, share, now, started)
    return LoadedPool(negotiator, tuple(admissions), layout.unplaced)


def enrol_in_rotation(pool: Pool, owners: Iterable[str | None], idle_users: Iterable[str],
                      running: Iterable[Job], served: Mapping[str, float]) -> None:
    """Make the users of an empty pool in the daemon's order: the user index is every
    order's last tie-break, and in order of first mention (slot owners, queued jobs in queue
    order, running jobs) the user who submitted first wins every tie for good (found live:
    3 users of equal shares on 8 slots held a fixed 3/3/2 split, 6 completions apart). Least
    `served` first (the MFlop-seconds each was allocated so far, as HTCondor's fair share
    counts usage), so a tie goes to the user served least and the odd slots rotate; first
    mention breaks ties between those. `idle_users`: the user of each queued job, in queue
    order."""
    mentioned = dict.fromkeys(chain((owner for owner in owners if owner is not None),
                                    idle_users, (job.user for job in running)))
    for name in sorted(mentioned, key=lambda name: served.get(name, 0.0)):
        pool.user(name)


def place_running(
    machines: tuple[Machine, ...], jobs: list[Job]
) -> tuple[dict[Job, str], list[SkippedAd]]:
    """Running job -> the slot it runs on: the claimed slot whose JobId names it, else its
    RemoteHost (a claimed static or dynamic slot, which one job holds, or a partitionable
    slot itself, which several may share). A RemoteHost naming a dynamic slot the collector
    does not list yet, cut from a partitionable slot it does list, is that partitionable
    slot: the schedd reports a start before the startd's new ad reaches the collector, and
    the job holds its machine's cpus meanwhile (found live: skipped, the room looked free
    and was given again)."""
    by_name = {machine.name: machine for machine in machines}
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
        if slot is not None and slot not in by_name and whole_slot(slot) in by_name:
            slot = whole_slot(slot)
        shared = slot in by_name and by_name[slot].slot_type == PARTITIONABLE
        if slot is None:
            reason = "running, but no slot names it (no JobId on a slot, no RemoteHost)"
        elif slot not in claimed and not shared:
            reason = f"running on {slot}, which is not a claimed slot among the machines read"
        elif slot in taken:
            reason = f"running on {slot}, which another job already holds"
        else:
            placed[job] = slot
            if not shared:
                taken.add(slot)
            continue
        unplaced.append(SkippedAd("jobs", 0, job.id, reason))
    return placed, unplaced


def _start_on(pool: Pool, task: Task, node: Node, share: Running, now: float,
              started: float | None) -> None:
    # A static slot's claim holds the whole slot, whatever the job asked for; a dynamic slot
    # its own share. Running jobs were admitted when they were submitted: they go straight to
    # the pool, past any admission stage.
    task.cpus, task.memory, task.gpus = (
        (node.free_cpus, node.free_memory, node.free_gpus) if share.whole
        else (share.cpus, share.memory, share.gpus))
    pool.submit(task, now)
    pool.start(task, node, started if started is not None else now)
