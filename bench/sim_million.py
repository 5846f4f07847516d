"""A million-task run: 1,000 machines, 500 users, SDRF ordering with HOSEP preemption.

The grid and the workload are synthetic and seeded (no real trace is that large with owners):
- machines of 1,000, 2,000, 4,000 or 8,000 MFlops (one core each, drawn with weights
  4:3:2:1), machine m owned by user m mod 400: 400 owners of 2-3 machines each, plus 100
  users who provide nothing;
- users submit with Zipf-like popularity (user k weighs 1 / (k + 1)^0.8, user order shuffled),
  so a few users are busy and most are light;
- task sizes are log-uniform between 60 s and 2 h on a mean machine; arrivals are Poisson at
  the rate that offers 95 % of the grid's power, so queues build up and HOSEP preempts.

Each size runs in its own process so that its peak memory (max RSS) is its own. The tasks are
generated as the simulator pulls them and leave memory when they end (the streaming engine,
`keep_tasks=False`): only the submitters are drawn up front, as 2-byte user indices, so that the
random draws, and the workload, are those of the list-building version of this benchmark. `run`
is `run_scenario` (setting up the pool and the policies, generating the tasks, the event loop),
`build` is drawing the grid and the submitters. Prints one line per size and a growth summary;
`--sizes` (or `--tasks`) picks the sizes, `--order` the order stage (the brief's composition is
SDRF ordering + HOSEP preemption; `--order hosep` is plain HOSEP), `--json` one object per size.

    .venv/bin/python bench/sim_million.py                  # 10^4, 10^5, 10^6
    .venv/bin/python bench/sim_million.py --tasks 10000000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import time
from array import array
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gridfair.core.pool import DONE, Node, Task  # noqa: E402
from gridfair.sim.scenario import Scenario, run_scenario  # noqa: E402

MACHINES = 1_000
USERS = 500
OWNERS = 400
POWERS = (1_000.0, 2_000.0, 4_000.0, 8_000.0)
POWER_WEIGHTS = (4, 3, 2, 1)
OFFERED_LOAD = 0.95
SHORTEST, LONGEST = 60.0, 7_200.0  # seconds on a mean machine


CHUNK = 1_000_000  # submitters drawn per call: one random() each, so chunks change nothing


def million_scenario(tasks: int, seed: int = 1) -> Scenario:
    rng = random.Random(seed)
    powers = rng.choices(POWERS, POWER_WEIGHTS, k=MACHINES)
    nodes = [Node(f"m{m}", f"user{m % OWNERS}", power) for m, power in enumerate(powers)]
    mean_power = sum(powers) / MACHINES
    users = [f"user{k}" for k in range(USERS)]
    rng.shuffle(users)
    weights = [1.0 / (k + 1) ** 0.8 for k in range(USERS)]
    submitters = array("H")
    for first in range(0, tasks, CHUNK):
        submitters.extend(rng.choices(range(USERS), weights, k=min(CHUNK, tasks - first)))
    return Scenario(nodes, _arrivals(rng, submitters, users, mean_power))


def _arrivals(rng: random.Random, submitters: array, users: list[str],
              mean_power: float) -> Iterator[Task]:
    """The tasks, made as the simulator pulls them: Poisson arrivals, log-uniform sizes."""
    # Log-uniform run time on a mean machine; its mean is (b - a) / ln(b / a).
    mean_run = (LONGEST - SHORTEST) / math.log(LONGEST / SHORTEST)
    rate = OFFERED_LOAD * MACHINES / mean_run
    low, high = math.log(SHORTEST), math.log(LONGEST)
    now = 0.0
    for index, user in enumerate(submitters):
        now += rng.expovariate(rate)
        seconds = math.exp(rng.uniform(low, high))
        yield Task(f"t{index}", users[user], now, work=seconds * mean_power,
                   source_index=index)


def run_one(tasks: int, order: str) -> dict:
    started = time.perf_counter()
    scenario = million_scenario(tasks)
    built = time.perf_counter() - started
    cpu_started = time.process_time()
    run_started = time.perf_counter()
    done = 0

    def task_done(task: Task) -> None:
        nonlocal done
        done += task.state == DONE

    result, _ = run_scenario(scenario, order=order, preempt="hosep", keep_tasks=False,
                             on_task_done=task_done)
    run = time.perf_counter() - run_started  # with setting up the pool and the policies
    cpu = time.process_time() - cpu_started
    return {
        "tasks": tasks,
        "order": order,
        "build_s": round(built, 2),
        "run_s": round(run, 2),
        "run_cpu_s": round(cpu, 2),
        "loop_s": round(result.wall_seconds, 2),
        "tasks_per_s": round(tasks / run),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "completed": done,
        "vacates": result.vacates,
        "events": result.events,
        "negotiations": result.negotiations,
        "makespan_days": round(result.makespan / 86_400, 1),
        "load_average": [round(load, 2) for load in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    sizes.add_argument("--tasks", type=int, help="one size: this many tasks (e.g. 10000000)")
    parser.add_argument("--order", default="sdrf")
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tasks is not None:
        args.sizes = [args.tasks]
    if args.one:
        print(json.dumps(run_one(args.sizes[0], args.order)))
        return
    rows = []
    for size in args.sizes:
        output = subprocess.run(
            [sys.executable, __file__, "--one", "--sizes", str(size), "--order", args.order],
            check=True, capture_output=True, text=True).stdout
        row = json.loads(output)
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        print(f"{row['tasks']:>9,} tasks  order={row['order']}+hosep  build {row['build_s']:6.2f} s"
              f"  run {row['run_s']:7.2f} s (CPU {row['run_cpu_s']:7.2f} s, event loop "
              f"{row['loop_s']:.2f} s)  "
              f"{row['tasks_per_s']:>7,} tasks/s  peak RSS "
              f"{row['peak_rss_mb']:>5,} MB  completed {row['completed']:,}  vacates "
              f"{row['vacates']:,}  makespan {row['makespan_days']} days  load average "
              f"{row['load_average']}", flush=True)
    if args.json:
        return
    for before, after in zip(rows, rows[1:], strict=False):
        growth = after["run_s"] / before["run_s"]
        factor = after["tasks"] / before["tasks"]
        print(f"{before['tasks']:,} -> {after['tasks']:,} tasks (x{factor:g}): run time "
              f"x{growth:.1f} (exponent {math.log(growth) / math.log(factor):.2f})")


if __name__ == "__main__":
    main()
