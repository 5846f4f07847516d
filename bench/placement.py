"""Placement at pool scale: the decide time of each placement against `fastest`, in one command.

The pool: partitionable machines of 16 cpus (`--slots` cpus in all, 50,000 by default: 3,125
machines), 2, 8 or 16 GiB a cpu in proportion 2:1:1, 1,000 MFlops a cpu (1,500 on every fourth
machine, so that `fastest` has an order to follow). The queue: `--jobs` jobs (1,000,000) of 100
users, queued before the first cycle, each asking for 1, 2 or 4 cpus (weights 6:3:1) and 1-32
GiB (a power of two, uniform), seeded. The order is DRF over cpus and memory, the allocation
rule backfill (the daemon's).

For each placement, on a fresh pool with the same jobs: the first cycle fills the empty pool
(`fill_s`); then `--cycles` steady cycles each finish 1 % of the running jobs (seeded) and
negotiate, and `decide_ms` is the mean time of those negotiations (`Negotiator.cycle`, what the
daemon's decide phase runs), `ratio` that over `fastest`'s. Also the pool's cpus and memory in
use after the fill. The load average is taken before and after.

    .venv/bin/python bench/placement.py [--slots 50000] [--jobs 1000000] [--cycles 20] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gridfair.core.negotiator import Negotiator  # noqa: E402
from gridfair.core.placement import FASTEST, PLACEMENTS  # noqa: E402
from gridfair.core.pool import CPUS, MEMORY, Node, Pool, Task  # noqa: E402
from gridfair.policies.drf import DrfOrder  # noqa: E402

GIB = 1024.0
CPUS_EACH = 16
GIB_A_CPU = (2, 2, 8, 16)  # machine m has GIB_A_CPU[m % 4]: 2:1:1
USERS = 100
FINISHED_A_CYCLE = 0.01


def machines(slots: int) -> list[Node]:
    return [Node(f"m{number}", None,
                 power=(1500.0 if number % 4 == 3 else 1000.0) * CPUS_EACH, cpus=CPUS_EACH,
                 memory=CPUS_EACH * GIB_A_CPU[number % 4] * GIB)
            for number in range(slots // CPUS_EACH)]


def jobs(count: int, seed: int) -> list[Task]:
    rng = random.Random(seed)
    cpus = rng.choices((1.0, 2.0, 4.0), (6, 3, 1), k=count)
    memory = [GIB * 2 ** rng.randrange(6) for _ in range(count)]
    users = rng.choices(range(USERS), k=count)
    return [Task(f"j{number}", f"u{users[number]}", 0.0, cpus=cpus[number],
                 memory=memory[number], duration=600.0) for number in range(count)]


def run_one(placement: str, slots: int, count: int, cycles: int, seed: int) -> dict:
    pool = Pool()
    pool.load(machines(slots), jobs(count, seed), [])
    negotiator = Negotiator(pool, DrfOrder(resources=("cpus", "memory")), explain=False,
                            placement=PLACEMENTS[placement]())
    pool.announce(0.0)
    started = time.perf_counter()
    filled = len(negotiator.cycle(0.0))
    fill_s = time.perf_counter() - started
    used = {"cpus": pool.used[CPUS] / pool.capacity[CPUS],
            "memory": pool.used[MEMORY] / pool.capacity[MEMORY]}
    rng = random.Random(seed + 1)
    running = [task for task in pool.tasks.values() if task.node is not None]
    decide = 0.0
    allocated = 0
    for cycle in range(1, cycles + 1):
        now = float(cycle)
        for _ in range(max(1, int(len(running) * FINISHED_A_CYCLE))):
            pool.finish(running.pop(rng.randrange(len(running))), now)
        started = time.perf_counter()
        decisions = negotiator.cycle(now)
        decide += time.perf_counter() - started
        allocated += len(decisions)
        running.extend(decision.task for decision in decisions)
    pool.close()
    return {"placement": placement, "fill_s": round(fill_s, 3), "fill_allocations": filled,
            "decide_ms": round(1000 * decide / cycles, 3),
            "allocations_a_cycle": round(allocated / cycles, 1),
            "used_after_fill": {name: round(value, 4) for name, value in used.items()}}


def load_averages(before: tuple[float, float, float]) -> dict[str, list[float]]:
    """The load average before the runs (`before`) and now, for a bench's JSON."""
    return {"load_average_before": [round(load, 2) for load in before],
            "load_average_after": [round(load, 2) for load in os.getloadavg()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--placements", default=",".join(PLACEMENTS),
                        help="comma-separated; fastest is always run, first")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    names = [FASTEST, *(name for name in options.placements.split(",") if name != FASTEST)]
    load_before = os.getloadavg()
    rows = []
    for name in names:
        rows.append(run_one(name, options.slots, options.jobs, options.cycles, options.seed))
        gc.collect()
        print(f"done: {name}", file=sys.stderr, flush=True)
    base = rows[0]["decide_ms"]
    for row in rows:
        row["ratio"] = round(row["decide_ms"] / base, 3) if base else None
    result = {"slots": options.slots, "jobs": options.jobs, "cycles": options.cycles,
              "seed": options.seed, "placements": rows, **load_averages(load_before)}
    if options.json:
        print(json.dumps(result))
        return
    print(f"{options.slots:,} slots, {options.jobs:,} jobs, {options.cycles} cycles; load "
          f"{result['load_average_before'][0]} -> {result['load_average_after'][0]}")
    print(f"{'placement':<16} {'fill s':>7} {'decide ms':>10} {'ratio':>6} {'allocs':>7} "
          f"{'cpus':>6} {'memory':>6}")
    for row in rows:
        print(f"{row['placement']:<16} {row['fill_s']:>7.2f} {row['decide_ms']:>10.2f} "
              f"{row['ratio']:>6.2f} {row['allocations_a_cycle']:>7.1f} "
              f"{row['used_after_fill']['cpus']:>6.3f} {row['used_after_fill']['memory']:>6.3f}")


if __name__ == "__main__":
    main()
