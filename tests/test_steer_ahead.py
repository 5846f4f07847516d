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
    # The policy now wants 1.2 there: 1.1 is withdrawn; a started job is forgotten.
    steerings.written["1.0"] = ("slot1@h", T0 + 120)
    assert steerings.stale([NextJob(other, busy, current)], set(), snapshot) == ["1.1"]
    assert "1.0" not in steerings.written
    # One allocated this cycle is steered by its allocation, not withdrawn.
    assert steerings.stale([], {"1.1"}, snapshot) == []
    # One held since is withdrawn: released, it would take the slot as its claim ends.
    steerings.written["1.2"] = ("slot1@h", T0 + 120)
    held = Snapshot(T0, (busy,), (current, dataclasses.replace(other, status=JobStatus.HELD)))
    assert steerings.stale([], set(), held) == ["1.2"]
    # So is one the snapshot no longer shows: the htcondor backend reads no held job (a job
    # gone has nothing to withdraw, and its withdrawal is quiet).
    assert steerings.stale([], set(), Snapshot(T0, (busy,), (current,))) == ["1.2"]


def test_a_look_at_the_pool_sees_a_start_on_a_kept_claim():
    before = PoolLook({}, {"u2": 3}, {"slot1@h": "1.0"})
    assert not PoolLook({}, {"u2": 3}, {"slot1@h": "1.0"}).changed_since(before)
    # The claim started 1.1 where 1.0 ran: no slot was free, nothing was submitted.
    assert PoolLook({}, {"u2": 2}, {"slot1@h": "1.1"}).changed_since(before)


class FoundSteerings:
    """A backend that finds steerings in the pool and records what it withdraws."""

    steers_ahead = True

    def __init__(self, found: dict[str, str] | None) -> None:
        self.found, self.withdrawn = found, []

    def steered_jobs(self) -> dict[str, str] | None:
        return self.found

    def withdraw(self, job_id: str) -> None:
        self.withdrawn.append(job_id)


def test_a_restarted_daemon_withdraws_the_steerings_it_finds_and_no_longer_wants():
    """The steerings a daemon before this one wrote (found on the jobs) are taken on at the
    first cycle that acts: the ones not wanted ahead again, nor in flight, nor allocated
    this cycle, are withdrawn; a wanted one is written again; asked once."""
    busy = slot("slot1@h", "1.0", "u2")
    current = job("1.0", "u2", on="slot1@h", start=T0 - 10)
    wanted_job, unwanted, flying, allocated = (job(f"1.{n}", "u2") for n in range(1, 5))
    snapshot = Snapshot(T0, (busy,), (current, wanted_job, unwanted, flying, allocated))
    backend = FoundSteerings({"1.1": "slot1@h", "1.2": "slot1@h", "1.3": "slot2@h",
                              "1.4": "slot2@h", "9.0": "slot1@h"})  # 9.0: held
    steerings = AheadSteerings(life=120.0)
    steerings.adopt(backend, {"1.3"})
    wanted = [NextJob(wanted_job, busy, current)]
    steerings.withdraw(backend, steerings.stale(wanted, {"1.4"}, snapshot))
    assert backend.withdrawn == ["1.2", "9.0"]
    assert steerings.to_write(wanted, T0) == wanted
    backend.found = {"1.2": "slot1@h"}
    steerings.adopt(backend, set())
    assert "1.2" not in steerings.written  # taken on once, at the start


def test_steerings_found_are_taken_on_once_the_pool_answers():
    steerings = AheadSteerings(life=120.0)
    backend = FoundSteerings(None)
    steerings.adopt(backend, set())
    backend.found = {"1.1": "slot1@h"}
    steerings.adopt(backend, set())
    assert steerings.written == {"1.1": ("slot1@h", 0.0)}
