"""Landing backoff: a job whose allocations do not land stops being a reason to act.

gridfair decides on a job as its ad reads now, and the negotiator starts it later, as it reads
then. A job that matched when decided and does not start once steered (its Requirements read
the clock, its owner holds it, it matches nothing as steered) costs the pool each time it is
allocated: a free slot held for `safety.landing_timeout`, or another user's job vacated for it
(issue 43: 4 vacates in 300 s, and 42 % of the pool's slot time idle, for a job that never ran).
So allocations given up because the job did not start (`inflight.TIMED_OUT`: not started in
time, or on no ad) count against it:
- a job with n such failures in the last `WINDOW` is not steered until `landing_timeout` x
  2^(n-1) after its last one (at most `CAP`);
- a user with k >= `USER_STREAK` such failures since its last allocation that landed is not
  steered until `landing_timeout` x 2^(k - USER_STREAK) after the last one (at most `CAP`),
  and then only one job at a time (its first idle job, by queue date then id: a probe) until
  one lands. Many jobs that each fail once add up to the user's backoff.
A backed-off job is left out of the cycle's view of the pool, so it neither holds a slot nor
receives one by preemption; the cycle notes each job and user when its backoff starts, and
`gridfair explain` shows it.

A machine where steered starts keep failing is set aside the same way (seen live, Showcase 2:
seven allocations in a row over 86 s to one partitionable slot, of three users, each timed
out, and the next cycle chose the slot again). Allocations to it given up on a verdict a later
snapshot may contradict (`inflight.WATCHED_LATE`: a timeout, or no room) count against it:
with k >= `MACHINE_STREAK` such failures since the last allocation that landed there, of at
least `MACHINE_USERS` users, it takes no new job until `landing_timeout` x
2^(k - MACHINE_STREAK) after the last one (at most `CAP`); a landing there ends the streak.
In the cycle's view it is closed (`SET_ASIDE`): what runs there stays, as on a drained
machine, and neither a free allocation nor a preemption puts a job there. A static slot
already claimed is left open (its claim's job is read off its state); its next start is a
preemption, and the job and user backoffs answer for that. Users, not failures, guard it
against an ordinary user: a job whose Requirements refuse a machine (reading the time, or
`TARGET`) times out there like a start the machine failed, so one user's jobs alone, however
many, never set a machine aside against its owner; it takes another user's start failing
there too, with no landing between.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gridfair.ad_views import PARTITIONABLE, Job, JobStatus, Machine, SkippedAd, Snapshot
from gridfair.core.stages import ALLOCATE
from gridfair.daemon.inflight import TIMED_OUT, WATCHED_LATE
from gridfair.daemon.store import FAILED, LANDED, Store

#: Seconds of failures looked back on.
WINDOW = 86_400.0
#: The longest backoff, seconds.
CAP = 3_600.0
#: Failures since a user's last landed allocation from which the user is backed off.
USER_STREAK = 2
#: Failures on one machine since the last allocation that landed there, and the users they
#: must come from, from which the machine is set aside.
MACHINE_STREAK = 3
MACHINE_USERS = 2
#: The state a set-aside machine has in the cycle's view: not Unclaimed, so it takes no job.
SET_ASIDE = "SetAside"


@dataclass(frozen=True, slots=True)
class Backed:
    """One job's or user's backoff."""

    failures: int
    last: float  # when the last failure was journaled
    until: float

    def why(self, name: str) -> str:
        return (f"not steered until {self.until:.0f}: {self.failures} allocation(s) of {name} "
                f"did not land (the last at {self.last:.0f}); landing backoff")


@dataclass(frozen=True, slots=True)
class SetAside:
    """One machine set aside: its streak of failed starts, of how many users."""

    failures: int
    users: int
    last: float
    until: float

    def why(self, name: str) -> str:
        return (f"no job steered there until {self.until:.0f}: {self.failures} allocation(s) "
                f"in a row to {name}, of {self.users} users, did not start (the last at "
                f"{self.last:.0f}); landing backoff")


@dataclass
class Backoff:
    """The jobs and users backed off now, those on a failure streak (`probing`), and the
    machines set aside."""

    jobs: dict[str, Backed] = field(default_factory=dict)
    users: dict[str, Backed] = field(default_factory=dict)
    probing: set[str] = field(default_factory=set)
    machines: dict[str, SetAside] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.jobs or self.users or self.probing or self.machines)


def _backed(failures: int, last: float, base: float, exponent: int) -> Backed:
    # Doublings past 2**1000 put any base over the cap (2.0 ** 1024 overflows: a pool whose
    # 30,000 allocations of a cycle all failed to land raised it).
    return Backed(failures, last, last + min(CAP, base * 2.0 ** min(exponent, 1000)))


def landing_backoff(store: Store, now: float, base: float) -> Backoff:
    """What the journal says is backed off at `now`, `base` being `landing_timeout`."""
    backoff = Backoff(machines=machines_set_aside(store, now, base))
    failed = " or ".join(["error like ?"] * len(TIMED_OUT))
    per_job = store.db.query(
        "select job, user, count(*) as failures, max(updated_at) as last from actions "
        f"where kind = ? and state = ? and updated_at >= ? and ({failed}) group by job",
        [ALLOCATE, FAILED, now - WINDOW, *TIMED_OUT])
    streaks: dict[str, tuple[int, float]] = {}
    for row in per_job:
        backed = _backed(row["failures"], row["last"], base, row["failures"] - 1)
        if backed.until > now:
            backoff.jobs[row["job"]] = backed
        count, last = streaks.get(row["user"] or "", (0, 0.0))
        streaks[row["user"] or ""] = (count + row["failures"], max(last, row["last"]))
    if not streaks:
        return backoff
    landed = dict(store.db.execute(
        "select user, max(updated_at) from actions where kind = ? and state = ? and "
        "updated_at >= ? group by user", [ALLOCATE, LANDED, now - WINDOW]).fetchall())
    for user, (count, last) in streaks.items():
        if landed.get(user, 0.0) >= last:
            continue  # one landed since: the streak is over
        if landed.get(user) is not None:  # only the failures since it count
            [(count,)] = store.db.execute(
                f"select count(*) from actions where kind = ? and state = ? and user = ? and "
                f"updated_at > ? and ({failed})",
                [ALLOCATE, FAILED, user, landed[user], *TIMED_OUT]).fetchall()
        if count < USER_STREAK:
            continue
        backoff.probing.add(user)
        backed = _backed(count, last, base, count - USER_STREAK)
        if backed.until > now:
            backoff.users[user] = backed
    return backoff


def machines_set_aside(store: Store, now: float, base: float) -> dict[str, SetAside]:
    """The machines whose streak of failed starts sets them aside at `now` (one pass over
    the failures of `WINDOW`, each machine's last landing joined in)."""
    watched = " or ".join(["a.error like ?"] * len(WATCHED_LATE))
    rows = store.db.query(
        "with landed as (select machine, max(updated_at) as at from actions "
        "where kind = ? and state = ? and updated_at >= ? group by machine) "
        "select a.machine, count(*) as failures, count(distinct a.user) as users, "
        "max(a.updated_at) as last from actions a left join landed l on l.machine = a.machine "
        f"where a.kind = ? and a.state = ? and a.updated_at >= ? and ({watched}) "
        "and a.updated_at > coalesce(l.at, 0) group by a.machine",
        [ALLOCATE, LANDED, now - WINDOW, ALLOCATE, FAILED, now - WINDOW, *WATCHED_LATE])
    aside = {}
    for row in rows:
        if row["failures"] < MACHINE_STREAK or row["users"] < MACHINE_USERS:
            continue
        backed = _backed(row["failures"], row["last"], base, row["failures"] - MACHINE_STREAK)
        if backed.until > now:
            aside[row["machine"]] = SetAside(row["failures"], row["users"], row["last"],
                                             backed.until)
    return aside


def without_backed_off(snapshot: Snapshot, backoff: Backoff) -> Snapshot:
    """The snapshot less the idle jobs backed off (each skipped with why): a user on a
    streak and out of its backoff keeps one idle job, its first by queue date then id; the
    machines set aside closed (`SET_ASIDE`)."""
    if not backoff:
        return snapshot
    snapshot = _with_machines_set_aside(snapshot, backoff.machines)
    if not (backoff.jobs or backoff.users or backoff.probing):
        return snapshot
    probes: dict[str, Job] = {}
    for job in snapshot.jobs:
        if (job.status is JobStatus.IDLE and job.user in backoff.probing
                and job.user not in backoff.users and job.id not in backoff.jobs):
            first = probes.get(job.user)
            if first is None or (job.qdate, job.id) < (first.qdate, first.id):
                probes[job.user] = job
    kept: list[Job] = []
    skipped: list[SkippedAd] = []
    for job in snapshot.jobs:
        why = _why_left_out(job, backoff, probes)
        if why is None:
            kept.append(job)
        else:
            skipped.append(SkippedAd("landing backoff", 0, job.id, why))
    return dataclasses.replace(snapshot, jobs=tuple(kept),
                               skipped=(*snapshot.skipped, *skipped))


def _with_machines_set_aside(snapshot: Snapshot, aside: Mapping[str, SetAside]) -> Snapshot:
    """The snapshot with each machine set aside closed: a partitionable slot (its dynamic
    slots, and what runs in them, stay) or a free static slot."""
    if not aside:
        return snapshot
    return dataclasses.replace(snapshot, machines=tuple(
        dataclasses.replace(machine, state=SET_ASIDE) if _closable(machine, aside) else machine
        for machine in snapshot.machines))


def _closable(machine: Machine, aside: Mapping[str, SetAside]) -> bool:
    return machine.name in aside and (machine.slot_type == PARTITIONABLE or machine.is_free)


def _why_left_out(job: Job, backoff: Backoff, probes: dict[str, Job]) -> str | None:
    if job.status is not JobStatus.IDLE:
        return None
    if job.id in backoff.jobs:
        return backoff.jobs[job.id].why(f"job {job.id}")
    if job.user in backoff.users:
        return backoff.users[job.user].why(f"user {job.user}")
    if job.user in backoff.probing and probes.get(job.user) is not job:
        return (f"not steered while user {job.user} is on probation: its allocations did not "
                "land, and one job at a time is tried until one does; landing backoff")
    return None


def newly_backed(backoff: Backoff, known: set[str]) -> Iterable[str]:
    """Notes for the jobs and users whose backoff started since `known` (updated)."""
    current: dict[str, Backed | SetAside] = {
        f"job {name}": backed for name, backed in backoff.jobs.items()}
    current.update({f"user {name}": backed for name, backed in backoff.users.items()})
    current.update({f"machine {name}": aside for name, aside in backoff.machines.items()})
    for name in sorted(current.keys() - known):
        yield current[name].why(name)
    known.clear()
    known.update(current)
