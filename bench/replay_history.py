"""Replaying a pool's history at the simulator's usual speed: a history of 100,000 jobs
against a task list of the same jobs, in one run.

The history is the live recording in tests/data/condor_history (121 jobs of three submitters
on a personal pool's four slots, `bench/live_history.py`), scaled: copy k of every ad has its
ClusterId moved on by k x (the largest cluster + 1), its times (QDate, starts, ends, the
banner's CompletionDate) moved on by k x the recording's span, and its GlobalJobId to match;
everything else as HTCondor wrote it, a whole ad each (about 3.6 KB). `--jobs` ads are written
as one schedd history file (ads and `***` banners). The same jobs are written as a 7-column
task list (submit, start, end, user, id, cpus, memory: each job's last run as its duration).

Each side runs in a fresh process that reports its CPU seconds and peak RSS:
- history: `gridfair simulate --workload HISTORY --machines slots.long -p condor --interval 2
  --claim-worklife 1200 --format json` (the pool's four slots and its settings);
- task list: `gridfair simulate --workload TASKS --capacity-ratio R -p condor --interval 2
  --format json`, R making the aggregate pool as busy as the four slots were
  (`--capacity-ratio`, default 1.06: the recording kept them 94 % busy);
- read only: the history read by `gridfair.classads.history.read_history` and nothing else.
Jobs per CPU second of each side, and the ratio of the two runs', with the load average.

    .venv/bin/python bench/replay_history.py [--jobs 100000] [--json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The CLI run as a side, its peak RSS and CPU printed after: task_file_stream.py's.
from task_file_stream import SIDE

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "condor_history"
#: The attributes that hold times (moved by a copy's offset) in an ad.
TIMES = ("QDate", "JobStartDate", "JobCurrentStartDate", "CompletionDate",
         "EnteredCurrentStatus", "LastMatchTime", "FirstJobMatchDate", "JobLastStartDate",
         "LastVacateTime", "JobCurrentStartExecutingDate", "LastJobLeaseRenewal",
         "JobFinishedHookDone", "ShadowBday", "LastSuspensionTime")
_TIME_LINE = re.compile(rf"^({'|'.join(TIMES)}) = (\d+)$", re.M)
_CLUSTER_LINE = re.compile(r"^ClusterId = (\d+)$", re.M)
_GLOBAL_LINE = re.compile(r'^GlobalJobId = "([^#]*)#(\d+)\.(\d+)#(\d+)"$', re.M)
_BANNER = re.compile(r"ClusterId = (\d+)(.*)CompletionDate = (\d+)(.*)")
READ_ONLY = """
import resource, sys
from gridfair.classads.history import HistoryJob, read_history
jobs = sum(isinstance(item, HistoryJob) for item in read_history([sys.argv[1]]))
usage = resource.getrusage(resource.RUSAGE_SELF)
print(jobs)
print(f"{usage.ru_maxrss / 1024:.1f} {usage.ru_utime + usage.ru_stime:.2f}", file=sys.stderr)
"""


def recorded_ads() -> list[tuple[str, str]]:
    """(ad text, banner line) of each job of the recording, in file order."""
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    parts = re.split(r"^(\*\*\*[^\n]*)\n", text, flags=re.M)
    return [(parts[index], parts[index + 1]) for index in range(0, len(parts) - 1, 2)]


def write_scaled(history: Path, tasks: Path, jobs: int) -> dict:
    """The recording scaled to `jobs` jobs, as a history file and as a task list."""
    ads = recorded_ads()
    qdates = [int(_value(ad, "QDate")) for ad, _ in ads]
    ends = [int(_value(ad, "CompletionDate") or _value(ad, "EnteredCurrentStatus"))
            for ad, _ in ads]
    start, span = min(qdates), max(ends) - min(qdates) + 1
    clusters = max(int(_value(ad, "ClusterId")) for ad, _ in ads) + 1
    written = 0
    rows = []
    with open(history, "w", encoding="utf-8") as out:
        copy = 0
        while written < jobs:
            shift, moved = copy * span, copy * clusters
            for ad, banner in ads:
                if written == jobs:
                    break
                out.write(_moved(ad, shift, moved))
                out.write(_BANNER.sub(lambda m, s=shift, c=moved: (
                    f"ClusterId = {int(m.group(1)) + c}{m.group(2)}CompletionDate = "
                    f"{int(m.group(3)) + s if int(m.group(3)) else 0}{m.group(4)}"), banner))
                out.write("\n")
                row = _task_row(ad, shift, moved, start)
                if row is not None:
                    rows.append(row)
                written += 1
            copy += 1
    rows.sort()
    with open(tasks, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(",".join(str(value) for value in row) + "\n")
    return {"history_jobs": written, "task_list_tasks": len(rows), "copies": copy,
            "span_seconds": span}


def _value(ad: str, name: str) -> str | None:
    match = re.search(rf"^{name} = (\S+)$", ad, re.M)
    return match.group(1) if match else None


def _moved(ad: str, shift: int, moved: int) -> str:
    ad = _TIME_LINE.sub(lambda m: f"{m.group(1)} = {int(m.group(2)) + shift}", ad)
    ad = _CLUSTER_LINE.sub(lambda m: f"ClusterId = {int(m.group(1)) + moved}", ad)
    return _GLOBAL_LINE.sub(lambda m: (f'GlobalJobId = "{m.group(1)}#{int(m.group(2)) + moved}.'
                                       f'{m.group(3)}#{int(m.group(4)) + shift}"'), ad)


def _task_row(ad: str, shift: int, moved: int, start: int) -> tuple | None:
    """The job as a task list line (times in microseconds), or None if it never ran."""
    began = _value(ad, "JobCurrentStartDate")
    if began is None:
        return None
    end = _value(ad, "CompletionDate")
    ended = int(end) if end and int(end) else int(_value(ad, "EnteredCurrentStatus"))
    qdate = int(_value(ad, "QDate")) + shift - start
    run = ended - int(began)
    user = _value(ad, "AcctGroupUser").strip('"')
    job = f"{int(_value(ad, 'ClusterId')) + moved}.{_value(ad, 'ProcId')}"
    return (qdate * 10**6, qdate * 10**6, (qdate + run) * 10**6, user, job, 1.0, 0.0)


def run_side(name: str, command: list[str], code: str = SIDE) -> dict:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *command], capture_output=True,
                          text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"side {name} failed:\n{done.stderr[-2000:]}")
    peak, cpu = (float(value) for value in done.stderr.strip().splitlines()[-1].split())
    return {"peak_rss_mb": peak, "cpu_seconds": cpu, "wall_seconds": round(wall, 2),
            "stdout": done.stdout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--capacity-ratio", type=float, default=1.06)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", type=Path, default=None,
                        help="write the scaled files here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gridfair-replay-") as scratch:
        directory = args.keep or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        history, tasks = directory / "history", directory / "tasks.csv"
        report = write_scaled(history, tasks, args.jobs)
        report.update(history_mb=round(history.stat().st_size / 2**20, 1),
                      load_average_before=os.getloadavg()[0])
        read = run_side("read", [str(history)], READ_ONLY)
        report["read_only"] = {key: read[key] for key in ("peak_rss_mb", "cpu_seconds")}
        report["read_only"]["jobs_per_cpu_second"] = round(report["history_jobs"]
                                                           / read["cpu_seconds"])
        for side, command, count in (
            ("history", ["simulate", "--workload", str(history), "--machines",
                         str(DATA / "slots.long"), "-p", "condor", "--interval", "2",
                         "--claim-worklife", "1200", "--format", "json", "-q"],
             "history_jobs"),
            ("task_list", ["simulate", "--workload", str(tasks), "--capacity-ratio",
                           str(args.capacity_ratio), "-p", "condor", "--interval", "2",
                           "--format", "json", "-q"], "task_list_tasks"),
        ):
            result = run_side(side, command)
            summary = json.loads(result.pop("stdout"))["summary"]
            result.update(tasks=summary["tasks"], completed=summary["completed"],
                          utilization=round(summary["utilization"], 3),
                          jobs_per_cpu_second=round(report[count] / result["cpu_seconds"]))
            report[side] = result
        report["history_over_task_list"] = round(
            report["history"]["jobs_per_cpu_second"]
            / report["task_list"]["jobs_per_cpu_second"], 2)
        report["load_average_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return
    print(f"{report['history_jobs']:,} jobs ({report['copies']} copies of the recording, "
          f"history file {report['history_mb']} MB), load {report['load_average_before']:.2f}"
          f" -> {report['load_average_after']:.2f}")
    for side in ("read_only", "history", "task_list"):
        figures = report[side]
        print(f"  {side:10} {figures['jobs_per_cpu_second']:8,} jobs per CPU second   CPU "
              f"{figures['cpu_seconds']:7.2f} s   peak RSS {figures['peak_rss_mb']:7.1f} MB")
    print(f"  history replay / task list: {report['history_over_task_list']:.2f}")


if __name__ == "__main__":
    main()
