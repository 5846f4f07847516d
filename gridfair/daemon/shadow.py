"""What a shadow daemon (`gridfair daemon --shadow`) records each cycle beside a dry run's
decisions: the pool as it ran and as gridfair's decisions would have left it, and what the
pool did instead of gridfair.

- `shadow_cycles`: per cycle, the pool's cpus and power;
- `shadow_usage`: per cycle, side (`pool`: the snapshot as read, before any decision;
  `gridfair`: the same pool with the cycle's decisions applied) and user: provided and
  allocated MFlops, running jobs and the cpus of the jobs waiting. The share error of
  either side is computed from these (`gridfair.daemon.shadow_report`).
- `shadow_starts`: every start the pool made, as reconciliation sees it (a job newly running,
  running on another slot, or running when first seen): the job, its slot and its own start
  time (JobCurrentStartDate, or the slot's JobStart), to be set against gridfair's
  allocations.
Nothing here acts on the pool: a shadow daemon is a dry run that records these too.
"""

from __future__ import annotations

from typing import Any

from gridfair.ad_views import Snapshot
from gridfair.core.pool import CPUS, POWER, QUEUED, Pool
from gridfair.daemon.reconcile import Reconciliation

POOL, GRIDFAIR = "pool", "gridfair"
#: The reconciliation events that are starts the pool made.
START_EVENTS = ("started", "moved", "seen-running")


def capacity_row(pool: Pool, cycle: int) -> dict[str, Any]:
    """The `shadow_cycles` row: the pool's cpus and MFlops."""
    return {"cycle": cycle, "cpus": pool.capacity[CPUS], "power": pool.capacity[POWER]}


def side_rows(pool: Pool, cycle: int, side: str) -> list[dict[str, Any]]:
    """One `shadow_usage` row per user of `pool` as it is now."""
    waiting: dict[str, float] = {}
    for task in pool.tasks.values():
        if task.state == QUEUED:
            waiting[task.user] = waiting.get(task.user, 0.0) + task.cpus
    return [{"cycle": cycle, "side": side, "user": user.name,
             "provided_mflops": user.provided_power, "allocated_mflops": user.allocated_power,
             "running": user.running, "waiting_cpus": waiting.get(user.name, 0.0)}
            for user in pool.users.values()]


def start_rows(recon: Reconciliation, snapshot: Snapshot, cycle: int,
               now: float) -> list[dict[str, Any]]:
    """One `shadow_starts` row per start the pool made since the last cycle."""
    jobs = snapshot.jobs_by_id
    rows = []
    for event in recon.events:
        if event.event not in START_EVENTS:
            continue
        job = jobs.get(event.job)
        started = job.start_time if job is not None and job.start_time else now
        rows.append({"cycle": cycle, "job": event.job, "user": event.user,
                     "machine": event.machine, "started": started})
    return rows
