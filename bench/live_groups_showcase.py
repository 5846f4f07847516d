"""Showcase 4: the pool's own accounting groups, live: gridfair's H-DRF across a two-level
group tree read from the pool against HTCondor's hierarchical group quotas (issue 47, "Tests
and showcase").

The pool: 9 machines, each one partitionable slot (`PersonalPool(layout="partitionable")`), of
three cpu/memory ratios, 36 cpus, 192 GiB and 4 GPUs in all (GPUs are HTCondor's custom
machine resource `GPUs`, `MACHINE_RESOURCE_GPUs`), 1,000 MFlops a cpu everywhere: 2 of 6 cpus
at 2 GiB a cpu with 2 GPUs each, 2 more without GPUs, 2 of 3 cpus at 8 GiB a cpu, 3 of 2 cpus
at 16 GiB a cpu.

The tree (HTCondor's knobs, on the pool; the daemon reads them, `groups = "condor"`):

    group_sci   dynamic quota 0.5   group_sci.cpu  0.5   C: 2-4 cpus, 1-2 GiB a job
                                    group_sci.mem  0.5   M: 1 cpu, 8-16 GiB a job
    group_ml    dynamic quota 0.5   group_ml.gpu   1.0   G: 1 GPU, 1-2 cpus, 4 GiB a job

Each user is a Unix account whose jobs ask for their group (`accounting_group = ...`); the pool
validates it (HTCondor's `AssignAccountingGroup` with a map of which account may use which
group, configs/htcondor-accounting-groups.config), and only then does gridfair charge jobs to
groups (`trust_accounting_groups = true`, docs/security.md). Jobs last 60-150 s.

Phases (time 0 of every figure is G's arrival): C and M fill the pool (the GPU machines too);
once at most 10 % of the cpus are free (or `--fill` s) the GPU project G arrives; `--leave-after`
(70) s later M withdraws its idle jobs (what runs finishes); the run ends `--duration` (140) s
after the arrival.

Entitlement at every moment, per leaf group, as a dominant share of the pool (cpus, memory,
GPUs): hierarchical progressive filling over the groups with demand (their running and idle
requests): every leaf that can still grow does, its parent's rate split among its growing
children by their weights (quota fractions), a leaf stopping when its demand is met or a
resource it asks for is full (`gridfair/policies/group_entitlement.py`'s rule, called). Its
guarantee: the product of the quota fractions on its path, capped by its demand. Figures per
run, from the arrival to the end, from the pool's job event log:
- `group_share_error`: time mean of sum over leaf groups |dominant share held - entitled|;
- `starved_cycles_max`: the longest stretch, in cycles (2 s), a leaf group held less than its
  guarantee by at least its smallest waiting job (a job it could run within its guarantee);
- `utilization` of cpus and memory (time means of allocated / capacity), and of GPUs;
- `vacates`, `completed_jobs`, `vacates_per_completed`, `landed_fraction` (gridfair only:
  bench/live_pool_showcase.py's measure), each group's mean held and entitled share, the load.

The sides, each on a fresh pool with the same jobs (same seed), the same tree on the pool:
- gridfair: the daemon as its unit runs it, `hdrf-fair` (H-DRF's order, preemption to the
  tree's entitlement, `group_preempt`) or `hdrf` (no preemption), every 2 s, with
  bench/live_pool_showcase.py's safety and pool configuration and `trust_accounting_groups`;
- htcondor: HTCondor alone, its group quotas with or without surplus, SLOT_WEIGHT as cpus or as
  the dominant share, group preemption on or off (`HTCONDOR`).

The machinery (pool, daemon, event log, records, `--save`/`--replay`) is
bench/live_pool_showcase.py's, and the output plumbing bench/live_drf_showcase.py's, imported.

    .venv/bin/python bench/live_groups_showcase.py [--seeds 1 2 3] [--sides gridfair,htcondor]
        [--gridfair hdrf-fair] [--htcondor surplus-cpus-preempt,...] [--json]
        [--save DIR] [--replay FILE...]

Needs root and HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # its sibling benches
sys.path.insert(0, str(BENCH.parent))

import live_drf_showcase as drf  # noqa: E402
import live_pool_showcase as showcase  # noqa: E402

GIB = 1024
#: (machines, cpus each, GiB a cpu, GPUs each)
MACHINES = ((2, 6, 2, 2), (2, 6, 2, 0), (2, 3, 8, 0), (3, 2, 16, 0))
PER_CPU = 1000.0
#: cpus, memory (MiB), GPUs
CAPACITY = (float(sum(n * cpus for n, cpus, _, _ in MACHINES)),
            float(sum(n * cpus * per_cpu * GIB for n, cpus, per_cpu, _ in MACHINES)),
            float(sum(n * gpus for n, _, _, gpus in MACHINES)))
JOB_SECONDS = (60.0, 150.0)
#: (group, weight: its dynamic quota), parents first
GROUPS = (("group_sci", 0.5), ("group_sci.cpu", 0.5), ("group_sci.mem", 0.5),
          ("group_ml", 0.5), ("group_ml.gpu", 1.0))
LEAVES = ("group_sci.cpu", "group_sci.mem", "group_ml.gpu")
#: user -> (its group, phase, jobs, cpus choices, GiB choices, GPUs); backlogs outlast the run
USERS = {
    "C": ("group_sci.cpu", "fill", 40, (2, 3, 4), (1, 2), 0),
    "M": ("group_sci.mem", "fill", 30, (1,), (8, 12, 16), 0),
    "G": ("group_ml.gpu", "arrival", 16, (1, 2), (4,), 1),
}
ARRIVING, LEAVING = "G", "M"
INTERVAL = showcase.INTERVAL

showcase.GRIDFAIR.setdefault("hdrf-fair", (
    "hdrf", "group-fair", lambda: 'groups = "condor"',
    "order hdrf on the pool's tree (groups = \"condor\"), preempt group-fair "
    "(--policy hdrf-fair)"))
showcase.GRIDFAIR.setdefault("hdrf", (
    "hdrf", "none", lambda: 'groups = "condor"',
    "order hdrf on the pool's tree (groups = \"condor\"), no preemption"))


def tree_knobs(surplus: bool) -> list[str]:
    """The tree as HTCondor's negotiator knobs (both sides' pools carry it)."""
    return ["GROUP_NAMES = " + ", ".join(name for name, _ in GROUPS),
            *(f"GROUP_QUOTA_DYNAMIC_{name} = {weight:g}" for name, weight in GROUPS),
            f"GROUP_ACCEPT_SURPLUS = {surplus}"]


def group_map(directory: Path) -> list[str]:
    """Each account may use its own group alone (a map file in `directory`, HTCondor's
    AssignAccountingGroup, its check of the requested group on): the pool validates groups."""
    groups = directory / "groups.map"
    groups.write_text("".join(f"* {user} {spec[0]}\n" for user, spec in USERS.items()))
    for path, mode in ((directory, 0o755), (groups, 0o644)):  # the schedd reads it
        path.chmod(mode)
    return [f"use FEATURE : AssignAccountingGroup({groups})"]


def gpu_slots() -> list[str]:
    """The GPUs, a custom machine resource, given to the first machines' slot types."""
    lines = [f"MACHINE_RESOURCE_GPUs = {CAPACITY[2]:g}"]
    number = 0
    for count, cpus, per_cpu, gpus in MACHINES:
        for _ in range(count):
            number += 1
            lines.append(f"SLOT_TYPE_{number} = cpus={cpus}, mem={cpus * per_cpu * GIB}, "
                         f"gpus={gpus}")
    return lines


#: Group quotas preempting: a group below its quota takes the slot of one above its own (the
#: manual's PREEMPTION_REQUIREMENTS for groups, bench/live_pool_showcase.py's).
GROUP_PREEMPTION = ["PREEMPTION_REQUIREMENTS = (SubmitterGroupResourcesInUse < "
                    "SubmitterGroupQuota) && (RemoteGroupResourcesInUse > RemoteGroupQuota)"]
NO_PREEMPTION = ["PREEMPTION_REQUIREMENTS = False"]
#: A slot's weight in quotas and usage: its dominant share of the pool's totals, in cpus
#: (real divisors: ClassAd division of integers is integer division, and weighs every slot 0).
DOMINANT_WEIGHT = (f"SLOT_WEIGHT = {CAPACITY[0]:.1f} * max({{ Cpus / {CAPACITY[0]:.1f}, "
                   f"Memory / {CAPACITY[1]:.1f}, (GPUs ?: 0) / {CAPACITY[2]:.1f} }})")
#: name -> (surplus accepted, its knobs); drf.COMMON: preemption considered, a partitionable
#: slot's dynamic slots preempted together, every start negotiated.
HTCONDOR = {
    "surplus-cpus-preempt": (True, [*drf.COMMON, "SLOT_WEIGHT = Cpus", *GROUP_PREEMPTION]),
    "surplus-dominant-preempt": (True, [*drf.COMMON, DOMINANT_WEIGHT, *GROUP_PREEMPTION]),
    "surplus-cpus": (True, [*drf.COMMON, "SLOT_WEIGHT = Cpus", *NO_PREEMPTION]),
    "quota-cpus-preempt": (False, [*drf.COMMON, "SLOT_WEIGHT = Cpus", *GROUP_PREEMPTION]),
    "quota-dominant-preempt": (False, [*drf.COMMON, DOMINANT_WEIGHT, *GROUP_PREEMPTION]),
}


# ----------------------------------------------------------------------------- the maths
def dominant_share(vector: Sequence[float]) -> float:
    """max over cpus, memory and GPUs of the vector's part of the pool's."""
    return max(used / whole for used, whole in zip(vector, CAPACITY, strict=True))


def parent_of(group: str) -> str:
    return group.rpartition(".")[0]


def hdrf_entitlement(demand: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each leaf group's entitled dominant share for its demand (cpus, memory, GPUs asked for
    in all): the hierarchical progressive filling of the module docstring, the product's
    (`group_entitlement.progressive_fill`), each leaf capped by its demand."""
    from gridfair.policies.group_entitlement import Claim, progressive_fill

    claims = {"": Claim(1.0)}
    for group, weight in GROUPS:  # parents first
        claim = claims[group] = Claim(weight)
        if group in demand:
            claim.demand = [asked / whole for asked, whole in zip(demand[group], CAPACITY,
                                                                   strict=True)]
            claim.limit = max(claim.demand)
        claims[parent_of(group)].parts.append(claim)
    progressive_fill(claims[""], len(CAPACITY))
    return {leaf: claims[leaf].dominant for leaf in demand}


def guarantee(leaf: str) -> float:
    """The product of the quota fractions on the leaf's path."""
    weight = dict(GROUPS)
    product = 1.0
    while leaf:
        product *= weight[leaf]
        leaf = parent_of(leaf)
    return product


@dataclasses.dataclass(frozen=True, slots=True)
class Moment:
    """The pool from `time` to the next moment, per leaf group."""

    time: float
    held: Mapping[str, float]  # dominant share held
    entitled: Mapping[str, float]  # H-DRF's
    starved: frozenset  # leaves below their guarantee by a waiting job's share or more
    used: tuple  # fraction of the pool's cpus, memory, GPUs allocated

    @property
    def error(self) -> float:
        return sum(abs(self.held.get(leaf, 0.0) - self.entitled.get(leaf, 0.0))
                   for leaf in LEAVES)


def group_of_job(record: showcase.Record, job: str) -> str:
    return USERS[record.jobs[job].user][0]


def timeline(record: showcase.Record) -> list[Moment]:
    """The pool after every start, end, submission and removal up to the run's end."""
    changes = sorted({run.start for run in record.runs}
                     | {run.end for run in record.runs if run.end}
                     | {life.submitted for life in record.lifetimes.values()}
                     | {life.ended for life in record.lifetimes.values() if life.ended})
    moments = []
    for moment in (change for change in changes if change <= record.until):
        running = {run.job for run in record.runs
                   if run.start <= moment and (run.end is None or run.end > moment)}
        held: dict[str, list[float]] = {}
        demand: dict[str, list[float]] = {}
        smallest_waiting: dict[str, float] = {}
        for job, life in record.lifetimes.items():
            if job not in running and not (life.submitted <= moment
                                           and (life.ended is None or life.ended > moment)):
                continue
            asked = record.jobs[job]
            vector = (asked.cpus, asked.memory, asked.gpus)
            leaf = group_of_job(record, job)
            for totals in (demand, held) if job in running else (demand,):
                total = totals.setdefault(leaf, [0.0, 0.0, 0.0])
                for r in range(3):
                    total[r] += vector[r]
            if job not in running:
                smallest_waiting[leaf] = min(dominant_share(vector),
                                             smallest_waiting.get(leaf, math.inf))
        shares = {leaf: dominant_share(vector) for leaf, vector in held.items()}
        starved = frozenset(
            leaf for leaf, waiting in smallest_waiting.items()
            if shares.get(leaf, 0.0) + waiting
            <= min(guarantee(leaf), dominant_share(demand[leaf])) + 1e-9)
        moments.append(Moment(
            moment, shares, hdrf_entitlement(demand), starved,
            tuple(sum(v[r] for v in held.values()) / CAPACITY[r] for r in range(3))))
    return moments


def starved_cycles(moments: Sequence[Moment], since: float, until: float) -> int:
    """The longest stretch within [since, until] that one leaf stayed starved, in cycles."""
    longest = 0.0
    began: dict[str, float] = {}
    for start, end, state in showcase.pieces(moments, since, until):
        for leaf in LEAVES:
            if leaf in state.starved:
                began.setdefault(leaf, start)
                longest = max(longest, end - began[leaf])
            else:
                began.pop(leaf, None)
    return int(longest // INTERVAL)


# ----------------------------------------------------------------------------- one run
@dataclasses.dataclass(frozen=True, slots=True)
class Asked:
    """What the bench submitted as a job: whose, and its cpus, MiB and GPUs."""

    user: str
    cpus: int
    memory: int
    gpus: int = 0


def scenario_jobs(seed: int) -> dict[str, list]:
    """user -> its JobSpecs, drawn from `seed` in USERS' order."""
    from tests.live.harness.personal_pool import JobSpec

    rng = random.Random(seed)
    jobs: dict[str, list] = {}
    for user, (_, _, count, cpu_choices, gib_choices, _) in USERS.items():
        jobs[user] = [JobSpec(user, rng.uniform(*JOB_SECONDS) * PER_CPU,
                              rng.choice(cpu_choices), rng.choice(gib_choices) * GIB)
                      for _ in range(count)]
    return jobs


def daemon_config(directory: Path, collector: str, config: str,
                  landing_timeout: float) -> None:
    """bench/live_pool_showcase.py's daemon configuration, trusting the pool's groups."""
    showcase.daemon_config(directory, collector, config, landing_timeout)
    path = directory / "gridfair.toml"
    path.write_text(path.read_text().replace(
        "[backend.htcondor]\n", "[backend.htcondor]\ntrust_accounting_groups = true\n"))


def run_side(side: str, config: str, seed: int, options: argparse.Namespace,
             python: Path | None) -> showcase.Record:
    """One side on a fresh pool: fill, G's arrival, M leaving; its record."""
    from gridfair.ad_views import whole_slot
    from tests.harness.pool_record import read_lifetimes, read_runs
    from tests.live.harness.personal_pool import (
        PersonalPool,
        SlotSpec,
        daemon_command,
        daemon_directory,
    )

    slots = [SlotSpec("pool", cpus * PER_CPU, cpus, cpus * per_cpu * GIB)
             for count, cpus, per_cpu, _ in MACHINES for _ in range(count)]
    jobs_of = scenario_jobs(seed)
    files = Path(tempfile.mkdtemp(prefix="gridfair-showcase4-", dir="/var/tmp"))
    if side == "gridfair":
        surplus, knobs = True, [*(showcase.ROOT / "configs" / "htcondor-pool.config")
                                .read_text().splitlines(), *NO_PREEMPTION]
        described = (f"{config}: the gridfair daemon as its account, "
                     f"{showcase.GRIDFAIR[config][3]}, trust_accounting_groups, every "
                     f"{INTERVAL:g} s; configs/htcondor-pool.config, "
                     "PREEMPTION_REQUIREMENTS = False; the tree with surplus")
    else:
        surplus, knobs = HTCONDOR[config]
        described = (f"{config}: " + "; ".join(knobs)
                     + f"; the tree {'with' if surplus else 'without'} surplus")
    pool_config = [*gpu_slots(), *group_map(files), *tree_knobs(surplus), *knobs]
    directory = daemon_directory() if side == "gridfair" else None
    load_before = os.getloadavg()
    try:
        with PersonalPool(slots, layout="partitionable", interval=int(INTERVAL),
                          extra_config=pool_config) as pool:
            event_log = pool.shared_file("events.log")
            jobs: dict[str, Asked] = {}

            def submit(phase: str) -> None:
                for user, specs in jobs_of.items():
                    group, when, *_, gpus = USERS[user]
                    if when == phase:
                        ids = pool.submit_cluster(specs, extra=[
                            f"log = {event_log}", f"accounting_group = {group}",
                            f"request_GPUs = {gpus}"])
                        jobs.update({job: Asked(user, spec.cpus, spec.memory, gpus)
                                     for job, spec in zip(ids, specs, strict=True)})

            daemon = None
            if directory is not None:
                daemon_config(directory, pool.collector_host, config,
                              options.landing_cycles * INTERVAL)
                daemon = subprocess.Popen(daemon_command(python), cwd=directory,
                                          env=pool.daemon_environment(),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                showcase.wait_for_lease(pool)
            started, fill_seconds, arrival, leaving, until = drf.run_phases(
                pool, submit, options, LEAVING, daemon)
            users = {job: asked.user for job, asked in jobs.items()}
            runs = [dataclasses.replace(run, slot=whole_slot(run.slot))
                    for run in read_runs(event_log, users, until)]
            lifetimes = read_lifetimes(event_log)
    finally:
        shutil.rmtree(files, ignore_errors=True)
    record = showcase.Record(side, config, described, seed, runs, lifetimes, jobs, {},
                             started, arrival, leaving, until, round(fill_seconds, 1),
                             [round(value, 2) for value in load_before],
                             [round(value, 2) for value in os.getloadavg()])
    if directory is not None:
        drf.keep_landing(record, directory, options.save)
    return record


def load_record(path: Path) -> showcase.Record:
    """A saved record, its jobs as this showcase's (with GPUs)."""
    from tests.harness.pool_record import Lifetime, Run

    raw = json.loads(path.read_text())
    raw["runs"] = [Run(**run) for run in raw["runs"]]
    raw["lifetimes"] = {job: Lifetime(**life) for job, life in raw["lifetimes"].items()}
    raw["jobs"] = {job: Asked(**asked) for job, asked in raw["jobs"].items()}
    return showcase.Record(**raw)


def figures(record: showcase.Record) -> dict[str, object]:
    """The run's figures (module docstring)."""
    moments = timeline(record)
    since, until = record.arrival, record.until
    # The event log's times are whole seconds: a vacate in the arrival's own second (the
    # daemon's first moves for G) ends "before" the arrival by less than a second.
    evicted = [run for run in record.runs
               if run.evicted and run.end and math.floor(since) <= run.end]
    completed = sum(1 for life in record.lifetimes.values()
                    if life.completed and life.ended and since <= life.ended <= until)

    def mean(value) -> float:
        return drf.time_mean(moments, since, until, value)

    result: dict[str, object] = {
        "side": record.side, "seed": record.seed, "config": record.config,
        "group_share_error": round(mean(lambda state: state.error), 4),
        "starved_cycles_max": starved_cycles(moments, since, until),
        "utilization": {name: round(mean(lambda state, r=r: state.used[r]), 3)
                        for r, name in enumerate(("cpus", "memory", "gpus"))},
        "vacates": len(evicted), "completed_jobs": completed,
        "landed_fraction": None,
        "vacates_per_completed": round(len(evicted) / completed, 3) if completed else None,
        "mean_held_share": {leaf: round(mean(lambda s, leaf=leaf: s.held.get(leaf, 0.0)), 4)
                            for leaf in LEAVES},
        "mean_hdrf_share": {leaf: round(mean(lambda s, leaf=leaf: s.entitled.get(leaf, 0.0)),
                                        4) for leaf in LEAVES},
        "fill_seconds": record.fill_seconds,
        "described": record.described,
        "loadavg_before": record.load_before, "loadavg_after": record.load_after,
    }
    if record.landing is not None:
        decided = record.landing["decided"]
        result["landed_fraction"] = (round(record.landing["landed"] / decided, 3)
                                     if decided else None)
        result["allocations"] = decided
    return result


# ----------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--sides", default="gridfair,htcondor")
    parser.add_argument("--gridfair", default="hdrf-fair", help="comma-separated (hdrf-fair, "
                        "hdrf)")
    parser.add_argument("--htcondor", default=",".join(HTCONDOR),
                        help=f"comma-separated ({', '.join(HTCONDOR)})")
    parser.add_argument("--landing-cycles", type=float, default=6.0)
    parser.add_argument("--fill", type=float, default=45.0,
                        help="at most this many seconds of filling before G arrives")
    parser.add_argument("--leave-after", type=float, default=70.0,
                        help="seconds from G's arrival until M withdraws its idle jobs")
    parser.add_argument("--duration", type=float, default=140.0,
                        help="seconds from G's arrival to the end")
    parser.add_argument("--save", metavar="DIR", help="each run's record here (JSON)")
    parser.add_argument("--replay", nargs="+", metavar="FILE",
                        help="figures from saved records instead of new runs")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    with drf.output_to_stderr() if options.json else contextlib.nullcontext():
        if options.replay:
            records = [load_record(Path(path)) for path in options.replay]
        else:
            gridfair = {name: showcase.GRIDFAIR[name] for name in ("hdrf-fair", "hdrf")}
            records = showcase.run_all(parser, options, run_side,
                                       {"gridfair": gridfair, "htcondor": HTCONDOR})
        runs = [figures(record) for record in records]
    if options.json:
        print(json.dumps({"runs": runs}, indent=1))
        return
    print(f"{'side config':<34} {'seed':>4} {'err':>6} {'starv':>5} {'cpus':>5} {'mem':>5} "
          f"{'gpus':>5} {'vac':>4} {'done':>4} {'landed':>6}  load (1 min)")
    for run in runs:
        landed = run["landed_fraction"]
        used = run["utilization"]
        print(f"{run['side'] + ' ' + run['config']:<34} {run['seed']:>4} "
              f"{run['group_share_error']:>6.3f} {run['starved_cycles_max']:>5} "
              f"{used['cpus']:>5.3f} {used['memory']:>5.3f} {used['gpus']:>5.3f} "
              f"{run['vacates']:>4} {run['completed_jobs']:>4} "
              f"{'-' if landed is None else f'{landed:.3f}':>6}  "
              f"{run['loadavg_before'][0]:.1f}-{run['loadavg_after'][0]:.1f}")


if __name__ == "__main__":
    main()
