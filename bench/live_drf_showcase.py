"""Showcase 3: multi-resource fairness on a live partitionable pool, gridfair's DRF with
fair-share preemption against HTCondor's own configurations (issue 33, items 1, 2 and 4).

The pool: 9 machines, each one partitionable slot (`PersonalPool(layout="partitionable")`), of
three cpu/memory ratios, 36 cpus and 192 GiB in all, 1,000 MFlops a cpu everywhere:
4 of 6 cpus at 2 GiB a cpu, 2 of 3 cpus at 8 GiB a cpu, 3 of 2 cpus at 16 GiB a cpu. Nobody
owns a machine (pure fair share). Users, each a Unix account of its own, with different
dominant resources (jobs drawn from the seed, 60-150 s each):
- C, cpu-heavy: 2-4 cpus, 1-2 GiB;  M, memory-heavy: 1 cpu, 8-16 GiB;
- X, mixed: 1-2 cpus, 4-12 GiB;     A, arriving: 1-2 cpus, 2-4 GiB.

Phases (time 0 of every figure is A's arrival):
- fill: C, M and X submit more than the pool holds; once at most 10 % of the cpus are free
  (or `--fill` s),
- arrival: A arrives on the full pool;
- leaving (`--leave-after`, 70 s): M withdraws its idle jobs (what runs finishes: a user
  leaving); the run ends `--duration` (140) s after the arrival.

Entitlement at every moment: DRF's progressive filling over the users with demand (their idle
plus running requests of cpus and memory), on the pool's capacities (bench/drf_preemption.py's
`drf_shares`, continuous: every user's dominant share rises at one rate until its demand is met
or a resource it asks for is full). Figures per run, from the arrival to the end, from the pool's
job event log:
- `dominant_share_error`: time mean of sum_u |dominant share held_u - DRF's_u|;
- `bound`: time mean of a lower bound on that sum for any assignment of the jobs present (item
  4; `granularity_bound`: each user's held dominant share must be that of a subset of its present
  jobs fitting the pool's totals, and its error is at least the distance from DRF's share to the
  nearest such value; exact for that relaxation, computed by a subset-sum over (cpus, GiB); it
  ignores which machine a job fits on and what the other users hold, so no assignment does
  better, and perhaps none reaches it); `excess_over_bound` = error - bound;
- `utilization` of cpus and memory (time means of allocated / capacity);
- `completed_jobs`, `vacates`, `lost_cpu_seconds` (run time of evicted runs x their cpus: no
  checkpointing), `vacates_per_completed`, each user's `mean_wait_s` (submission to first start,
  jobs started in the window);
- gridfair only: `landed_fraction` (bench/live_pool_showcase.py's measure);
- the load average before and after.

The sides, each on a fresh pool with the same jobs (same seed):
- gridfair: the daemon as its unit runs it (its own account, from a wheel-built venv), `drf-fair`
  (`--policy drf-fair`: DRF's order, `preempt = "fair"`) every 2 s, bench/live_pool_showcase.py's
  safety and pool configuration (only steered jobs start, HTCondor never preempts on its own);
- htcondor: HTCondor alone, one of `HTCONDOR` (`--htcondor` names one or several).

Two scenarios, told by the configuration's name: pure fair share (`drf-fair` and the HTCondor
configurations without a suffix), and entitlements (`wdrf-fair`, weighted DRF with `WEIGHTS`:
A entitled to twice the others' dominant share; HTCondor's `...-factors` configurations, with
priority factors in the inverse ratio, `condor_userprio -setfactor`); the entitlement is then
weighted DRF's progressive filling.

The machinery (pool, daemon, event log, records, `--save`/`--replay`) is
bench/live_pool_showcase.py's, imported.

    .venv/bin/python bench/live_drf_showcase.py [--seeds 1 2 3] [--sides gridfair,htcondor]
        [--gridfair drf-fair] [--htcondor dominant-prio] [--json] [--plot-dir DIR]
        [--save DIR] [--replay FILE...]

Needs root and HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import dataclasses
import functools
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # its sibling benches
sys.path.insert(0, str(BENCH.parent))

import live_pool_showcase as showcase  # noqa: E402
from drf_preemption import drf_shares  # noqa: E402

from gridfair.core.pool import CPUS, MEMORY  # noqa: E402

GIB = 1024
#: (machines, cpus each, GiB a cpu)
MACHINES = ((4, 6, 2), (2, 3, 8), (3, 2, 16))
PER_CPU = 1000.0
CAPACITY_CPUS = sum(count * cpus for count, cpus, _ in MACHINES)
CAPACITY_GIB = sum(count * cpus * per_cpu for count, cpus, per_cpu in MACHINES)
#: (machines, cpus each, GiB each) for the bound
MACHINE_UNITS = tuple((count, cpus, cpus * per_cpu) for count, cpus, per_cpu in MACHINES)
JOB_SECONDS = (60.0, 150.0)
#: user -> (phase, jobs, cpus choices, GiB choices); every backlog outlasts the run
USERS = {
    "C": ("fill", 40, (2, 3, 4), (1, 2)),
    "M": ("fill", 30, (1,), (8, 12, 16)),
    "X": ("fill", 30, (1, 2), (4, 8, 12)),
    "A": ("arrival", 40, (1, 2), (2, 3, 4)),
}
ARRIVING, LEAVING = "A", "M"
INTERVAL = showcase.INTERVAL
#: The entitlement scenario: A entitled to twice the others' share (weighted DRF); gridfair
#: runs `wdrf-fair` with these weights, HTCondor a configuration with priority factors in
#: their inverse ratio (a user's effective priority is its usage times its factor).
WEIGHTS = {"A": 2, "C": 1, "M": 1, "X": 1}
DEFAULT_FACTOR = 1000  # HTCondor's default priority factor

# The gridfair side, in bench/live_pool_showcase.py's table of daemon policies.
showcase.GRIDFAIR.setdefault("drf-fair", ("drf", "fair", lambda: "",
                                          "order drf, preempt fair (--policy drf-fair)"))


def wdrf_options() -> str:
    """`wdrf-fair`'s [policy.options]: WEIGHTS, naming each user as the daemon charges one who
    owns no machine, by its authenticated name (user@UID_DOMAIN: docs/live-pool.md, "Who a
    job is charged to"); a bare name would match nobody, and every weight be 0."""
    from tests.live.harness.personal_pool import UID_DOMAIN

    return "weights = { " + ", ".join(f'"{user}@{UID_DOMAIN}" = {weight}'
                                       for user, weight in WEIGHTS.items()) + " }"


showcase.GRIDFAIR.setdefault("wdrf-fair", (
    "wdrf", "fair", wdrf_options,
    "order wdrf with weights " + ", ".join(f"{u} {w}" for u, w in WEIGHTS.items())
    + ", preempt fair (--policy wdrf-fair)"))

#: HTCondor's knobs common to every configuration (docs/results/live-drf.md cites the manual):
#: preemption considered, a partitionable slot's dynamic slots preempted together for a job
#: that needs their room, every start negotiated (no claim reuse, no leftovers).
COMMON = ["NEGOTIATOR_CONSIDER_PREEMPTION = True", "ALLOW_PSLOT_PREEMPTION = True",
          "CLAIM_WORKLIFE = 0", "CLAIM_PARTITIONABLE_LEFTOVERS = False"]
#: A slot's weight in fair share: its dominant share of the pool's totals, in cpus.
DOMINANT_WEIGHT = (f"SLOT_WEIGHT = {CAPACITY_CPUS} * max({{ Cpus / {CAPACITY_CPUS}.0, "
                   f"Memory / {CAPACITY_GIB * GIB}.0 }})")
HTCONDOR = {
    # HTCondor's default weight (cpus), fair share following current use, priority preemption.
    "cpus-prio": [*COMMON, "SLOT_WEIGHT = Cpus", *showcase.PRIORITY_PREEMPTION],
    # Fair share in dominant shares, no preemption: arrivals wait for jobs to end.
    "dominant": [*COMMON, DOMINANT_WEIGHT, "PRIORITY_HALFLIFE = 60",
                 "PREEMPTION_REQUIREMENTS = False"],
    # Fair share in dominant shares with priority preemption: HTCondor's closest to DRF.
    "dominant-prio": [*COMMON, DOMINANT_WEIGHT, *showcase.PRIORITY_PREEMPTION],
    # The same with the manual's guard against preempting a job just started (its example
    # keeps a claim an hour; here 30 s, a fifth of the longest job).
    "dominant-guard": [*COMMON, DOMINANT_WEIGHT, "PRIORITY_HALFLIFE = 60",
                       "PREEMPTION_REQUIREMENTS = (time() - EnteredCurrentState) > 30"
                       " && RemoteUserPrio > SubmitterUserPrio * 1.2"],
}
#: The weighted scenario's HTCondor configurations: these, with priority factors set.
FACTORED = {f"{name}-factors": HTCONDOR[name] for name in ("cpus-prio", "dominant-prio")}
HTCONDOR.update(FACTORED)


def weights_of(config: str) -> dict[str, int] | None:
    """The users' weights of the run's scenario: WEIGHTS for the weighted one, else None."""
    return dict(WEIGHTS) if config == "wdrf-fair" or config in FACTORED else None


# ----------------------------------------------------------------------------- the maths
def dominant_share(cpus: float, memory: float, capacity: tuple[float, float]) -> float:
    """max(cpus / the pool's cpus, memory / the pool's memory)."""
    return max(cpus / capacity[0], memory / capacity[1])


def drf_entitlement(demand: Mapping[str, tuple[float, float]], capacity: tuple[float, float],
                    weights: Mapping[str, int] | None = None) -> dict[str, float]:
    """DRF's dominant share for each user with demand ((cpus, memory) asked for in all):
    progressive filling on the pool's capacities. With whole `weights` (1 for a user they leave
    out), weighted DRF: a user of weight w is w users of 1/w of its demand each, whose dominant
    shares rise together, so its own rises w times as fast."""
    vectors = {}
    for user, (cpus, memory) in demand.items():
        clones = (weights or {}).get(user, 1)
        for clone in range(clones):
            vector = [0.0] * 4
            vector[CPUS], vector[MEMORY] = cpus / clones, memory / clones
            vectors[user, clone] = vector
    whole = [0.0] * 4
    whole[CPUS], whole[MEMORY] = capacity
    entitled: dict[str, float] = {}
    for (user, _), share in drf_shares(vectors, whole).items():
        entitled[user] = entitled.get(user, 0.0) + share
    return entitled


def share_error(held: Mapping[str, float], entitled: Mapping[str, float]) -> float:
    """sum_u |dominant share held_u - entitled_u| over every user in either."""
    return sum(abs(held.get(user, 0.0) - entitled.get(user, 0.0))
               for user in set(held) | set(entitled))


@functools.lru_cache(maxsize=4096)
def reachable_shares(sizes: tuple[tuple[int, int], ...],
                     capacity: tuple[int, int]) -> tuple[float, ...]:
    """Every dominant share a subset of these jobs ((cpus, memory) in whole units) fitting the
    pool's totals can hold, sorted: a subset-sum over (cpus, memory), one bit set of memory
    totals per cpu total (cost: jobs x cpus of the pool big-integer operations)."""
    cpus_total, memory_total = capacity
    memory_mask = (1 << (memory_total + 1)) - 1
    reach = [0] * (cpus_total + 1)
    reach[0] = 1
    for cpus, memory in sizes:
        for held in range(cpus_total - cpus, -1, -1):
            if reach[held]:
                reach[held + cpus] |= (reach[held] << memory) & memory_mask
    shares = {dominant_share(held, memory, capacity)
              for held, bits in enumerate(reach)
              for memory in range(memory_total + 1) if bits >> memory & 1}
    return tuple(sorted(shares))


def granularity_bound(present: Mapping[str, Sequence[tuple[int, int]]],
                      entitled: Mapping[str, float], capacity: tuple[int, int]) -> float:
    """A lower bound on sum_u |held_u - entitled_u| for any assignment of the jobs present
    (each user's running and idle jobs, in whole units): per user, the distance from its
    entitlement to the nearest dominant share a subset of its jobs can hold."""
    total = 0.0
    for user, wanted in entitled.items():
        shares = reachable_shares(tuple(sorted(present.get(user, ()))), capacity)
        at = bisect.bisect_left(shares, wanted)
        total += min(abs(shares[index] - wanted)
                     for index in (at - 1, at) if 0 <= index < len(shares))
    return total


def assignment_bound(present: Mapping[str, Sequence[tuple[int, int]]],
                     entitled: Mapping[str, float], machines: Sequence[tuple[int, int, int]],
                     capacity: tuple[int, int], whole: bool = True,
                     nodes: int = 500) -> float:
    """The least sum_u |held_u - entitled_u| any assignment of the jobs present (each user's
    running and idle jobs, whole units) to the machines ((count, cpus, memory) per kind) can
    reach, as a mixed-integer program: how many jobs of each user and size run on each machine,
    within its cpus and memory; t_u >= each resource's share - entitled_u (the dominant share is
    their maximum) and t_u >= entitled_u - the share of one resource the program picks per user
    (exact: the maximum is at least the picked one). `whole=False` relaxes it to a linear
    program (jobs split, still only over machines they fit on whole, identical machines pooled;
    the dominant share bounded by the sum of its jobs' own dominant shares): a weaker bound at a
    fraction of the cost. The result is a lower bound either way: the solver's proven bound
    when `nodes` branch-and-bound nodes run out before it proves its optimum (a node limit,
    not a time limit: the same bound on every machine), never below `granularity_bound`."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    users = sorted(entitled)
    if whole:  # each machine on its own
        boxes = [(1, cpus, memory) for count, cpus, memory in machines for _ in range(count)]
    else:
        boxes = list(machines)
    counts: dict[tuple[int, tuple[int, int]], int] = {}
    for number, user in enumerate(users):
        for size in present.get(user, ()):
            counts[number, size] = counts.get((number, size), 0) + 1
    # Variables: jobs of (user, size) on a box it fits, then t_u, then (whole) z_ur.
    columns = [(number, size, box) for (number, size) in sorted(counts)
               for box, (_, cpus, memory) in enumerate(boxes)
               if size[0] <= cpus and size[1] <= memory]
    slack = len(columns)
    picks = slack + len(users)
    width = picks + (2 * len(users) if whole else 0)
    rows: list[list[float]] = []
    lower: list[float] = []
    upper: list[float] = []

    def row(entries: Mapping[int, float], low: float, high: float) -> None:
        line = [0.0] * width
        for index, value in entries.items():
            line[index] += value
        rows.append(line)
        lower.append(low)
        upper.append(high)

    for key, count in counts.items():  # no more jobs of a size than the user has
        row({i: 1.0 for i, column in enumerate(columns) if column[:2] == key}, 0, count)
    for box, (count, cpus, memory) in enumerate(boxes):  # each box's cpus and memory
        for resource, room in ((0, cpus), (1, memory)):
            row({i: column[1][resource] for i, column in enumerate(columns)
                 if column[2] == box}, 0, count * room)
    for number, user in enumerate(users):
        mine = [i for i, column in enumerate(columns) if column[0] == number]
        wanted = entitled[user]
        for resource in (0, 1):  # share_r - t_u <= entitled
            share = {i: columns[i][1][resource] / capacity[resource] for i in mine}
            row({**share, slack + number: -1.0}, -float("inf"), wanted)
            if whole:  # share_r + t_u >= entitled, unless r is not the one picked
                pick = picks + 2 * number + resource
                row({**share, slack + number: 1.0, pick: -wanted}, 0, float("inf"))
        if whole:  # pick one resource: z_u0 + z_u1 = 1 (the constraint above is off for z = 1)
            row({picks + 2 * number: 1.0, picks + 2 * number + 1: 1.0}, 1, 1)
        else:  # sum of its jobs' dominant shares + t_u >= entitled
            row({**{i: dominant_share(*columns[i][1], capacity) for i in mine},
                 slack + number: 1.0}, wanted, float("inf"))
    cost = [0.0] * slack + [1.0] * len(users) + [0.0] * (width - picks)
    integral = [1 if whole else 0] * slack + [0] * len(users) + [1] * (width - picks)
    highest = [float("inf")] * picks + [1.0] * (width - picks)
    # Each t_u at least the user's own granularity_bound (a valid cut: no assignment gives
    # the user a share its jobs cannot add up to), which the linear relaxation misses.
    lowest = [0.0] * width
    for number, user in enumerate(users):
        lowest[slack + number] = granularity_bound(present, {user: entitled[user]}, capacity)
    solved = milp(cost, constraints=LinearConstraint(rows, lower, upper),
                  integrality=integral, bounds=Bounds(lowest, highest),
                  options={"node_limit": nodes})
    bound = getattr(solved, "mip_dual_bound", None)
    if solved.status == 0 or bound is None:
        bound = solved.fun
    if bound is None:
        raise RuntimeError(f"assignment bound: the solver failed: {solved.message}")
    return max(0.0, float(bound))


@dataclasses.dataclass(frozen=True, slots=True)
class Moment:
    """The pool from `time` to the next moment."""

    time: float
    held: Mapping[str, float]  # dominant share held
    entitled: Mapping[str, float]  # DRF's
    granularity: float  # granularity_bound
    packing: float  # assignment_bound
    cpus_used: float  # fraction of the pool's cpus allocated
    memory_used: float
    stranded: tuple[float, float] = (0.0, 0.0)  # `stranded`'s
    at_drf: tuple[float, float] = (0.0, 0.0)  # `drf_utilization`'s

    @property
    def error(self) -> float:
        return share_error(self.held, self.entitled)

    @property
    def bound(self) -> float:
        """The larger of the two lower bounds."""
        return max(self.granularity, self.packing)


#: Each machine's (cpus, MiB), in the pool's slot order (slot1 is the first).
MACHINE_CAPACITIES = tuple((cpus, cpus * per_cpu * GIB) for count, cpus, per_cpu in MACHINES
                           for _ in range(count))


def stranded(used: Mapping[int, tuple[float, float]],
             idle: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The cpus and memory free on machines where no idle job fits, as fractions of the pool's:
    what the placement left unusable by the jobs waiting. `used`: machine index -> (cpus, MiB)
    allocated there; `idle`: the waiting jobs' (cpus, MiB)."""
    cpus = memory = 0.0
    for index, (total_cpus, total_memory) in enumerate(MACHINE_CAPACITIES):
        held = used.get(index, (0.0, 0.0))
        free = (total_cpus - held[0], total_memory - held[1])
        if not any(job[0] <= free[0] and job[1] <= free[1] for job in idle):
            cpus += free[0]
            memory += free[1]
    return cpus / CAPACITY_CPUS, memory / (CAPACITY_GIB * GIB)


def drf_utilization(demand: Mapping[str, Sequence[float]], entitled: Mapping[str, float],
                    capacity: tuple[float, float]) -> tuple[float, float]:
    """The fractions of the pool's cpus and memory DRF's entitlement allocates: each user its
    dominant share of its own demand's shape (what an exactly fair scheduler with divisible
    jobs would use)."""
    cpus = memory = 0.0
    for user, share in entitled.items():
        asked = demand[user]
        dominant = dominant_share(asked[0], asked[1], capacity)
        if dominant > 0:
            cpus += share * asked[0] / dominant / capacity[0]
            memory += share * asked[1] / dominant / capacity[1]
    return cpus, memory


def machine_of(slot: str) -> int:
    """`slotN@host` -> N - 1, the machine's index in MACHINE_CAPACITIES."""
    return int(slot.partition("@")[0].removeprefix("slot")) - 1


def timeline(record: showcase.Record) -> list[Moment]:
    """The pool after every start, end, submission and removal up to the run's end."""
    jobs = record.jobs
    capacity = (float(CAPACITY_CPUS), float(CAPACITY_GIB * GIB))
    units = (CAPACITY_CPUS, int(CAPACITY_GIB))
    changes = sorted({run.start for run in record.runs}
                     | {run.end for run in record.runs if run.end}
                     | {life.submitted for life in record.lifetimes.values()}
                     | {life.ended for life in record.lifetimes.values() if life.ended})
    # Bounds only from the state at the arrival on (the window every figure covers).
    first = max((change for change in changes if change <= record.arrival), default=0.0)
    moments = []
    for moment in (change for change in changes if change <= record.until):
        on = {run.job: run.slot for run in record.runs
              if run.start <= moment and (run.end is None or run.end > moment)}
        running = set(on)
        used: dict[int, tuple[float, float]] = {}
        idle: list[tuple[float, float]] = []
        held: dict[str, list[float]] = {}
        demand: dict[str, list[float]] = {}
        present: dict[str, list[tuple[int, int]]] = {}
        for job, life in record.lifetimes.items():
            if job not in running and not (life.submitted <= moment
                                           and (life.ended is None or life.ended > moment)):
                continue
            asked = jobs[job]
            if job in running:
                machine = machine_of(on[job])
                before = used.get(machine, (0.0, 0.0))
                used[machine] = (before[0] + asked.cpus, before[1] + asked.memory)
            else:
                idle.append((asked.cpus, asked.memory))
            for totals in (demand, held) if job in running else (demand,):
                total = totals.setdefault(asked.user, [0.0, 0.0])
                total[0] += asked.cpus
                total[1] += asked.memory
            present.setdefault(asked.user, []).append((asked.cpus, -(-asked.memory // GIB)))
        entitled = drf_entitlement({user: tuple(v) for user, v in demand.items()}, capacity,
                                   weights_of(record.config))
        moments.append(Moment(
            moment, {user: dominant_share(*v, capacity) for user, v in held.items()}, entitled,
            granularity_bound(present, entitled, units),
            _moment_bound(tuple(sorted((user, tuple(sorted(sizes)))
                                       for user, sizes in present.items())),
                          tuple(sorted(entitled.items())), units)
            if moment >= first else 0.0,
            sum(v[0] for v in held.values()) / capacity[0],
            sum(v[1] for v in held.values()) / capacity[1],
            stranded(used, idle), drf_utilization(demand, entitled, capacity)))
    return moments


@functools.lru_cache(maxsize=4096)
def _moment_bound(present: tuple, entitled: tuple, units: tuple[int, int]) -> float:
    """assignment_bound on hashable arguments: a job starting or being vacated changes neither
    the jobs present nor the entitlement, so most moments repeat an earlier one."""
    return assignment_bound(dict(present), dict(entitled), MACHINE_UNITS, units)


def time_mean(moments: Sequence[Moment], since: float, until: float,
              value: Callable[[Moment], float]) -> float:
    """`value`'s mean over [since, until], each state held until the next moment."""
    return sum(value(state) * (end - start) for start, end, state
               in showcase.pieces(moments, since, until)) / (until - since)


# ----------------------------------------------------------------------------- one run
def scenario_jobs(seed: int) -> dict[str, list]:
    """user -> its JobSpecs, drawn from `seed` in USERS' order."""
    from tests.live.harness.personal_pool import JobSpec

    rng = random.Random(seed)
    jobs: dict[str, list] = {}
    for user, (_, count, cpu_choices, gib_choices) in USERS.items():
        jobs[user] = []
        for _ in range(count):
            seconds = rng.uniform(*JOB_SECONDS)
            cpus = rng.choice(cpu_choices)
            jobs[user].append(JobSpec(user, seconds * PER_CPU, cpus,
                                      rng.choice(gib_choices) * GIB))
    return jobs


def run_phases(pool, submit: Callable[[str], None], options: argparse.Namespace,
               leaving_user: str, daemon: subprocess.Popen | None
               ) -> tuple[float, float, float, float, float]:
    """The phases on a pool (the module docstring's): `submit("fill")`, until the pool is
    full; `submit("arrival")`; `leaving_user`'s idle jobs removed `--leave-after` s later; the
    end `--duration` s after the arrival; then the daemon, if any, stopped. (started, seconds
    the fill took, arrival, leaving, end)."""
    try:
        started = time.time()
        submit("fill")
        fill_seconds = showcase.wait_until_full(pool, options.fill)
        time.sleep(2 * INTERVAL)
        arrival = time.time()
        submit("arrival")
        time.sleep(max(0.0, arrival + options.leave_after - time.time()))
        leaving = time.time()
        pool.run_tool(["condor_rm", "-constraint",
                       f'JobStatus == 1 && Owner == "{leaving_user}"'])
        time.sleep(max(0.0, arrival + options.duration - time.time()))
        return started, fill_seconds, arrival, leaving, time.time()
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)


def run_side(side: str, config: str, seed: int, options: argparse.Namespace,
             python: Path | None) -> showcase.Record:
    """One side on a fresh pool: fill, A's arrival, M leaving; its record."""
    from gridfair.ad_views import whole_slot
    from tests.harness.pool_record import read_lifetimes, read_runs
    from tests.live.harness.personal_pool import (
        ACCOUNTING_PREFIX,
        UID_DOMAIN,
        PersonalPool,
        SlotSpec,
        daemon_command,
        daemon_directory,
    )

    slots = [SlotSpec("pool", cpus * PER_CPU, cpus, cpus * per_cpu * GIB)
             for count, cpus, per_cpu in MACHINES for _ in range(count)]
    jobs_of = scenario_jobs(seed)
    if side == "gridfair":
        pool_config = [*(showcase.ROOT / "configs" / "htcondor-pool.config").read_text()
                       .splitlines(), "PREEMPTION_REQUIREMENTS = False"]
        described = (f"{config}: the gridfair daemon as its account, "
                     f"{showcase.GRIDFAIR[config][3]}, every {INTERVAL:g} s; "
                     "configs/htcondor-pool.config, PREEMPTION_REQUIREMENTS = False")
    else:
        pool_config = HTCONDOR[config]
        described = f"{config}: " + "; ".join(pool_config)
        if config in FACTORED:
            described += "; priority factors " + ", ".join(
                f"{user} {DEFAULT_FACTOR * max(WEIGHTS.values()) // weight}"
                for user, weight in WEIGHTS.items())
    directory = daemon_directory() if side == "gridfair" else None
    load_before = os.getloadavg()
    with PersonalPool(slots, layout="partitionable", interval=int(INTERVAL),
                      extra_config=pool_config) as pool:
        event_log = pool.shared_file("events.log")
        if config in FACTORED:  # set before any job: usage is charged with them from the start
            for user, weight in WEIGHTS.items():
                pool.run_tool(["condor_userprio", "-setfactor",
                               f"{ACCOUNTING_PREFIX}.{user}@{UID_DOMAIN}",
                               str(DEFAULT_FACTOR * max(WEIGHTS.values()) // weight)])
        jobs: dict[str, showcase.Submitted] = {}

        def submit(phase: str) -> None:
            for user, specs in jobs_of.items():
                if USERS[user][0] == phase:
                    ids = pool.submit_cluster(specs, extra=[f"log = {event_log}"])
                    jobs.update({job: showcase.Submitted(user, spec.cpus, spec.memory)
                                 for job, spec in zip(ids, specs, strict=True)})

        daemon = None
        if directory is not None:
            showcase.daemon_config(directory, pool.collector_host, config,
                                   options.landing_cycles * INTERVAL)
            daemon = subprocess.Popen(daemon_command(python), cwd=directory,
                                      env=pool.daemon_environment(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            showcase.wait_for_lease(pool)
        started, fill_seconds, arrival, leaving, until = run_phases(pool, submit, options,
                                                                   LEAVING, daemon)
        users = {job: submitted.user for job, submitted in jobs.items()}
        runs = [dataclasses.replace(run, slot=whole_slot(run.slot))
                for run in read_runs(event_log, users, until)]
        lifetimes = read_lifetimes(event_log)
    record = showcase.Record(side, config, described, seed, runs, lifetimes, jobs, {},
                             started, arrival, leaving, until, round(fill_seconds, 1),
                             [round(value, 2) for value in load_before],
                             [round(value, 2) for value in os.getloadavg()])
    if directory is not None:
        keep_landing(record, directory, options.save)
    return record


def keep_landing(record: showcase.Record, directory: Path, save: str | None = None) -> None:
    """The daemon's landing of its allocations (bench/live_pool_showcase.py's measure) into
    `record`, from its store in `directory`, which is then removed; with `save` (`--save`'s
    directory), its store and log copied there first, beside the record: its journal says
    why each vacate and allocation was made."""
    from tests.harness.pool_record import landing

    landed = landing(directory / "state.db", record.runs, 2 * INTERVAL)
    record.landing = {"decided": landed.decided, "landed": landed.landed,
                      "landed_within_two_cycles": landed.landed_in_time,
                      "journal": dict(landed.journal)}
    if save:
        Path(save).mkdir(parents=True, exist_ok=True)
        for name in ("state.db", "daemon.log"):
            shutil.copy(directory / name, Path(save) /
                        f"{record.side}-{record.config}-seed{record.seed}-{name}")
    shutil.rmtree(directory, ignore_errors=True)


def figures(record: showcase.Record, plot_dir: str | None = None) -> dict[str, object]:
    """The run's figures (module docstring), and its picture in `plot_dir`."""
    moments = timeline(record)
    since, until = record.arrival, record.until
    # The event log's times are whole seconds: a vacate in the arrival's own second (the
    # daemon's answer to it) reads as before it, and was left out (6 of 6, seen 2026-11-29).
    evicted = [run for run in record.runs
               if run.evicted and run.end and math.floor(since) <= run.end]
    completed = sum(1 for life in record.lifetimes.values()
                    if life.completed and life.ended and since <= life.ended <= until)
    first_start: dict[str, float] = {}
    for run in record.runs:
        first_start[run.job] = min(run.start, first_start.get(run.job, run.start))
    waits: dict[str, list[float]] = {}
    for job, start in first_start.items():
        if since <= start <= until:
            waits.setdefault(record.jobs[job].user, []).append(
                start - record.lifetimes[job].submitted)
    error = time_mean(moments, since, until, lambda state: state.error)
    bound = time_mean(moments, since, until, lambda state: state.bound)
    result: dict[str, object] = {
        "side": record.side, "seed": record.seed,
        "scenario": "fair-share" if weights_of(record.config) is None else "weighted",
        "config": record.config,
        "dominant_share_error": round(error, 4),
        "utilization": {
            "cpus": round(time_mean(moments, since, until, lambda s: s.cpus_used), 3),
            "memory": round(time_mean(moments, since, until, lambda s: s.memory_used), 3)},
        # Free where no waiting job fits (the placement's loss), and what DRF's entitlement
        # itself allocates (an exactly fair scheduler's use, on divisible jobs).
        "stranded": {
            "cpus": round(time_mean(moments, since, until, lambda s: s.stranded[0]), 3),
            "memory": round(time_mean(moments, since, until, lambda s: s.stranded[1]), 3)},
        "utilization_at_drf": {
            "cpus": round(time_mean(moments, since, until, lambda s: s.at_drf[0]), 3),
            "memory": round(time_mean(moments, since, until, lambda s: s.at_drf[1]), 3)},
        "vacates": len(evicted), "completed_jobs": completed,
        "landed_fraction": None,
        "bound": round(bound, 4), "excess_over_bound": round(error - bound, 4),
        "bound_granularity": round(time_mean(moments, since, until, lambda s: s.granularity),
                                   4),
        "bound_packing": round(time_mean(moments, since, until, lambda s: s.packing), 4),
        "vacates_per_completed": round(len(evicted) / completed, 3) if completed else None,
        "lost_cpu_seconds": round(sum((run.end - run.start) * record.jobs[run.job].cpus
                                      for run in evicted), 1),
        "mean_wait_s": {user: round(sum(values) / len(values), 1)
                        for user, values in sorted(waits.items())},
        "mean_held_share": _mean_shares(moments, since, until, "held"),
        "mean_drf_share": _mean_shares(moments, since, until, "entitled"),
        "fill_seconds": record.fill_seconds,
        "described": record.described,
        "loadavg_before": record.load_before, "loadavg_after": record.load_after,
    }
    if record.landing is not None:
        decided = record.landing["decided"]
        result["landed_fraction"] = (round(record.landing["landed"] / decided, 3)
                                     if decided else None)
        result["allocations"] = decided
    if plot_dir:
        plot(moments, record, Path(plot_dir) / f"drf-{record.side}-{record.config}-seed"
             f"{record.seed}.png", f"{record.side} ({record.config}), seed {record.seed}: "
             f"DS error {error:.3f} (bound {bound:.3f})")
    return result


def _mean_shares(moments: Sequence[Moment], since: float, until: float,
                 which: str) -> dict[str, float]:
    users = sorted({user for state in moments for user in getattr(state, which)})
    return {user: round(time_mean(moments, since, until,
                                  lambda state, user=user: getattr(state, which).get(user, 0.0)),
                        4)
            for user in users}


def plot(moments: Sequence[Moment], record: showcase.Record, path: Path, title: str) -> None:
    """Each user's dominant share held (solid) and DRF's (dotted) over time, from the arrival."""
    showcase.plot_steps(
        moments, USERS, lambda state, user: state.held.get(user, 0.0),
        lambda state, user: state.entitled.get(user, 0.0), record.arrival, record.until,
        [(0.0, f"{ARRIVING} arrives"), (record.shift - record.arrival, f"{LEAVING} leaves")],
        path, title + " (dotted: DRF's)", top=0.8, xlabel=f"seconds since {ARRIVING} arrived",
        ylabel="dominant share")


# ----------------------------------------------------------------------------- main
@contextlib.contextmanager
def output_to_stderr() -> Iterator[None]:
    """Whatever is written to standard output meanwhile goes to standard error, at the file
    descriptor: the MILP solver (HiGHS, in C) and the pool's tools write there past Python's
    `sys.stdout`, and `--json` promises one JSON object and nothing else on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def parse_with_records(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """`parser`'s options, with a live bench's `--save`, `--replay` and `--json`."""
    parser.add_argument("--save", metavar="DIR", help="each run's record here (JSON)")
    parser.add_argument("--replay", nargs="+", metavar="FILE",
                        help="figures from saved records instead of new runs")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def recorded_runs(parser: argparse.ArgumentParser, options: argparse.Namespace,
                  run: Callable[..., showcase.Record],
                  configurations: Mapping[str, Mapping]) -> list[showcase.Record]:
    """The records `--replay` names, or new runs of every side and configuration asked for
    (bench/live_pool_showcase.py's `run_all`)."""
    if options.replay:
        return [showcase.Record.load(Path(path)) for path in options.replay]
    return showcase.run_all(parser, options, run, configurations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--sides", default="gridfair,htcondor")
    parser.add_argument("--gridfair", default="drf-fair",
                        help=f"comma-separated ({', '.join(showcase.GRIDFAIR)})")
    parser.add_argument("--htcondor", default="dominant-prio",
                        help=f"comma-separated ({', '.join(HTCONDOR)})")
    parser.add_argument("--landing-cycles", type=float, default=6.0)
    parser.add_argument("--fill", type=float, default=45.0,
                        help="at most this many seconds of filling before A arrives")
    parser.add_argument("--leave-after", type=float, default=70.0,
                        help="seconds from A's arrival until M withdraws its idle jobs")
    parser.add_argument("--duration", type=float, default=140.0,
                        help="seconds from A's arrival to the end")
    parser.add_argument("--plot-dir", help="one PNG per run here")
    options = parse_with_records(parser)
    with output_to_stderr() if options.json else contextlib.nullcontext():
        records = recorded_runs(parser, options, run_side,
                                {"gridfair": showcase.GRIDFAIR, "htcondor": HTCONDOR})
        runs = [figures(record, options.plot_dir) for record in records]
    if options.json:
        print(json.dumps({"runs": runs}, indent=1))
        return
    print(f"{'side config':<24} {'seed':>4} {'DS err':>7} {'bound':>6} {'cpus':>5} {'mem':>5} "
          f"{'vac':>4} {'done':>4} {'landed':>6}  load (1 min)")
    for run in runs:
        landed = run["landed_fraction"]
        print(f"{run['side'] + ' ' + run['config']:<24} {run['seed']:>4} "
              f"{run['dominant_share_error']:>7.4f} {run['bound']:>6.4f} "
              f"{run['utilization']['cpus']:>5.3f} {run['utilization']['memory']:>5.3f} "
              f"{run['vacates']:>4} {run['completed_jobs']:>4} "
              f"{'-' if landed is None else f'{landed:.3f}':>6}  "
              f"{run['loadavg_before'][0]:.1f}-{run['loadavg_after'][0]:.1f}")


if __name__ == "__main__":
    main()
