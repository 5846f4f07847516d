"""Steering ahead (gridfair.daemon.steer_ahead): which job each busy slot runs next."""

from __future__ import annotations

import dataclasses

import pytest

from gridfair.ad_views import Job, JobStatus, Machine, Snapshot
from gridfair.classads.kept_pool import KeptPool
from gridfair.classads.to_pool import pool_from_snapshot
from gridfair.daemon.backends.pool_watch import PoolLook
from gridfair.daemon.steer_ahead import AheadSteerings, NextJob, next_jobs
from gridfair.policies.registry import build_stages

T0 = 1_000_000.0


def slot(name: str, job: str | None = None, user: str | None = None) -> Machine:
    return Machine(name, "Absent", 1000.0, state="Claimed" if job else "Unclaimed",
                   activity="Busy" if job else "Idle", running_job=job, running_user=user)


def job(job_id: str, user: str, *, on: str | None = None, start: float | None = None) -> Job:
    return Job(job_id, user, JobStatus.RUNNING if on else JobStatus.IDLE, T0 - 100,
               start_time=start, machine=on)


@pytest.fixture(params=["rebuilt", "kept"])
def decide(request):
    """The next jobs of a snapshot's busy slots, on the pool rebuilt or kept (the daemon's)."""
    def decide(machines: list[Machine], jobs: list[Job], policy: str = "reclaim"):
        snapshot = Snapshot(T0, tuple(machines), tuple(jobs))
        stages = build_stages(policy)
        loaded = (pool_from_snapshot(snapshot, stages) if request.param == "rebuilt"
                  else KeptPool().update(snapshot, stages))
        loaded.negotiator.cycle(T0)
        return {(n.job.id, n.slot.name)
                for n in next_jobs(loaded.pool, stages.order, snapshot, set(), T0)}
    return decide


def test_a_busy_slot_whose_user_goes_next_gets_that_user_s_next_job(decide):
    machines = [slot("slot1@h", "1.1", "u2"), slot("slot2@h", "1.0", "u2")]
    jobs = [job("1.0", "u2", on="slot2@h", start=T0 - 10),
            job("1.1", "u2", on="slot1@h", start=T0 - 10),
            job("1.2", "u2"), job("1.3", "u2")]
    assert decide(machines, jobs) == {("1.2", "slot1@h"), ("1.3", "slot2@h")}


def test_a_slot_the_policy_gives_another_user_has_no_job_steered_ahead(decide):
    machines = [slot("slot1@h", "1.1", "u2"), slot("slot2@h", "1.0", "u2")]
    jobs = [job("1.0", "u2", on="slot2@h", start=T0 - 10),
            job("1.1", "u2", on="slot1@h", start=T0 - 10),
            job("1.2", "u2"), job("1.3", "u2"), job("2.0", "u3")]
    # slot1's job started with slot2's and sorts first: it goes to u3, slot2 to u2's next.
    assert decide(machines, jobs) == {("1.2", "slot2@h")}


def test_a_steering_ahead_is_written_once_renewed_at_half_life_and_withdrawn_when_unwanted():
    busy = slot("slot1@h", "1.0", "u2")
    current = job("1.0", "u2", on="slot1@h", start=T0 - 10)
    nxt, other = job("1.1", "u2"), job("1.2", "u2")
    snapshot = Snapshot(T0, (busy,), (current, nxt, other))
    steerings = AheadSteerings(life=120.0)
    wanted = [NextJob(nxt, busy, current)]
    assert steerings.to_write(wanted, T0) == wanted
    steerings.written["1.1"] = ("slot1@h", T0 + 120)
    assert steerings.to_write(wanted, T0 + 59) == []
    assert steerings.to_write(wanted, T0 + 61) == wanted  # less than half its life left
    # The policy now wants 1.2 there: 1.1 is withdrawn; a started or gone job is forgotten.
    steerings.written["1.3"] = ("slot1@h", T0 + 120)
    assert steerings.stale([NextJob(other, busy, current)], set(), snapshot) == ["1.1"]
    assert "1.3" not in steerings.written
    # One allocated this cycle is steered by its allocation, not withdrawn.
    assert steerings.stale([], {"1.1"}, snapshot) == []
    # One held since is withdrawn: released, it would take the slot as its claim ends.
    steerings.written["1.2"] = ("slot1@h", T0 + 120)
    held = Snapshot(T0, (busy,), (current, dataclasses.replace(other, status=JobStatus.HELD)))
    assert steerings.stale([], set(), held) == ["1.2"]


def test_a_look_at_the_pool_sees_a_start_on_a_kept_claim():
    before = PoolLook({}, {"u2": 3}, {"slot1@h": "1.0"})
    assert not PoolLook({}, {"u2": 3}, {"slot1@h": "1.0"}).changed_since(before)
    # The claim started 1.1 where 1.0 ran: no slot was free, nothing was submitted.
    assert PoolLook({}, {"u2": 2}, {"slot1@h": "1.1"}).changed_since(before)
