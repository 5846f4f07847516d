"""The showcase: owner share on a live HTCondor pool, gridfair's daemon against HTCondor alone.

The HOSEP paper's Table 1 grid (`hosep-table1`: 12 machines, owners User1-User4, MFlops) as a
personal pool of 12 static slots. Users 2-4 fill it (6 long jobs each), then User1 (who owns
45.76 % of the power) submits `--late-jobs` (18 by default). Each side runs on a fresh pool:

- gridfair: the real daemon (`python -m gridfair.daemon`, CycleRunner, `htcondor` backend) with
  the HOSEP policy (or OSEP, or `reclaim`: HOSEP's order with issue 11's preemption, an owner
  below its share takes back its own machines first) every `--interval` seconds,
  `landing_timeout` = two negotiation cycles, on a pool configured with
  configs/htcondor-pool.config, `GRIDFAIR_DECIDES_ALL_STARTS = True` (`--shared-starts`: False) and
  `PREEMPTION_REQUIREMENTS = False` (HTCondor never preempts; gridfair's vacates and steering,
  or `--condor-now` handovers, decide);
- htcondor (`--htcondor groups`): one accounting group per owner whose quota is the power it
  provides (`SLOT_WEIGHT = MFlops`; for OSEP, `SLOT_WEIGHT = 1` and quotas in machines),
  `GROUP_ACCEPT_SURPLUS = True`, and negotiator preemption of over-quota groups for
  under-quota ones (`PREEMPTION_REQUIREMENTS`); or (`--htcondor rank`) every slot ranks its
  owner's jobs first, so the negotiator preempts for the owner by rank.

Every job writes one event log; from its execute / evicted events the bench rebuilds each
owner's allocated share (MFlops, or machines for OSEP) over time and reports: seconds from
User1's arrival until every owner with demand is within 10 % of its provided share and stays
so to the end of the run (`seconds_to_share`; `seconds_to_user1_share` for User1 alone),
vacates (evicted runs) and the work they discarded (`lost_work_seconds`, run seconds of
evicted runs: no checkpointing), also from User1's arrival on, and for gridfair
`landed_fraction` (allocations the pool accepted, each attempt, whose job's next start was on
the slot gridfair chose), how many of them started within two negotiation cycles, and the
daemon's own journal verdicts. The daemon's store and log stay in the directory printed as
`daemon_directory`, for `gridfair` inspection. Load averages are printed with each side.

    .venv/bin/python bench/live_owner_share.py [--policy hosep|reclaim|osep] [--duration 90]
        [--interval 2] [--htcondor groups|rank] [--sides gridfair,htcondor] [--late-jobs 18]
        [--condor-now] [--shared-starts] [--json] [--plot FILE]

Needs HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.harness, tests.live.harness: test tools, in a clone only

from tests.harness.pool_record import Run, landing, read_runs  # noqa: E402

GRID = "hosep-table1"
LATE_OWNER = "User1"
FILLERS = ("User2", "User3", "User4")
JOBS_PER_USER = 6
#: Work per job: 600 s on the fastest machine, far longer than a run, so demand never ends
#: and every end of a run before the bench stops is a vacate.
JOB_WORK = 132250 * 600
TOLERANCE = 0.10


def share_timeline(runs: Sequence[Run], weight: Mapping[str, float],
                   owners: Sequence[str]) -> list[tuple[float, dict[str, float]]]:
    """Each owner's allocated share of the pool's total weight after every start or end of a
    run, in time order: [(time, {owner: share})]."""
    total = sum(weight.values())
    changes = sorted({run.start for run in runs} | {run.end for run in runs if run.end})
    timeline = []
    for moment in changes:
        held = dict.fromkeys(owners, 0.0)
        for run in runs:
            if run.start <= moment and (run.end is None or run.end > moment):
                held[run.user] = held.get(run.user, 0.0) + weight[run.slot]
        timeline.append((moment, {owner: held[owner] / total for owner in owners}))
    return timeline


def within(shares: Mapping[str, float], provided: Mapping[str, float], owners: Sequence[str],
           tolerance: float = TOLERANCE) -> bool:
    """Every owner in `owners` holds its provided share, give or take `tolerance` of it."""
    return all(abs(shares.get(owner, 0.0) - provided[owner]) <= tolerance * provided[owner]
               for owner in owners)


def seconds_to_share(timeline: Sequence[tuple[float, Mapping[str, float]]],
                     provided: Mapping[str, float], owners: Sequence[str], since: float,
                     tolerance: float = TOLERANCE) -> float | None:
    """Seconds from `since` until the owners are within tolerance of their provided shares and
    stay so to the end of the timeline; None if they are not at its end."""
    at_arrival: Mapping[str, float] = {}
    for moment, shares in timeline:
        if moment <= since:
            at_arrival = shares
    settled = since if within(at_arrival, provided, owners, tolerance) else None
    for moment, shares in timeline:
        if moment <= since:
            continue
        if not within(shares, provided, owners, tolerance):
            settled = None
        elif settled is None:
            settled = moment
    return None if settled is None else settled - since


def group_quota_config(owner_weight: Mapping[str, float], power: bool) -> list[str]:
    """An administrator's owner-share configuration: a group per owner, quota = what it
    provides, surplus shared, over-quota groups preempted for under-quota ones."""
    from tests.live.harness.personal_pool import ACCOUNTING_PREFIX

    groups = [f"{ACCOUNTING_PREFIX}.{owner}" for owner in owner_weight]
    return [
        f"GROUP_NAMES = {ACCOUNTING_PREFIX}, {', '.join(groups)}",
        f"GROUP_QUOTA_{ACCOUNTING_PREFIX} = {sum(owner_weight.values()):g}",
        *(f"GROUP_QUOTA_{group} = {owner_weight[owner]:g}"
          for group, owner in zip(groups, owner_weight, strict=True)),
        "GROUP_ACCEPT_SURPLUS = True",
        f"SLOT_WEIGHT = {'MFlops' if power else '1'}",
        "NEGOTIATOR_CONSIDER_PREEMPTION = True",
        "PREEMPTION_REQUIREMENTS = (SubmitterGroupResourcesInUse < SubmitterGroupQuota)"
        " && (RemoteGroupResourcesInUse > RemoteGroupQuota)",
    ]


#: Owner share by the slots' own preference: each startd ranks its owner's jobs first, and
#: the negotiator preempts a running job for an idle one the slot ranks higher ("rank
#: preemption", which PREEMPTION_REQUIREMENTS does not govern; it is switched off here, so
#: user priorities never preempt). Owners get their own slots back; surplus is first come.
RANK_CONFIG = [
    "RANK = 1000 * (TARGET.AcctGroupUser =?= MY.GridOwner)",
    "NEGOTIATOR_CONSIDER_PREEMPTION = True",
    "PREEMPTION_REQUIREMENTS = False",
]


def htcondor_config(kind: str, owner_weight: Mapping[str, float], power: bool) -> list[str]:
    """The HTCondor-alone side's configuration: `groups` (quotas per owner) or `rank`."""
    return group_quota_config(owner_weight, power) if kind == "groups" else RANK_CONFIG


def daemon_config(directory: Path, collector: str, policy: str, interval: float,
                  landing_timeout: float, condor_now: str = "") -> Path:
    path = directory / "gridfair.toml"
    path.write_text(f"""
[daemon]
store = "state.db"
interval = {interval}
[policy]
name = "{policy}"
[safety]
min_runtime = 0
max_vacates_per_cycle = 12
preempt_cooldown = 0
max_snapshot_age = 60
landing_timeout = {landing_timeout}
[backend]
kind = "htcondor"
[backend.htcondor]
collector = "{collector}"
condor_now = "{condor_now}"
""")
    return path


def run_side(side: str, policy: str, duration: float, interval: float,
             htcondor: str = "groups", all_starts: bool = True,
             late_jobs: int = len(FILLERS) * JOBS_PER_USER,
             condor_now: bool = False) -> dict[str, object]:
    from tests.live.harness.personal_pool import JobSpec, PersonalPool, slots_of_grid

    slots = slots_of_grid(GRID)
    power = policy != "osep"  # HOSEP and reclaim count MFlops; OSEP machines
    owner_weight: dict[str, float] = {}
    for slot in slots:
        owner_weight[slot.owner] = owner_weight.get(slot.owner, 0.0) + (slot.mflops if power
                                                                         else 1.0)
    config = (ROOT / "configs" / "htcondor-pool.config").read_text().splitlines()
    config += ([f"GRIDFAIR_DECIDES_ALL_STARTS = {all_starts}",
                "PREEMPTION_REQUIREMENTS = False"] if side == "gridfair"
               else htcondor_config(htcondor, owner_weight, power))
    work = Path(tempfile.mkdtemp(prefix="gridfair-showcase-")) if side == "gridfair" else None
    with PersonalPool(slots, extra_config=config) as pool:
        # Two of the pool's negotiation cycles: the bound for an allocation to start.
        two_cycles = 2.0 * pool.interval
        weight = {name: (float(mflops) if power else 1.0)
                  for name, mflops in pool.status("Name", "MFlops")}
        event_log = pool.shared_file("events.log")  # every submitter's jobs write it
        submit_extra = [f"log = {event_log}"]
        daemon = None
        if work is not None:
            toml = daemon_config(work, pool.collector_host, policy, interval, two_cycles,
                                 pool.tool("condor_now") if condor_now else "")
            with open(work / "daemon.log", "w") as daemon_log:
                # The pool's configuration in the environment, as on a pool's own host, for
                # condor_now.
                daemon = subprocess.Popen(
                    [sys.executable, "-m", "gridfair.daemon", "--config", str(toml)],
                    cwd=work, stdout=subprocess.DEVNULL, stderr=daemon_log,
                    env=pool.environment)
            # Its first cycle holds the lease: a filler submitted before it could start unsteered
            # (measured: one of twelve fill starts was HTCondor's, "not landed" in the journal).
            pool.wait_until(pool.lease_held, 60)
        try:
            users: dict[str, str] = {}
            for user in FILLERS:
                for job in pool.submit([JobSpec(user, JOB_WORK)] * JOBS_PER_USER,
                                       extra=submit_extra):
                    users[job] = user
            pool.wait_until(lambda: len(pool.running()) == len(slots), 90)
            time.sleep(2 * interval)
            arrival = time.time()
            for job in pool.submit([JobSpec(LATE_OWNER, JOB_WORK)] * late_jobs,
                                   extra=submit_extra):
                users[job] = LATE_OWNER
            time.sleep(duration)
            until = time.time()
        finally:
            if daemon is not None:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(timeout=60)
        runs = read_runs(event_log, users, until)
    owners = sorted(owner_weight)
    total = sum(owner_weight.values())
    provided = {owner: owner_weight[owner] / total for owner in owners}
    timeline = share_timeline(runs, weight, owners)
    evicted = [run for run in runs if run.evicted]
    figures: dict[str, object] = {
        "seconds_to_share": seconds_to_share(timeline, provided, owners, arrival),
        "seconds_to_user1_share": seconds_to_share(timeline, provided, [LATE_OWNER], arrival),
        "vacates": len(evicted),
        "lost_work_seconds": sum(run.end - run.start for run in evicted if run.end),
        # The same from User1's arrival on (HTCondor's RANK also preempts while Users 2-4 fill).
        "vacates_after_arrival": sum(1 for run in evicted if run.end and run.end >= arrival),
        "lost_work_seconds_after_arrival": sum(run.end - run.start for run in evicted
                                               if run.end and run.end >= arrival),
        "final_shares": timeline[-1][1] if timeline else {},
        "provided_shares": provided,
        "timeline": [(round(moment - arrival, 1), shares) for moment, shares in timeline],
    }
    if work is not None:
        landed = landing(work / "state.db", runs, two_cycles)
        figures["daemon_directory"] = str(work)
        figures["allocations"] = landed.decided
        figures["allocations_landed"] = landed.landed
        figures["landed_fraction"] = landed.landed / landed.decided if landed.decided else None
        figures["landed_within_two_cycles"] = landed.landed_in_time
        figures["two_cycles_seconds"] = two_cycles
        figures["landing_latency_median_s"] = (statistics.median(landed.latencies)
                                               if landed.latencies else None)
        figures["journal"] = dict(landed.journal)
        figures["decides_all_starts"] = all_starts
        figures["condor_now"] = condor_now
    else:
        figures["htcondor_config"] = htcondor
    return figures


def plot(results: Mapping[str, Mapping[str, object]], path: str, duration: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(1, len(results), figsize=(6 * len(results), 4), sharey=True,
                                   squeeze=False)
    axes = axes[0]
    for axis, (side, figures) in zip(axes, results.items(), strict=True):
        timeline = figures["timeline"]
        for owner, share in figures["provided_shares"].items():
            moments = [moment for moment, _ in timeline] + [duration]
            values = [shares[owner] for _, shares in timeline]
            line, = axis.step(moments, values + values[-1:], where="post", label=owner)
            axis.axhline(share, color=line.get_color(), linestyle=":")
        axis.set_title(side)
        axis.set_xlabel("seconds since User1 arrived")
    axes[0].set_ylabel("allocated share (dotted: provided)")
    axes[0].legend()
    figure.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=("hosep", "reclaim", "osep"), default="hosep")
    parser.add_argument("--duration", type=float, default=90.0,
                        help="seconds each side runs after User1 arrives")
    parser.add_argument("--interval", type=float, default=2.0,
                        help="seconds between gridfair's cycles")
    parser.add_argument("--htcondor", choices=("groups", "rank"), default="groups",
                        help="HTCondor's own owner-share configuration: accounting groups "
                        "with quotas and group preemption, or startd RANK of the owner's jobs")
    parser.add_argument("--late-jobs", type=int, default=len(FILLERS) * JOBS_PER_USER,
                        help=f"jobs {LATE_OWNER} submits (default: enough for the whole pool)")
    parser.add_argument("--condor-now", action="store_true",
                        help="gridfair side: each vacate + allocation of its slot as one "
                        "condor_now (backend.htcondor.condor_now)")
    parser.add_argument("--shared-starts", action="store_true",
                        help="gridfair side: HTCondor also starts jobs gridfair did not steer "
                        "(GRIDFAIR_DECIDES_ALL_STARTS = False)")
    parser.add_argument("--sides", default="gridfair,htcondor",
                        help="comma-separated: gridfair, htcondor")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", metavar="FILE")
    args = parser.parse_args()
    sides = [side for side in ("gridfair", "htcondor") if side in args.sides.split(",")]
    if not sides:
        parser.error(f"--sides {args.sides!r}: name gridfair and/or htcondor")
    results = {}
    for side in sides:
        load_before = os.getloadavg()
        results[side] = run_side(side, args.policy, args.duration, args.interval, args.htcondor,
                                 not args.shared_starts, args.late_jobs, args.condor_now)
        results[side]["loadavg_before"] = load_before
        results[side]["loadavg_after"] = os.getloadavg()
    if args.plot:
        plot(results, args.plot, args.duration)
    if args.json:
        print(json.dumps({side: {key: value for key, value in figures.items()
                                 if key != "timeline"} for side, figures in results.items()},
                         indent=2))
        return
    print(f"policy {args.policy}; {args.duration:g} s after {LATE_OWNER} arrives")
    for side, figures in results.items():
        settle = figures["seconds_to_share"]
        print(f"{side}{'' if side == 'gridfair' else ' (' + args.htcondor + ')'}: load "
              f"average {figures['loadavg_before']} before, {figures['loadavg_after']} after")
        print(f"  every owner within 10 % of its share after: "
              f"{'not reached' if settle is None else f'{settle:.0f} s'}")
        user1 = figures["seconds_to_user1_share"]
        print(f"  {LATE_OWNER} within 10 %: {'not reached' if user1 is None else f'{user1:.0f} s'}")
        print(f"  vacates {figures['vacates']}, work lost {figures['lost_work_seconds']:.0f} s")
        if "landed_fraction" in figures:
            print(f"  allocations landed on the chosen slot: {figures['allocations_landed']} "
                  f"of {figures['allocations']}, {figures['landed_within_two_cycles']} within "
                  f"two negotiation cycles ({figures['two_cycles_seconds']:g} s); "
                  f"daemon's journal: {figures['journal']}")
            print(f"  daemon store and log: {figures['daemon_directory']}")
        final = ", ".join(f"{owner} {share:.1%}/{figures['provided_shares'][owner]:.1%}"
                          for owner, share in figures["final_shares"].items())
        print(f"  final share / provided: {final}")


if __name__ == "__main__":
    main()
