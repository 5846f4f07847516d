"""DRF, weighted DRF and SDRF on the Google derived task list, all under one allocation rule.

Prints, with the machine's load average (the machine is shared; quote the best run):
- each order's run time (read + simulate, best of `--repeat`, wall and CPU seconds) at r = 0.9
  (SDRF at delta = 0.9999), in both forms (`paper`, `authors`), against a target of 1.5 s
  each;
- for r = 0.5 ... 1.0 and the paper's deltas 1 - 1e-1 ... 1 - 1e-7 (unless `--no-sweep`):
  - the users' mean wait (the SDRF paper's Fig. 4 figure: the mean over users of each user's
    mean wait) of DRF, weighted DRF and SDRF, and SDRF's and weighted DRF's change against
    DRF in percent (negative: they wait less);
  - the share of users who complete more tasks than under DRF (the paper's Fig. 5: a user's
    completed tasks over its submitted ones, where completed means ended by the trace's own
    end, its last recorded finish), and the share who complete fewer, for SDRF and weighted
    DRF.
Every run uses the same rule (`--allocation`, default stop: Algorithm 1, as the authors'
simulator has it for every allocator) and the sweep one form (`--form`, default `authors`, the
authors' simulator's computations), so the orders are the only difference.
Run:
    .venv/bin/python bench/drf_family.py [FILE] [--allocation stop] [--form authors]
        [--equal-shares] [--no-sweep] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from pathlib import Path
from typing import Any

from gridfair.core.stages import ALLOCATION_RULES, STOP
from gridfair.policies.drf import AUTHORS, FORMS
from gridfair.sim.engine import SimulationResult
from gridfair.sim.scenario import run_scenario
from gridfair.sim.workloads.taskcsv import MICROSECONDS, trace_scenario

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


def trace_end(path: Path) -> float:
    """The trace's own end in seconds: its last recorded finish (the 3rd column)."""
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as lines:
        return max(int(line.split(",", 3)[2]) for line in lines if line.strip()) / MICROSECONDS


def completed_ratios(result: SimulationResult, end: float) -> dict[str, float]:
    """Each user's tasks ended by `end` over its submitted tasks (the paper's Fig. 5)."""
    done: dict[str, list[int]] = {}
    for task in result.tasks:
        counts = done.setdefault(task.user, [0, 0])
        counts[0] += task.finish_time is not None and task.finish_time <= end
        counts[1] += 1
    return {user: ended / submitted for user, (ended, submitted) in done.items()}


def against_drf(drf: dict[str, float], other: dict[str, float]) -> tuple[float, float]:
    """Percent of users who complete a larger, and a smaller, share of their tasks than
    under DRF."""
    more = sum(other[user] > ratio for user, ratio in drf.items())
    fewer = sum(other[user] < ratio for user, ratio in drf.items())
    return 100 * more / len(drf), 100 * fewer / len(drf)


def figures(result: SimulationResult, end: float) -> tuple[float, dict[str, float]]:
    return users_mean_wait(result), completed_ratios(result, end)


def timed(path: Path, repeat: int, allocation: str, equal_shares: bool,
          ) -> list[dict[str, Any]]:
    """Each order in each form at r = 0.9: best wall and CPU seconds of `repeat` runs."""
    rows = []
    for form in FORMS:
        for policy, delta in TIMED:
            wall = cpu = float("inf")
            for _ in range(repeat):
                started, used = time.perf_counter(), time.process_time()
                simulate(path, 0.9, policy, delta, allocation, form, equal_shares)
                wall = min(wall, time.perf_counter() - started)
                cpu = min(cpu, time.process_time() - used)
            rows.append({"order": policy, "form": form, "wall_seconds": wall,
                         "cpu_seconds": cpu})
    return rows


def sweep(path: Path, allocation: str, form: str, equal_shares: bool) -> list[dict[str, Any]]:
    run = {"allocation": allocation, "form": form, "equal_shares": equal_shares}
    end = trace_end(path)
    rows: list[dict[str, Any]] = []
    for ratio in RATIOS:
        drf_wait, drf_done = figures(simulate(path, ratio, "drf", None, **run), end)
        wdrf_wait, wdrf_done = figures(simulate(path, ratio, "wdrf", None, **run), end)
        wdrf_more, wdrf_fewer = against_drf(drf_done, wdrf_done)
        for delta in DELTAS:
            sdrf_wait, sdrf_done = figures(simulate(path, ratio, "sdrf", delta, **run), end)
            more, fewer = against_drf(drf_done, sdrf_done)
            rows.append({"ratio": ratio, "delta": delta, "drf": drf_wait, "wdrf": wdrf_wait,
                         "sdrf": sdrf_wait,
                         "sdrf_vs_drf_percent": 100 * (sdrf_wait / drf_wait - 1),
                         "wdrf_vs_drf_percent": 100 * (wdrf_wait / drf_wait - 1),
                         "sdrf_users_more_percent": more, "sdrf_users_fewer_percent": fewer,
                         "wdrf_users_more_percent": wdrf_more,
                         "wdrf_users_fewer_percent": wdrf_fewer})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--allocation", choices=ALLOCATION_RULES, default=STOP)
    parser.add_argument("--form", choices=FORMS, default=AUTHORS, help="the sweep's form")
    parser.add_argument("--equal-shares", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per order")
    parser.add_argument("--no-sweep", action="store_true", help="only the timed runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")

    seconds = timed(args.file, args.repeat, args.allocation, args.equal_shares)
    load = os.getloadavg()  # of the timed runs
    rows = [] if args.no_sweep else sweep(args.file, args.allocation, args.form,
                                          args.equal_shares)
    run = {"allocation": args.allocation, "form": args.form, "equal_shares": args.equal_shares}
    if args.json:
        print(json.dumps({"file": args.file.name, **run, "seconds": seconds, "sweep": rows,
                          "load_average": load}, indent=1))
        return
    print(f"{args.file.name}: allocation = {args.allocation}, "
          f"{'equal shares' if args.equal_shares else 'entitlements = mean usage'}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (timed runs)")
    for row in seconds:
        print(f"{row['order']:<5} {row['form']:<8} read + simulate at r = 0.9: "
              f"{row['wall_seconds']:.2f} s wall, {row['cpu_seconds']:.2f} s CPU "
              f"(best of {args.repeat}; target <= 1.5 s)")
    if not rows:
        return
    print(f"form = {args.form}: users' mean wait (s), change against DRF, and % of users who "
          "complete more / fewer of their tasks by the trace's end than under DRF")
    print(f"{'r':>4} {'1 - delta':>9} {'DRF':>7} {'wDRF':>7} {'SDRF':>7} {'wDRF/DRF':>9} "
          f"{'SDRF/DRF':>9} {'wDRF +/-':>11} {'SDRF +/-':>11}")
    for row in rows:
        print(f"{row['ratio']:>4.1f} {1 - row['delta']:>9.0e} {row['drf']:>7.1f} "
              f"{row['wdrf']:>7.1f} {row['sdrf']:>7.1f} {row['wdrf_vs_drf_percent']:>+8.1f}% "
              f"{row['sdrf_vs_drf_percent']:>+8.1f}% "
              f"{row['wdrf_users_more_percent']:>5.0f}/{row['wdrf_users_fewer_percent']:<5.0f} "
              f"{row['sdrf_users_more_percent']:>5.0f}/{row['sdrf_users_fewer_percent']:<5.0f}")


if __name__ == "__main__":
    main()
