"""Allocations in flight: a slot the daemon gave a job holds it until the job starts.

An allocation is carried out as a request to the pool (HTCondor: the job is steered to the
slot, and the negotiator starts it on its next cycle), so it is `confirmed` some seconds
before the job runs. Meanwhile the next snapshot shows the slot free (or still running the
job vacated for it) and the job idle: a cycle that believed it would give the slot to another
user and the job to another slot. Seen live: 54-81 % of the showcase's allocations landed.

So every cycle, each confirmed allocation not yet seen running (`in_flight`) is settled
against the snapshot (`settle`):
- the job runs on the chosen slot (or, partitionable, on a dynamic slot of it): `landed`;
- the job has left the queue, and the pool's record of ended jobs (`PoolBackend.ended_runs`,
  HTCondor's history) says its last run started there since: `landed` too, and the slot is
  free for the cycle (a short job that started and ended between two cycles); said to have
  run elsewhere: "not landed";
- the job is idle again with a run count past the one steered (`JobRunCount`, which the
  schedd counts up at every start: a job that restarts, `on_exit_remove = false`): it started
  where it was steered (the steering authorizes no other slot) and was requeued: `landed`,
  and the slot is free for the cycle;
- the job runs elsewhere, the slot is gone or another job now runs on it (one gridfair did
  not vacate for it), or `landing_timeout` seconds of the pool's time passed without a start
  (two negotiation cycles) or without any ad listing the job (read from autoclusters, a job
  that has just started is on no ad until its slot's ad catches up): `failed`, "not landed:
  <why>", retryable (a later cycle that decides the same again carries it out again), and
  the backend withdraws the steering so the pool may start the job anywhere;
- otherwise it holds its slot: the cycle's view of the pool (`Settlement.view`) shows the job
  running there since the allocation, and the jobs it displaces (vacated for it, slower to
  leave than the next snapshot) idle. On a partitionable slot the job holds the CPUs,
  memory and GPUs allocated to it (its dynamic slot does not exist yet; the pool's START cuts
  none larger, whatever the job's request says by then), beside what else runs there;
  the jobs vacated on that slot leave it in the view, with their dynamic slots; a flight
  that no longer fits beside the rest (they did not leave, or others took the room) is
  "not landed: no room". The policy therefore decides as if the allocation had happened,
  and the safety guard spares the held job from preemption.

A flight given up for a timeout alone (not started in time, or its job on no ad), or for no
room on a partitionable slot (judged on ads that may not yet name a starting job), is still
watched by the next `LATE_LANDING_CYCLES` cycles (`given_up`; counted in cycles, so that a
daemon restarted after an outage still looks): seen then running on its slot, it is
journaled `landed`, late. Under load the pool may start a job, or the collector list the
dynamic slot it runs in, after the timeout (found live: a job that left the idle rows at once
was on no slot ad for over the 6 s a test allowed, and its allocation stayed "not landed"
while it ran where gridfair sent it).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress, count, starmap
from typing import Any

from gridfair.ad_views import JOB_ID, PARTITIONABLE, Job, JobStatus, Machine, Snapshot, whole_slot
from gridfair.core.stages import ALLOCATE, VACATE
from gridfair.daemon.store import CONFIRMED, FAILED, LANDED, Store

CLAIMED, BUSY = "Claimed", "Busy"

#: How many cycles after a flight is given up for a timeout it is still watched for a late
#: landing.
LATE_LANDING_CYCLES = 10
#: The problems of a flight given up for a timeout alone, and their SQL patterns.
_NOT_SEEN = "not landed: job {job} not seen in the pool for {waited:.0f} s"
_NOT_STARTED = "not landed: not started within {timeout:g} s (waited {waited:.0f} s)"
TIMED_OUT = ("not landed: job % not seen in the pool for %",
              "not landed: not started within %")
#: Verdicts a later snapshot may contradict, so watched for a late landing too: the timeouts,
#: and no room on a partitionable slot, judged while a claimed dynamic slot did not yet name
#: its job (seen live, Showcase 2: a flight journaled "no room for 3 CPUs" while its job ran
#: there from 1.8 s after the acceptance to its end).
WATCHED_LATE = (*TIMED_OUT, "not landed: % has no room for %")

log = logging.getLogger("gridfair.daemon")


@dataclass(frozen=True, slots=True)
class Flight:
    """One confirmed allocation not yet seen running."""

    key: str
    job: str
    machine: str
    confirmed: float  # when the pool accepted it (the journal's updated_at)
    user: str = ""  # the job's user, to show the slot taken while no ad lists the job
    # The size allocated on a partitionable slot (None in a journal from before it was kept)
    cpus: float | None = None
    memory: float | None = None
    gpus: float | None = None
    #: The job's run count when steered (None in a journal from before it was kept).
    run_count: int | None = None

    def holds(self, job: Job | None) -> tuple[float, float, float]:
        """The CPUs, memory and GPUs the flight holds on a partitionable slot: the size
        allocated, since the pool's START cuts no larger dynamic slot for the job whatever
        its request says now (a submitter may edit it once steered: a grown request must not
        push other users' flights off the machine). In a journal from before the size was
        kept: what the job asks for (1 CPU if no ad lists it)."""
        if self.cpus is not None:
            return self.cpus, self.memory or 0.0, self.gpus or 0.0
        if job is not None:
            return job.request_cpus, job.request_memory, job.request_gpus
        return 1.0, 0.0, 0.0


@dataclass
class Settlement:
    """What the snapshot says about the allocations in flight."""

    view: Snapshot  # the snapshot with every held slot taken by its job
    held: dict[str, Flight] = field(default_factory=dict)  # job id -> its flight
    landed: list[Flight] = field(default_factory=list)
    #: (slot, start time if known) of each landed flight, in the same order
    started: list[tuple[str, float | None]] = field(default_factory=list)
    #: (flight, why it did not land)
    missed: list[tuple[Flight, str]] = field(default_factory=list)
    #: (flight given up for a timeout, the slot it runs on now)
    landed_late: list[tuple[Flight, str]] = field(default_factory=list)
    #: (flight, slot, start) of each flight whose job ran there and ended since (late or not)
    ended: list[tuple[Flight, str, float]] = field(default_factory=list)
    #: (flight, run count now) of each flight whose job started since and is idle again
    requeued: list[tuple[Flight, int]] = field(default_factory=list)


def in_flight(store: Store) -> list[Flight]:
    """The confirmed allocations of the journal (none has been seen running yet)."""
    return _flights(store, "state = ?", [CONFIRMED])


def count_in_flight(store: Store) -> int:
    """How many confirmed allocations the journal has (`in_flight`, not read as flights)."""
    [(count,)] = store.db.execute("select count(*) from actions where kind = ? and state = ?",
                                  [ALLOCATE, CONFIRMED]).fetchall()
    return count


def given_up(store: Store, since_cycle: int) -> list[Flight]:
    """The allocations given up in cycle `since_cycle` or later on a verdict a later
    snapshot may contradict (`WATCHED_LATE`), and not carried out again since: watched for a
    late landing."""
    errors = " or ".join(["error like ?"] * len(WATCHED_LATE))
    return _flights(store, f"state = ? and cycle >= ? and ({errors})",
                    [FAILED, since_cycle, *WATCHED_LATE])


def _flights(store: Store, where: str, values: list) -> list[Flight]:
    # Rows as tuples, in the order of Flight's fields: at 32,368 flights, 0.10-0.12 s CPU a
    # cycle against 0.13-0.15 s for sqlite-utils' dict a row.
    return list(starmap(Flight, store.db.execute(
        "select key, job, machine, updated_at, coalesce(user, ''), cpus, memory, gpus, "
        f"run_count from actions where kind = ? and {where} order by updated_at, key",
        [ALLOCATE, *values])))


def vacated_for(store: Store, flights: Iterable[Flight]) -> dict[tuple[str, str], float]:
    """(job, slot) -> when it was last vacated, for the confirmed vacates on the flights'
    slots: the jobs a flight may find still leaving its slot."""
    machines = sorted({flight.machine for flight in flights})
    if not machines:
        return {}
    marks = ",".join("?" * len(machines))
    vacated: dict[tuple[str, str], float] = {}
    for row in store.db.query(
            f"select job, machine, updated_at from actions where state = ? and kind = ? "
            f"and machine in ({marks})", [CONFIRMED, VACATE, *machines]):
        pair = (row["job"], row["machine"])
        vacated[pair] = max(vacated.get(pair, row["updated_at"]), row["updated_at"])
    return vacated


def on_slot(running: str | None, chosen: str) -> bool:
    """`running` is the slot `chosen`, or a dynamic slot (slotN_M@host) of it (slotN@host)."""
    return running is not None and (running == chosen or whole_slot(running) == chosen)


def partitionable(machine: Machine | None) -> bool:
    """A partitionable slot: it takes several jobs, each in a dynamic slot of its own."""
    return machine is not None and machine.slot_type == PARTITIONABLE


def settle(snapshot: Snapshot, flights: Iterable[Flight],
           vacated: Mapping[tuple[str, str], float], timeout: float,
           late: Iterable[Flight] = (),
           ended: Mapping[str, tuple[str, float]] | None = None,
           memo: HeldViews | None = None) -> Settlement:
    """Sort the flights into landed, missed and held, and the `late` ones (`given_up`) seen
    on their slots into landed late; build the view with the held slots. `ended`: the
    jobs gone from the queue whose last run started since they were steered, with its slot
    and start (`PoolBackend.ended_runs`). `memo`: the views held in the last cycle
    (`HeldViews`)."""
    ended = ended or {}
    jobs = snapshot.jobs_by_id
    machines = snapshot.machines_by_name
    where = snapshot.job_slots
    settlement = Settlement(snapshot)

    def running_on(job_id: str) -> str | None:
        job = jobs.get(job_id)
        return where.get(job_id) or (
            job.machine if job is not None and job.status is JobStatus.RUNNING else None)

    def ran_on(flight: Flight) -> str | None:
        """The slot the flight's job, gone from the queue, last ran on since it was steered."""
        slot, started = ended.get(flight.job, (None, 0.0))
        # Start dates are whole seconds: a start in the second of the acceptance counts.
        return slot if flight.job not in jobs and started >= int(flight.confirmed) else None

    for flight in late:
        running = running_on(flight.job)
        if on_slot(running, flight.machine):
            settlement.landed_late.append((flight, running))
        elif on_slot(ran_on(flight), flight.machine):
            settlement.ended.append((flight, *ended[flight.job]))
    held_slots: set[str] = set()
    room: _Room | None = None  # built on the first flight to a partitionable slot
    for flight in flights:
        job = jobs.get(flight.job)
        running = running_on(flight.job)
        # Idle again, by the schedd's word, whatever a slot ad that lags still says.
        if (job is not None and job.status is JobStatus.IDLE and flight.run_count is not None
                and job.run_count > flight.run_count):
            settlement.requeued.append((flight, job.run_count))
            continue
        if on_slot(running, flight.machine):
            settlement.landed.append(flight)
            settlement.started.append((running, job.start_time if job is not None else None))
            continue
        gone_from = ran_on(flight)
        if on_slot(gone_from, flight.machine):
            settlement.ended.append((flight, *ended[flight.job]))
            continue
        problem = None if gone_from is None else f"not landed: {flight.job} ran on {gone_from}"
        machine = machines.get(flight.machine)
        # A snapshot taken before the pool accepted the allocation says nothing about it.
        if problem is None and snapshot.time >= flight.confirmed:
            problem = _why_not_held(flight, job, running, machine, jobs, vacated,
                                    snapshot.time - flight.confirmed, timeout)
        if problem is None and (flight.job in settlement.held or flight.machine in held_slots):
            # Two flights for one job or one static slot (journaled before slots were held).
            problem = "not landed: another allocation in flight holds the job or the slot"
        shared = partitionable(machine)
        if problem is None and shared:
            room = room or _Room(snapshot, vacated)
            problem = room.take(flight, job)
        if problem is None:
            settlement.held[flight.job] = flight
            if not shared:
                held_slots.add(flight.machine)
        else:
            settlement.missed.append((flight, problem))
    # A landed job whose slot's ad lags (the collector learns of the claim an update interval
    # after the schedd) keeps its slot in the view too, or the slot would look free.
    lagging = {flight.job: flight for flight in settlement.landed
               if flight.machine in machines and machines[flight.machine].running_job is None}
    settlement.view = hold_slots(snapshot, {**lagging, **settlement.held}, vacated,
                                 room.starting if room is not None else (), memo)
    return settlement


class HeldViews:
    """The views `hold_slots` made in the last cycle, by job id and slot name, carried to the
    next: a held job or slot whose snapshot view is the very one of the last cycle, changed
    in the same way, gets the very view made then. The kept pool tells an unchanged job or
    slot by its view's identity (`gridfair.classads.kept_pool`), so every allocation in
    flight would otherwise be a changed job and slot every cycle, laid out anew."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[Any, tuple, Any]] = {}
        self._now: dict[str, tuple[Any, tuple, Any]] = {}

    def begin(self) -> None:
        """A new snapshot's views: those of the last are kept for it to reuse, no older."""
        self._last, self._now = self._now, {}

    def replace(self, key: str, view: Any, **changes: Any) -> Any:
        """`dataclasses.replace(view, **changes)`, or the one made last cycle for `key`."""
        signature = tuple(changes.items())
        last = self._last.get(key)
        made = last[2] if last is not None and last[0] is view and last[1] == signature \
            else dataclasses.replace(view, **changes)
        self._now[key] = (view, signature, made)
        return made


class _Room:
    """What is left on each partitionable slot for the flights held there, in the order they
    are settled: its CPUs and memory less its dynamic slots' (but those of jobs vacated for
    the flights, on their way out) and the flights already held.

    A dynamic slot claimed with no job named yet may be a job starting: its schedd has
    claimed it and its ad does not say for which job. A flight that finds no room beside it
    takes that slot as its own job's (seen live: the job had left the idle rows, its dynamic
    slot took the machine's last CPU, and the flight was "not landed: no room" while its job
    started there); each such slot is one flight's (`starting`, left out of the view). Only
    a claim that can be the flight's job's, though: its user's (a schedd claims a slot for
    the job's own user), or one whose user is unknown, or a victim's of the flight's own
    handover (`condor_now` coalesces the victims' claims, idle a moment, for it). Another
    user's claim kept idle is that user's, however long (seen live, Showcase 2: G1's claim
    left idle on O2's machine by a handover that never started was taken, cycle after cycle
    for 86 s, as the starting slot of seven flights of three other users, none of which
    could start there)."""

    def __init__(self, snapshot: Snapshot, vacated: Mapping[tuple[str, str], float]) -> None:
        self.left: dict[str, list[float]] = {
            machine.name: [machine.cpus, machine.memory, machine.gpus]
            for machine in snapshot.machines if machine.slot_type == PARTITIONABLE}
        self.unnamed: dict[str, list[Machine]] = {}  # slot -> its claimed, jobless dynamic slots
        self.starting: set[str] = set()  # those taken as a flight's job's
        self.jobs = jobs = snapshot.jobs_by_id
        self.vacated = vacated
        for machine in snapshot.machines:
            left = self.left.get(machine.parent or "")
            if left is None or machine.state != CLAIMED or _leaving_slot(
                    machine, jobs, vacated):
                continue
            left[0] -= machine.cpus
            left[1] -= machine.memory
            left[2] -= machine.gpus
            if machine.running_job is None:
                self.unnamed.setdefault(machine.parent or "", []).append(machine)

    def take(self, flight: Flight, job: Job | None) -> str | None:
        """Hold room for the flight's job; why not, if it does not fit."""
        left = self.left[flight.machine]
        cpus, memory, gpus = flight.holds(job)

        def fits(cpus_left: float, memory_left: float, gpus_left: float) -> bool:
            return cpus <= cpus_left and memory <= memory_left and gpus <= gpus_left

        if not fits(*left):
            unnamed = self.unnamed.get(flight.machine, [])
            users = self._claimants(flight, job)
            own = next((slot for slot in unnamed if fits(slot.cpus, slot.memory, slot.gpus)
                        and (slot.running_user is None or slot.running_user in users)), None)
            if own is not None:  # the flight's job starting there: its room is the flight's
                unnamed.remove(own)
                self.starting.add(own.name)
                left[0] += own.cpus
                left[1] += own.memory
                left[2] += own.gpus
        if not fits(*left):
            asked, free = ((f" and {gpus:g} GPUs", f", {max(left[2], 0):g} GPUs") if gpus
                           else ("", ""))
            return (f"not landed: {flight.machine} has no room for {cpus:g} CPUs and "
                    f"{memory:g} MiB{asked} (left: {max(left[0], 0):g} CPUs, "
                    f"{max(left[1], 0):g} MiB{free})")
        left[0] -= cpus
        left[1] -= memory
        left[2] -= gpus
        return None

    def _claimants(self, flight: Flight, job: Job | None) -> set[str]:
        """The users whose claim may be the flight's job's: its own, and those of the jobs
        vacated for it in its handover (journaled at the time the flight was)."""
        users = {flight.user} if job is None else {flight.user, job.user}
        users.update(self.jobs[victim].user for (victim, slot), when in self.vacated.items()
                     if slot == flight.machine and when == flight.confirmed
                     and victim in self.jobs)
        return users


def _leaving_slot(machine: Machine, jobs: Mapping[str, Job],
                  vacated: Mapping[tuple[str, str], float]) -> bool:
    """A dynamic slot whose job gridfair vacated for a flight on its partitionable slot."""
    return machine.running_job is not None and machine.parent is not None and _leaving(
        machine.running_job, machine.parent, jobs, vacated)


def _why_not_held(flight: Flight, job: Job | None, running: str | None,
                  machine: Machine | None, jobs: Mapping[str, Job],
                  vacated: Mapping[tuple[str, str], float], waited: float,
                  timeout: float) -> str | None:
    """Why a flight that has not landed no longer holds its slot, or None if it does."""
    if machine is None:  # whatever became of its job, even one no ad lists now
        return f"not landed: slot {flight.machine} is gone"
    if job is None:
        # Read from autoclusters, a job that has just started is on no ad until its slot's
        # ad catches up (idle rows list only idle jobs): absence is evidence only with time.
        return _NOT_SEEN.format(job=flight.job, waited=waited) if waited > timeout else None
    if running is not None:
        return f"not landed: {flight.job} started on {running}"
    # Running where no ad says yet (the schedd marks it running before RemoteHost is set):
    # not evidence either way, so it holds until the timeout.
    if job.status not in (JobStatus.IDLE, JobStatus.RUNNING):
        return f"not landed: {flight.job} is {job.status.name.lower()}"
    occupant = machine.running_job
    if occupant is not None and not _leaving(occupant, flight.machine, jobs, vacated):
        who = jobs[occupant].user if occupant in jobs else machine.running_user
        return f"not landed: {flight.machine} runs {occupant} ({who or 'unknown user'})"
    return _NOT_STARTED.format(timeout=timeout, waited=waited) if waited > timeout else None


def _leaving(occupant: str, slot: str, jobs: Mapping[str, Job],
             vacated: Mapping[tuple[str, str], float]) -> bool:
    """The occupant's run on the slot is one gridfair vacated (it started before the vacate:
    a job matched straight back after it is a new run, holding the slot)."""
    when = vacated.get((occupant, slot))
    if when is None:
        return False
    job = jobs.get(occupant)
    started = job.start_time if job is not None else None
    return started is None or started <= when


def hold_slots(snapshot: Snapshot, held: Mapping[str, Flight],
               vacated: Mapping[tuple[str, str], float],
               starting: Collection[str] = (), memo: HeldViews | None = None) -> Snapshot:
    """The snapshot as it will be once the held allocations start: each held job runs on its
    slot since the allocation (or its start, if it runs); a job vacated for it (still on the
    slot, or on a dynamic slot of the partitionable slot it holds) is idle, and that dynamic
    slot gone, as are the `starting` dynamic slots (a held job's own, not named yet). `memo`
    gives back the views made for the last snapshot where they are the same."""
    memo = memo or HeldViews()
    memo.begin()
    machines_by_name = snapshot.machines_by_name
    held = {flight.job: flight for flight in held.values()
            if flight.machine in machines_by_name}
    if not held:
        return snapshot
    by_slot = {flight.machine: flight for flight in held.values()
               if not partitionable(machines_by_name[flight.machine])}
    shared = {flight.machine for flight in held.values()} - by_slot.keys()
    jobs = snapshot.jobs_by_id
    leaving = {machines_by_name[name].running_job for name in by_slot
               if machines_by_name[name].running_job is not None}
    gone = {machine.name for machine in snapshot.machines if machine.parent in shared
            and _leaving_slot(machine, jobs, vacated)}
    leaving.update(machines_by_name[name].running_job for name in gone)
    gone.update(starting)
    machines = []
    for machine in snapshot.machines:
        if machine.name in gone:
            continue
        flight = by_slot.get(machine.name)
        if flight is not None:
            user = jobs[flight.job].user if flight.job in jobs else flight.user
            machine = memo.replace(f"slot {machine.name}", machine, state=CLAIMED,
                                   activity=BUSY, running_job=flight.job, running_user=user)
        machines.append(machine)
    view_jobs = list(snapshot.jobs)
    touched = held.keys() | leaving
    # The few jobs that change are found over all of them at once, in C.
    changed = []
    for position in compress(count(), map(touched.__contains__, map(JOB_ID, snapshot.jobs))):
        job = view_jobs[position]
        changed.append((position, job.id))
        flight = held.get(job.id)
        if flight is not None:
            started = job.start_time if job.status is JobStatus.RUNNING else None
            cpus, memory, gpus = (flight.holds(job) if flight.machine in shared else
                                  (job.request_cpus, job.request_memory, job.request_gpus))
            view_jobs[position] = memo.replace(
                f"job {job.id}", job, status=JobStatus.RUNNING, machine=flight.machine,
                start_time=started or flight.confirmed, request_cpus=cpus,
                request_memory=memory, request_gpus=gpus)
        else:
            view_jobs[position] = memo.replace(f"job {job.id}", job, status=JobStatus.IDLE,
                                               machine=None, start_time=None)
    # A held job no ad lists (started, its slot's ad not caught up): running where it was sent.
    for flight in held.values():
        if flight.job not in jobs:
            cpus, memory, gpus = flight.holds(None)
            view_jobs.append(Job(flight.job, flight.user, JobStatus.RUNNING, flight.confirmed,
                                 start_time=flight.confirmed, machine=flight.machine,
                                 request_cpus=cpus, request_memory=memory, request_gpus=gpus))
    # The view's index: the snapshot's, with the few jobs that differ (a copy, not a pass).
    view_index = jobs.copy()
    view_index.update((job.id, job) for job in view_jobs[len(snapshot.jobs):])
    view_index.update((job_id, view_jobs[position]) for position, job_id in changed)
    return Snapshot.indexed(snapshot.time, tuple(machines), tuple(view_jobs), snapshot.skipped,
                            view_index)


def record(store: Store, settlement: Settlement, cycle: int, now: float,
           withdraw: Callable[[str], None]) -> None:
    """Journal the landed and missed flights; `withdraw(job_id)` (the backend's) lifts the
    steering of each missed one first."""
    withdrawn: dict[str, str] = {}
    for flight, _ in settlement.missed:
        try:
            withdraw(flight.job)
        except Exception as error:  # noqa: BLE001 - noted in the journal; the job stays idle
            withdrawn[flight.key] = f"; steering not withdrawn: {error}"
    with store.transaction(f"record the landings of cycle {cycle}") as db:
        for flight, (where, started) in zip(settlement.landed, settlement.started,
                                            strict=True):
            # Start dates are whole seconds: one in the second of the acceptance reads 0.
            after = "" if started is None else (
                f", started {max(started - flight.confirmed, 0):.0f} s")
            store.set_action_state(flight.key, LANDED, cycle, now,
                                   f"running on {where}{after} after the pool accepted it",
                                   db=db)
        for flight, problem in settlement.missed:
            store.set_action_state(flight.key, FAILED, cycle, now,
                                   problem + withdrawn.get(flight.key, ""), retryable=True,
                                   db=db)
        for flight, where in settlement.landed_late:
            store.set_action_state(flight.key, LANDED, cycle, now,
                                   f"running on {where}: landed late, "
                                   f"{now - flight.confirmed:.0f} s after it was given up", db=db)
        for flight, where, started in settlement.ended:
            waited = max(started - flight.confirmed, 0)
            store.set_action_state(flight.key, LANDED, cycle, now,
                                   f"ran on {where}, started {waited:.0f} s after the pool "
                                   "accepted it, and left the queue", db=db)
        for flight, runs in settlement.requeued:
            store.set_action_state(flight.key, LANDED, cycle, now,
                                   f"started on {flight.machine} (run {runs} of the job, "
                                   f"steered at {flight.run_count}) and is idle again", db=db)
    if (settlement.landed or settlement.missed or settlement.held or settlement.landed_late
            or settlement.ended or settlement.requeued):
        log.debug("cycle %d: allocations %d landed (%d late, %d ended, %d requeued), %d not "
                  "landed, %d in flight", cycle, len(settlement.landed),
                  len(settlement.landed_late), len(settlement.ended), len(settlement.requeued),
                  len(settlement.missed), len(settlement.held))


def pending(store: Store, snapshot: Snapshot, timeout: float, cycle: int,
            ended_runs: Callable[[Collection[str], float], Mapping[str, tuple[str, float]]]
            | None = None, memo: HeldViews | None = None) -> Settlement:
    """The journal's flights settled against `snapshot` in cycle `cycle`, and the flights
    given up for a timeout in the last `LATE_LANDING_CYCLES` cycles watched for a late
    landing; `ended_runs` (the backend's) is asked about the flights' jobs gone from the
    snapshot."""
    flights = in_flight(store)
    late = given_up(store, cycle - LATE_LANDING_CYCLES)
    gone = [flight for flight in (*flights, *late) if flight.job not in snapshot.jobs_by_id]
    ended = ended_runs({flight.job for flight in gone},
                       min(flight.confirmed for flight in gone)) if gone and ended_runs else {}
    return settle(snapshot, flights, vacated_for(store, flights), timeout, late, ended, memo)

