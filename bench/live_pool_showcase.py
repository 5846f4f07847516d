"""Showcase 2: owner share on a live partitionable pool, gridfair's daemon against HTCondor alone.

The pool: 9 machines, each one partitionable slot (`PersonalPool(layout="partitionable")`) of
2-8 cpus at 1,000-4,000 MFlops a cpu and 2 GiB a cpu, owned by four owners of different sizes
(O1 16 cpus / 48,000 MFlops = 50 % of the power, O2 10 / 26,000, O3 6 / 10,000, O4 4 /
12,000), and two users who own nothing (G1, G2): the pool of bench/owner_share_pslots.py, the
simulated version. Jobs (drawn from the seed) ask for 1-4 cpus and 512-8,192 MiB (at most
2 GiB a cpu) and run 60-180 s on a cpu of the pool's mean speed (work in MFlop per cpu: a
faster machine finishes sooner). Every submitter is a Unix account of its own.

- fill: G1, G2, O2 and O3 submit more than the pool holds; once it is full (90 % of the cpus
  running, or 60 s),
- arrival (time 0 of every figure): O1, the largest owner, arrives on the full pool;
- shift (`--shift-after`, 90 s): O4 arrives, and O3 and G1 withdraw their idle jobs (what
  runs finishes); the run ends `--duration` (180) s after the arrival.

Each side runs on a fresh pool with the same jobs (same seed):
- gridfair: the daemon as its systemd unit runs it (its own account, from a wheel-built
  venv, `daemon_command`), one of `GRIDFAIR` (`--gridfair` names one or several) every 2 s,
  safety `min_runtime = 0`, `preempt_cooldown = 0`, `max_vacates_per_cycle = 36`,
  `landing_timeout` = `--landing-cycles` (6) negotiation cycles; the pool runs
  configs/htcondor-pool.config (only gridfair's steered jobs start while its lease holds) and
  `PREEMPTION_REQUIREMENTS = False` (HTCondor never preempts on its own);
  With `--condor-now`, the daemon carries each preemption out as one `condor_now JOB VICTIM
  [VICTIM ...]` (`backend.htcondor.condor_now`: the victims' dynamic slots handed to the
  receiver on their claims, no negotiation between) on a pool whose claims are kept
  (`CONDOR_NOW_POOL`: `CLAIM_WORKLIFE = 1200`, which condor_now needs, and a dynamic slot
  takes only a job gridfair steered, so that a kept claim is not reused for its submitter's
  next job behind gridfair's back; with the daemon down, no job would start on a dynamic
  slot: a bench knob, not a pool's);
- htcondor: HTCondor alone, one of `HTCONDOR` (`--htcondor` names one or several).

Entitlement, the same for both sides, at every moment (in MFlops; P = the pool's power):
each user's demand d_u is the power it holds plus its idle jobs' cpus at the pool's mean
power per cpu; an owner is entitled to the power it provides, p_u, as far as it has demand,
and what is left, the surplus, is split evenly among the users who want more (max-min:
water-filling): e_u = min(d_u, p_u + L), with the level L such that the e_u add up to P
(every d_u when the demand is less than P). This is the promise of SDRF's order with the
owners' provided shares as entitlements (its share term is use minus entitlement) and owner
reclaim for an owner below its share. `share_error_level` judges by another promise, each
user at least the level and an owner at least its share: e_u = min(d_u, max(p_u, L)) (DRF's
progressive filling in power, with owners' floors; HTCondor's fair-share pie comes close).

Figures per run, from the pool's own job event log (every submitter's jobs write one):
- `share_error`: the time mean, from the arrival to the end, of sum_u |held_u - e_u| / P;
- `seconds_to_share`: from the arrival until every user with demand is within 10 % of its
  entitlement (or within one cpu of the slowest machine, 1,000 MFlops, where 10 % is less:
  jobs hold whole cpus) and stays so until the shift (null: not so at the shift);
  `seconds_to_share_after_shift` the same from the shift to the end;
- `vacates` (evicted runs), `lost_work_seconds` and `lost_cpu_seconds` (run time thrown away:
  no checkpointing), `completed_jobs`, all from the arrival to the end (`..._whole_run`: from
  the first submission); `vacates_per_completed`;
- gridfair only: `landed_fraction` (allocations the pool accepted, each attempt counted,
  whose job next started on the partitionable slot gridfair chose), the daemon's journal;
- the load average before and after.

`--save DIR` keeps each run's record (the event log's runs and lifetimes, the phases' times);
`--replay FILE...` computes the figures (and plots) again from saved records.

    .venv/bin/python bench/live_pool_showcase.py [--seeds 1 2 3] [--sides gridfair,htcondor]
        [--gridfair sdrf-owners] [--condor-now] [--htcondor groups-rank] [--json]
        [--plot-dir DIR] [--save DIR]

Needs root and HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only

from landing_watch import LandingWatch, keep_pool_logs  # noqa: E402

#: owner, cpus, MFlops per cpu (the pool of bench/owner_share_pslots.py)
MACHINES = (
    ("O1", 8, 4000), ("O1", 8, 2000),
    ("O2", 4, 4000), ("O2", 4, 1500), ("O2", 2, 2000),
    ("O3", 4, 2000), ("O3", 2, 1000),
    ("O4", 2, 4000), ("O4", 2, 2000),
)
GUESTS = ("G1", "G2")
MEMORY_PER_CPU = 2048
CPUS = sum(cpus for _, cpus, _ in MACHINES)
TOTAL_POWER = sum(cpus * per_cpu for _, cpus, per_cpu in MACHINES)
MEAN_PER_CPU = TOTAL_POWER / CPUS
#: The least power a job holds: one cpu of the slowest machine.
ONE_CPU = min(per_cpu for _, _, per_cpu in MACHINES)
TOLERANCE = 0.10
#: A job runs this many seconds (drawn uniformly) on a cpu of the pool's mean speed: 30-90
#: negotiation cycles, so that a start's latency (a cycle or two) is not most of a job.
JOB_SECONDS = (60.0, 180.0)
#: (phase, user, jobs submitted); every backlog outlasts the run.
BURSTS = (("fill", "G1", 40), ("fill", "G2", 40), ("fill", "O2", 30), ("fill", "O3", 30),
          ("arrival", "O1", 50), ("shift", "O4", 25))
#: Users whose idle jobs are withdrawn at the shift.
WITHDRAW = ("O3", "G1")
INTERVAL = 2.0  # the daemon's cycle and the pool's negotiation interval
#: The gridfair side's pool with `--condor-now`: claims kept (condor_now runs the receiver on
#: its victims' claims, coalesced; with CLAIM_WORKLIFE = 0 "given slot is not claimed"), and a
#: kept claim reused only for a job gridfair steered to the slot it is cut from (START's
#: steering clause, configs/htcondor-pool.config, then takes or refuses it).
CONDOR_NOW_POOL = ["CLAIM_WORKLIFE = 1200",
                   "START = $(START) && (MY.DynamicSlot =!= true || TARGET.GridfairSlot =!= "
                   "undefined)"]


def provided_power() -> dict[str, float]:
    provided: dict[str, float] = {}
    for owner, cpus, per_cpu in MACHINES:
        provided[owner] = provided.get(owner, 0.0) + cpus * per_cpu
    return provided


def provided_shares() -> dict[str, dict[str, float]]:
    """Each owner's share of the pool's cpus, memory and power (memory goes with cpus)."""
    shares: dict[str, dict[str, float]] = {}
    for owner, cpus, per_cpu in MACHINES:
        mine = shares.setdefault(owner, {"cpus": 0.0, "memory": 0.0, "power": 0.0})
        mine["cpus"] += cpus / CPUS
        mine["memory"] += cpus / CPUS
        mine["power"] += cpus * per_cpu / TOTAL_POWER
    return shares


# ----------------------------------------------------------------------------- the sides
def owner_entitlements() -> str:
    """SDRF's options making each owner's entitlement what it provides, per resource: the
    authors' form, whose share term is use minus entitlement (an owner below its share
    comes first, the surplus goes to whoever is least above its own)."""
    lines = ['form = "authors"', "[policy.options.resource_weights]"]
    for owner, shares in provided_shares().items():
        lines.append(f"{owner} = {{ " + ", ".join(f"{name} = {value:.6f}"
                                                   for name, value in shares.items()) + " }")
    return "\n".join(lines)


#: name -> (order, preempt, a function making its [policy.options] lines, what it is)
GRIDFAIR = {
    "sdrf-owners": ("sdrf", "reclaim", owner_entitlements,
                    "order sdrf, owners entitled to what they provide, preempt reclaim"),
    "sdrf": ("sdrf", "reclaim", lambda: "", "order sdrf (its defaults), preempt reclaim"),
    "reclaim": ("hosep", "reclaim", lambda: "", "--policy reclaim: order hosep, preempt "
                "reclaim"),
}

#: HTCondor-alone configurations aiming at the same entitlement (docs/results/live-pool.md,
#: "Showcase 2", cites the manual for each knob). Common to all: usage, fair share and quotas
#: counted in power (SLOT_WEIGHT), preemption considered, a partitionable slot's dynamic slots
#: preempted together for a job that needs them (ALLOW_PSLOT_PREEMPTION), every start
#: negotiated (no claim reuse, no leftovers of a claimed partitionable slot).
COMMON = ["SLOT_WEIGHT = Cpus * MFlops", "NEGOTIATOR_CONSIDER_PREEMPTION = True",
          "ALLOW_PSLOT_PREEMPTION = True", "CLAIM_WORKLIFE = 0",
          "CLAIM_PARTITIONABLE_LEFTOVERS = False"]
#: Each machine prefers its owner's jobs: the negotiator preempts for them by rank.
OWNER_RANK = ["RANK = 1000 * (TARGET.AcctGroupUser =?= MY.GridOwner)"]
#: Fair share that follows current use: priorities halve every 60 s, and a user whose
#: priority is 1.2 times better than the running job's takes its slot (the manual's
#: PREEMPTION_REQUIREMENTS example without its one-hour guard).
PRIORITY_PREEMPTION = ["PRIORITY_HALFLIFE = 60",
                       "PREEMPTION_REQUIREMENTS = RemoteUserPrio > SubmitterUserPrio * 1.2"]


def group_quotas(directory: Path) -> list[str]:
    """A group per user (the pool assigns it from a map of accounts, HTCondor's
    AssignAccountingGroup), quota = the power it provides (0 for guests), surplus accepted,
    over-quota groups preempted for under-quota ones."""
    provided = provided_power()
    users = [*provided, *GUESTS]
    groups = directory / "groups.map"
    groups.write_text("".join(f"* {user} group_{user}\n" for user in users))
    for path, mode in ((directory, 0o755), (groups, 0o644)):  # the schedd reads it
        path.chmod(mode)
    return [
        f"use FEATURE : AssignAccountingGroup({groups}, False)",
        "GROUP_NAMES = " + ", ".join(f"group_{user}" for user in users),
        *(f"GROUP_QUOTA_group_{user} = {provided.get(user, 0.0):g}" for user in users),
        "GROUP_ACCEPT_SURPLUS = True",
        "PREEMPTION_REQUIREMENTS = (SubmitterGroupResourcesInUse < SubmitterGroupQuota)"
        " && (RemoteGroupResourcesInUse > RemoteGroupQuota)",
    ]


#: name -> its knobs (given a directory for the files they name)
HTCONDOR = {
    "rank": lambda files: [*COMMON, *OWNER_RANK, "PREEMPTION_REQUIREMENTS = False"],
    "rank-prio": lambda files: [*COMMON, *OWNER_RANK, *PRIORITY_PREEMPTION],
    "groups": lambda files: [*COMMON, *group_quotas(files)],
    "groups-rank": lambda files: [*COMMON, *OWNER_RANK, *group_quotas(files)],
}


def scenario_jobs(seed: int) -> dict[tuple[str, str], list]:
    """(phase, user) -> its burst of JobSpecs, drawn from `seed` in BURSTS' order."""
    from tests.live.harness.personal_pool import JobSpec

    rng = random.Random(seed)
    bursts = {}
    for phase, user, count in BURSTS:
        jobs = []
        for _ in range(count):
            cpus = rng.choice((1, 1, 2, 2, 3, 4))
            memory = rng.choice([m for m in (512, 1024, 2048, 4096, 8192)
                                 if m <= cpus * MEMORY_PER_CPU])
            jobs.append(JobSpec(user, rng.uniform(*JOB_SECONDS) * MEAN_PER_CPU, cpus, memory))
        bursts[phase, user] = jobs
    return bursts


# ----------------------------------------------------------------------------- figures
#: How the surplus is shared: evenly over the owners' shares (`split`, the stated
#: entitlement), or up to a common level that owners' shares floor (`level`).
SPLIT, LEVEL = "split", "level"


def entitlements(provided: Mapping[str, float], demand: Mapping[str, float], total: float,
                 surplus: str = SPLIT) -> dict[str, float]:
    """Each user with demand: min(demand, provided + L) (`split`) or min(demand,
    max(provided, L)) (`level`), the level L making them add up to `total` (all the demand
    when the pool covers it)."""
    users = [user for user, wanted in demand.items() if wanted > 0]
    if sum(demand[user] for user in users) <= total:
        return {user: demand[user] for user in users}

    def given(level: float) -> dict[str, float]:
        return {user: min(demand[user], provided.get(user, 0.0) + level if surplus == SPLIT
                          else max(provided.get(user, 0.0), level)) for user in users}

    low, high = 0.0, total  # sum(given(low)) <= total < sum(given(high))
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if sum(given(middle).values()) <= total else (low, middle)
    return given(low)


@dataclasses.dataclass(frozen=True, slots=True)
class Moment:
    """The pool from `time` to the next moment: power held and entitled, per user."""

    time: float
    held: Mapping[str, float]
    entitled: Mapping[str, float]

    @property
    def error(self) -> float:
        """sum_u |held_u - e_u| over the pool's power."""
        users = set(self.held) | set(self.entitled)
        return sum(abs(self.held.get(user, 0.0) - self.entitled.get(user, 0.0))
                   for user in users) / TOTAL_POWER

    @property
    def within(self) -> bool:
        """Every user with demand within 10 % of its entitlement (or one slow cpu)."""
        return all(abs(self.held.get(user, 0.0) - entitled)
                   <= max(TOLERANCE * entitled, ONE_CPU)
                   for user, entitled in self.entitled.items())


@dataclasses.dataclass(frozen=True, slots=True)
class Submitted:
    """What the bench submitted as a job: whose, and how many cpus (and MiB) it asks for."""

    user: str
    cpus: int
    memory: int = 0  # MiB; 0 in records saved before it was kept


def timeline(runs: Sequence, lifetimes: Mapping, jobs: Mapping[str, Submitted],
             power_per_cpu: Mapping[str, float], until: float,
             surplus: str = SPLIT) -> list[Moment]:
    """The pool after every start, end, submission and removal up to `until`: each user's
    held power (its running jobs' cpus x their machine's power per cpu; `runs` name the
    machine's partitionable slot) and entitlement (`entitlements` of the held power plus the
    idle jobs' cpus x MEAN_PER_CPU)."""
    provided = provided_power()
    changes = sorted({run.start for run in runs} | {run.end for run in runs if run.end}
                     | {life.submitted for life in lifetimes.values()}
                     | {life.ended for life in lifetimes.values() if life.ended})
    moments = []
    for moment in (change for change in changes if change <= until):
        held: dict[str, float] = {}
        running = set()
        for run in runs:
            if run.start <= moment and (run.end is None or run.end > moment):
                running.add(run.job)
                held[run.user] = (held.get(run.user, 0.0)
                                  + jobs[run.job].cpus * power_per_cpu[run.slot])
        demand = dict(held)
        for job, life in lifetimes.items():
            if (job not in running and life.submitted <= moment
                    and (life.ended is None or life.ended > moment)):
                user = jobs[job].user
                demand[user] = demand.get(user, 0.0) + jobs[job].cpus * MEAN_PER_CPU
        moments.append(Moment(moment, held,
                              entitlements(provided, demand, TOTAL_POWER, surplus)))
    return moments


def pieces(moments: Sequence[Moment], since: float,
           until: float) -> list[tuple[float, float, Moment]]:
    """(from, to, state) covering [since, until]: the state at `since`, then each moment."""
    before = [moment for moment in moments if moment.time <= since]
    spans = [(since, before[-1])] if before else []
    spans += [(moment.time, moment) for moment in moments if since < moment.time < until]
    ends = [start for start, _ in spans[1:]] + [until]
    return [(start, end, state) for (start, state), end in zip(spans, ends, strict=True)]


def time_mean_error(moments: Sequence[Moment], since: float, until: float) -> float:
    """The share error's mean over [since, until] (each state held until the next moment)."""
    return sum(state.error * (end - start)
               for start, end, state in pieces(moments, since, until)) / (until - since)


def mean_shares(moments: Sequence[Moment], since: float, until: float,
                which: str) -> dict[str, float]:
    """Each user's held (or entitled) share of the power, time-averaged over the window."""
    totals: dict[str, float] = {}
    for start, end, state in pieces(moments, since, until):
        for user, power in getattr(state, which).items():
            totals[user] = totals.get(user, 0.0) + power * (end - start)
    return {user: round(total / (until - since) / TOTAL_POWER, 4)
            for user, total in sorted(totals.items())}


def seconds_to_share(moments: Sequence[Moment], since: float, until: float) -> float | None:
    """Seconds from `since` until every user with demand is within its tolerance and stays
    so until `until`; None if it is not so then."""
    settled = None
    for start, _, state in pieces(moments, since, until):
        if not state.within:
            settled = None
        elif settled is None:
            settled = start
    return None if settled is None else settled - since


# ----------------------------------------------------------------------------- one run
@dataclasses.dataclass
class Record:
    """What one run of one side left: the event log's runs (on partitionable slots) and job
    lifetimes, what was submitted, the phases' times, the daemon's landing and the load."""

    side: str
    config: str  # the configuration's name
    described: str  # what the side ran, knob by knob
    seed: int
    runs: list
    lifetimes: dict
    jobs: dict
    power_per_cpu: dict
    started: float
    arrival: float
    shift: float
    until: float
    fill_seconds: float
    load_before: list
    load_after: list
    landing: dict | None = None
    daemon_directory: str | None = None

    def save(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.side}-{self.config}-seed{self.seed}.json"
        path.write_text(json.dumps(dataclasses.asdict(self)))
        return path

    @classmethod
    def load(cls, path: Path) -> Record:
        from tests.harness.pool_record import Lifetime, Run

        raw = json.loads(path.read_text())
        raw["runs"] = [Run(**run) for run in raw["runs"]]
        raw["lifetimes"] = {job: Lifetime(**life) for job, life in raw["lifetimes"].items()}
        raw["jobs"] = {job: Submitted(**job_) for job, job_ in raw["jobs"].items()}
        return cls(**raw)


def daemon_config(directory: Path, collector: str, name: str, landing_timeout: float,
                  condor_now: str = "") -> None:
    """The daemon's gridfair.toml for policy `name`; `condor_now`: the program's path (empty:
    vacate, then steer)."""
    order, preempt, options, _ = GRIDFAIR[name]
    (directory / "gridfair.toml").write_text(f"""
[daemon]
store = "state.db"
interval = {INTERVAL}
log_file = "daemon.log"
[safety]
min_runtime = 0
max_vacates_per_cycle = 36
preempt_cooldown = 0
max_snapshot_age = 60
landing_timeout = {landing_timeout}
[backend]
kind = "htcondor"
[backend.htcondor]
collector = "{collector}"
condor_now = "{condor_now}"
[policy]
name = "reclaim"
order = "{order}"
preempt = "{preempt}"
[policy.options]
{options()}
""")


def wait_for_lease(pool, timeout: float = 60.0) -> None:
    """Until the daemon holds its lease on the negotiator (its first cycle is done)."""
    def held() -> bool:
        done = pool.run_tool(["condor_config_val", "-negotiator", "GRIDFAIR_LEASE_UNTIL"],
                             check=False)
        return done.returncode == 0 and float(done.stdout.strip() or 0) > time.time()

    pool.wait_until(held, timeout)


def wait_until_full(pool, timeout: float = 60.0) -> float:
    """Until at most 10 % of the cpus are free (or `timeout`); the seconds it took."""
    started = time.monotonic()
    with_room = "PartitionableSlot =?= true"
    with contextlib.suppress(TimeoutError):
        pool.wait_until(lambda: sum(int(row[0]) for row in pool.status(
            "Cpus", constraint=with_room)) <= 0.1 * CPUS, timeout)
    return time.monotonic() - started


def run_side(side: str, config: str, seed: int, options: argparse.Namespace,
             python: Path | None) -> Record:
    """One side on a fresh pool: fill, O1's arrival, the shift; its record."""
    from gridfair.ad_views import whole_slot
    from tests.harness.pool_record import landing, read_lifetimes, read_runs
    from tests.live.harness.personal_pool import (
        PersonalPool,
        SlotSpec,
        daemon_command,
        daemon_directory,
    )

    slots = [SlotSpec(owner, cpus * per_cpu, cpus, cpus * MEMORY_PER_CPU)
             for owner, cpus, per_cpu in MACHINES]
    bursts = scenario_jobs(seed)
    files = Path(tempfile.mkdtemp(prefix="gridfair-showcase-", dir="/var/tmp"))
    condor_now = side == "gridfair" and getattr(options, "condor_now", False)
    if side == "gridfair":
        pool_config = [*(ROOT / "configs" / "htcondor-pool.config").read_text().splitlines(),
                       "PREEMPTION_REQUIREMENTS = False", *(CONDOR_NOW_POOL if condor_now else ())]
        described = (f"{config}: the gridfair daemon as its account, {GRIDFAIR[config][3]}, "
                     f"every {INTERVAL:g} s; configs/htcondor-pool.config (only steered jobs "
                     "start), PREEMPTION_REQUIREMENTS = False"
                     + ("; condor_now handovers, " + ", ".join(CONDOR_NOW_POOL)
                        if condor_now else ""))
        if condor_now:
            config += "+condor-now"
    else:
        pool_config = HTCONDOR[config](files)
        described = f"{config}: " + "; ".join(line.replace(str(files), "DIR")
                                              for line in pool_config)
    directory = daemon_directory() if side == "gridfair" else None
    load_before = os.getloadavg()
    try:
        with PersonalPool(slots, layout="partitionable", interval=int(INTERVAL),
                          extra_config=pool_config) as pool:
            power_per_cpu = {name: float(mflops) for name, mflops in pool.status(
                "Name", "MFlops", constraint="PartitionableSlot =?= true")}
            event_log = pool.shared_file("events.log")  # every submitter's jobs write it
            extra = [f"log = {event_log}"]
            jobs: dict[str, Submitted] = {}

            def submit(phase: str) -> None:
                for (when, user), specs in bursts.items():
                    if when == phase:
                        ids = pool.submit_cluster(specs, extra=extra)
                        jobs.update({job: Submitted(user, spec.cpus)
                                     for job, spec in zip(ids, specs, strict=True)})

            daemon = None
            if directory is not None:
                daemon_config(directory, pool.collector_host, config.removesuffix("+condor-now"),
                              options.landing_cycles * INTERVAL,
                              pool.tool("condor_now") if condor_now else "")
                daemon = subprocess.Popen(daemon_command(python), cwd=directory,
                                          env=pool.daemon_environment(),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wait_for_lease(pool)
            watch = (LandingWatch(directory / "state.db", pool.collector_host)
                     if directory is not None and options.save else contextlib.nullcontext())
            try:
                with watch:
                    started = time.time()
                    submit("fill")
                    fill_seconds = wait_until_full(pool)
                    time.sleep(2 * INTERVAL)
                    arrival = time.time()
                    submit("arrival")
                    time.sleep(max(0.0, arrival + options.shift_after - time.time()))
                    shift = time.time()
                    submit("shift")
                    pool.run_tool(["condor_rm", "-constraint", "JobStatus == 1 && ("
                                   + " || ".join(f'Owner == "{user}"' for user in WITHDRAW)
                                   + ")"])
                    time.sleep(max(0.0, arrival + options.duration - time.time()))
                    until = time.time()
            finally:
                if daemon is not None:
                    daemon.send_signal(signal.SIGTERM)
                    daemon.wait(timeout=60)
            if isinstance(watch, LandingWatch):  # the verdicts once the daemon is done
                kept = Path(options.save) / f"{side}-{config}-seed{seed}"
                watch.save(kept.with_name(kept.name + "-landing-watch.json"))
                keep_pool_logs(pool.directory, kept.with_name(kept.name + "-pool-logs"))
            users = {job: submitted.user for job, submitted in jobs.items()}
            runs = [dataclasses.replace(run, slot=whole_slot(run.slot))
                    for run in read_runs(event_log, users, until)]
            lifetimes = read_lifetimes(event_log)
    finally:
        shutil.rmtree(files, ignore_errors=True)
    record = Record(side, config, described, seed, runs, lifetimes, jobs, power_per_cpu,
                    started, arrival, shift, until, round(fill_seconds, 1),
                    [round(value, 2) for value in load_before],
                    [round(value, 2) for value in os.getloadavg()])
    if directory is not None:
        landed = landing(directory / "state.db", runs, 2 * INTERVAL)
        record.landing = {"decided": landed.decided, "landed": landed.landed,
                          "landed_within_two_cycles": landed.landed_in_time,
                          "journal": dict(landed.journal)}
        if options.keep_state:
            record.daemon_directory = str(directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return record


def figures(record: Record, plot_dir: str | None = None) -> dict[str, object]:
    """The run's figures (module docstring), and its picture in `plot_dir`."""
    moments = timeline(record.runs, record.lifetimes, record.jobs, record.power_per_cpu,
                       record.until)
    arrival, shift, until = record.arrival, record.shift, record.until

    def counted(since: float) -> dict[str, float]:
        evicted = [run for run in record.runs
                   if run.evicted and run.end and since <= run.end <= until]
        done = sum(1 for life in record.lifetimes.values()
                   if life.completed and life.ended and since <= life.ended <= until)
        return {"vacates": len(evicted), "completed_jobs": done,
                "lost_work_seconds": round(sum(run.end - run.start for run in evicted), 1),
                "lost_cpu_seconds": round(sum((run.end - run.start) * record.jobs[run.job].cpus
                                              for run in evicted), 1)}

    window = counted(arrival)
    level = timeline(record.runs, record.lifetimes, record.jobs, record.power_per_cpu,
                     until, LEVEL)
    result: dict[str, object] = {
        "side": record.side, "seed": record.seed,
        "share_error": round(time_mean_error(moments, arrival, until), 4),
        "seconds_to_share": seconds_to_share(moments, arrival, shift),
        "seconds_to_share_after_shift": seconds_to_share(moments, shift, until),
        **window,
        "vacates_per_completed": (round(window["vacates"] / window["completed_jobs"], 3)
                                  if window["completed_jobs"] else None),
        "config": record.described,
        "share_error_level": round(time_mean_error(level, arrival, until), 4),
        **{f"{key}_whole_run": value for key, value in counted(record.started).items()},
        "fill_seconds": record.fill_seconds,
        "mean_held_share": mean_shares(moments, arrival, until, "held"),
        "mean_entitled_share": mean_shares(moments, arrival, until, "entitled"),
        "loadavg_before": record.load_before,
        "loadavg_after": record.load_after,
    }
    if record.landing is not None:
        decided = record.landing["decided"]
        result["landed_fraction"] = (round(record.landing["landed"] / decided, 3)
                                     if decided else None)
        result["allocations"] = decided
        result["landed_within_two_cycles"] = record.landing["landed_within_two_cycles"]
        result["journal"] = record.landing["journal"]
    if record.daemon_directory:
        result["daemon_directory"] = record.daemon_directory
    if plot_dir:
        plot(moments, arrival, shift, until,
             Path(plot_dir) / f"{record.side}-{record.config}-seed{record.seed}.png",
             f"{record.side} ({record.config}), seed {record.seed}: share error "
             f"{result['share_error']:.3f}")
    return result


def plot(moments: Sequence[Moment], arrival: float, shift: float, until: float, path: Path,
         title: str) -> None:
    """Each user's held share (solid) and entitlement (dotted) over time, from the arrival."""
    users = sorted({user for moment in moments for user in (*moment.held, *moment.entitled)})
    plot_steps(moments, users, lambda moment, user: moment.held.get(user, 0.0) / TOTAL_POWER,
               lambda moment, user: moment.entitled.get(user, 0.0) / TOTAL_POWER,
               arrival, until, [(0.0, "O1 arrives"), (shift - arrival, "shift")], path,
               title + " (dotted: entitled)", top=0.65, xlabel="seconds since O1 arrived",
               ylabel="share of the pool's MFlops")


def plot_steps(moments: Sequence[Any], users: Sequence[str],
               held: Callable[[Any, str], float], dotted: Callable[[Any, str], float],
               arrival: float, until: float, marks: Sequence[tuple[float, str]], path: Path,
               title: str, *, top: float, xlabel: str, ylabel: str) -> None:
    """A showcase's picture: per user, `held` (solid) and `dotted` as steps over time from
    the arrival, with vertical `marks` (time since the arrival, label)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    shown = [moment for moment in moments if moment.time <= until]
    times = [moment.time - arrival for moment in shown] + [until - arrival]
    figure, axis = pyplot.subplots(figsize=(7.5, 3.6), dpi=80)
    for user in users:
        solid = [held(moment, user) for moment in shown]
        dots = [dotted(moment, user) for moment in shown]
        line, = axis.step(times, [*solid, solid[-1]], where="post", label=user, linewidth=1.4)
        axis.step(times, [*dots, dots[-1]], where="post", color=line.get_color(),
                  linestyle=":", linewidth=1.2)
    for at, label in marks:
        axis.axvline(at, color="grey", linewidth=0.8)
        axis.text(at, 0.97, f" {label}", transform=axis.get_xaxis_transform(), fontsize=8,
                  va="top")
    axis.set_xlim(min(-20.0, times[0]), until - arrival)
    axis.set_ylim(0, top)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.set_title(title, fontsize=9)
    axis.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    pyplot.close(figure)


# ----------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--sides", default="gridfair,htcondor",
                        help="comma-separated: gridfair, htcondor")
    parser.add_argument("--gridfair", default="sdrf-owners",
                        help=f"comma-separated gridfair policies ({', '.join(GRIDFAIR)})")
    parser.add_argument("--condor-now", action="store_true",
                        help="the gridfair side hands each preemption's slot over with "
                        "condor_now, on a pool whose claims are kept (CONDOR_NOW_POOL)")
    parser.add_argument("--htcondor", default="groups-rank",
                        help=f"comma-separated HTCondor configurations ({', '.join(HTCONDOR)})")
    parser.add_argument("--landing-cycles", type=float, default=6.0,
                        help="gridfair's landing_timeout in negotiation cycles (a start on a "
                        "partitionable slot takes 2-3 cycles after the steering: negotiation, "
                        "claim, activation, and about 1 s until its dynamic slot's ad)")
    parser.add_argument("--shift-after", type=float, default=90.0,
                        help="seconds from O1's arrival to the shift of demand")
    parser.add_argument("--duration", type=float, default=180.0,
                        help="seconds from O1's arrival to the end")
    parser.add_argument("--plot-dir", help="one PNG per run here")
    parser.add_argument("--save", metavar="DIR", help="each run's record here (JSON)")
    parser.add_argument("--replay", nargs="+", metavar="FILE",
                        help="figures from saved records instead of new runs")
    parser.add_argument("--keep-state", action="store_true",
                        help="keep the daemon's directory (store, log) for `gridfair explain`")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    if options.replay:
        records = [Record.load(Path(path)) for path in options.replay]
    else:
        records = run_all(parser, options)
    runs = [figures(record, options.plot_dir) for record in records]
    if options.json:
        print(json.dumps({"runs": runs}, indent=1))
        return
    print_table(runs)


def run_all(parser: argparse.ArgumentParser, options: argparse.Namespace,
            run: Callable[..., Record] | None = None,
            configurations: Mapping[str, Mapping] | None = None) -> list[Record]:
    """Every (side, configuration) of `--sides` on every seed, each on a fresh pool, the
    daemon installed once: `run(side, name, seed, options, python)` (this showcase's
    `run_side` unless given), the names checked against `configurations` (side -> the
    configurations it knows; these GRIDFAIR and HTCONDOR unless given)."""
    run = run or run_side
    configurations = configurations or {"gridfair": GRIDFAIR, "htcondor": HTCONDOR}
    sides = [side for side in ("gridfair", "htcondor") if side in options.sides.split(",")]
    asked = {"gridfair": options.gridfair.split(","), "htcondor": options.htcondor.split(",")}
    unknown = [name for side in sides for name in asked[side]
               if name not in configurations[side]]
    if not sides or unknown:
        parser.error(f"--sides {options.sides!r}: gridfair and/or htcondor; --gridfair: "
                     f"{', '.join(configurations['gridfair'])}; --htcondor: "
                     f"{', '.join(configurations['htcondor'])}")
    plan = [(side, name) for side in sides for name in asked[side]]
    install = Path(tempfile.mkdtemp(prefix="gridfair-install-", dir="/var/tmp"))
    records = []
    try:
        python = None
        if "gridfair" in sides:
            from tests.live.harness.personal_pool import install_daemon

            python = install_daemon(ROOT, install)
        for seed in options.seeds:
            for side, name in plan:
                records.append(run(side, name, seed, options, python))
                if options.save:
                    records[-1].save(Path(options.save))
                print(f"done: {side} {name} seed {seed}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(install, ignore_errors=True)
    return records


def print_table(runs: Iterable[Mapping[str, object]]) -> None:
    print(f"{'side':<24} {'seed':>4} {'share err':>9} {'(level)':>8} {'to share s':>10} "
          f"{'after shift':>11} {'vacates':>7} {'done':>5} {'lost cpu s':>10} {'landed':>6}  "
          "load (1 min)")
    for run in runs:
        landed = run.get("landed_fraction")
        print(f"{run['side'] + ' ' + str(run['config']).split(':')[0]:<24} {run['seed']:>4} "
              f"{run['share_error']:>9.4f} {run['share_error_level']:>8.4f} "
              f"{_seconds(run['seconds_to_share']):>10} "
              f"{_seconds(run['seconds_to_share_after_shift']):>11} {run['vacates']:>7} "
              f"{run['completed_jobs']:>5} {run['lost_cpu_seconds']:>10.0f} "
              f"{'-' if landed is None else f'{landed:.3f}':>6}  "
              f"{run['loadavg_before'][0]:.1f}-{run['loadavg_after'][0]:.1f}")


def _seconds(value: object) -> str:
    return "never" if value is None else f"{value:.0f}"


if __name__ == "__main__":
    main()
