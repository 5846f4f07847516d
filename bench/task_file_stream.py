"""`gridfair simulate` on a long 7-column task file: the reader's share of the memory.

The Google derived task list (51,307 tasks over ~2.9 h) repeated end to end for `--days`
days is written once as a task file (plain, or gzip with `--gzip`: copy k of a task keeps its
user, size and duration, is shifted by k x the trace's span and has the id `<id>@k`). Then

    gridfair simulate --workload FILE --capacity-ratio R -p drf --format json --tasks-out ...

(R = `--capacity-ratio`, default 2: a pool twice the trace's mean usage, so that queues stay
short and what a run holds at its peak is the reader's doing, not a backlog's) runs on it in a
fresh process, which reports its peak RSS and CPU seconds. With `--baseline
DIR` the same command runs again, right after, on the gridfair package of another checkout
(`git worktree add --detach /tmp/base <commit>`): before issue 13's reader the file was read
into a list of every task first; now it is checked in one pass that keeps no task and read
again as the simulation takes its tasks. The sides run the same command on the same file and
differ in the code alone; the bench checks that they print the same JSON and write the same
task file (sha256 of each).

    .venv/bin/python bench/task_file_stream.py [--days 3] [--gzip] [--baseline DIR] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "google" / "derived" / \
    "tasks_parts00000-00001.csv.gz"
# Run as a side: the CLI of the checkout on PYTHONPATH, its peak RSS and CPU printed after.
SIDE = """
import resource, sys, time
from gridfair.cli import main
sys.argv[0] = "gridfair"
try:
    main()
finally:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{usage.ru_maxrss / 1024:.1f} {usage.ru_utime + usage.ru_stime:.2f}",
          file=sys.stderr)
"""


def write_month(path: Path, days: float, compressed: bool) -> int:
    """The trace repeated over `days` days as a task file; how many tasks it has."""
    sys.path.insert(0, str(ROOT))
    from gridfair.sim.workloads.repeat import DAY, RepeatedTasks
    from gridfair.sim.workloads.taskcsv import read_tasks

    trace = read_tasks(TRACE)
    copies = RepeatedTasks(trace.tasks, trace.span, days * DAY)
    opener = gzip.open if compressed else open
    written = 0
    with opener(path, "wt", encoding="utf-8") as out:
        for task in copies:
            submit = round(task.submit_time * 1e6)
            out.write(f"{submit},{submit},{submit + round(task.duration * 1e6)},{task.user},"
                      f"{task.id},{task.cpus!r},{task.memory!r}\n")
            written += 1
    return written


def run_side(code: Path, workload: Path, ratio: float, scratch: Path, name: str) -> dict:
    tasks_out = scratch / f"{name}.tasks"
    command = [sys.executable, "-c", SIDE, "simulate", "--workload", str(workload),
               "--capacity-ratio", str(ratio), "-p", "drf", "--format", "json", "--quiet",
               "--tasks-out", str(tasks_out)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(code)})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"side {name} failed:\n{done.stderr}")
    peak_mb, cpu = (float(value) for value in done.stderr.strip().splitlines()[-1].split())
    result = {"code": str(code), "peak_rss_mb": peak_mb, "cpu_seconds": cpu,
              "wall_seconds": round(wall, 2),
              "output_sha256": hashlib.sha256(done.stdout.encode()).hexdigest()[:16],
              "tasks_out_sha256": hashlib.sha256(tasks_out.read_bytes()).hexdigest()[:16]}
    tasks_out.unlink()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--capacity-ratio", type=float, default=2.0)
    parser.add_argument("--gzip", action="store_true", help="write the task file gzipped")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout's root, run after this one on the same file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if not TRACE.exists():
        sys.exit(f"needs the Google derived task list at {TRACE} (../shared/data)")
    with tempfile.TemporaryDirectory(prefix="gridfair-taskfile-") as directory:
        scratch = Path(directory)
        workload = scratch / ("month.csv.gz" if args.gzip else "month.csv")
        tasks = write_month(workload, args.days, args.gzip)
        report = {"days": args.days, "capacity_ratio": args.capacity_ratio, "tasks": tasks,
                  "file_mb": round(workload.stat().st_size / 2**20, 1),
                  "load_average_before": os.getloadavg()[0]}
        sides = {"now": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
        for name, code in sides.items():
            report[name] = run_side(code, workload, args.capacity_ratio, scratch, name)
        report["load_average_after"] = os.getloadavg()[0]
    if args.baseline:
        report["same_output"] = all(
            report["now"][key] == report["baseline"][key]
            for key in ("output_sha256", "tasks_out_sha256"))
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return
    print(f"{tasks:,} tasks over {args.days:g} days, file {report['file_mb']} MB, "
          f"load {report['load_average_before']:.2f} -> {report['load_average_after']:.2f}")
    for name in sides:
        side = report[name]
        print(f"  {name:9} peak RSS {side['peak_rss_mb']:8.1f} MB   "
              f"CPU {side['cpu_seconds']:7.2f} s   output {side['output_sha256']} "
              f"tasks {side['tasks_out_sha256']}")
    if args.baseline:
        print(f"  same output: {report['same_output']}")


if __name__ == "__main__":
    main()
