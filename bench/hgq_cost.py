"""What a decision of HTCondor's hierarchical group quotas costs (the `condor` order over a
tree, `policies/group_quotas.py`) as the pool's users grow.

A simulated pool of `--slots` 1-cpu slots and a two-level tree (4 departments of dynamic
quota 0.25, each of 2 projects of 0.5, surplus accepted), U users dealt round-robin into the
8 projects, each submitting enough 1-cpu jobs that the pool stays short of slots. A first
cycle fills the pool; then each of `--cycles` steady cycles finishes `--churn` running jobs
at random (seeded), their users submit one more each, and the order makes a decision per
freed slot. Printed per U: the steady cycles' CPU seconds per decision (the finishes' and
submits' events included), and a digest of every decision (job, machine, reason) so two
codes can be shown to decide alike; and the scaling exponent, the slope of log(CPU per
decision) against log(U) (1: each decision reads every user; near 0: it does not). The
plain `condor` order (no tree) runs beside as the floor: the live tree's swaps as users'
priorities cross cost the same with groups or without, in the events.

`--baseline DIR` runs each U again, right after, on the gridfair package of another checkout
(`git archive main gridfair | tar -x -C DIR`), in a fresh process: today's figures and the
change's from one command, under much the same load (printed: the machine is shared).
`--code DIR` runs only that checkout.

    .venv/bin/python bench/hgq_cost.py [--users 100,1000,10000] [--baseline DIR] [--json]

With --json, one JSON object and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `--code DIR` runs on the gridfair package of another checkout: on the path before imports.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv[:-1] else ROOT
sys.path.insert(0, str(CODE))

from gridfair.core.negotiator import Negotiator  # noqa: E402
from gridfair.core.pool import RUNNING, Node, Pool, Task  # noqa: E402
from gridfair.core.stages import OrderPolicy  # noqa: E402
from gridfair.policies.registry import build_stages  # noqa: E402

DEPARTMENTS, PROJECTS = 4, 2


def two_level_tree(users: int) -> dict[str, object]:
    """4 departments of 2 projects each, dynamic quotas, the users dealt round-robin."""
    tree: dict[str, object] = {"accept_surplus": True}
    projects = []
    for department in range(DEPARTMENTS):
        tree[f"d{department}"] = {"quota_dynamic": 1.0 / DEPARTMENTS}
        for project in range(PROJECTS):
            name = f"d{department}.p{project}"
            tree[name] = {"quota_dynamic": 1.0 / PROJECTS, "users": []}
            projects.append(name)
    for index in range(users):
        tree[projects[index % len(projects)]]["users"].append(f"u{index}")  # type: ignore[index]
    return tree


def run_one(users: int, slots: int, cycles: int, churn: int, seed: int, flat: bool
            ) -> dict[str, object]:
    """One pool's run: the steady cycles' CPU per decision and the decisions' digest;
    `flat`: the plain `condor` order, no tree (the floor the groups add to)."""
    options = {} if flat else {"groups": two_level_tree(users)}
    order = build_stages(order="condor", options=options).order
    return {"users": users, **steady_pool(order, users, slots, cycles, churn, seed)}


def steady_pool(order: OrderPolicy, users: int, slots: int, cycles: int, churn: int,
                seed: int, steady: Callable[[], None] | None = None) -> dict[str, object]:
    """`order` over a pool of `slots` 1-cpu slots and `users` users kept short of slots: a
    first cycle, then (after calling `steady`) `cycles` steady cycles of `churn` finishes and
    resubmits; their CPU per decision and the decisions' digest."""
    rng = random.Random(seed)
    pool = Pool()
    for index in range(slots):
        pool.add_node(Node(f"slot{index}", None, power=1.0, cpus=1.0, memory=1024.0))
    negotiator = Negotiator(pool, order)
    jobs_each = max(2, math.ceil(2 * slots / users))
    serial = 0

    def submit(user: int, now: float) -> None:
        nonlocal serial
        serial += 1
        negotiator.submit(Task(f"j{serial}", f"u{user}", now, cpus=1.0, memory=1.0,
                               duration=1e9), now)

    for user in range(users):
        for _ in range(jobs_each):
            submit(user, 0.0)
    digest = hashlib.sha256()

    def note(decisions: list) -> None:
        for decision in decisions:
            digest.update(f"{decision.task.id} {decision.node.name if decision.node else ''} "
                          f"{decision.reason}\n".encode())

    note(negotiator.cycle(0.0))
    if steady is not None:
        steady()
    events_cpu, cycles_cpu, decided = 0.0, 0.0, 0
    for step in range(1, cycles + 1):
        now = 60.0 * step
        running = sorted((task for task in pool.tasks.values() if task.state == RUNNING),
                         key=lambda task: task.seq)
        finished = rng.sample(running, min(churn, len(running)))
        started = time.process_time()  # the events too: incremental state costs there
        for task in finished:
            pool.finish(task, now)
            submit(int(task.user[1:]), now)
        between = time.process_time()
        decisions = negotiator.cycle(now)
        events_cpu += between - started
        cycles_cpu += time.process_time() - between
        decided += len(decisions)
        note(decisions)
    per_decision = 1e6 / max(decided, 1)
    return {"decisions": decided, "cycles_cpu_s": round(cycles_cpu, 4),
            "events_cpu_s": round(events_cpu, 4),
            "cpu_per_decision_us": round(per_decision * cycles_cpu, 2),
            "cpu_per_decision_with_events_us": round(per_decision * (cycles_cpu + events_cpu),
                                                     2),
            "idle_users": sum(1 for user in pool.users.values() if not user.running),
            "digest": digest.hexdigest()[:16]}


def exponent(runs: list[dict], key: str = "cpu_per_decision_us") -> float | None:
    """Least-squares slope of log(CPU per decision) against log(users)."""
    points = [(math.log(run["users"]), math.log(run[key])) for run in runs if run[key] > 0]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return round(sum((x - mean_x) * (y - mean_y) for x, y in points) / spread, 3)


def add_pool_arguments(parser: argparse.ArgumentParser, slots: int, cycles: int,
                       churn: int) -> None:
    """The steady pool's options (`steady_pool`), the checkouts' and --json."""
    parser.add_argument("--users", default="100,1000,10000",
                        help="comma-separated user counts")
    parser.add_argument("--slots", type=int, default=slots)
    parser.add_argument("--cycles", type=int, default=cycles)
    parser.add_argument("--churn", type=int, default=churn,
                        help="running jobs finished before each steady cycle")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--code", type=Path, default=None,
                        help="run on the gridfair package of this checkout instead")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="run each U again on the gridfair package of this checkout")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def checked_counts(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[int]:
    """The user counts of `add_pool_arguments`' options, each option checked (a usage error
    otherwise)."""
    try:
        counts = [int(count) for count in args.users.split(",") if count]
    except ValueError:
        parser.error(f"--users {args.users!r}: comma-separated whole numbers")
    if not counts or min(counts) < 1 or args.slots < 1 or args.cycles < 1 or args.churn < 1:
        parser.error("need users, --slots, --cycles and --churn >= 1")
    for option, checkout in (("--code", args.code), ("--baseline", args.baseline)):
        if checkout is not None and not (checkout / "gridfair").is_dir():
            parser.error(f"{option} {checkout}: no gridfair package there")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_pool_arguments(parser, slots=500, cycles=10, churn=50)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--flat", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    counts = checked_counts(parser, args)
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.slots, args.cycles, args.churn, args.seed,
                                 args.flat)))
        return
    sides = [("code", CODE, False), ("flat", CODE, True)] + (
        [("baseline", args.baseline, False)] if args.baseline else [])
    result: dict[str, object] = {"slots": args.slots, "cycles": args.cycles,
                                 "churn": args.churn, "seed": args.seed,
                                 "load_average_before": os.getloadavg()[0]}
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in sides}
    for users in counts:  # the sides one after the other per U: much the same load
        for label, checkout, flat in sides:
            command = [sys.executable, __file__, "--one", str(users), "--slots",
                       str(args.slots), "--cycles", str(args.cycles), "--churn",
                       str(args.churn), "--seed", str(args.seed), "--code", str(checkout),
                       *(["--flat"] if flat else [])]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.exit(f"the {label} run of {users} users failed:\n{done.stderr}")
            runs[label].append(json.loads(done.stdout))
    result["load_average_after"] = os.getloadavg()[0]
    for label, checkout, flat in sides:
        result[label] = {"checkout": str(checkout), "tree": not flat, "runs": runs[label],
                         "exponent": exponent(runs[label]), "exponent_with_events": exponent(
                             runs[label], "cpu_per_decision_with_events_us")}
    if args.baseline:
        result["same_decisions"] = [run["digest"] for run in runs["code"]] == [
            run["digest"] for run in runs["baseline"]]
        result["speedup"] = [round(base["cpu_per_decision_us"] / run["cpu_per_decision_us"], 2)
                             for run, base in zip(runs["code"], runs["baseline"], strict=True)]
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    print(heading(args, result))
    for label, _, _ in sides:
        figures = result[label]
        assert isinstance(figures, dict)
        for run in figures["runs"]:
            print(f"  {label:8} {run['users']:>6} users: {run['cpu_per_decision_us']:>9.1f} us "
                  f"CPU per decision, {run['cpu_per_decision_with_events_us']:>9.1f} us with "
                  f"the events ({run['decisions']} decisions), digest {run['digest']}")
        print(f"  {label:8} exponent {figures['exponent']}, with the events "
              f"{figures['exponent_with_events']}")
    if "same_decisions" in result:
        print("same decisions" if result["same_decisions"] else "DECISIONS DIFFER")


def heading(args: argparse.Namespace, result: dict[str, object]) -> str:
    """The text report's first line: the pool's steady cycles and the load around the run."""
    return (f"{args.slots} slots, {args.cycles} steady cycles of {args.churn} finishes; load "
            f"average {result['load_average_before']:.2f} before, "
            f"{result['load_average_after']:.2f} after")


if __name__ == "__main__":
    main()
