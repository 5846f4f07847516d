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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from gridfair.ad_views import Job, JobStatus, SkippedAd, Snapshot
from gridfair.core.stages import ALLOCATE
from gridfair.daemon.inflight import TIMED_OUT
from gridfair.daemon.store import FAILED, LANDED, Store

#: Seconds of failures looked back on.
WINDOW = 86_400.0
#: The longest backoff, seconds.
CAP = 3_600.0
#: Failures since a user's last landed allocation from which the user is backed off.
USER_STREAK = 2


@dataclass(frozen=True, slots=True)
class Backed:
    """One job's or user's backoff."""

    failures: int
    last: float  # when the last failure was journaled
    until: float

    def why(self, name: str) -> str:
        return (f"not steered until {self.until:.0f}: {self.failures} allocation(s) of {name} "
                f"did not land (the last at {self.last:.0f}); landing backoff")


@dataclass
class Backoff:
    """The jobs and users backed off now, and those on a failure streak (`probing`)."""

    jobs: dict[str, Backed] = field(default_factory=dict)
    users: dict[str, Backed] = field(default_factory=dict)
    probing: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.jobs or self.users or self.probing)


def _backed(failures: int, last: float, base: float, exponent: int) -> Backed:
    # Doublings past 2**1000 put any base over the cap (2.0 ** 1024 overflows: a pool whose
    # 30,000 allocations of a cycle all failed to land raised it).
    return Backed(failures, last, last + min(CAP, base * 2.0 ** min(exponent, 1000)))


def landing_backoff(store: Store, now: float, base: float) -> Backoff:
    """What the journal says is backed off at `now`, `base` being `landing_timeout`."""
    backoff = Backoff()
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


def without_backed_off(snapshot: Snapshot, backoff: Backoff) -> Snapshot:
    """The snapshot less the idle jobs backed off (each skipped with why): a user on a
    streak and out of its backoff keeps one idle job, its first by queue date then id."""
    if not backoff:
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
    current = {f"job {name}": backed for name, backed in backoff.jobs.items()}
    current.update({f"user {name}": backed for name, backed in backoff.users.items()})
    for name in sorted(current.keys() - known):
        yield current[name].why(name)
    known.clear()
    known.update(current)
