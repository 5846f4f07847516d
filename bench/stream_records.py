"""A run's per-task records and metrics, kept to the end or streamed out as tasks end.

Two sides, each in its own process (so each has its own peak RSS), run the same simulation
and write the same outputs: a `--tasks-out` file in the workload's format, a `--db` SQLite
file with the run, per-user and per-task rows, and the per-user metrics. They differ in one
thing, whether the run keeps its tasks:
- `kept`: the run keeps every task; metrics, task file and database are made from
  `result.tasks` at the end (`gridfair simulate` before issue 13);
- `streamed`: each task is handed on as it ends (`run_streamed`): its record written, its
  metrics added, the task let go (`gridfair simulate` now).
The bench checks that both sides wrote the same thing (sha256 of the task file, of the
database's rows without wall times, and of the metrics).

Workloads:
- `google`: the Google derived task list (51,307 tasks over ~2.9 h, read as a list, as the
  reader does), SDRF, capacity ratio 0.9, delta 0.9999;
- `month`: the same trace repeated end to end for `--days` days, generated as it goes
  (`gridfair.sim.workloads.repeat`), DRF. A streamed run of it also keeps queued tasks as small
  handles until they reach their user's queue head (`Pool.submit_deferred`), which only a run
  that does not keep its tasks may do: part of the memory gap is that, not the records.

    .venv/bin/python bench/stream_records.py [--days 1] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gridfair.core.pool import Task
from gridfair.sim.metrics import RunMetrics, run_summary, user_metrics
from gridfair.sim.results_db import RunWriter, save_run
from gridfair.sim.scenario import build_scenario, run_streamed, simulation_of
from gridfair.sim.task_stream import InOrder, arrival_key
from gridfair.sim.workloads.registry import write_tasks
from gridfair.sim.workloads.repeat import repeated_trace_scenario

TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "google" / "derived" / \
    "tasks_parts00000-00001.csv.gz"
SIDES = ("kept", "streamed")


def scenario_of(workload: str, days: float):
    if workload == "google":
        return build_scenario(None, str(TRACE), options={"capacity_ratio": 0.9}), "sdrf", \
            {"delta": 0.9999}
    return repeated_trace_scenario(TRACE, days, {"capacity_ratio": 0.9}), "drf", {}


def run_side(side: str, workload: str, days: float, scratch: Path) -> dict:
    started = time.perf_counter()
    scenario, policy, options = scenario_of(workload, days)
    tasks_out, db_path = scratch / f"{side}.tasks", scratch / f"{side}.db"
    description = {"workload": workload, "policy": policy, "days": days}
    if side == "kept":
        simulation = simulation_of(scenario, policy=policy, policy_options=options)
        result = simulation.run()
        users = user_metrics(result)
        summary = run_summary(result, users)
        write_tasks(scenario.task_writer, result.tasks, tasks_out)
        save_run(db_path, description=description, summary=summary, users=users,
                 tasks=result.tasks)
    else:
        simulation = simulation_of(scenario, policy=policy, policy_options=options,
                                   keep_tasks=False)
        metrics = RunMetrics(scenario.nodes)
        in_arrival_order = InOrder(arrival_key, metrics.add)
        task_file = scenario.task_writer(tasks_out)
        run_writer = RunWriter(db_path, description)
        outputs: list[Callable[[Task], None]] = [in_arrival_order.add, task_file.write,
                                                 run_writer.add]
        result = run_streamed(simulation, outputs)
        in_arrival_order.close()
        task_file.close()
        users = metrics.users()
        summary = metrics.summary(result, users)
        run_writer.finish(summary, users)
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    figures = {key: value for key, value in summary.as_dict().items() if key != "wall_seconds"}
    return {
        "tasks": summary.tasks,
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "tasks_file_sha256": _sha256(tasks_out.read_bytes()),
        "db_rows_sha256": _db_digest(db_path),
        "metrics_sha256": _sha256(json.dumps([figures, [u.as_dict() for u in users]],
                                             sort_keys=True).encode()),
    }


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _db_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with sqlite3.connect(path) as db:
        for table in ("runs", "users", "tasks"):
            columns = [row[1] for row in db.execute(f"pragma table_info({table})")
                       if row[1] != "wall_seconds"]
            for row in db.execute(f"select {', '.join(columns)} from {table} order by rowid"):
                digest.update(repr(row).encode())
    return digest.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="google,month",
                        help="comma-separated: google, month (default both)")
    parser.add_argument("--days", type=float, default=1.0, help="the month workload's days")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    workloads = [name for name in args.workloads.split(",") if name]
    if not workloads or any(name not in ("google", "month") for name in workloads):
        parser.error("--workloads takes google, month or both")
    if args.days <= 0:
        parser.error("--days must be positive")
    if not TRACE.exists():
        sys.exit(f"needs the Google derived task list: {TRACE} (../shared/data)")
    if args.side:
        print(json.dumps(run_side(args.side, workloads[0], args.days, Path(args.scratch))))
        return
    result: dict = {"days": args.days, "load_average_before": os.getloadavg()[0]}
    for workload in workloads:
        result[workload] = {}
        with tempfile.TemporaryDirectory() as scratch:
            for side in SIDES:
                done = subprocess.run(
                    [sys.executable, __file__, "--side", side, "--workloads", workload,
                     "--days", str(args.days), "--scratch", scratch],
                    capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    sys.exit(f"the {side} side of {workload} failed:\n{done.stderr}")
                result[workload][side] = json.loads(done.stdout)
        sides = result[workload]
        result[workload]["same_outputs"] = all(
            sides["kept"][key] == sides["streamed"][key]
            for key in ("tasks_file_sha256", "db_rows_sha256", "metrics_sha256"))
    result["load_average_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    print(f"load average {result['load_average_before']:.2f} before, "
          f"{result['load_average_after']:.2f} after")
    for workload in workloads:
        sides = result[workload]
        print(f"{workload} ({sides['kept']['tasks']:,} tasks): outputs "
              f"{'identical' if sides['same_outputs'] else 'DIFFER'}")
        for side in SIDES:
            figures = sides[side]
            print(f"  {side:>8}: peak RSS {figures['peak_rss_mb']:,.0f} MB, "
                  f"{figures['cpu_seconds']:.1f} s CPU, {figures['wall_seconds']:.1f} s wall")


if __name__ == "__main__":
    main()
