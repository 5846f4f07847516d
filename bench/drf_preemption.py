"""DRF with and without fair-share preemption (`--preempt fair`), simulated: how fast a user
arriving on a full pool gets its DRF share, and what it costs in vacates (issue 33, item 0).

The pool (fixed): 8 partitionable machines at 1,000 MFlops per cpu, of two cpu/memory ratios:
4 of 8 cpus and 4 GiB a cpu, 4 of 4 cpus and 8 GiB a cpu (48 cpus, 256 GiB). Users (jobs drawn
from the seed, 600-1,800 s each on any machine):
- t = 0: `cpu` (cpu-heavy: 2-4 cpus, 1-2 GiB) and `mem` (memory-heavy: 1 cpu, 4-8 GiB)
  submit enough to keep the pool full for the whole run;
- t = 1,200 s: `late` arrives on the full pool (mixed: 1-2 cpus, 4-8 GiB);
- t = 3,600 s: `mem` submits no more (its last jobs end: a user leaving).
The negotiator runs every 20 s (a daemon's cycle); every order backfills.

Per run, from the pool after every cycle (each state weighted by the time to the next):
- `dominant_share_error`: the time mean of the sum over users of |dominant share held - DRF's|,
  DRF's being progressive filling over the users with demand (their idle plus running
  requests) on the pool's cpus and memory, each user's dominant share rising at the same rate
  until its demand is met or a resource it uses is full;
- `late_to_share_s`: from `late`'s arrival until its dominant share is within 0.05 of DRF's
  (None: never, before `mem` leaves);
- utilization of cpus and memory (time means of allocated / capacity), vacates, work lost
  (cpu-seconds thrown away), jobs completed by the end, each user's mean wait;
- the error over time, in 600 s bins (for the docs' curve).

With `--scaling`, instead: the cost of a preemption against the pool's size. A full pool of
N machines of 8 cpus and 32 GiB (N = 100, 1,000, 10,000), N / 10 users each running jobs of
1 cpu and 4 GiB (8 N jobs), and a user arriving with 20 such jobs: the time of the cycle that
makes its 20 preemptions, per preemption, beside the same cycle under DRF without preemption
(the baseline: a cycle that finds no free room), after a first cycle with nobody waiting (where
the stage ranks every user against the pool's capacity, once).

    .venv/bin/python bench/drf_preemption.py [--seeds 1 2 3] [--json]
    .venv/bin/python bench/drf_preemption.py --scaling [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gridfair.core.pool import CPUS, DONE, MEMORY, QUEUED, RUNNING, Node, Pool, Task  # noqa: E402
from gridfair.sim.engine_options import EngineOptions  # noqa: E402
from gridfair.sim.scenario import Scenario, simulation_of  # noqa: E402

GIB = 1024
PER_CPU = 1000.0
#: (count, cpus, GiB a cpu)
MACHINES = ((4, 8, 4), (4, 4, 8))
ARRIVAL, LEAVING, END = 1200.0, 3600.0, 5400.0
#: user -> (first submission, last submission, jobs, cpus choices, GiB choices)
USERS = {
    "cpu": (0.0, END, 160, (2, 3, 4), (1, 2)),
    "mem": (0.0, LEAVING, 200, (1,), (4, 6, 8)),
    "late": (ARRIVAL, END, 90, (1, 2), (4, 6, 8)),
}
INTERVAL = 20.0
BIN = 600.0
#: name -> (order, preempt, options)
CONFIGURATIONS = {
    "drf": ("drf", None, {}),
    "drf+fair": ("drf", "fair", {}),
    "sdrf": ("sdrf", None, {"equal_shares": True}),
    "sdrf+fair": ("sdrf", "fair", {"equal_shares": True}),
}
RESOURCES = (CPUS, MEMORY)


def nodes() -> list[Node]:
    made = []
    for kind, (count, cpus, per_cpu) in enumerate(MACHINES):
        made += [Node(f"k{kind}-{number}", None, cpus * PER_CPU, cpus=cpus,
                      memory=cpus * per_cpu * GIB) for number in range(count)]
    return made


def tasks(seed: int) -> list[Task]:
    rng = random.Random(seed)
    made = []
    for user, (first, last, count, cpus_choices, gib_choices) in USERS.items():
        # Jobs arrive in a burst at `first` (enough to fill the pool), the rest spread to `last`.
        for number in range(count):
            at = first if number < count // 2 else rng.uniform(first, last - 600.0)
            cpus = rng.choice(cpus_choices)
            seconds = rng.uniform(600.0, 1800.0)
            made.append(Task(f"{user}.{number}", user, at, cpus=cpus,
                             memory=rng.choice(gib_choices) * GIB,
                             work=seconds * PER_CPU * cpus))
    made.sort(key=lambda task: (task.submit_time, task.id))
    return made


def drf_shares(demands: dict[str, list[float]], capacity: list[float]) -> dict[str, float]:
    """Progressive filling: each user's dominant share under DRF, given what it asks for in
    all (its idle plus running requests) of each resource; users rise together until their
    demand is met or a resource they use is full (continuous: jobs are not whole here)."""
    need = {user: [asked[r] / capacity[r] for r in RESOURCES] for user, asked in demands.items()
            if any(asked[r] > 0 for r in RESOURCES)}
    dominant = {user: max(shares) for user, shares in need.items()}
    share = dict.fromkeys(need, 0.0)
    used = [0.0] * len(RESOURCES)
    rising = set(need)
    while rising:
        # Per unit of dominant share, what the rising users take of each resource.
        rate = [sum(need[user][r] / dominant[user] for user in rising)
                for r in range(len(RESOURCES))]
        step = min(dominant[user] - share[user] for user in rising)
        for r, per in enumerate(rate):
            if per > 0:
                step = min(step, (1.0 - used[r]) / per)
        for user in rising:
            share[user] += step
        used = [total + step * per for total, per in zip(used, rate, strict=True)]
        full = {r for r in range(len(RESOURCES)) if used[r] >= 1.0 - 1e-12}
        rising = {user for user in rising if share[user] < dominant[user] - 1e-12
                  and not any(need[user][r] > 0 for r in full)}
    return share


class Sampler:
    """The pool after every cycle: DRF's shares, the error against them, utilization."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.samples: list[tuple[float, float, float, float, float]] = []
        # (time, error, late's gap, cpu utilization, memory utilization)

    def __call__(self, now: float) -> None:
        pool = self.pool
        demands: dict[str, list[float]] = {}
        for task in pool.tasks.values():
            if task.state in (QUEUED, RUNNING):
                asked = demands.setdefault(task.user, [0.0] * 4)
                asked[CPUS] += task.cpus
                asked[MEMORY] += task.memory
        fair = drf_shares(demands, pool.capacity)
        held = {user.name: max(user.usage[r] / pool.capacity[r] for r in RESOURCES)
                for user in pool.users.values()}
        error = sum(abs(held.get(user, 0.0) - fair.get(user, 0.0))
                    for user in set(held) | set(fair))
        gap = abs(held.get("late", 0.0) - fair.get("late", 0.0))
        self.samples.append((now, error, gap, pool.used[CPUS] / pool.capacity[CPUS],
                             pool.used[MEMORY] / pool.capacity[MEMORY]))

    def figures(self, end: float) -> dict:
        samples = [sample for sample in self.samples if sample[0] < end]
        times = [sample[0] for sample in samples] + [end]
        spans = [later - now for now, later in zip(times, times[1:], strict=False)]
        total = sum(spans)

        def mean(column: int) -> float:
            return sum(sample[column] * span for sample, span
                       in zip(samples, spans, strict=True)) / total

        bins = []
        for start in range(0, int(end), int(BIN)):
            inside = [(sample[1], min(later, start + BIN) - max(sample[0], start))
                      for sample, later in zip(samples, times[1:], strict=True)
                      if sample[0] < start + BIN and later > start]
            bins.append(round(sum(e * s for e, s in inside) / sum(s for _, s in inside), 3))
        after = [(now, gap) for now, _, gap, _, _ in samples if ARRIVAL <= now < LEAVING]
        last_out = max((now for now, gap in after if gap > 0.05), default=None)
        reached = (ARRIVAL if last_out is None else
                   min((now for now, _ in after if now > last_out), default=None))
        return {"dominant_share_error": round(mean(1), 4),
                "utilization": {"cpus": round(mean(3), 3), "memory": round(mean(4), 3)},
                "late_to_share_s": None if reached is None else round(reached - ARRIVAL, 1),
                "error_by_600s": bins}


def run(configuration: str, seed: int) -> dict:
    order, preempt, options = CONFIGURATIONS[configuration]
    simulation = simulation_of(Scenario(nodes(), tasks(seed)), order=order,
                               preempt=preempt or "none", policy_options=options,
                               allocation="backfill",
                               engine=EngineOptions(interval=INTERVAL))
    sampler = Sampler(simulation.negotiator.pool)
    simulation.on_cycle = sampler
    started = time.process_time()
    result = simulation.run()
    cpu = time.process_time() - started
    waits: dict[str, list[float]] = {}
    for task in result.tasks:
        if task.first_start is not None:
            waits.setdefault(task.user, []).append(task.first_start - task.submit_time)
    return {
        "configuration": configuration, "seed": seed, **sampler.figures(END),
        "vacates": result.vacates,
        "lost_cpu_s": round(sum(task.lost_work for task in result.tasks) / PER_CPU, 0),
        "completed_by_end": sum(task.state == DONE and task.finish_time <= END
                                for task in result.tasks),
        "mean_wait_s": {user: round(statistics.fmean(values), 0)
                        for user, values in sorted(waits.items())},
        "cpu_s": round(cpu, 3),
    }


def scaling_run(machines: int, preempt: str | None) -> dict:
    """One cycle on a full pool of `machines` machines with a user arriving (`--scaling`)."""
    from gridfair.core.negotiator import Negotiator
    from gridfair.policies.registry import build_stages

    stages = build_stages(order="drf", preempt=preempt)
    pool = Pool(task_key=stages.order.task_key)
    negotiator = Negotiator(pool, stages.order, stages.preempt)
    users = max(2, machines // 10)
    for index in range(machines):
        node = pool.add_node(Node(f"m{index}", None, 8 * PER_CPU, cpus=8, memory=32 * GIB))
        for slot in range(8):
            number = index * 8 + slot
            task = Task(f"j{number}", f"u{number % users}", 0.0, cpus=1, memory=4 * GIB,
                        work=1e9)
            pool.submit(task, 0.0)
            pool.start(task, node, float(number % 97))
    # A cycle with nobody waiting first: the stage ranks every user once against the pool's
    # capacity (at its first cycle, and when machines join), not per decision.
    negotiator.cycle(50.0)
    for number in range(20):
        negotiator.submit(Task(f"late.{number}", "late", 100.0, cpus=1, memory=4 * GIB,
                               work=1e9), 100.0)
    started = time.process_time()  # CPU time: steadier than wall time on a shared machine
    decisions = negotiator.cycle(100.0)
    elapsed = time.process_time() - started
    vacates = sum(decision.kind == "vacate" for decision in decisions)
    return {"machines": machines, "jobs": machines * 8, "users": users + 1,
            "preempt": preempt or "none", "vacates": vacates, "cycle_ms": round(elapsed * 1e3, 2),
            "ms_per_preemption": round(elapsed * 1e3 / vacates, 3) if vacates else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--configurations", nargs="+", default=list(CONFIGURATIONS),
                        choices=list(CONFIGURATIONS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scaling", action="store_true",
                        help="the cost of a preemption against the pool's size instead")
    args = parser.parse_args()
    if args.scaling:
        rows = [scaling_run(machines, preempt) for machines in (100, 1000, 10_000)
                for preempt in (None, "fair")]
        load = [round(value, 2) for value in os.getloadavg()]
        if args.json:
            print(json.dumps({"scaling": rows, "load_average": load}, indent=1))
            return
        print(f"{'machines':>8} {'jobs':>6} {'users':>5} {'preempt':>7} {'vacates':>7} "
              f"{'cycle ms':>9} {'ms/preemption':>13}")
        for row in rows:
            per = "-" if row["ms_per_preemption"] is None else f"{row['ms_per_preemption']:.3f}"
            print(f"{row['machines']:>8} {row['jobs']:>6} {row['users']:>5} "
                  f"{row['preempt']:>7} {row['vacates']:>7} {row['cycle_ms']:>9.2f} {per:>13}")
        print(f"load average {load}")
        return
    rows = [run(name, seed) for name in args.configurations for seed in args.seeds]
    load = [round(value, 2) for value in os.getloadavg()]
    if args.json:
        print(json.dumps({"runs": rows, "load_average": load}, indent=1))
        return
    print(f"{'configuration':<11} {'seed':>4} {'DS error':>8} {'late to share s':>15} "
          f"{'util cpu':>8} {'util mem':>8} {'vacates':>7} {'lost cpu-s':>10} {'done':>5} "
          f"{'wait cpu/mem/late s':>20} {'cpu s':>6}")
    for row in rows:
        reach = "never" if row["late_to_share_s"] is None else f"{row['late_to_share_s']:g}"
        wait = "/".join(f"{row['mean_wait_s'].get(user, 0):.0f}" for user in USERS)
        print(f"{row['configuration']:<11} {row['seed']:>4} {row['dominant_share_error']:>8.4f} "
              f"{reach:>15} {row['utilization']['cpus']:>8.3f} "
              f"{row['utilization']['memory']:>8.3f} {row['vacates']:>7} "
              f"{row['lost_cpu_s']:>10.0f} {row['completed_by_end']:>5} {wait:>20} "
              f"{row['cpu_s']:>6.2f}")
    print("error by 600 s bin:")
    for row in rows:
        print(f"  {row['configuration']:<11} {row['seed']:>4} "
              + " ".join(f"{value:.3f}" for value in row["error_by_600s"]))
    print(f"load average {load}")


if __name__ == "__main__":
    main()
