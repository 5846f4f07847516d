"""What H-DRF costs against DRF on the Google derived task list (51,307 tasks), same run.

Runs DRF, H-DRF with no tree (which must decide exactly as DRF) and H-DRF over a two-level
tree (the users, sorted by name, dealt round-robin into 4 departments of 2 projects each;
dynamic quotas 0.25 and 0.5, surplus accepted), each `--repeat` times (best kept), at
capacity ratio 0.9, and prints their wall and CPU seconds, their ratios to DRF's, the
machine's load average, whether flat H-DRF's task times equal DRF's, and a digest of each
run's task times (a change of speed must leave them as they were). With --preempt, also
H-DRF with preemption to the tree's entitlement (`--policy hdrf-fair`) over the same tree,
and its vacates. With --group-order, each group of the tree orders its own users so (drf, the
default; condor; sdrf: `docs/groups.md`).
Run:
    .venv/bin/python bench/hdrf_cost.py [FILE] [--repeat 3] [--preempt] [--group-order O] [--json]
With --json, one JSON object and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from gridfair.core.groups import GROUP_ORDERS
from gridfair.sim.scenario import run_scenario
from gridfair.sim.workloads.taskcsv import trace_scenario

DEFAULT_FILE = (Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "google"
                / "derived" / "tasks_parts00000-00001.csv.gz")
RATIO = 0.9


def two_level_tree(users: list[str], group_order: str = "drf") -> dict[str, Any]:
    tree: dict[str, Any] = {"accept_surplus": True, "order": group_order}
    for department in range(4):
        tree[f"d{department}"] = {"quota_dynamic": 0.25}
        for project in range(2):
            tree[f"d{department}.p{project}"] = {"quota_dynamic": 0.5, "users": []}
    for index, user in enumerate(sorted(users)):
        tree[f"d{index % 4}.p{(index // 4) % 2}"]["users"].append(user)
    return tree


def timed(path: Path, policy: str, options: dict[str, Any]
          ) -> tuple[float, float, list, int]:
    """Wall and CPU seconds of one run, its tasks' (id, start, finish) and its vacates."""
    scenario = trace_scenario(path, None, {"capacity_ratio": RATIO})
    wall, cpu = time.perf_counter(), time.process_time()
    result, _ = run_scenario(scenario, policy=policy, policy_options=options)
    times = [(task.id, task.start_time, task.finish_time) for task in result.tasks]
    vacates = sum(task.preemptions for task in result.tasks)
    return time.perf_counter() - wall, time.process_time() - cpu, times, vacates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--preempt", action="store_true",
                        help="also run --policy hdrf-fair over the tree")
    parser.add_argument("--group-order", choices=GROUP_ORDERS, default="drf",
                        help="how each group of the tree orders its own users")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scenario = trace_scenario(args.file, None, {"capacity_ratio": RATIO})
    users = sorted({task.user for task in scenario.tasks})
    runs = {"drf": ("drf", {}), "hdrf-flat": ("hdrf", {}),
            "hdrf-tree": ("hdrf", {"groups": two_level_tree(users, args.group_order)})}
    if args.preempt:
        runs["hdrf-fair-tree"] = ("hdrf-fair",
                                  {"groups": two_level_tree(users, args.group_order)})
    best: dict[str, tuple[float, float]] = {}
    times: dict[str, list] = {}
    vacates: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, (policy, options) in runs.items():
            wall, cpu, times[name], vacates[name] = timed(args.file, policy, options)
            if name not in best or wall < best[name][0]:
                best[name] = (wall, cpu)
    report = {
        "file": args.file.name, "tasks": len(times["drf"]), "users": len(users),
        "group_order": args.group_order,
        "load_average": os.getloadavg(),
        "runs": {name: {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                        "wall_ratio_to_drf": round(wall / best["drf"][0], 3),
                        "vacates": vacates[name]}
                 for name, (wall, cpu) in best.items()},
        "flat_equals_drf": times["hdrf-flat"] == times["drf"],
        "digests": {name: hashlib.sha256(repr(run).encode()).hexdigest()[:16]
                    for name, run in times.items()},
    }
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return
    print(f"{report['tasks']} tasks, {report['users']} users; load average "
          f"{report['load_average'][0]:.2f}; flat H-DRF equals DRF: "
          f"{report['flat_equals_drf']}; tree digest {report['digests']['hdrf-tree']}")
    for name, figures in report["runs"].items():
        print(f"  {name:14} wall {figures['wall_s']:7.3f} s  cpu {figures['cpu_s']:7.3f} s  "
              f"x{figures['wall_ratio_to_drf']:.2f} DRF's wall  {figures['vacates']} vacates")


if __name__ == "__main__":
    main()
