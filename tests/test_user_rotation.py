"""Ties between users of equal share rotate in the daemon's pool (`to_pool.enrol_in_rotation`):
the user served least so far wins, where first mention (queue date) gave every tie to the
user who submitted first."""

from __future__ import annotations

import pytest

from gridfair.ad_views import Job, JobStatus, Machine, Snapshot
from gridfair.classads.kept_pool import KeptPool
from gridfair.classads.to_pool import pool_from_snapshot
from gridfair.policies.registry import build_stages

T0 = 1_000_000.0


def slot(name: str, job: str | None = None, user: str | None = None) -> Machine:
    return Machine(name, "Absent", 1000.0, state="Claimed" if job else "Unclaimed",
                   activity="Busy" if job else "Idle", running_job=job, running_user=user)


def job(job_id: str, user: str, qdate: float, *, on: str | None = None,
        start: float | None = None) -> Job:
    return Job(job_id, user, JobStatus.RUNNING if on else JobStatus.IDLE, qdate,
               start_time=start, machine=on)


#: u1 submitted first; both run one job (the same second); one slot is free.
SNAPSHOT = Snapshot(T0, (slot("slot1@h"), slot("slot2@h", "1.0", "u1"),
                         slot("slot3@h", "2.0", "u2")),
                    (job("1.0", "u1", T0 - 100, on="slot2@h", start=T0 - 5),
                     job("1.1", "u1", T0 - 100),
                     job("2.0", "u2", T0 - 90, on="slot3@h", start=T0 - 5),
                     job("2.1", "u2", T0 - 90)))


@pytest.mark.parametrize("policy", ["reclaim", "drf"])
@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("served, winner", [
    ({"u1": 2e6, "u2": 1e6}, "u2"), ({"u1": 1e6, "u2": 2e6}, "u1"), ({}, "u1"), (None, "u1")])
def test_a_tie_goes_to_the_user_served_least(policy, kept, served, winner):
    stages = build_stages(policy)
    loaded = (KeptPool(served=served).update(SNAPSHOT, stages) if kept
              else pool_from_snapshot(SNAPSHOT, stages, served=served))
    [decision] = loaded.negotiator.cycle(T0)
    assert (decision.task.user, decision.node.name) == (winner, "slot1@h")
