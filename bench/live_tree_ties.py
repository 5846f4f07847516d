"""The live tree's swap events when most users are idle (`policies/live_tree.py`): a user
whose job ends decays back onto HTCondor's priority floor (0.5), where every idle user is
tied, and takes its place among them by the tie-break.

A simulated pool of `--slots` 1-cpu slots, U users each submitting enough 1-cpu jobs that
most of them wait with nothing running (idle, at the floor). A first cycle fills the pool;
then each of `--cycles` steady cycles finishes `--churn` running jobs at random (seeded),
their users submit one more each, and the order makes a decision per freed slot. Run for the
flat `condor` order (HTCondor's effective priority) and for SDRF (commitments decay towards 0:
no floor, the control). Printed per order and U: the live tree's swap events in the steady
cycles and per decision, CPU per decision (the finishes' and submits' events included), a
digest of every decision (job, machine, reason) so two codes can be shown to decide alike, and
per order the exponent of events and CPU per decision against U (the slope of their logs).

`--baseline DIR` runs each (order, U) again, right after, on the gridfair package of another
checkout (`git archive main gridfair | tar -x -C DIR`), in a fresh process: today's figures
and the change's from one command, under much the same load (printed: the machine is shared).

    .venv/bin/python bench/live_tree_ties.py [--users 100,1000,10000] [--baseline DIR] [--json]

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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `--code DIR` runs on the gridfair package of another checkout: on the path before imports.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv[:-1] else ROOT
sys.path.insert(0, str(CODE))

from gridfair.core.negotiator import Negotiator  # noqa: E402
from gridfair.core.pool import RUNNING, Node, Pool, Task  # noqa: E402
from gridfair.policies.registry import build_stages  # noqa: E402

ORDERS = ("condor", "sdrf")


def run_one(order_name: str, users: int, slots: int, cycles: int, churn: int, seed: int
            ) -> dict[str, object]:
    """One pool's run: the steady cycles' swap events, CPU and decisions' digest."""
    rng = random.Random(seed)
    pool = Pool()
    for index in range(slots):
        pool.add_node(Node(f"slot{index}", None, power=1.0, cpus=1.0, memory=1024.0))
    order = build_stages(order=order_name).order
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
    tree = order.tree  # type: ignore[attr-defined]
    swaps_before = tree.swaps
    cpu, decided = 0.0, 0
    for step in range(1, cycles + 1):
        now = 60.0 * step
        running = sorted((task for task in pool.tasks.values() if task.state == RUNNING),
                         key=lambda task: task.seq)
        finished = rng.sample(running, min(churn, len(running)))
        started = time.process_time()
        for task in finished:
            pool.finish(task, now)
            submit(int(task.user[1:]), now)
        decisions = negotiator.cycle(now)
        tree.advance(now)  # the events due by now, whether or not a decision read them
        cpu += time.process_time() - started
        decided += len(decisions)
        note(decisions)
    swaps = tree.swaps - swaps_before
    idle = sum(1 for user in pool.users.values() if not user.running)
    return {"order": order_name, "users": users, "idle_users": idle, "decisions": decided,
            "swap_events": swaps, "swap_events_per_decision": round(swaps / max(decided, 1), 2),
            "cpu_s": round(cpu, 4), "cpu_per_decision_us": round(1e6 * cpu / max(decided, 1), 2),
            "digest": digest.hexdigest()[:16]}


def exponent(runs: list[dict], key: str) -> float | None:
    """Least-squares slope of log(runs' `key`) against log(users)."""
    points = [(math.log(run["users"]), math.log(run[key])) for run in runs if run[key] > 0]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return round(sum((x - mean_x) * (y - mean_y) for x, y in points) / spread, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="100,1000,10000",
                        help="comma-separated user counts")
    parser.add_argument("--orders", default=",".join(ORDERS),
                        help=f"comma-separated orders, of {', '.join(ORDERS)}")
    parser.add_argument("--slots", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--churn", type=int, default=10,
                        help="running jobs finished before each steady cycle")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--code", type=Path, default=None,
                        help="run on the gridfair package of this checkout instead")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="run each order and U again on the gridfair package of this "
                             "checkout")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    try:
        counts = [int(count) for count in args.users.split(",") if count]
    except ValueError:
        parser.error(f"--users {args.users!r}: comma-separated whole numbers")
    orders = [name for name in args.orders.split(",") if name]
    if not orders or set(orders) - set(ORDERS):
        parser.error(f"--orders {args.orders!r}: comma-separated, of {', '.join(ORDERS)}")
    if not counts or min(counts) < 1 or args.slots < 1 or args.cycles < 1 or args.churn < 1:
        parser.error("need users, --slots, --cycles and --churn >= 1")
    for option, checkout in (("--code", args.code), ("--baseline", args.baseline)):
        if checkout is not None and not (checkout / "gridfair").is_dir():
            parser.error(f"{option} {checkout}: no gridfair package there")
    if args.one is not None:
        order_name, users = args.one.split(":")
        print(json.dumps(run_one(order_name, int(users), args.slots, args.cycles, args.churn,
                                 args.seed)))
        return
    sides = [("code", CODE)] + ([("baseline", args.baseline)] if args.baseline else [])
    result: dict[str, object] = {"slots": args.slots, "cycles": args.cycles,
                                 "churn": args.churn, "seed": args.seed,
                                 "load_average_before": os.getloadavg()[0]}
    runs: dict[tuple[str, str], list[dict]] = {(label, name): [] for label, _ in sides
                                               for name in orders}
    for name in orders:
        for users in counts:  # the sides one after the other per U: much the same load
            for label, checkout in sides:
                command = [sys.executable, __file__, "--one", f"{name}:{users}", "--slots",
                           str(args.slots), "--cycles", str(args.cycles), "--churn",
                           str(args.churn), "--seed", str(args.seed), "--code", str(checkout)]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    sys.exit(f"the {label} run of {name} at {users} users failed:\n"
                             f"{done.stderr}")
                runs[label, name].append(json.loads(done.stdout))
    result["load_average_after"] = os.getloadavg()[0]
    for label, checkout in sides:
        result[label] = {"checkout": str(checkout), "orders": {
            name: {"runs": runs[label, name],
                   "exponent_events": exponent(runs[label, name], "swap_events_per_decision"),
                   "exponent_cpu": exponent(runs[label, name], "cpu_per_decision_us")}
            for name in orders}}
    if args.baseline:
        result["same_decisions"] = all(
            [run["digest"] for run in runs["code", name]]
            == [run["digest"] for run in runs["baseline", name]] for name in orders)
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    print(f"{args.slots} slots, {args.cycles} steady cycles of {args.churn} finishes; load "
          f"average {result['load_average_before']:.2f} before, "
          f"{result['load_average_after']:.2f} after")
    for name in orders:
        for label, _ in sides:
            for run in runs[label, name]:
                print(f"  {name:6} {label:8} {run['users']:>6} users ({run['idle_users']} "
                      f"idle): {run['swap_events']:>8} swap events, "
                      f"{run['swap_events_per_decision']:>8.1f} a decision, "
                      f"{run['cpu_per_decision_us']:>9.1f} us CPU a decision, "
                      f"digest {run['digest']}")
            figures = result[label]["orders"][name]  # type: ignore[index]
            print(f"  {name:6} {label:8} exponent: events {figures['exponent_events']}, "
                  f"CPU {figures['exponent_cpu']}")
    if "same_decisions" in result:
        print("same decisions" if result["same_decisions"] else "DECISIONS DIFFER")


if __name__ == "__main__":
    main()
