"""Owner share on partitionable machines, simulated: which preemption rule reaches every
owner's share (issue 24, item 2).

The pool (fixed): 9 partitionable machines of 2-8 cpus at 1,000-4,000 MFlops per cpu, 4 GiB
per cpu, owned by four owners of different sizes (O1 16 cpus / 48,000 MFlops, O2 10 / 26,000,
O3 6 / 10,000, O4 4 / 12,000), and two users who own nothing (G1, G2) and live on the surplus.
Jobs (drawn from the seed) ask for 1-4 cpus and 1-8 GiB (never more than 4 GiB a cpu) and run
300-1,200 s on a machine of the pool's mean speed (work in MFlop, so faster machines finish
sooner). Three phases:
- t = 0: G1, G2, O2 and O3 submit enough to fill the pool;
- t = 600 s: O1 arrives on the full pool (a waiting owner);
- t = 1,800 s: demand shifts: O4 arrives, G2 submits a second burst, O3 submits no more.
The negotiator runs every 20 s (a daemon's cycle).

Per run, from the pool after every cycle (each state weighted by the time to the next):
- `share_error`: the time mean of the power owners were owed and waited for, over the pool's
  power (`core.shares.share_error`: each owner below its share with jobs waiting adds the
  smaller of what it lacks and what its waiting jobs could use);
- `served_fraction`: the fraction of the time every owner with jobs waiting is within 10 % of
  its share, or as close as its jobs allow (even its smallest waiting job, on the slowest
  cpus, would not bring it closer);
- `seconds_to_share` per phase (O1's arrival, the shift; each 1,200 s long): from the phase's
  start until every owner with jobs waiting is so, and stays so to the phase's end (None: it
  is not so at the end);
- vacates, work lost (run time thrown away), jobs completed, owners' mean wait.

    .venv/bin/python bench/owner_share_pslots.py [--seeds 1 2 3] [--json]
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

from gridfair.core.pool import CPUS, DONE, POWER, QUEUED, Node, Pool, Task  # noqa: E402
from gridfair.core.shares import share_error  # noqa: E402
from gridfair.sim.engine_options import EngineOptions  # noqa: E402
from gridfair.sim.scenario import Scenario, simulation_of  # noqa: E402

#: name, owner, cpus, MFlops per cpu
MACHINES = (
    ("o1-a", "O1", 8, 4000), ("o1-b", "O1", 8, 2000),
    ("o2-a", "O2", 4, 4000), ("o2-b", "O2", 4, 1500), ("o2-c", "O2", 2, 2000),
    ("o3-a", "O3", 4, 2000), ("o3-b", "O3", 2, 1000),
    ("o4-a", "O4", 2, 4000), ("o4-b", "O4", 2, 2000),
)
MEMORY_PER_CPU = 4096
#: (time, user, jobs)
PHASES = (
    (0.0, (("G1", 30), ("G2", 30), ("O2", 25), ("O3", 25))),
    (600.0, (("O1", 45),)),
    (1800.0, (("O4", 20), ("G2", 30))),
)
PHASE_STARTS = tuple(start for start, _ in PHASES)
PHASE_LENGTH = 1200.0
INTERVAL = 20.0
#: name -> the stages (order, preempt)
CONFIGURATIONS = {
    "hosep": ("hosep", "hosep"),
    "reclaim": ("hosep", "reclaim"),
    "sdrf+hosep": ("sdrf", "hosep"),
    "sdrf+reclaim": ("sdrf", "reclaim"),
    "no preemption": ("hosep", None),
}


def nodes() -> list[Node]:
    return [Node(name, owner, cpus * per_cpu, cpus=cpus, memory=cpus * MEMORY_PER_CPU)
            for name, owner, cpus, per_cpu in MACHINES]


def tasks(seed: int) -> list[Task]:
    rng = random.Random(seed)
    per_cpu = sum(c * p for _, _, c, p in MACHINES) / sum(c for _, _, c, _ in MACHINES)
    made = []
    for start, batch in PHASES:
        for user, count in batch:
            for number in range(count):
                cpus = rng.choice((1, 1, 2, 2, 3, 4))
                memory = rng.choice([m for m in (1024, 2048, 4096, 8192)
                                     if m <= cpus * MEMORY_PER_CPU])
                seconds = rng.uniform(300.0, 1200.0)
                made.append(Task(f"{user}.{start:.0f}.{number}", user, start + number * 0.01,
                                 cpus=cpus, memory=memory, work=seconds * per_cpu * cpus))
    made.sort(key=lambda task: task.submit_time)
    return made


class Sampler:
    """The pool after every cycle: owed share error and owners within 10 % of their share."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.total = pool.capacity[POWER]
        self.per_cpu = self.total / pool.capacity[CPUS]
        self.slowest = min(node.power_per_cpu for node in pool.nodes)
        self.samples: list[tuple[float, float, bool]] = []  # (time, error, all within)

    def __call__(self, now: float) -> None:
        waiting: dict[str, float] = {}
        smallest: dict[str, float] = {}
        for task in self.pool.tasks.values():
            if task.state == QUEUED:
                waiting[task.user] = waiting.get(task.user, 0.0) + task.cpus
                smallest[task.user] = min(smallest.get(task.user, task.cpus), task.cpus)
        owners = [user for user in self.pool.users.values() if user.provided_power > 0]
        error = share_error(((user.provided_power, user.allocated_power,
                              waiting.get(user.name, 0.0)) for user in owners),
                            self.per_cpu, self.total)
        within = all(self.served(user.provided_power, user.allocated_power,
                                 smallest[user.name] * self.slowest)
                     for user in owners if user.name in waiting)
        self.samples.append((now, error, within))

    @staticmethod
    def served(provided: float, allocated: float, least_gain: float) -> bool:
        """Within 10 % of the share, or as close as the user's jobs allow: the least it could
        gain would take it at least as far above as it is below."""
        lacking = provided - allocated
        return lacking <= 0.1 * provided or least_gain >= 2 * lacking

    def figures(self, end: float) -> dict:
        times = [sample[0] for sample in self.samples] + [end]
        spans = [later - now for now, later in zip(times, times[1:], strict=False)]
        mean_error = sum(error * span for (_, error, _), span
                         in zip(self.samples, spans, strict=True)) / max(sum(spans), 1e-9)
        served = sum(span for (_, _, within), span in zip(self.samples, spans, strict=True)
                     if within) / max(sum(spans), 1e-9)
        to_share = []
        for start in PHASE_STARTS[1:]:
            stop = start + PHASE_LENGTH
            inside = [(now, within) for now, _, within in self.samples if start <= now < stop]
            if not inside or not inside[-1][1]:
                to_share.append(None)
                continue
            last_out = max((now for now, within in inside if not within), default=None)
            reached = start if last_out is None else min(
                now for now, within in inside if now > last_out)
            to_share.append(round(reached - start, 1))
        return {"share_error": round(mean_error, 4), "served_fraction": round(served, 3),
                "seconds_to_share": to_share}


def run(configuration: str, seed: int) -> dict:
    order, preempt = CONFIGURATIONS[configuration]
    scenario = Scenario(nodes(), tasks(seed))
    # Every order backfills, as the daemon does (`policy.allocation`): SDRF's paper rule
    # would leave cpus idle behind a job too big for what is free.
    simulation = simulation_of(scenario, order=order, preempt=preempt or "none",
                               allocation="backfill",
                               engine=EngineOptions(interval=INTERVAL))
    sampler = Sampler(simulation.negotiator.pool)
    simulation.on_cycle = sampler
    started = time.process_time()
    result = simulation.run()
    cpu = time.process_time() - started
    owners = {name for _, name, _, _ in MACHINES}
    waits = [task.first_start - task.submit_time for task in result.tasks
             if task.user in owners and task.first_start is not None]
    return {
        "configuration": configuration, "seed": seed,
        **sampler.figures(result.makespan),
        "vacates": result.vacates,
        "lost_work_s": round(sum(task.lost_work for task in result.tasks)
                             / (sum(c * p for _, _, c, p in MACHINES)
                                / sum(c for _, _, c, _ in MACHINES)), 1),
        "completed": sum(task.state == DONE for task in result.tasks),
        "owners_mean_wait_s": round(statistics.fmean(waits), 1) if waits else None,
        "makespan_s": round(result.makespan, 1),
        "cpu_s": round(cpu, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--configurations", nargs="+", default=list(CONFIGURATIONS),
                        choices=list(CONFIGURATIONS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [run(name, seed) for name in args.configurations for seed in args.seeds]
    load = [round(value, 2) for value in os.getloadavg()]
    if args.json:
        print(json.dumps({"runs": rows, "load_average": load}, indent=1))
        return
    print(f"{'configuration':<14} {'seed':>4} {'share err':>9} {'served':>6} "
          f"{'to share (O1, shift) s':>23} {'vacates':>7} {'lost s':>7} {'done':>5} "
          f"{'owner wait s':>12}")
    for row in rows:
        reach = ", ".join("never" if s is None else f"{s:g}" for s in row["seconds_to_share"])
        print(f"{row['configuration']:<14} {row['seed']:>4} {row['share_error']:>9.4f} "
              f"{row['served_fraction']:>6.3f} {reach:>23} {row['vacates']:>7} "
              f"{row['lost_work_s']:>7.0f} "
              f"{row['completed']:>5} {row['owners_mean_wait_s']:>12}")
    print(f"load average {load}")


if __name__ == "__main__":
    main()
