"""The charges the htcondor backend carries between reads (`kept_charges`): each read's
charged jobs and slots are what `charge_snapshot` makes of it, and a job or slot whose view is
the last read's keeps its charged object while the slots name the same owners."""

from __future__ import annotations

from gridfair.ad_views import Job, JobStatus, Machine, Snapshot
from gridfair.classads.submitters import SubmitterMap, charge_snapshot
from gridfair.daemon.backends.htcondor.kept_charges import KeptCharges

SUBMITTERS = SubmitterMap("pool.test")


def _charged_alike(kept: Snapshot, fresh: Snapshot) -> None:
    assert [(job, job.identity) for job in kept.jobs] == [
        (job, job.identity) for job in fresh.jobs]
    assert kept.machines == fresh.machines
    assert kept.charges == fresh.charges


def test_kept_charges_follow_the_owners_the_slots_name_and_keep_the_rest():
    jobs = tuple(Job(f"1.{n}", user, JobStatus.IDLE, 100.0 + n, group=group)
                 for n, (user, group) in enumerate([("alice@pool.test", None),
                                                    ("bob@pool.test", None),
                                                    ("bob@pool.test", "physics")]))
    alice = Machine("slot1@a", "alice", 1000.0)
    busy = Machine("slot1@b", "alice", 1000.0, state="Claimed", activity="Busy",
                   running_job="9.0", running_user="bob@pool.test")
    kept = KeptCharges(SUBMITTERS)
    reads = [Snapshot(1.0, (alice, busy), jobs),
             # bob's slot comes: bob's jobs are charged to bob from now on, not as
             # themselves, though their views are the last read's
             Snapshot(2.0, (alice, busy, Machine("slot1@c", "bob", 1000.0)), jobs),
             Snapshot(3.0, (alice, busy, Machine("slot1@c", "bob", 1000.0)), (
                 *jobs[:2], Job("1.3", "carol@pool.test", JobStatus.IDLE, 104.0)))]
    before = None
    for read in reads:
        charged = kept.charged(read, keep=True)
        _charged_alike(charged, charge_snapshot(read, SUBMITTERS))
        if before is not None:
            # The same view charged alike: the very object, for the kept pool to pass over.
            same = [job.id for job in charged.jobs if job.id in before and job.user ==
                    before[job.id].user and read.jobs_by_id[job.id] in jobs]
            assert same and all(charged.jobs_by_id[job_id] is before[job_id]
                                for job_id in same)
        before = charged.jobs_by_id
    assert charged.jobs_by_id["1.1"].user == "bob"
    assert charged.machines[1].running_user == "bob"


def test_a_read_not_kept_leaves_the_last_reads_charges():
    job = Job("1.0", "alice@pool.test", JobStatus.IDLE, 1.0)
    read = Snapshot(1.0, (Machine("slot1@a", "alice", 1.0),), (job,))
    kept = KeptCharges(SUBMITTERS)
    first = kept.charged(read, keep=True)
    kept.charged(Snapshot(2.0, (Machine("slot1@a", "bob", 1.0),), (job,)), keep=False)
    assert kept.charged(read, keep=True).jobs[0] is first.jobs[0]
