"""Simulator throughput on real workloads, in tasks per second.

1. HOSEP on the 4-owner iSPD model (embedded `multi-owner-hosep`: 20 machines, 4 owners) with the
   first 15,000 jobs of KTH-SP2 (PWA, cleaned 2.1), inter-arrival times divided by 50, run time
   x the grid's mean power per cpu (5,200 MFlops) as work, the log's users mapped onto the 4
   owners in turn (`--user-map round-robin`), and again with the 4 busiest users as owners and
   the others as guests who provide nothing (`busiest`, the default: more preemption).
2. SDRF on the Google derived file (51,307 tasks, 72 users; capacity = r x the trace's mean
   usage, r = 1.0 and 0.5 as in the SDRF paper's range).

Reading the input is timed apart from the run: `run` is the event loop with the policy, what
a simulator's speed is usually quoted as; `with loading` adds parsing. Each case runs
`--repeat` times (default 3); the best and the median wall times are printed, and the best CPU
time of the process (on a shared machine, wall time includes waiting for a core).
References on the same machine (the issue's figures): iSPD ~2,500 tasks/s (6 s for 15,000 tasks
on that model); the SDRF authors' simulator ~8 s for the 51,307-task file (~6,400 tasks/s).

    .venv/bin/python bench/sim_throughput.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gridfair.sim.grid_loader import embedded_grids  # noqa: E402
from gridfair.sim.scenario import build_scenario, run_scenario  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
MODEL = embedded_grids()["multi-owner-hosep"]
KTH = SHARED / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"
GOOGLE = SHARED / "google" / "derived" / "tasks_parts00000-00001.csv.gz"

CASES = [
    ("HOSEP, 4-owner model, KTH-SP2 first 15,000 jobs, users round-robin onto owners",
     str(MODEL), KTH, {"limit": 15_000, "compress": 50, "user_map": "round-robin"},
     {"policy": "hosep"}),
    ("HOSEP, 4-owner model, KTH-SP2 first 15,000 jobs, 4 busiest users own, others guests",
     str(MODEL), KTH, {"limit": 15_000, "compress": 50, "user_map": "busiest"},
     {"policy": "hosep"}),
    ("SDRF, Google derived file (51,307 tasks), capacity ratio 1.0",
     None, GOOGLE, {"capacity_ratio": 1.0}, {"policy": "sdrf"}),
    ("SDRF, Google derived file (51,307 tasks), capacity ratio 0.5",
     None, GOOGLE, {"capacity_ratio": 0.5}, {"policy": "sdrf"}),
]


def measure(grid, workload: Path, options: dict, run_options: dict, repeat: int) -> dict:
    loads, runs, cpu = [], [], []
    for _ in range(repeat):
        started = time.perf_counter()
        scenario = build_scenario(grid, str(workload), options=options)
        loads.append(time.perf_counter() - started)
        cpu_started = time.process_time()
        result, _ = run_scenario(scenario, **run_options)
        cpu.append(time.process_time() - cpu_started)
        runs.append(result.wall_seconds)
    tasks = len(scenario.tasks)
    best = min(runs)
    return {
        "tasks": tasks,
        "load": min(loads),
        "run_best": best,
        "run_median": statistics.median(runs),
        "per_s_best": tasks / best,
        "per_s_median": tasks / statistics.median(runs),
        "per_s_total": tasks / (best + min(loads)),
        "per_cpu_s": tasks / min(cpu),
        "vacates": result.vacates,
        "events": result.events,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for title, grid, workload, options, run_options in CASES:
        if not workload.exists():
            print(f"{title}: skipped, needs {workload}")
            continue
        row = measure(grid, workload, options, run_options, args.repeat)
        print(f"{title}\n  {row['tasks']:,} tasks, {row['events']:,} events, "
              f"{row['vacates']:,} vacates; load {row['load']:.2f} s; run best "
              f"{row['run_best']:.2f} s = {row['per_s_best']:,.0f} tasks/s (median "
              f"{row['per_s_median']:,.0f}); per CPU-second {row['per_cpu_s']:,.0f}; with "
              f"loading {row['per_s_total']:,.0f} tasks/s",
              flush=True)


if __name__ == "__main__":
    main()
