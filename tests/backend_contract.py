"""The pool backend contract: what every backend does, as one suite (APScheduler 4's
`tests/test_datastores.py` runs one over every data store). It is run over the sim, files and
htcondor-on-fakes backends by `tests/test_backends.py`, and over the htcondor backend on a
live personal pool by `tests/live/test_backend_contract_live.py`: each of those files gives
the `backend` fixture (with something running and something idle on a pool with free slots)
and imports the tests below.

Required: reading, vacating, allocating. Optional (`PoolBackend`'s defaults do nothing, or
refuse): a batch of allocations, withdrawing one, the lease, the clock, the advert, handing a
slot over; each either works or says why not, never anything else."""

from __future__ import annotations

import math

import pytest

from gridfair.ad_views import Job, JobStatus, Machine, Snapshot
from gridfair.daemon.backends import ActionFailed


def _running(snapshot: Snapshot) -> list[Job]:
    return [j for j in snapshot.jobs if j.status == JobStatus.RUNNING]


def _idle(snapshot: Snapshot) -> list[Job]:
    return [j for j in snapshot.jobs if j.status == JobStatus.IDLE]


def test_snapshot_is_consistent(backend):
    snapshot = backend.read_snapshot()
    assert snapshot.machines and snapshot.jobs
    names = [m.name for m in snapshot.machines]
    assert len(names) == len(set(names))
    ids = [j.id for j in snapshot.jobs]
    assert len(ids) == len(set(ids))
    on_slot = {m.running_job for m in snapshot.machines if m.running_job}
    assert {j.id for j in _running(snapshot)} <= on_slot | {j.id for j in snapshot.jobs}
    assert all(m.power > 0 for m in snapshot.machines)
    assert all(isinstance(m, Machine) for m in snapshot.machines)
    assert snapshot.time <= backend.now() + 1.0


def test_snapshot_has_owners_and_running_jobs_on_slots(backend):
    snapshot = backend.read_snapshot()
    assert any(m.owner for m in snapshot.machines)
    slots = {m.name for m in snapshot.machines}
    for job in _running(snapshot):
        holder = [m for m in snapshot.machines if m.running_job == job.id]
        assert holder or job.machine in slots


def test_vacate_reports_each_job(backend):
    snapshot = backend.read_snapshot()
    victim = _running(snapshot)[0]
    results = backend.vacate([victim.id, "999.9"])
    assert set(results) == {victim.id, "999.9"}
    assert results[victim.id] is None
    assert isinstance(results["999.9"], str) and results["999.9"]


def test_allocate_idle_job_to_free_slot(backend):
    snapshot = backend.read_snapshot()
    job = _idle(snapshot)[0]
    machine = next(m for m in snapshot.machines if m.is_free)
    backend.allocate(job, machine)


def test_allocate_unknown_job_fails(backend):
    snapshot = backend.read_snapshot()
    machine = snapshot.machines[0]
    ghost = Job(id="999.9", user="nobody", status=JobStatus.IDLE, qdate=0.0)
    with pytest.raises(ActionFailed):
        backend.allocate(ghost, machine)


def test_reading_twice_gives_the_same_pool_shape(backend):
    first = backend.read_snapshot()
    second = backend.read_snapshot()
    assert {m.name for m in first.machines} == {m.name for m in second.machines}
    assert second.time >= first.time


def test_allocate_all_reports_each_allocation(backend):
    """A batch: None for each allocation carried out, the reason for each other, in order."""
    snapshot = backend.read_snapshot()
    job = _idle(snapshot)[0]
    free = [m for m in snapshot.machines if m.is_free]
    ghost = Job(id="999.9", user="nobody", status=JobStatus.IDLE, qdate=0.0)
    problems = backend.allocate_all([(job, free[0]), (ghost, free[-1])])
    assert problems[0] is None
    assert isinstance(problems[1], str) and problems[1]
    backend.actions_done()


def test_an_allocation_can_be_withdrawn(backend):
    snapshot = backend.read_snapshot()
    job = _idle(snapshot)[0]
    backend.allocate(job, next(m for m in snapshot.machines if m.is_free))
    backend.withdraw(job.id)


def test_the_lease_is_renewed_and_released_or_there_is_none(backend):
    backend.hold_starts(backend.now() + 60)
    backend.release_starts()


def test_the_clock_skew_is_a_figure_or_says_why_not(backend):
    try:
        skew = backend.clock_skew(5.0)
    except ActionFailed as failure:  # a pool that cannot tell (no negotiator listed) says so
        assert str(failure)
        return
    assert isinstance(skew, float) and math.isfinite(skew) and abs(skew) < 3600


def test_the_advert_is_shown_and_withdrawn_or_there_is_nowhere_to_show_it(backend):
    ad = {"MyType": "GridfairNegotiator", "Name": "gridfair@contract", "LastCycle": 1}
    backend.advertise(ad)
    backend.withdraw_ad(ad)


def test_a_handover_is_done_where_offered_else_refused(backend):
    snapshot = backend.read_snapshot()
    victim = _running(snapshot)[0]
    machine = next(m for m in snapshot.machines if m.name == victim.machine
                   or m.running_job == victim.id)
    if not backend.can_hand_over(machine):
        with pytest.raises(ActionFailed):
            backend.handover([victim], _idle(snapshot)[0], machine)


def test_the_clock_moves_forward(backend):
    first = backend.now()
    assert backend.now() >= first
