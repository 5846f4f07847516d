"""Wall and CPU time of the deadline policies on the whole KTH-SP2 trace (28,467 usable jobs)
cut to 25 of its 100 processors, Fixed2x deadlines: the setting of tests/test_justice_kth.py,
whose outcomes (deadlines met, Jain's index) the tests assert; the times belong here.

    python bench/justice_kth.py [--policies justice,baseline-fs] [--json]

Needs ../shared/data/swf/KTH-SP2-1996-2.1-cln.swf.gz. Prints the load average: the machine
is shared, so CPU seconds are the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from gridfair.sim.deadline_metrics import deadline_summary
from gridfair.sim.scenario import run_scenario
from gridfair.sim.workloads.swf import read_swf
from gridfair.sim.workloads.swf_justice import justice_scenario

KTH = Path(__file__).resolve().parents[1].parent / "shared/data/swf/KTH-SP2-1996-2.1-cln.swf.gz"
POLICIES = "justice,reactive-fs,oracle,baseline-fs"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=KTH)
    parser.add_argument("--capacity", type=int, default=25)
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not args.trace.exists():
        sys.exit(f"justice_kth: {args.trace} not found (it is in ../shared/data/swf)")
    trace = read_swf(args.trace)
    rows = []
    load_before = os.getloadavg()[0]
    for policy in args.policies.split(","):
        scenario = justice_scenario(trace, args.capacity, "Fixed2x", seed=1)
        wall, cpu = time.perf_counter(), cpu_seconds()
        result, _ = run_scenario(scenario, policy=policy)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        summary = deadline_summary(result)
        rows.append({"policy": policy, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                     "jobs": summary.jobs, "deadlines_met": summary.deadlines_met,
                     "jain_index": round(summary.jain_index, 4)})
    load = {"before": load_before, "after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps({"capacity": args.capacity, "runs": rows, "loadavg_1min": load},
                         indent=2))
        return
    print(f"KTH-SP2 at {args.capacity} processors, Fixed2x (load {load['before']:.1f} -> "
          f"{load['after']:.1f})")
    print(f"{'policy':<12} {'wall s':>7} {'CPU s':>7} {'jobs':>6} {'met':>6} {'Jain':>7}")
    for row in rows:
        print(f"{row['policy']:<12} {row['wall_s']:>7.2f} {row['cpu_s']:>7.2f} {row['jobs']:>6} "
              f"{row['deadlines_met']:>6} {row['jain_index']:>7.4f}")


if __name__ == "__main__":
    main()
