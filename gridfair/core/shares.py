"""Per-user shares of a pool: who provides what and who uses what.

A `SharesReport` is what `gridfair shares` shows. It is built from a pool loaded from ads
(`gridfair.cli.shares`) or from the daemon's store (`gridfair.daemon.reports`), so the figures
are the same wherever they come from; the CLI renders either.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gridfair.core.pool import CPUS, GPUS, MEMORY, POWER, Pool, UserState, power_diff

#: The resources a dominant share is taken over unless the order names its own.
ALL_RESOURCES = (CPUS, MEMORY, POWER, GPUS)

#: The columns summed into the report's totals: MFlops (floats, summed exactly rounded, so the
#: totals do not depend on the Python version), then counts.
SUMMED_MFLOPS = ("provided_mflops", "allocated_mflops", "in_flight_mflops")
SUMMED = (*SUMMED_MFLOPS, "nodes_provided", "nodes_used", "running", "idle", "in_flight")


def dominant_share(usage: Sequence[float], capacity: Sequence[float],
                   resources: Sequence[int] = ALL_RESOURCES) -> float:
    """DRF's dominant share: the largest fraction of the pool's total of any of `resources`
    the user holds (`usage`, indexed as `UserState.usage`); a resource the pool has none of
    counts for nothing."""
    return max((usage[i] / capacity[i] for i in resources if capacity[i] > 0), default=0.0)


@dataclass(frozen=True, slots=True)
class SharesReport:
    """What `shares` shows: per-user rows, their totals, decisions, skipped ads and
    warnings about ads used."""

    time: float
    policy: str
    users: Sequence[Mapping[str, Any]]
    totals: Mapping[str, Any]
    decisions: Sequence[Mapping[str, Any]] = ()
    skipped: Sequence[Mapping[str, Any]] = ()
    #: Ads used that are suspect (an attribute set twice), as `skipped` lists them.
    warnings: Sequence[Mapping[str, Any]] = ()
    #: Who each identity's jobs are charged to and why (identity, owner, rule, mapped), when
    #: the source charged them (a live pool, the daemon's store).
    charges: Sequence[Mapping[str, Any]] = ()
    #: Slot ads used (static, partitionable and dynamic), when the source read ads.
    slots: int | None = None
    #: How the decisions are introduced: from ads, what one cycle would do now; from the
    #: daemon's store, what its latest cycle did (each decision then has its action's state).
    decisions_heading: str = "Decisions now"
    decisions_note: str = "none carried out"
    #: Where a simulated clock started, `time` being simulated seconds after it (None: `time`
    #: is wall time).
    sim_start: float | None = None
    #: A line on the state of the source, shown under the heading (from the daemon's store:
    #: the latest cycle failed, and the table is of an earlier one).
    status: str | None = None


def share_rows(pool: Pool, in_flight: Collection[str] = (),
               flights: Mapping[str, tuple[int, list[float]]] | None = None,
               ) -> list[dict[str, Any]]:
    """One row per user, in the order HOSEP serves them: users who provide power by PowerDiff
    (most below their share first), then users who provide nothing by allocated MFlops; ties
    by name. The tasks `in_flight` (ids: allocations the daemon's view runs and the pool has
    not started yet) are counted as HTCondor counts them, idle, and apart (`in_flight`,
    `in_flight_mflops`): the running columns are what the slots show. `flights` is
    `flight_usage(pool, in_flight)` when the caller has it already."""
    if flights is None:
        flights = flight_usage(pool, in_flight)
    none = (0, [0.0] * len(pool.capacity))

    def allocated(user: UserState) -> float:
        return user.allocated_power - flights.get(user.name, none)[1][POWER]

    def order(user: UserState) -> tuple[Any, ...]:
        if user.provided_power > 0:
            return (0, power_diff(allocated(user), user.provided_power), user.name)
        return (1, allocated(user), user.name)

    nodes_used: dict[str, set[str]] = {}
    for task in pool.tasks.values():
        if task.node is not None and task.id not in in_flight:
            nodes_used.setdefault(task.user, set()).add(task.node.name)
    rows = []
    for user in sorted(pool.users.values(), key=order):
        flying, flown = flights.get(user.name, none)
        rows.append({
            "user": user.name,
            "provided_mflops": user.provided_power,
            "allocated_mflops": allocated(user),
            "power_diff": power_diff(allocated(user), user.provided_power),
            "nodes_provided": user.provided_nodes,
            "nodes_used": len(nodes_used.get(user.name, ())),
            "running": user.running - flying,
            "idle": user.idle_count + flying,
            "in_flight": flying,
            "in_flight_mflops": flown[POWER],
        })
    return rows


def flight_usage(pool: Pool, in_flight: Collection[str]) -> dict[str, tuple[int, list[float]]]:
    """User -> (tasks, what they hold: cpus, memory, MFlops, GPUs) of the running tasks in
    `in_flight`."""
    flights: dict[str, tuple[int, list[float]]] = {}
    for job_id in in_flight:
        task = pool.tasks.get(job_id)
        node = task.node if task is not None else None
        if node is None:
            continue
        count, held = flights.get(task.user, (0, [0.0] * len(pool.capacity)))
        for index, amount in enumerate((task.cpus, task.memory, node.power_per_cpu * task.cpus,
                                        task.gpus)):
            held[index] += amount
        flights[task.user] = (count + 1, held)
    return flights


def share_totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Sums of the summable columns, with the number of users."""
    totals: dict[str, Any] = {"users": len(rows)}
    for key in SUMMED:
        values = (row[key] for row in rows)
        totals[key] = math.fsum(values) if key in SUMMED_MFLOPS else sum(values)
    return totals


def share_error(users: Iterable[tuple[float, float, float]], power_per_cpu: float,
                total_power: float) -> float:
    """The owner-share error of a pool at one moment: the power owners were owed and waited
    for, over the pool's power. `users` are (provided MFlops, allocated MFlops, cpus of its
    jobs waiting): each owner below its share with jobs waiting adds the smaller of what it
    lacks and what its waiting jobs could use (at `power_per_cpu`, the pool's mean); 0 is a
    pool whose owners never waited below their share."""
    owed = math.fsum(min(provided - allocated, waiting * power_per_cpu)
                     for provided, allocated, waiting in users if provided > allocated and waiting)
    return owed / total_power if total_power > 0 else 0.0
