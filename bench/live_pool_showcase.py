"""Showcase 2: owner share on a live partitionable pool, gridfair's daemon against HTCondor alone.

The pool: 9 machines, each one partitionable slot (`PersonalPool(layout="partitionable")`) of
2-8 cpus at 1,000-4,000 MFlops a cpu and 2 GiB a cpu, owned by four owners of different sizes
(O1 16 cpus / 48,000 MFlops = 50 % of the power, O2 10 / 26,000, O3 6 / 10,000, O4 4 /
12,000), and two users who own nothing (G1, G2): the pool of bench/owner_share_pslots.py, the
simulated version. Jobs (drawn from the seed) ask for 1-4 cpus and 512-8,192 MiB (at most
2 GiB a cpu) and run 20-60 s on a cpu of the pool's mean speed (work in MFlop per cpu: a
faster machine finishes sooner). Every submitter is a Unix account of its own.

- fill: G1, G2, O2 and O3 submit more than the pool holds; once it is full (90 % of the cpus
  running, or 60 s),
- arrival (time 0 of every figure): O1, the largest owner, arrives on the full pool;
- shift (`--shift-after`, 60 s): O4 arrives, and O3 and G1 withdraw their idle jobs (what
  runs finishes); the run ends `--duration` (150) s after the arrival.

Each side runs on a fresh pool with the same jobs (same seed):
- gridfair: the daemon as its systemd unit runs it (its own account, from a wheel-built
  venv, `daemon_command`), order `--order` (sdrf) and preemption `--preempt` (reclaim) every
  2 s, safety `min_runtime = 0`, `preempt_cooldown = 0`, `max_vacates_per_cycle = 36`,
  `landing_timeout` = `--landing-cycles` negotiation cycles; the pool runs
  configs/htcondor-pool.config (only gridfair's steered jobs start while its lease holds) and
  `PREEMPTION_REQUIREMENTS = False` (HTCondor never preempts on its own);
- htcondor: HTCondor alone, one of `HTCONDOR` (below; `--htcondor` names one or several).

Entitlement, the same for both sides, at every moment (in MFlops; P = the pool's power):
each user's demand d_u is the power it holds plus its idle jobs' cpus at the pool's mean
power per cpu; an owner is guaranteed its provided power p_u (as far as it has demand), and
the rest is shared max-min (water-filling, as DRF's progressive filling does in one
resource): e_u = min(d_u, max(p_u, L)) with the level L such that the e_u add up to P (every
d_u when the demand is less than P). A user who owns nothing gets the level, an owner the
larger of its share and the level.

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

    .venv/bin/python bench/live_pool_showcase.py [--seeds 1 2 3] [--sides gridfair,htcondor]
        [--htcondor rank-prio] [--order sdrf] [--preempt reclaim] [--json] [--plot-dir DIR]

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
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: owner, cpus, MFlops per cpu (the pool of bench/owner_share_pslots.py)
MACHINES = (
    ("O1", 8, 4000), ("O1", 8, 2000),
    ("O2", 4, 4000), ("O2", 4, 1500), ("O2", 2, 2000),
    ("O3", 4, 2000), ("O3", 2, 1000),
    ("O4", 2, 4000), ("O4", 2, 2000),
)
GUESTS = ("G1", "G2")
MEMORY_PER_CPU = 2048
TOTAL_POWER = sum(cpus * per_cpu for _, cpus, per_cpu in MACHINES)
MEAN_PER_CPU = TOTAL_POWER / sum(cpus for _, cpus, _ in MACHINES)
#: The least power a job holds: one cpu of the slowest machine.
ONE_CPU = min(per_cpu for _, _, per_cpu in MACHINES)
TOLERANCE = 0.10
#: (phase, user, jobs submitted); every backlog outlasts the run.
BURSTS = (("fill", "G1", 40), ("fill", "G2", 40), ("fill", "O2", 30), ("fill", "O3", 30),
          ("arrival", "O1", 50), ("shift", "O4", 25))
#: Users whose idle jobs are withdrawn at the shift.
WITHDRAW = ("O3", "G1")
INTERVAL = 2.0  # the daemon's cycle and the pool's negotiation interval

#: HTCondor-alone configurations aiming at the same entitlement (docs/live-pool.md,
#: "Showcase 2", cites the manual for each knob). Common to all: usage, fair share and quotas
#: counted in power (SLOT_WEIGHT), preemption considered, a partitionable slot's dynamic slots
#: preempted together for a job that needs them (ALLOW_PSLOT_PREEMPTION), every start
#: negotiated (no claim reuse).
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


def group_quotas() -> list[str]:
    """A group per user, quota = the power it provides (0 for guests), surplus accepted,
    over-quota groups preempted for under-quota ones."""
    from gridfair.daemon.backends.personal_pool import ACCOUNTING_PREFIX

    provided = provided_power()
    users = [*provided, *GUESTS]
    return [
        f"GROUP_NAMES = {ACCOUNTING_PREFIX}, "
        + ", ".join(f"{ACCOUNTING_PREFIX}.{user}" for user in users),
        f"GROUP_QUOTA_{ACCOUNTING_PREFIX} = {TOTAL_POWER:g}",
        *(f"GROUP_QUOTA_{ACCOUNTING_PREFIX}.{user} = {provided.get(user, 0.0):g}"
          for user in users),
        "GROUP_ACCEPT_SURPLUS = True",
        "PREEMPTION_REQUIREMENTS = (SubmitterGroupResourcesInUse < SubmitterGroupQuota)"
        " && (RemoteGroupResourcesInUse > RemoteGroupQuota)",
    ]


HTCONDOR = {
    "rank": lambda: [*COMMON, *OWNER_RANK, "PREEMPTION_REQUIREMENTS = False"],
    "rank-prio": lambda: [*COMMON, *OWNER_RANK, *PRIORITY_PREEMPTION],
    "groups": lambda: [*COMMON, *group_quotas()],
    "groups-rank": lambda: [*COMMON, *OWNER_RANK, *group_quotas()],
}


def provided_power() -> dict[str, float]:
    provided: dict[str, float] = {}
    for owner, cpus, per_cpu in MACHINES:
        provided[owner] = provided.get(owner, 0.0) + cpus * per_cpu
    return provided


def scenario_jobs(seed: int) -> dict[tuple[str, str], list]:
    """(phase, user) -> its burst of JobSpecs, drawn from `seed` in BURSTS' order."""
    from gridfair.daemon.backends.personal_pool import JobSpec

    rng = random.Random(seed)
    bursts = {}
    for phase, user, count in BURSTS:
        jobs = []
        for _ in range(count):
            cpus = rng.choice((1, 1, 2, 2, 3, 4))
            memory = rng.choice([m for m in (512, 1024, 2048, 4096, 8192)
                                 if m <= cpus * MEMORY_PER_CPU])
            jobs.append(JobSpec(user, rng.uniform(20.0, 60.0) * MEAN_PER_CPU, cpus, memory))
        bursts[phase, user] = jobs
    return bursts


# ----------------------------------------------------------------------------- figures
def entitlements(provided: Mapping[str, float], demand: Mapping[str, float],
                 total: float) -> dict[str, float]:
    """Each user with demand: min(demand, max(provided, L)), the level L making them add up
    to `total` (all the demand when the pool covers it)."""
    users = [user for user, wanted in demand.items() if wanted > 0]
    if sum(demand[user] for user in users) <= total:
        return {user: demand[user] for user in users}

    def given(level: float) -> dict[str, float]:
        return {user: min(demand[user], max(provided.get(user, 0.0), level)) for user in users}

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
    """What the bench submitted as a job: whose, and how many cpus it asks for."""

    user: str
    cpus: int


def timeline(runs: Sequence, lifetimes: Mapping, jobs: Mapping[str, Submitted],
             power_per_cpu: Mapping[str, float], until: float) -> list[Moment]:
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
        moments.append(Moment(moment, held, entitlements(provided, demand, TOTAL_POWER)))
    return moments


def state_at(moments: Sequence[Moment], time_: float) -> Moment | None:
    """The last moment at or before `time_`."""
    before = [moment for moment in moments if moment.time <= time_]
    return before[-1] if before else None


def time_mean_error(moments: Sequence[Moment], since: float, until: float) -> float:
    """The share error's mean over [since, until] (each state held until the next moment)."""
    start = state_at(moments, since)
    pieces = ([] if start is None else [(since, start.error)]) + [
        (moment.time, moment.error) for moment in moments if since < moment.time < until]
    total = sum(error * (later - at) for (at, error), (later, _)
                in zip(pieces, [*pieces[1:], (until, 0.0)], strict=True))
    return total / (until - since)


def seconds_to_share(moments: Sequence[Moment], since: float, until: float) -> float | None:
    """Seconds from `since` until every user with demand is within its tolerance and stays
    so until `until`; None if it is not so then."""
    start = state_at(moments, since)
    settled = since if start is not None and start.within else None
    for moment in moments:
        if since < moment.time < until:
            if not moment.within:
                settled = None
            elif settled is None:
                settled = moment.time
    return None if settled is None else settled - since


# ----------------------------------------------------------------------------- one run
def daemon_config(directory: Path, collector: str, order: str, preempt: str,
                  landing_timeout: float) -> None:
    (directory / "gridfair.toml").write_text(f"""
[daemon]
store = "state.db"
interval = {INTERVAL}
log_file = "daemon.log"
[policy]
name = "reclaim"
order = "{order}"
preempt = "{preempt}"
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
    cpus = sum(cpus for _, cpus, _ in MACHINES)
    started = time.monotonic()
    with_room = "PartitionableSlot =?= true"
    with contextlib.suppress(TimeoutError):
        pool.wait_until(lambda: sum(int(row[0]) for row in pool.status(
            "Cpus", constraint=with_room)) <= 0.1 * cpus, timeout)
    return time.monotonic() - started


def run_side(side: str, config: str, seed: int, options: argparse.Namespace,
             python: Path | None) -> dict[str, object]:
    from gridfair.classads.views import whole_slot
    from gridfair.daemon.backends.personal_pool import (
        PersonalPool,
        SlotSpec,
        daemon_command,
        daemon_directory,
    )
    from gridfair.daemon.pool_record import landing, read_lifetimes, read_runs

    slots = [SlotSpec(owner, cpus * per_cpu, cpus, cpus * MEMORY_PER_CPU)
             for owner, cpus, per_cpu in MACHINES]
    bursts = scenario_jobs(seed)
    two_cycles = 2 * INTERVAL
    if side == "gridfair":
        pool_config = [*(ROOT / "configs" / "htcondor-pool.config").read_text().splitlines(),
                       "PREEMPTION_REQUIREMENTS = False"]
        described = (f"gridfair daemon as its account: order {options.order}, preempt "
                     f"{options.preempt}, every {INTERVAL:g} s; configs/htcondor-pool.config "
                     f"(only steered jobs start), PREEMPTION_REQUIREMENTS = False")
    else:
        pool_config = HTCONDOR[config]()
        described = f"{config}: " + "; ".join(pool_config)
    directory = daemon_directory() if side == "gridfair" else None
    load_before = os.getloadavg()
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
            daemon_config(directory, pool.collector_host, options.order, options.preempt,
                          options.landing_cycles * INTERVAL)
            daemon = subprocess.Popen(daemon_command(python), cwd=directory,
                                      env=pool.daemon_environment(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_lease(pool)
        try:
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
                           + " || ".join(f'Owner == "{user}"' for user in WITHDRAW) + ")"])
            time.sleep(max(0.0, arrival + options.duration - time.time()))
            until = time.time()
        finally:
            if daemon is not None:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(timeout=60)
        users = {job: submitted.user for job, submitted in jobs.items()}
        runs = [dataclasses.replace(run, slot=whole_slot(run.slot))
                for run in read_runs(event_log, users, until)]
        lifetimes = read_lifetimes(event_log)
    load_after = os.getloadavg()
    moments = timeline(runs, lifetimes, jobs, power_per_cpu, until)

    def counted(since: float) -> dict[str, float]:
        evicted = [run for run in runs if run.evicted and run.end and since <= run.end <= until]
        done = sum(1 for life in lifetimes.values()
                   if life.completed and life.ended and since <= life.ended <= until)
        return {"vacates": len(evicted), "completed_jobs": done,
                "lost_work_seconds": round(sum(run.end - run.start for run in evicted), 1),
                "lost_cpu_seconds": round(sum((run.end - run.start) * jobs[run.job].cpus
                                              for run in evicted), 1)}

    window = counted(arrival)
    figures: dict[str, object] = {
        "side": side, "seed": seed,
        "share_error": round(time_mean_error(moments, arrival, until), 4),
        "seconds_to_share": seconds_to_share(moments, arrival, shift),
        "seconds_to_share_after_shift": seconds_to_share(moments, shift, until),
        **window,
        "vacates_per_completed": (round(window["vacates"] / window["completed_jobs"], 3)
                                  if window["completed_jobs"] else None),
        "config": described,
        **{f"{key}_whole_run": value for key, value in counted(started).items()},
        "fill_seconds": round(fill_seconds, 1),
        "mean_held_share": mean_shares(moments, arrival, until, "held"),
        "mean_entitled_share": mean_shares(moments, arrival, until, "entitled"),
        "loadavg_before": [round(value, 2) for value in load_before],
        "loadavg_after": [round(value, 2) for value in load_after],
    }
    if directory is not None:
        landed = landing(directory / "state.db", runs, two_cycles)
        figures["landed_fraction"] = (round(landed.landed / landed.decided, 3)
                                      if landed.decided else None)
        figures["allocations"] = landed.decided
        figures["landed_within_two_cycles"] = landed.landed_in_time
        figures["journal"] = dict(landed.journal)
        if options.keep_state:
            figures["daemon_directory"] = str(directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    if options.plot_dir:
        name = f"{side}-{config}-seed{seed}.png" if side == "htcondor" else \
            f"gridfair-seed{seed}.png"
        plot(moments, arrival, shift, until, Path(options.plot_dir) / name,
             f"{side} ({config}), seed {seed}: share error {figures['share_error']:.3f}")
    return figures


def mean_shares(moments: Sequence[Moment], since: float, until: float,
                which: str) -> dict[str, float]:
    """Each user's held (or entitled) share of the power, time-averaged over the window."""
    start = state_at(moments, since)
    pieces = ([] if start is None else [(since, start)]) + [
        (moment.time, moment) for moment in moments if since < moment.time < until]
    totals: dict[str, float] = {}
    for (at, moment), (later, _) in zip(pieces, [*pieces[1:], (until, None)], strict=True):
        for user, power in getattr(moment, which).items():
            totals[user] = totals.get(user, 0.0) + power * (later - at)
    return {user: round(total / (until - since) / TOTAL_POWER, 4)
            for user, total in sorted(totals.items())}


def plot(moments: Sequence[Moment], arrival: float, shift: float, until: float, path: Path,
         title: str) -> None:
    """Each user's held share (solid) and entitlement (dotted) over time, from the arrival."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    users = sorted({user for moment in moments for user in (*moment.held, *moment.entitled)})
    shown = [moment for moment in moments if moment.time <= until]
    times = [moment.time - arrival for moment in shown] + [until - arrival]
    figure, axis = pyplot.subplots(figsize=(7, 3.6), dpi=80)
    for user in users:
        held = [moment.held.get(user, 0.0) / TOTAL_POWER for moment in shown]
        entitled = [moment.entitled.get(user, 0.0) / TOTAL_POWER for moment in shown]
        line, = axis.step(times, [*held, held[-1]], where="post", label=user, linewidth=1.4)
        axis.step(times, [*entitled, entitled[-1]], where="post", color=line.get_color(),
                  linestyle=":", linewidth=1.2)
    for at, label in ((0.0, "O1 arrives"), (shift - arrival, "shift")):
        axis.axvline(at, color="grey", linewidth=0.8)
        axis.text(at, 0.97, f" {label}", transform=axis.get_xaxis_transform(), fontsize=8,
                  va="top")
    axis.set_xlim(min(-20.0, times[0]), until - arrival)
    axis.set_ylim(0, 0.6)
    axis.set_xlabel("seconds since O1 arrived")
    axis.set_ylabel("share of the pool's MFlops")
    axis.set_title(title + " (dotted: entitled)", fontsize=9)
    axis.legend(fontsize=7, ncol=3, loc="upper right", bbox_to_anchor=(1.0, 0.9))
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
    parser.add_argument("--htcondor", default="rank-prio",
                        help=f"comma-separated HTCondor configurations ({', '.join(HTCONDOR)})")
    parser.add_argument("--order", default="sdrf", help="gridfair's order stage")
    parser.add_argument("--preempt", default="reclaim", help="gridfair's preemption stage")
    parser.add_argument("--landing-cycles", type=float, default=2.0,
                        help="gridfair's landing_timeout in negotiation cycles")
    parser.add_argument("--shift-after", type=float, default=60.0,
                        help="seconds from O1's arrival to the shift of demand")
    parser.add_argument("--duration", type=float, default=150.0,
                        help="seconds from O1's arrival to the end")
    parser.add_argument("--plot-dir", help="one PNG per run here")
    parser.add_argument("--keep-state", action="store_true",
                        help="keep the daemon's directory (store, log) for `gridfair explain`")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    sides = [side for side in ("gridfair", "htcondor") if side in options.sides.split(",")]
    configs = options.htcondor.split(",")
    unknown = [name for name in configs if name not in HTCONDOR]
    if not sides or unknown:
        parser.error(f"--sides {options.sides!r} / --htcondor {options.htcondor!r}: sides are "
                     f"gridfair and htcondor, configurations {', '.join(HTCONDOR)}")
    plan = [(side, config) for side in sides
            for config in (configs if side == "htcondor" else ["gridfair"])]
    install = Path(tempfile.mkdtemp(prefix="gridfair-install-", dir="/var/tmp"))
    try:
        python = None
        if "gridfair" in sides:
            from gridfair.daemon.backends.personal_pool import install_daemon

            python = install_daemon(ROOT, install)
        runs = [run_side(side, config, seed, options, python)
                for seed in options.seeds for side, config in plan]
    finally:
        shutil.rmtree(install, ignore_errors=True)
    if options.json:
        print(json.dumps({"runs": runs}, indent=1))
        return
    print_table(runs)


def print_table(runs: Iterable[Mapping[str, object]]) -> None:
    print(f"{'side':<22} {'seed':>4} {'share err':>9} {'to share s':>10} {'after shift':>11} "
          f"{'vacates':>7} {'done':>5} {'lost cpu s':>10} {'landed':>6}  load (1 min)")
    for run in runs:
        side = run["side"] if run["side"] == "gridfair" else \
            f"htcondor {str(run['config']).split(':')[0]}"
        landed = run.get("landed_fraction")
        print(f"{side:<22} {run['seed']:>4} {run['share_error']:>9.4f} "
              f"{_seconds(run['seconds_to_share']):>10} "
              f"{_seconds(run['seconds_to_share_after_shift']):>11} {run['vacates']:>7} "
              f"{run['completed_jobs']:>5} {run['lost_cpu_seconds']:>10.0f} "
              f"{'-' if landed is None else f'{landed:.3f}':>6}  "
              f"{run['loadavg_before'][0]:.1f}-{run['loadavg_after'][0]:.1f}")


def _seconds(value: object) -> str:
    return "never" if value is None else f"{value:.0f}"


if __name__ == "__main__":
    main()
