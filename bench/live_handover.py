"""HOSEP's "vacate this, run that there" on a live HTCondor pool: steering against condor_now.

A personal pool of the HOSEP paper's Table 1 grid (12 static slots, configs/htcondor-pool.config
plus `PREEMPTION_REQUIREMENTS = False`). Each round: 12 long jobs of User2 fill every slot;
6 idle jobs of User3 wait (competitors: HTCondor may start them on any slot that frees up);
6 jobs of User1 arrive. Then 6 seeded random victims are each replaced by one User1 job on
the victim's slot, through the htcondor backend:

- `steer`: `vacate([victim])` then `allocate(job, slot)` (GridfairSlot edit + reschedule),
  what the daemon does by default;
- `condor_now`: `handover([victim], job, slot)`, i.e. `condor_now JOB VICTIM` (the program, an
  argument list, on the jobs' schedd, as a queue super user).

For each replacement: seconds from the call to the job running (decision -> running), whether
it runs on the victim's slot (landed), and within two negotiation cycles; where the victims
and competitors ended up; what the backend reported as failed.

    .venv/bin/python bench/live_handover.py [--rounds 3] [--seed 1] [--all-starts]
        [--set-factors] [--mechanisms steer,condor_now] [--layout static|partitionable]
        [--claim-worklife 0] [--json]

`--all-starts` sets `GRIDFAIR_DECIDES_ALL_STARTS = True` (the negotiator matches only jobs
steered by gridfair); `--set-factors` makes HTCondor's own submitter order agree with the
decision (`Negotiator.setFactor`: User1 1, Users 2-3 1e6) before the replacements.
condor_now works only on dynamic slots with claims kept: `--layout partitionable
--claim-worklife 1200`; on a static slot it is refused as a failure.
Needs HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only
LONG = 132250 * 3600
PAIRS = 6
MECHANISMS = ("steer", "condor_now")


def agree_factors(pool) -> None:
    """HTCondor's submitter order made to agree with the decision: the arrivals' submitter is
    negotiated first (priority factor 1), the competitors' and fillers' last (1e6)."""
    import htcondor2

    from tests.live.harness.personal_pool import ACCOUNTING_PREFIX, UID_DOMAIN

    collector = htcondor2.Collector(pool.collector_host)
    negotiator = htcondor2.Negotiator(collector.locate(htcondor2.DaemonType.Negotiator))
    for user, factor in (("User1", 1.0), ("User2", 1e6), ("User3", 1e6)):
        negotiator.setFactor(f"{ACCOUNTING_PREFIX}.{user}@{UID_DOMAIN}", factor)


def replace_round(pool, backend, mechanism: str, rng: random.Random, two_cycles: float,
                  all_starts: bool, factors: bool) -> dict[str, object]:
    """One round: fill, queue competitors and arrivals, replace PAIRS victims; the figures."""
    from gridfair.daemon.backends import ActionFailed
    from tests.live.harness.personal_pool import JobSpec

    pool.clear_queue()
    pool.wait_until(lambda: not pool.running(), 60)
    fillers = pool.submit([JobSpec("User2", LONG)] * len(pool.slots))
    if all_starts:  # only steered jobs are matched: steer each filler to a slot of its own
        snapshot = backend.read_snapshot()
        jobs = {job.id: job for job in snapshot.jobs}
        for job_id, machine in zip(fillers, snapshot.machines, strict=True):
            backend.allocate(jobs[job_id], machine)
    pool.wait_until(lambda: set(pool.running()) >= set(fillers), 90)
    pool.submit([JobSpec("User3", LONG)] * PAIRS)
    arrivals = pool.submit([JobSpec("User1", LONG)] * PAIRS)
    if factors:
        agree_factors(pool)
    snapshot = backend.read_snapshot()
    jobs = {job.id: job for job in snapshot.jobs}
    slots = {machine.name: machine for machine in snapshot.machines}
    running_on = {m.running_job: m.name for m in snapshot.machines if m.running_job}
    victims = rng.sample(sorted(running_on), PAIRS)
    chosen: dict[str, str] = {}
    failures: list[str] = []
    started_at: dict[str, float] = {}
    for job_id, victim in zip(arrivals, victims, strict=True):
        slot = running_on[victim]
        started_at[job_id] = time.monotonic()
        try:
            if mechanism == "condor_now":
                if not backend.can_hand_over(slots[slot]):
                    raise ActionFailed(f"condor_now cannot hand {slot} over (not dynamic)")
                backend.handover([jobs[victim]], jobs[job_id], slots[slot])
            else:
                problem = backend.vacate([victim])[victim]
                if problem is not None:
                    raise ActionFailed(f"vacate {victim}: {problem}")
                backend.allocate(jobs[job_id], slots[slot])
        except ActionFailed as error:
            failures.append(str(error))
            continue
        chosen[job_id] = slot
    running: dict[str, tuple[float, str]] = {}
    deadline = time.monotonic() + 30
    while len(running) < len(chosen) and time.monotonic() < deadline:
        for job_id, slot in pool.running().items():
            if job_id in chosen and job_id not in running:
                running[job_id] = (time.monotonic() - started_at[job_id], slot)
        time.sleep(0.1)
    latencies = [running[job][0] for job in chosen if job in running and
                 running[job][1] == chosen[job]]
    return {
        "decided": PAIRS,
        "carried_out": len(chosen),
        "landed": len(latencies),
        "landed_within_two_cycles": sum(latency <= two_cycles for latency in latencies),
        "latencies": latencies,
        "elsewhere_or_not_started": sorted(set(chosen) - {job for job in chosen if job in running
                                                          and running[job][1] == chosen[job]}),
        "failures": failures,
        "victims_evicted": len(pool.jobs("ClusterId", constraint=" || ".join(
            f"(ClusterId == {victim.split('.')[0]} && LastVacateTime =!= undefined)"
            for victim in victims))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--all-starts", action="store_true",
                        help="GRIDFAIR_DECIDES_ALL_STARTS = True on the pool")
    parser.add_argument("--set-factors", action="store_true",
                        help="Negotiator.setFactor: User1 first (1), User2 and User3 last (1e6)")
    parser.add_argument("--layout", choices=("static", "partitionable"), default="static")
    parser.add_argument("--claim-worklife", type=int, default=0,
                        help="CLAIM_WORKLIFE (condor_now needs claims kept: not 0)")
    parser.add_argument("--mechanisms", default=",".join(MECHANISMS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    mechanisms = [m for m in MECHANISMS if m in args.mechanisms.split(",")]

    from gridfair.daemon.backends.htcondor import HTCondorBackend
    from tests.live.harness.personal_pool import PersonalPool, slots_of_grid

    config = (ROOT / "configs" / "htcondor-pool.config").read_text().splitlines()
    config += [f"GRIDFAIR_DECIDES_ALL_STARTS = {args.all_starts}",
               "PREEMPTION_REQUIREMENTS = False", f"CLAIM_WORKLIFE = {args.claim_worklife}"]
    results: dict[str, dict[str, object]] = {}
    load_before = os.getloadavg()
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.monotonic()
    with PersonalPool(slots_of_grid("hosep-table1"), extra_config=config,
                      layout=args.layout) as pool:
        backend = HTCondorBackend.connect(
            pool.collector_host, condor_now=pool.tool("condor_now"),
            tool_environment=pool.environment)
        two_cycles = 2.0 * pool.interval
        for mechanism in mechanisms:
            rng = random.Random(args.seed)
            rounds = [replace_round(pool, backend, mechanism, rng, two_cycles, args.all_starts,
                                    args.set_factors)
                      for _ in range(args.rounds)]
            latencies = [lat for r in rounds for lat in r["latencies"]]
            decided = sum(r["decided"] for r in rounds)
            results[mechanism] = {
                "decided": decided,
                "carried_out": sum(r["carried_out"] for r in rounds),
                "landed": sum(r["landed"] for r in rounds),
                "landed_fraction": sum(r["landed"] for r in rounds) / decided,
                "landed_within_two_cycles": sum(r["landed_within_two_cycles"] for r in rounds),
                "two_cycles_seconds": two_cycles,
                "latency_median_s": statistics.median(latencies) if latencies else None,
                "latency_max_s": max(latencies) if latencies else None,
                "victims_evicted": sum(r["victims_evicted"] for r in rounds),
                "failures": [f for r in rounds for f in r["failures"]],
                "not_landed_jobs": [j for r in rounds for j in r["elsewhere_or_not_started"]],
            }
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    meta = {"all_starts": args.all_starts, "set_factors": args.set_factors,
            "layout": args.layout, "claim_worklife": args.claim_worklife,
            "rounds": args.rounds, "seed": args.seed,
            "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
            "wall_s": round(time.monotonic() - wall, 1),
            "bench_cpu_s": round(cpu.ru_utime + cpu.ru_stime - cpu_before.ru_utime
                                 - cpu_before.ru_stime, 2)}
    if args.json:
        print(json.dumps({**results, "run": meta}, indent=2))
        return
    print(f"GRIDFAIR_DECIDES_ALL_STARTS = {args.all_starts}; {args.rounds} rounds of {PAIRS} "
          f"replacements; load average {meta['loadavg_before']} before, "
          f"{meta['loadavg_after']} after; {meta['wall_s']} s wall")
    for mechanism, figures in results.items():
        latency = ("-" if figures["latency_median_s"] is None else
                   f"median {figures['latency_median_s']:.1f} s, max "
                   f"{figures['latency_max_s']:.1f} s")
        print(f"{mechanism}: {figures['landed']}/{figures['decided']} landed on the victim's "
              f"slot ({figures['landed_within_two_cycles']} within "
              f"{figures['two_cycles_seconds']:g} s); decision -> running {latency}; "
              f"victims evicted {figures['victims_evicted']}; failures {figures['failures']}")


if __name__ == "__main__":
    main()
