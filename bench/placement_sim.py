"""Placements in the simulator: how full, how fast and how fair each leaves a multi-resource
pool (issue 48, "Measure"), on three workloads.

- `showcase3` and `showcase3-weighted`: Showcase 3's pool and jobs (bench/live_drf_showcase.py:
  9 partitionable machines of 2, 8 and 16 GiB a cpu, 36 cpus and 192 GiB; users C, M and X
  submit at 0, A at `ARRIVAL`), simulated, not run live: `drf-fair` (pure fair share), and
  `wdrf-fair` (A weighted 2), a cycle every 2 s as the showcase's daemon. The live run's
  leaving phase (M withdrawing its idle jobs) is not simulated: every user keeps its backlog.
  Figures over the showcase's window, from A's arrival to 140 s after it; makespan and mean
  wait over all jobs.
- `google`: the derived Google task file (51,307 tasks, cpus and memory normalised to the
  largest machine), on a pool of machines of the trace's five commonest shapes (cpus, memory:
  (0.5, 0.5), (0.5, 0.25), (0.5, 0.75), (1, 1), (0.25, 0.25) in proportion 53:31:8:6:1, after
  Reiss et al., SoCC 2012, Table 1), as many as hold `--capacity-ratio` (1.0) x the trace's
  mean usage of cpus, 1,000 MFlops a cpu everywhere (so `fastest` is first fit in the
  machines' seeded order), DRF over cpus and memory with the trace's entitlements, backfill,
  a cycle every 10 s. Figures over the whole run.
- `whole-machine`: whole-machine jobs behind fragments (issue 48's last part, measured only:
  no reservation or draining rule yet). 16 machines of 16 cpus and 64 GiB; user `small`
  submits jobs of 1-4 cpus and 1-8 GiB for 300-1,800 s (Poisson, 85 % of the cpus offered)
  for 6 hours, user `whole` a job of 16 cpus and 32 GiB for 1,800 s every 15 minutes; DRF,
  backfill, no preemption, a cycle every 30 s. Also `whole_wait_mean_s` and
  `whole_wait_max_s`: the whole-machine jobs' waits (a job never started counts to the end).
  condor_defrag's shipped defaults drain nothing (`DEFRAG_DRAINING_MACHINES_PER_HOUR = 0`),
  so this is also what a pool running it unconfigured sees.

Per placement: `cpus` and `memory` (time means of used / capacity), makespan, mean wait
(submission to first start), the dominant-share error (time mean of sum_u |dominant share
held_u - (weighted) DRF's_u|, DRF's by progressive filling over the users with demand, on
the pool's totals, sampled after every cycle), and `decide_s` (process time in the
negotiation cycles; `decide_ratio` over `fastest`'s of the same run).

    .venv/bin/python bench/placement_sim.py [--workloads showcase3,google,...] [--seeds 1 2 3]
        [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Mapping
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import live_drf_showcase as showcase3  # noqa: E402
from placement import load_averages  # noqa: E402

from gridfair.core.placement import FASTEST, PLACEMENTS  # noqa: E402
from gridfair.core.pool import CPUS, MEMORY, QUEUED, RUNNING, Node, Pool, Task  # noqa: E402
from gridfair.sim.engine_options import EngineOptions  # noqa: E402
from gridfair.sim.scenario import Scenario, simulation_of  # noqa: E402
from gridfair.sim.workloads.taskcsv import scan_tasks  # noqa: E402

GOOGLE = BENCH.parent.parent / "shared" / "data" / "google" / "derived" / \
    "tasks_parts00000-00001.csv.gz"
#: Google 2011's commonest machine shapes: (cpus, memory) normalised, weight.
GOOGLE_SHAPES = (((0.5, 0.5), 53), ((0.5, 0.25), 31), ((0.5, 0.75), 8), ((1.0, 1.0), 6),
                 ((0.25, 0.25), 1))
ARRIVAL = 45.0  # the showcase's --fill bound: A arrives at most this long after the fill
WINDOW = 140.0  # the showcase's --duration
WHOLE_HOURS = 6.0  # of arrivals in the whole-machine workload


def dominant_share_error(pool: Pool, weights: Mapping[str, float] | None) -> float:
    """sum_u |held_u - DRF's_u| now (weighted DRF when `weights`: whole weights only)."""
    capacity = (pool.capacity[CPUS], pool.capacity[MEMORY])
    demand: dict[str, list[float]] = {}
    for task in pool.tasks.values():
        if task.state in (QUEUED, RUNNING):
            asked = demand.setdefault(task.user, [0.0, 0.0])
            asked[0] += task.cpus
            asked[1] += task.memory
    entitled = showcase3.drf_entitlement(
        {user: (cpus, memory) for user, (cpus, memory) in demand.items()}, capacity,
        {user: int(weight) for user, weight in (weights or {}).items()} or None)
    held = {user.name: showcase3.dominant_share(user.usage[CPUS], user.usage[MEMORY], capacity)
            for user in pool.users.values()}
    return showcase3.share_error(held, entitled)


class Sampler:
    """The pool after every cycle in [since, until): each state weighted by the time to the
    next sample."""

    def __init__(self, pool: Pool, weights: Mapping[str, float] | None, since: float,
                 until: float, every: float) -> None:
        self.pool, self.weights = pool, weights
        self.since, self.until, self.every = since, until, every
        self.samples: list[tuple[float, float, float, float]] = []

    def __call__(self, now: float) -> None:
        if not self.since <= now < self.until:
            return
        if self.samples and now - self.samples[-1][0] < self.every:
            return
        pool = self.pool
        self.samples.append((now, dominant_share_error(pool, self.weights),
                             pool.used[CPUS] / pool.capacity[CPUS],
                             pool.used[MEMORY] / pool.capacity[MEMORY]))

    def means(self, end: float) -> tuple[float, float, float]:
        times = [sample[0] for sample in self.samples] + [min(end, self.until)]
        spans = [later - now for now, later in zip(times, times[1:], strict=False)]
        total = math.fsum(spans)
        return tuple(math.fsum(sample[column] * span for sample, span
                               in zip(self.samples, spans, strict=True)) / total
                     for column in (1, 2, 3))


def showcase3_scenario(seed: int) -> tuple[list[Node], list[Task]]:
    nodes = [Node(f"k{kind}-{number}", None, cpus * showcase3.PER_CPU, cpus=cpus,
                  memory=cpus * per_cpu * showcase3.GIB)
             for kind, (count, cpus, per_cpu) in enumerate(showcase3.MACHINES)
             for number in range(count)]
    tasks = []
    for user, specs in showcase3.scenario_jobs(seed).items():
        at = 0.0 if showcase3.USERS[user][0] == "fill" else ARRIVAL
        tasks += [Task(f"{user}.{number}", user, at, cpus=spec.cpus, memory=spec.memory,
                       work=spec.work) for number, spec in enumerate(specs)]
    tasks.sort(key=lambda task: task.submit_time)  # stable: users in USERS' order
    return nodes, tasks


def google_scenario(seed: int, ratio: float) -> tuple[list[Node], list[Task], dict]:
    trace = scan_tasks(GOOGLE)
    cpus_wanted = ratio * trace.mean_usage[0]
    rng = random.Random(seed)
    shapes = [shape for shape, weight in GOOGLE_SHAPES for _ in range(weight)]
    nodes: list[Node] = []
    total = 0.0
    while total < cpus_wanted:
        cpus, memory = rng.choice(shapes)
        nodes.append(Node(f"g{len(nodes)}", None, cpus * 1000.0, cpus=cpus, memory=memory))
        total += cpus
    return nodes, list(trace.tasks), trace.entitlements()


def whole_machine_scenario(seed: int) -> tuple[list[Node], list[Task]]:
    rng = random.Random(seed)
    nodes = [Node(f"w{number}", None, 16 * 1000.0, cpus=16, memory=64 * showcase3.GIB)
             for number in range(16)]
    mean_cpus, mean_seconds = 2.5, 1050.0
    rate = 0.85 * 16 * 16 / (mean_cpus * mean_seconds)
    tasks, now = [], 0.0
    while now < WHOLE_HOURS * 3600:
        now += rng.expovariate(rate)
        tasks.append(Task(f"small.{len(tasks)}", "small", now, cpus=rng.randint(1, 4),
                          memory=rng.randint(1, 8) * showcase3.GIB,
                          duration=rng.uniform(300.0, 1800.0)))
    tasks += [Task(f"whole.{number}", "whole", number * 900.0, cpus=16,
                   memory=32 * showcase3.GIB, duration=1800.0)
              for number in range(int(WHOLE_HOURS * 4))]
    tasks.sort(key=lambda task: task.submit_time)
    return nodes, tasks


def run(workload: str, placement: str, seed: int, ratio: float) -> dict:
    if workload == "whole-machine":
        nodes, tasks = whole_machine_scenario(seed)
        order, preempt, options, interval = "drf", None, {"resources": ("cpus", "memory")}, 30.0
        since, until, every, error_weights = 0.0, math.inf, 60.0, None
    elif workload == "google":
        nodes, tasks, weights = google_scenario(seed, ratio)
        order, preempt, options, interval = "drf", None, {"resources": ("cpus", "memory"),
                                                          "weights": weights}, 10.0
        since, until, every, error_weights = 0.0, math.inf, 60.0, None
    else:
        nodes, tasks = showcase3_scenario(seed)
        weighted = workload == "showcase3-weighted"
        order = "wdrf" if weighted else "drf"
        options = {"resources": ("cpus", "memory"),
                   **({"weights": showcase3.WEIGHTS} if weighted else {})}
        preempt, interval = "fair", 2.0
        since, until, every = ARRIVAL, ARRIVAL + WINDOW, 0.0
        error_weights = showcase3.WEIGHTS if weighted else None
    simulation = simulation_of(Scenario(nodes, tasks), order=order, preempt=preempt or "none",
                               policy_options=options, allocation="backfill",
                               engine=EngineOptions(interval=interval), placement=placement)
    negotiator = simulation.negotiator
    sampler = Sampler(negotiator.pool, error_weights, since, until, every)
    simulation.on_cycle = sampler
    decide = 0.0
    cycle = negotiator.cycle

    def timed_cycle(now: float, *, single: bool = False) -> list:
        nonlocal decide
        started = time.process_time()
        decisions = cycle(now, single=single)
        decide += time.process_time() - started
        return decisions

    negotiator.cycle = timed_cycle
    result = simulation.run()
    error, cpus, memory = sampler.means(result.makespan)
    waits = [task.first_start - task.submit_time for task in result.tasks
             if task.first_start is not None]
    whole = [(task.first_start if task.first_start is not None else result.makespan)
             - task.submit_time for task in result.tasks if task.user == "whole"]
    return {"workload": workload, "placement": placement, "seed": seed,
            "cpus": round(cpus, 4), "memory": round(memory, 4),
            "makespan_s": round(result.makespan, 1),
            "mean_wait_s": round(math.fsum(waits) / len(waits), 1),
            "dominant_share_error": round(error, 4), "vacates": result.vacates,
            "decide_s": round(decide, 3),
            **({"whole_wait_mean_s": round(math.fsum(whole) / len(whole), 1),
                "whole_wait_max_s": round(max(whole), 1)} if whole else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads",
                        default="showcase3,showcase3-weighted,google,whole-machine")
    parser.add_argument("--placements", default=",".join(PLACEMENTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--capacity-ratio", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    names = [FASTEST, *(name for name in options.placements.split(",") if name != FASTEST)]
    load_before = os.getloadavg()
    rows = []
    for workload in options.workloads.split(","):
        seeds = options.seeds if workload != "google" else options.seeds[:1]
        for seed in seeds:
            base = None
            for name in names:
                row = run(workload, name, seed, options.capacity_ratio)
                base = row["decide_s"] if base is None else base
                row["decide_ratio"] = round(row["decide_s"] / base, 3) if base else None
                rows.append(row)
                print(f"done: {workload} {name} seed {seed}", file=sys.stderr, flush=True)
    result = {"runs": rows, "capacity_ratio": options.capacity_ratio,
              **load_averages(load_before)}
    if options.json:
        print(json.dumps(result))
        return
    print(f"{'workload':<19} {'placement':<15} {'seed':>4} {'cpus':>6} {'memory':>6} "
          f"{'makespan':>9} {'wait':>8} {'DS err':>7} {'vac':>5} {'decide s':>9} {'ratio':>6}")
    for row in rows:
        print(f"{row['workload']:<19} {row['placement']:<15} {row['seed']:>4} "
              f"{row['cpus']:>6.3f} {row['memory']:>6.3f} {row['makespan_s']:>9.0f} "
              f"{row['mean_wait_s']:>8.1f} {row['dominant_share_error']:>7.4f} "
              f"{row['vacates']:>5} {row['decide_s']:>9.2f} {row['decide_ratio']:>6.2f}")
    print(f"load average {result['load_average_before'][0]} -> "
          f"{result['load_average_after'][0]}")


if __name__ == "__main__":
    main()
