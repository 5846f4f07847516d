"""A month of the Google trace under SDRF or weighted DRF, streamed through the simulator.

The derived Google task list (../shared/data/google/derived/, 51,307 tasks over 2.78 h from the
first start to the last finish) is repeated end to end, generated on the fly, until it covers
`--days` days (30: ~13.3 M tasks); users keep their names, so entitlements and SDRF's
commitments carry over from copy to copy (`gridfair.sim.workloads.repeat`). The pool is the
SDRF experiments' (papers/003, Sec. 7): one aggregate node of r x the trace's mean usage
(`--capacity-ratio`, default r = 0.9), entitlements from the users' mean usage; SDRF runs with
delta = 1 - 1e-6 (`--delta`).

The run streams (`Simulation(keep_tasks=False)`): a task leaves memory when it ends, and the
users' waits are accumulated online (`tests.harness.waits.UserWaits`), so memory follows the
tasks running and queued at once, not the month. Printed: tasks, tasks/s (wall, set-up
included), peak RSS (max RSS of this process), swap events per 1,000 tasks (major page
faults: reads from disk or swap; near 0 means the run never swapped), the users' mean wait
(mean over users of each user's mean wait, the SDRF paper's figure) and the load average of
the shared machine;
`--json` adds each user's mean wait and, per user, the tasks ended by the month's end (the last
copy's submit horizon, `--days` after the first arrival) and the tasks submitted: the SDRF
paper's Fig. 5 measure, compared across policies by `bench/month_compare.py`.

    .venv/bin/python bench/google_month.py                       # SDRF, 30 days
    .venv/bin/python bench/google_month.py --policy wdrf --days 7 --json
    .venv/bin/python bench/google_month.py --days 1 --baseline /tmp/base   # side by side
    .venv/bin/python bench/google_month.py --queued-bytes 1000000   # bytes per queued task

`--baseline DIR` runs the same command afterwards on the gridfair package of another checkout
(`git worktree add --detach /tmp/base main`), in a fresh process, so both figures come from one
command under much the same load; `--code DIR` runs only that checkout. `--baseline-pure`
instead runs the same code again on its pure-Python path (GRIDFAIR_PURE_PYTHON=1): with
`--code build/compiled` (`make build/compiled/.built`), the compiled core against the plain
one (`compiled` in the figures says which ran). Tasks/s are per wall
second; CPU seconds (user + system, getrusage) and tasks per CPU second are printed beside them,
since the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `--code DIR` runs the same benchmark on the gridfair package of another checkout (the
# baseline): it must be on the path before the first import.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv[:-1] else ROOT
sys.path.insert(0, str(CODE))
sys.path.insert(1, str(ROOT))  # tests.harness: this clone's test tools

from gridfair.core.pool import Task  # noqa: E402
from gridfair.sim.scenario import run_scenario  # noqa: E402
from gridfair.sim.workloads.repeat import repeated_trace_scenario  # noqa: E402
from tests.harness.waits import UserWaits  # noqa: E402

TRACE = ROOT.parent / "shared" / "data" / "google" / "derived" / "tasks_parts00000-00001.csv.gz"


def run(trace: Path, policy: str, days: float, capacity_ratio: float, delta: float) -> dict:
    started = time.perf_counter()
    scenario = repeated_trace_scenario(trace, days, {"capacity_ratio": capacity_ratio})
    waits = UserWaits()
    month_end = scenario.tasks.last
    done_by_month_end: dict[str, list[int]] = {}  # user -> [ended by month end, submitted]

    def task_done(task: Task) -> None:
        waits.add(task)
        counts = done_by_month_end.setdefault(task.user, [0, 0])
        counts[0] += task.finish_time is not None and task.finish_time <= month_end
        counts[1] += 1

    options = {"delta": delta} if policy == "sdrf" else {}
    result, _ = run_scenario(scenario, policy=policy, policy_options=options,
                             keep_tasks=False, on_task_done=task_done)
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    from gridfair.core import pool

    return {
        "code": str(CODE),
        "compiled": not (pool.__file__ or "").endswith(".py"),
        "policy": policy,
        "days": days,
        "capacity_ratio": capacity_ratio,
        "delta": delta if policy == "sdrf" else None,
        "tasks": result.submitted,
        "completed": waits.completed,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "tasks_per_second": round(result.submitted / wall),
        "tasks_per_cpu_second": round(result.submitted / (usage.ru_utime + usage.ru_stime)),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "swap_events_per_1000_tasks": round(1000 * usage.ru_majflt / result.submitted, 4),
        "users_mean_wait": waits.users_mean_wait(),
        "users": len(waits.by_user),
        "mean_wait_by_user": {user: waits.mean_wait(user) for user in sorted(waits.by_user)},
        "done_by_month_end_by_user": {user: done_by_month_end[user]
                                      for user in sorted(done_by_month_end)},
        "vacates": result.vacates,
        "makespan_days": round(result.makespan / 86_400, 2),
        "load_average": [round(load, 2) for load in os.getloadavg()],
    }


def queued_bytes(trace: Path, count: int) -> dict:
    """Bytes of memory per queued task: `count` copies of the trace submitted to one pool with
    no node (all stay queued), as Tasks (`Pool.submit`) and as handles (`submit_deferred`)."""
    # Imported here: a baseline checkout (`--code`) may not have deferred queues.
    from gridfair.core.pool import Pool
    from gridfair.sim.workloads.repeat import RepeatedTasks
    from gridfair.sim.workloads.taskcsv import read_tasks

    tasks = read_tasks(trace)
    figures = {}
    kept = []  # both pools stay alive: the second may not reuse the first's freed memory
    for deferred in (False, True):
        copies = RepeatedTasks(tasks.tasks, tasks.span, 1e12)
        pool = Pool()
        pool.make_task = copies.make_task
        before = _rss_bytes()
        if deferred:
            for submit, user, handle in islice(copies.arrivals(), count):
                pool.submit_deferred(user, handle, submit)
        else:
            for task in islice(copies, count):
                pool.submit(task, task.submit_time)
        figures["deferred" if deferred else "tasks"] = round((_rss_bytes() - before) / count, 1)
        kept.append(pool)
    return figures


def _rss_bytes() -> int:
    """The resident set now (Linux), in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=("sdrf", "wdrf", "drf"), default="sdrf")
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--capacity-ratio", type=float, default=0.9)
    parser.add_argument("--delta", type=float, default=1 - 1e-6)
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--json", action="store_true", help="print the figures as one object")
    parser.add_argument("--code", type=Path, default=None,
                        help="run on the gridfair package of this checkout (default: this one)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="then run the same command on this checkout (e.g. a worktree of "
                             "main) in a fresh process, and print both")
    parser.add_argument("--baseline-pure", action="store_true",
                        help="then run the same code on its pure-Python path, in a fresh "
                             "process, and print both")
    parser.add_argument("--queued-bytes", type=int, default=0, metavar="N",
                        help="instead of a run: memory per queued task, N queued as Tasks and "
                             "as deferred handles (this checkout only)")
    args = parser.parse_args()
    if not args.trace.exists():
        parser.error(f"no trace at {args.trace} (the derived Google task list of ../shared/data)")
    if args.code is not None and not (args.code / "gridfair").is_dir():
        parser.error(f"--code {args.code}: no gridfair package there")
    if args.queued_bytes:
        print(json.dumps({"queued_tasks": args.queued_bytes,
                          "bytes_per_queued_task": queued_bytes(args.trace, args.queued_bytes)}))
        return
    row = run(args.trace, args.policy, args.days, args.capacity_ratio, args.delta)
    if not args.json:
        _print(row)  # now, not after the baseline: a month takes a while
    baseline = (_baseline(args) if args.baseline is not None or args.baseline_pure
                else None)
    if args.json:
        print(json.dumps(row if baseline is None else {"this": row, "baseline": baseline}))
    elif baseline is not None:
        _print(baseline)


def _print(row: dict) -> None:
    print(f"{row['code']} ({'compiled' if row['compiled'] else 'pure Python'}): "
          f"{row['policy']}  {row['days']:g} days (r={row['capacity_ratio']:g})"
          f"  {row['tasks']:,} tasks ({row['completed']:,} completed)  "
          f"{row['wall_seconds']:.1f} s wall, {row['cpu_seconds']:.1f} s CPU  "
          f"{row['tasks_per_second']:,} tasks/s ({row['tasks_per_cpu_second']:,} per CPU "
          f"second)  peak RSS {row['peak_rss_mb']:,} MB  "
          f"swap events {row['swap_events_per_1000_tasks']:g} per 1,000 tasks  "
          f"users' mean wait {row['users_mean_wait']:.1f} s ({row['users']} users)  "
          f"load average {row['load_average']}", flush=True)


def _baseline(args: argparse.Namespace) -> dict:
    """The same run on the baseline checkout, or on this code's pure-Python path, in its own
    process (its own peak RSS)."""
    code, environment = args.baseline, dict(os.environ)
    if args.baseline_pure:
        code, environment["GRIDFAIR_PURE_PYTHON"] = CODE, "1"
    if not (code / "gridfair").is_dir():
        sys.exit(f"google_month.py: --baseline {code}: no gridfair package there")
    command = [sys.executable, __file__, "--json", "--code", str(code),
               "--policy", args.policy, "--days", str(args.days),
               "--capacity-ratio", str(args.capacity_ratio), "--delta", repr(args.delta),
               "--trace", str(args.trace)]
    done = subprocess.run(command, capture_output=True, text=True, env=environment)
    if done.returncode != 0:
        sys.exit(f"google_month.py: the baseline run on {code} failed:\n{done.stderr}")
    return json.loads(done.stdout)


if __name__ == "__main__":
    main()
