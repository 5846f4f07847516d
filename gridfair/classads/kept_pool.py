"""The daemon's pool kept from one cycle to the next: each snapshot becomes events on it.

A rebuild (`to_pool.pool_from_snapshot`) makes every job a new task and replays the whole
snapshot through the policy stages, event by event: at 100k jobs most of a cycle. `KeptPool`
keeps the slots it made and the jobs' queue order, and each cycle compares the snapshot with
the last one:
- jobs submitted (new idle), started, vacated, moved, finished (gone, held, completed);
- slots that came, went, or changed (a new ad: state, claim, power, owner).
Only what changed is made anew: the running and the idle jobs are kept each in queue order
and a changed or gone job's view is taken out and a new one put in, each found by bisection
(`_reordered`). The pool's indexes are then laid out in one pass (`Pool.load`:
no policy callback per job) in the rebuild's orders (slots as the snapshot lists them, idle
jobs by QDate then id, running jobs by slot), and the stages learn the pool from its totals
(`Pool.announce`). The ClassAd matcher is kept too: only the jobs and slots whose view
changed are classified again (`_match`). A running job's task is made each cycle; an idle
job's only when it reaches its user's queue head (`Pool.load`'s deferred tasks), where the
order stage's task key allows it (`DEFERRABLE_KEYS`): a million idle jobs cost their views
and a handle each, not a task each. Totals are summed in the rebuild's order, so every
figure, tie and decision is the rebuild's to the last bit (`tests/test_kept_pool.py` runs
both on the same snapshot sequences).

Stages whose state follows from the pool as it is now take this path: HOSEP, OSEP, reclaim,
DRF and weighted DRF. Stages that integrate over the events' times (SDRF, HTCondor priority),
remember arrival order (DMFA-SRQ) or admit jobs as they are submitted get the rebuild, and
`unsupported` says why.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, is_, is_not
from typing import TYPE_CHECKING

from gridfair.ad_views import DYNAMIC, JOB_ID, JOB_STATUS, Job, JobStatus, Machine, Snapshot
from gridfair.classads.matching import AutoclusterMatcher
from gridfair.classads.to_pool import (
    LoadedPool,
    close,
    enrol_in_rotation,
    lay_out,
    node_from_machine,
    queue_order,
    task_from_job,
)
from gridfair.core.collector import collector_paused
from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Pool, Task, fifo_key, least_demand_key

if TYPE_CHECKING:
    from gridfair.policies.registry import Stages

#: Task keys that never decrease along the queue order for the daemon's tasks, so that a
#: user's queued tasks can stay deferred behind its head: QDate (the queue's first key), and
#: HOSEP's least demand, 0 for a task with neither work nor duration (the daemon's).
DEFERRABLE_KEYS = (fifo_key, least_demand_key)
_JOB_USER = attrgetter("user")
_QDATE = attrgetter("qdate")
_ABSENT = object()  # a job the last cycle did not have

#: The kinds of change a snapshot can bring, as counted in `PoolEvents`.
EVENT_KINDS = ("submitted", "started", "vacated", "moved", "finished",
               "slot_came", "slot_went", "slot_changed")


def unsupported(stages: Stages) -> str | None:
    """Why the kept pool cannot serve these stages (they need the rebuild), or None."""
    if stages.admit is not None:
        return f"admission stage {stages.admit.name} decides on every submit"
    for role, stage in (("order", stages.order), ("preempt", stages.preempt)):
        # A stage whose state is a function of the pool's current totals and running tasks
        # gets from `Pool.announce` what a replay of every event would give it.
        if stage is not None and not stage.state_from_totals:
            return (f"{role} stage {stage.name} keeps state over the events' times or order, "
                    "which only a replay of every event reproduces")
    return None


@dataclass(frozen=True, slots=True)
class JobsChanged:
    """What the daemon found changed between two snapshots read (`reconcile`), so that the
    kept pool need not look at every job again: `ids` holds every job whose view in `now` is
    not the very object it was in `since` (new, changed, moved) and every job gone. The view
    the kept pool is given holds `now`'s jobs position for position (some replaced by the
    allocations in flight) and then others (`inflight.hold_slots`)."""

    since: Snapshot | None  # None: no snapshot before (`ids` is every job)
    now: Snapshot
    ids: Collection[str]


@dataclass
class PoolEvents:
    """How many of each kind of change the last snapshot brought."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVENT_KINDS, 0))

    def add(self, kind: str, count: int = 1) -> None:
        self.counts[kind] += count

    @property
    def changes(self) -> int:
        return sum(self.counts.values())


class KeptPool:
    """Slots and the jobs' queue order kept between cycles; `update` lays out the pool of a
    new snapshot."""

    def __init__(self, *, matcher: Callable[[Task, Node], bool] | None = None,
                 defer: bool = True, served: Mapping[str, float] | None = None) -> None:
        """`defer`: idle jobs' tasks made as they reach their queue's head, where the task
        key allows; not when every queued task must be in `Pool.tasks` (the shadow's rows).
        `served`: users indexed by it, least first (`to_pool.enrol_in_rotation`); the caller
        keeps it current."""
        self._matcher = matcher
        # The matcher kept across cycles (when no `matcher` is given), and how many of the
        # jobs and slots it met have since changed or gone (their entries kept, unused).
        self._kept_matcher = AutoclusterMatcher()
        self._forgotten = 0
        self._defer = defer
        self._served = served
        self._machines: dict[str, tuple[Machine, Node]] = {}
        self._views: dict[str, Job] = {}  # id -> the job's view in the last snapshot
        # The snapshot read that the last view was made of (`JobsChanged.now`), and the jobs
        # whose view differed from it (held by an allocation in flight); None if unknown.
        self._read: Snapshot | None = None
        self._differed: set[str] = set()
        # The last snapshot's running and idle jobs, each in queue order (`queue_order`).
        self._orders: dict[JobStatus, list[Job]] = {JobStatus.RUNNING: [], JobStatus.IDLE: []}
        self._running: dict[str, str] = {}  # running job in the pool -> its slot
        self._in_pool = 0  # jobs in the last pool: running on a slot, or idle
        self.events = PoolEvents()
        self.cycles = 0
        self.looked_at = 0  # jobs the last update looked at for a change (`_fresh`)

    @property
    def queue(self) -> list[str]:
        """The last snapshot's idle job ids in queue order (QDate, then the id), then its
        running ones'."""
        return [job.id for status in (JobStatus.IDLE, JobStatus.RUNNING)
                for job in self._orders[status]]

    def update(self, snapshot: Snapshot, stages: Stages,
               changed: JobsChanged | None = None) -> LoadedPool:
        """The negotiator over the snapshot's pool, as `pool_from_snapshot` would make it;
        `changed`: what changed since the last snapshot read, if the caller knows."""
        # The layout makes a tuple per queued job; the cyclic collector, triggered by them,
        # would scan the kept pool's million objects over and over (a third of the update's
        # time at 100k jobs). The daemon pauses it for the whole cycle; so does this, alone.
        with collector_paused():
            return self._update(snapshot, stages, changed)

    def _update(self, snapshot: Snapshot, stages: Stages,
                changed: JobsChanged | None) -> LoadedPool:
        events = PoolEvents()
        now = snapshot.time
        nodes, slots_left = self._nodes((machine for machine in snapshot.machines
                                         if machine.slot_type != DYNAMIC), events)
        last_views = self._views
        index = snapshot.jobs_by_id
        fresh, jobs_left = self._fresh(snapshot, self._candidates(snapshot, changed))
        match = self._match(jobs_left, slots_left, len(index) + len(nodes))
        running_jobs, idle = self._orders[JobStatus.RUNNING], self._orders[JobStatus.IDLE]
        layout = lay_out(snapshot.machines, running_jobs, index)
        held = layout.held_on_closed()
        for machine, available in layout.nodes:
            node = nodes[machine.name]
            node.used_cpus = node.used_memory = node.used_gpus = 0.0
            if available:
                node.free_cpus, node.free_memory, node.free_gpus = (node.cpus, node.memory,
                                                                    node.gpus)
            else:
                close(node, held[machine.name])
        running: list[tuple[Task, Node, float]] = []
        running_on: dict[str, str] = {}  # running job -> its slot
        for share in layout.running:
            node = nodes[share.node]
            if share.job is not None:
                task = task_from_job(share.job)
                started = share.job.start_time if share.job.start_time is not None else now
                running_on[share.job.id] = share.slot
            else:
                task = Task(share.stand_in[0], share.stand_in[1], now)
                started = now
            # A static slot's claim holds the whole slot, whatever the job asked for.
            task.cpus, task.memory, task.gpus = (
                (node.cpus, node.memory, node.gpus) if share.whole
                else (share.cpus, share.memory, share.gpus))
            running.append((task, node, started))
        self._count_job_events(running_on, len(idle), fresh, last_views, index, events)
        pool = Pool(task_key=stages.order.task_key,
                    exact_accounting=stages.order.exact_accounting,
                    matcher=layout.matcher(match))
        laid_out = [nodes[machine.name] for machine, _ in layout.nodes]
        idle_users = list(map(_JOB_USER, idle))
        if self._served is not None:
            enrol_in_rotation(pool, (machine.owner for machine, _ in layout.nodes), idle_users,
                              (share.job for share in layout.running if share.job is not None),
                              self._served)
        if self._defer and stages.order.task_key in DEFERRABLE_KEYS:
            pool.make_task = lambda handle: task_from_job(idle[handle])
            pool.load(laid_out, (), running, deferred=idle_users)
        else:
            pool.load(laid_out, list(map(task_from_job, idle)), running)
        negotiator = Negotiator(pool, stages.order, stages.preempt, stages.admit,
                            allocation=stages.allocation, placement=stages.placement)
        pool.announce(now)
        self.events = events
        self.cycles += 1
        return LoadedPool(negotiator, (), layout.unplaced)

    # ------------------------------------------------------------- internals
    def _match(self, jobs_left: list[Job], slots_left: list[str],
               live: int) -> Callable[[Task, Node], bool]:
        """The matcher of this cycle: the one kept, told which jobs and slots changed or
        went; a new one when those it was told of outnumber the `live` jobs and slots (its
        groups and matches of ads gone would otherwise grow without bound)."""
        if self._matcher is not None:
            return self._matcher
        self._forgotten += len(jobs_left) + len(slots_left)
        if self._forgotten > live:
            self._kept_matcher, self._forgotten = AutoclusterMatcher(), 0
            return self._kept_matcher
        matcher = self._kept_matcher
        for job in jobs_left:
            matcher.forget_job(job.id)
        for name in slots_left:
            matcher.forget_machine(name)
        matcher.next_snapshot()
        return matcher

    def _nodes(self, machines: Iterable[Machine],
               events: PoolEvents) -> tuple[dict[str, Node], list[str]]:
        """Each slot's node (kept where its view is the last cycle's), and the slots whose
        view changed or that went."""
        kept = self._machines
        current: dict[str, tuple[Machine, Node]] = {}
        changed: list[str] = []  # slots whose view (and maybe ad) is not the last cycle's
        for machine in machines:
            before = kept.get(machine.name)
            if before is not None and before[0] is machine:
                current[machine.name] = before
                continue
            if before is None:
                events.add("slot_came")
            else:
                changed.append(machine.name)
                if before[0] != machine:
                    events.add("slot_changed")
            current[machine.name] = (machine, node_from_machine(machine))
        gone = [name for name in kept if name not in current]
        events.add("slot_went", len(gone))
        self._machines = current
        return {name: node for name, (_, node) in current.items()}, [*changed, *gone]

    def _candidates(self, view: Snapshot, changed: JobsChanged | None) -> list[str] | None:
        """The ids of every job whose view may not be the last cycle's, from `changed` (when
        it starts from the snapshot the last view was made of): those it names, and those
        held in the view (an allocation in flight) now or last cycle. None: every job is
        looked at. Remembers `changed.now` and the jobs held for the next cycle."""
        if changed is None:
            self._read = None
            return None
        read = changed.now
        if view is read:
            differed: set[str] = set()
        else:
            # Held views replace the read's in place and come after them: found over every
            # job at once, in C.
            differed = set(map(JOB_ID, compress(view.jobs, map(is_not, view.jobs, read.jobs))))
            differed.update(map(JOB_ID, view.jobs[len(read.jobs):]))
        usable = changed.since is self._read and self._read is not None and bool(self._views)
        candidates = sorted({*changed.ids, *differed, *self._differed}) if usable else None
        self._read, self._differed = read, differed
        return candidates

    def _fresh(self, snapshot: Snapshot,
               candidates: list[str] | None) -> tuple[list[Job], list[Job]]:
        """The snapshot's jobs whose view is not the one of the last cycle (new ones, and
        changed ones), and the last cycle's views of the changed and gone ones; the running
        and idle orders made the snapshot's (`_reorder`). Only those jobs, and the ones gone,
        are visited one by one: among the `candidates` (`_candidates`) alone when known,
        else found over all jobs at once, in C."""
        jobs = snapshot.jobs
        index = snapshot.jobs_by_id
        last = self._views
        self.looked_at = len(jobs) if candidates is None else len(candidates)
        if candidates is not None:
            fresh = [index[job_id] for job_id in candidates
                     if job_id in index and index[job_id] is not last.get(job_id)]
            replaced = [last[job_id] for job_id in candidates
                        if job_id in last and index.get(job_id) is not last[job_id]]
        else:
            fresh = list(compress(jobs, map(is_not, map(last.get, map(JOB_ID, jobs)), jobs)))
            replaced = [last[job.id] for job in fresh if job.id in last]
            if len(last) + len(fresh) - len(replaced) != len(index):  # some jobs left
                replaced += map(last.__getitem__, last.keys() - index.keys())
        self._views = index
        if not last or (len(fresh) + len(replaced)) * 8 > len(index):
            # Many changed: sorted anew (one pass over every job, in C, and a sort).
            for status, order in self._orders.items():
                order[:] = sorted(compress(jobs, map(is_, map(JOB_STATUS, jobs),
                                                     repeat(status))), key=queue_order)
            return fresh, replaced
        for status, order in self._orders.items():
            order[:] = _reordered(order, [job for job in replaced if job.status is status],
                                  [job for job in fresh if job.status is status])
        return fresh, replaced

    def _count_job_events(self, running_on: dict[str, str], idle: int, fresh: Iterable[Job],
                          last_views: Mapping[str, Job], views: Mapping[str, Job],
                          events: PoolEvents) -> None:
        """Count the jobs whose place (a slot, or the queue) is not the last cycle's.

        Only a job with a new view or running now or then can have moved: an idle job is
        in the queue because its view says idle, and an unchanged view says what it said.
        Jobs that left the pool are counted, not found: the last pool's size less the jobs
        still in it."""
        running_before = self._running

        def place(job_id: str, running: Mapping[str, str], views: Mapping[str, Job]) -> object:
            slot = running.get(job_id)
            if slot is not None:
                return slot
            view = views.get(job_id)
            return None if view is not None and view.status is JobStatus.IDLE else _ABSENT

        in_pool = len(running_on) + idle
        if not last_views:  # the first cycle: every job in the pool has just come
            events.add("submitted", idle)
            events.add("started", len(running_on))
            self._running, self._in_pool = running_on, in_pool
            return
        now_views = {job_id: views[job_id] for job_id in running_before if job_id in views}
        now_views.update((job.id, job) for job in fresh)
        arrived = 0  # jobs in the pool now that were not in it last cycle
        for job_id in now_views.keys() | running_on.keys():
            now = place(job_id, running_on, now_views)
            was = place(job_id, running_before, last_views)
            if now is _ABSENT or now == was:
                continue
            if was is _ABSENT:
                arrived += 1
                events.add("submitted" if now is None else "started")
            else:
                events.add("started" if was is None else ("vacated" if now is None
                                                          else "moved"))
        events.add("finished", self._in_pool - (in_pool - arrived))
        self._running = running_on
        self._in_pool = in_pool


def _reordered(order: list[Job], left: list[Job], came: list[Job]) -> list[Job]:
    """`order` (jobs in `queue_order`) less the views `left`, with the views `came` put in
    their places: each found by bisection, and the list remade a slice at a time (a list's
    copy, in C), so that a cycle costs the jobs that changed, not a key a job kept."""
    if not left and not came:
        return order
    kept: list[Job] = []
    start = 0
    for view in sorted(left, key=queue_order):
        at = _place(order, view, start)
        if at == len(order) or order[at] is not view:
            raise AssertionError(f"job {view.id} is not where its queue order puts it")
        kept += order[start:at]
        start = at + 1
    kept += order[start:]
    merged: list[Job] = []
    start = 0
    for view in sorted(came, key=queue_order):
        at = _place(kept, view, start)
        merged += kept[start:at]
        merged.append(view)
        start = at
    merged += kept[start:]
    return merged


def _place(order: list[Job], job: Job, start: int) -> int:
    """Where `job` goes in `order` (in `queue_order`), at `start` or after: among the jobs
    of its QDate (found with a key read in C), by the whole key (a key made in Python a
    step, for those few)."""
    low = bisect_left(order, job.qdate, start, key=_QDATE)
    high = bisect_right(order, job.qdate, low, key=_QDATE)
    return bisect_left(order, queue_order(job), low, high, key=queue_order)
