"""DRF, weighted DRF and SDRF on the Google derived task list, all under one allocation rule.

Prints, with the machine's load average (the machine is shared; quote the best run):
- each order's run time (read + simulate, best of `--repeat`) at r = 0.9 (SDRF at
  delta = 0.9999), against a target of 1.5 s each;
- the users' mean wait (the SDRF paper's figure: the mean over users of each user's mean wait)
  of DRF, weighted DRF and SDRF for r = 0.5 ... 1.0 and the paper's deltas 1 - 1e-1 ...
  1 - 1e-7, and SDRF's change against DRF in percent (negative: SDRF waits less).
Every run uses the same rule (`--allocation`, default stop: Algorithm 1, as the authors'
simulator has it for every allocator) and the same form (`--form`), so the orders are the only
difference.
Run:
    .venv/bin/python bench/drf_family.py [FILE] [--allocation stop] [--form paper] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from gridfair.core.stages import ALLOCATION_RULES, STOP
from gridfair.policies.drf import FORMS, PAPER
from gridfair.sim.engine import SimulationResult
from gridfair.sim.scenario import run_scenario
from gridfair.sim.workloads.taskcsv import trace_scenario

DEFAULT_FILE = (Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "google"
                / "derived" / "tasks_parts00000-00001.csv.gz")
RATIOS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DELTAS = tuple(1 - 10.0 ** -k for k in range(1, 8))
TIMED = (("drf", None), ("wdrf", None), ("sdrf", 0.9999))


def simulate(path: Path, ratio: float, policy: str, delta: float | None, allocation: str,
             form: str, equal_shares: bool) -> SimulationResult:
    scenario = trace_scenario(path, None, {"capacity_ratio": ratio,
                                           "equal_shares": equal_shares})
    options: dict[str, Any] = {"form": form}
    if delta is not None:
        options["delta"] = delta
    result, _ = run_scenario(scenario, policy=policy, policy_options=options,
                             allocation=allocation)
    return result


def users_mean_wait(result: SimulationResult) -> float:
    by_user: dict[str, list[float]] = {}
    for task in result.tasks:
        by_user.setdefault(task.user, []).append(task.first_start - task.submit_time)
    return sum(sum(waits) / len(waits) for waits in by_user.values()) / len(by_user)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--allocation", choices=ALLOCATION_RULES, default=STOP)
    parser.add_argument("--form", choices=FORMS, default=PAPER)
    parser.add_argument("--equal-shares", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per order")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    run = {"allocation": args.allocation, "form": args.form, "equal_shares": args.equal_shares}

    seconds: dict[str, float] = {}
    for policy, delta in TIMED:
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            simulate(args.file, 0.9, policy, delta, **run)
            best = min(best, time.perf_counter() - started)
        seconds[policy] = best
    waits: list[dict[str, Any]] = []
    for ratio in RATIOS:
        drf = users_mean_wait(simulate(args.file, ratio, "drf", None, **run))
        wdrf = users_mean_wait(simulate(args.file, ratio, "wdrf", None, **run))
        for delta in DELTAS:
            sdrf = users_mean_wait(simulate(args.file, ratio, "sdrf", delta, **run))
            waits.append({"ratio": ratio, "delta": delta, "drf": drf, "wdrf": wdrf, "sdrf": sdrf,
                          "sdrf_vs_drf_percent": 100 * (sdrf / drf - 1)})
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"file": args.file.name, **run, "seconds": seconds, "waits": waits,
                          "load_average": load}, indent=1))
        return
    print(f"{args.file.name}: allocation = {args.allocation}, form = {args.form}, "
          f"{'equal shares' if args.equal_shares else 'entitlements = mean usage'}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for policy, best in seconds.items():
        print(f"{policy:<5} read + simulate at r = 0.9: {best:.2f} s "
              f"(best of {args.repeat}; target <= 1.5 s)")
    print("users' mean wait (s)")
    print(f"{'r':>4} {'1 - delta':>11} {'DRF':>8} {'wDRF':>8} {'SDRF':>8} {'SDRF vs DRF':>12}")
    for row in waits:
        print(f"{row['ratio']:>4.1f} {1 - row['delta']:>11.0e} {row['drf']:>8.1f} "
              f"{row['wdrf']:>8.1f} {row['sdrf']:>8.1f} {row['sdrf_vs_drf_percent']:>+11.1f}%")


if __name__ == "__main__":
    main()
