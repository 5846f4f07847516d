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
The pool and its cycles are `hgq_cost.py`'s (the flat order, fewer slots by default).

`--baseline DIR` runs each (order, U) again, right after, on the gridfair package of another
checkout (`git archive main gridfair | tar -x -C DIR`), in a fresh process: today's figures
and the change's from one command, under much the same load (printed: the machine is shared).

    .venv/bin/python bench/live_tree_ties.py [--users 100,1000,10000] [--baseline DIR] [--json]

With --json, one JSON object and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `--code DIR` runs on the gridfair package of another checkout: on the path before imports.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv[:-1] else ROOT
sys.path.insert(0, str(CODE))

from hgq_cost import (  # noqa: E402  # the same steady pool, bench/
    add_pool_arguments,
    checked_counts,
    exponent,
    heading,
    steady_pool,
)

from gridfair.policies.registry import build_stages  # noqa: E402

ORDERS = ("condor", "sdrf")


def run_one(order_name: str, users: int, slots: int, cycles: int, churn: int, seed: int
            ) -> dict[str, object]:
    """One pool's run: the steady cycles' swap events, CPU and decisions' digest."""
    order = build_stages(order=order_name).order
    swaps_before = [0]

    def steady() -> None:  # the tree is the order's once a negotiator attached it
        swaps_before[0] = order.tree.swaps  # type: ignore[attr-defined]

    run = steady_pool(order, users, slots, cycles, churn, seed, steady)
    tree = order.tree  # type: ignore[attr-defined]
    tree.advance(60.0 * cycles)  # the events due by the last cycle, read by a decision or not
    swaps = tree.swaps - swaps_before[0]
    decided = run["decisions"]
    assert isinstance(decided, int)
    return {"order": order_name, "users": users, **run, "swap_events": swaps,
            "swap_events_per_decision": round(swaps / max(decided, 1), 2),
            "cpu_per_decision_us": run["cpu_per_decision_with_events_us"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_pool_arguments(parser, slots=50, cycles=20, churn=10)
    parser.add_argument("--orders", default=",".join(ORDERS),
                        help=f"comma-separated orders, of {', '.join(ORDERS)}")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    counts = checked_counts(parser, args)
    orders = [name for name in args.orders.split(",") if name]
    if not orders or set(orders) - set(ORDERS):
        parser.error(f"--orders {args.orders!r}: comma-separated, of {', '.join(ORDERS)}")
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
    print(heading(args, result))
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
