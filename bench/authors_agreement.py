"""gridfair against the SDRF authors' simulator (github hsadok/sdrf), task by task.

Runs gridfair on the Google derived task list (r = 0.9; SDRF at delta = 0.9999) for DRF,
weighted DRF, SDRF and SDRF with equal shares, under the stop rule and `--form authors` (or
`--form paper`), and compares every task's start time with the one the authors' simulator
wrote for the same task. Their output files are made by hand (docs/ordering.md says how, and
from which commit) and found in `--authors-dir` under the names their simulator gives them;
an order whose file is missing is reported as such and skipped.

Prints, per order, the share of tasks whose start times agree exactly (to the microsecond)
and within 1 s, and the first disagreements in time; `--json` for the figures.
Run:
    .venv/bin/python bench/authors_agreement.py --authors-dir DIR [FILE] [--form authors]
        [--show 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gridfair.core.pool import Task
from gridfair.core.stages import STOP
from gridfair.errors import GridfairError, InputError
from gridfair.policies.drf import AUTHORS, FORMS
from gridfair.sim.scenario import run_scenario
from gridfair.sim.workloads.taskcsv import MICROSECONDS, trace_scenario

DEFAULT_FILE = (Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "google"
                / "derived" / "tasks_parts00000-00001.csv.gz")
RATIO = 0.9
DELTA = 0.9999
#: Start times that differ by at most this many microseconds "agree within 1 s".
ONE_SECOND = 1_000_000


@dataclass(frozen=True)
class Order:
    """One order of the comparison: gridfair's policy and options, and the name of the
    authors' output file for it (their simulator names its files after its options)."""

    name: str
    policy: str
    delta: float | None
    equal_shares: bool
    authors_file: str


ORDERS = (
    Order("DRF", "drf", None, False, f"task_sim-wdrf-{RATIO}-0.csv"),
    Order("weighted DRF", "wdrf", None, False, f"task_sim-wdrf-{RATIO}-0-weighted.csv"),
    Order("SDRF", "sdrf", DELTA, False, f"task_sim-sdrf-{RATIO}-{DELTA}.csv"),
    Order("SDRF, equal shares", "sdrf", DELTA, True,
          f"task_sim-sdrf-{RATIO}-{DELTA}-same_share.csv"),
)


def read_authors_starts(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Task id -> [(submit_us, start_us)] in submit order, from the authors' output (the
    7-column task list, in the order tasks finished; a resubmitted task id appears once per
    submission)."""
    starts: dict[str, list[tuple[int, int]]] = {}
    try:
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                fields = line.rstrip("\r\n").split(",")
                if len(fields) != 7:
                    raise InputError(f"expected 7 columns (submit,start,finish,user,task_id,"
                                     f"cpu,mem), got {len(fields)}", source=str(path),
                                     line=number)
                try:
                    submit, start = int(fields[0]), int(fields[1])
                except ValueError:
                    raise InputError(f"submit and start must be integers (microseconds), not "
                                     f"{fields[0]!r}, {fields[1]!r}", source=str(path),
                                     line=number) from None
                starts.setdefault(fields[4], []).append((submit, start))
    except OSError as error:
        raise InputError(f"cannot read the authors' output: {error}", source=str(path)) from None
    for runs in starts.values():
        runs.sort()
    return starts


def gridfair_tasks(path: Path, order: Order, form: str) -> tuple[list[Task], float]:
    """gridfair's tasks (in file order) for `order` under the stop rule, and the run's CPU
    seconds (read + simulate)."""
    cpu = time.process_time()
    scenario = trace_scenario(path, None, {"capacity_ratio": RATIO,
                                           "equal_shares": order.equal_shares})
    options: dict[str, Any] = {"form": form}
    if order.delta is not None:
        options["delta"] = order.delta
    result, _ = run_scenario(scenario, policy=order.policy, policy_options=options,
                             allocation=STOP)
    return sorted(result.tasks, key=lambda task: task.source_index), time.process_time() - cpu


def microseconds(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * MICROSECONDS)


def compare(tasks: Iterable[Task], authors: dict[str, list[tuple[int, int]]], source: str,
            show: int) -> dict[str, Any]:
    """Agreement of gridfair's start times with the authors', task by task: the k-th
    submission of a task id in gridfair's input is matched with the k-th in theirs."""
    seen: dict[str, int] = {}
    total = exact = close = 0
    disagreements: list[dict[str, Any]] = []
    for task in tasks:
        task_id = task.id.partition("#")[0]  # gridfair's mark of a resubmitted id
        occurrence = seen.get(task_id, 0)
        seen[task_id] = occurrence + 1
        runs = authors.get(task_id, [])
        if occurrence >= len(runs):
            raise InputError(f"task {task_id} (submission {occurrence + 1}) is not in the "
                             "authors' output: was it made from the same task list?",
                             source=source)
        submit, theirs = runs[occurrence]
        ours = microseconds(task.first_start)
        if submit != microseconds(task.submit_time):
            raise InputError(f"task {task_id} (submission {occurrence + 1}) was submitted at "
                             f"{submit} us there and {microseconds(task.submit_time)} us here: "
                             "not the same task list", source=source)
        total += 1
        gap = math.inf if ours is None else abs(ours - theirs)
        exact += gap == 0
        close += gap <= ONE_SECOND
        if gap > ONE_SECOND:
            disagreements.append({"task": task_id, "user": task.user, "submit_us": submit,
                                  "authors_start_us": theirs, "gridfair_start_us": ours})
    extra = sum(len(runs) for runs in authors.values()) - total
    if extra:
        raise InputError(f"the authors' output has {extra} task(s) the task list does not",
                         source=source)
    disagreements.sort(key=lambda row: min(row["authors_start_us"],
                                           row["gridfair_start_us"] or math.inf))
    return {"tasks": total, "exact": exact, "within_1s": close,
            "exact_percent": 100 * exact / total, "within_1s_percent": 100 * close / total,
            "first_disagreements": disagreements[:show]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE,
                        help="the task list both simulators ran (default: the Google file)")
    parser.add_argument("--authors-dir", type=Path, required=True,
                        help="directory of the authors' simulator's output files")
    parser.add_argument("--form", choices=FORMS, default=AUTHORS)
    parser.add_argument("--show", type=int, default=5, help="disagreements shown per order")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not args.authors_dir.is_dir():
        parser.error(f"--authors-dir {args.authors_dir}: not a directory")
    if args.show < 0:
        parser.error("--show must be >= 0")

    rows: list[dict[str, Any]] = []
    try:
        for order in ORDERS:
            path = args.authors_dir / order.authors_file
            row: dict[str, Any] = {"order": order.name, "authors_file": order.authors_file}
            if path.exists():
                authors = read_authors_starts(path)
                tasks, cpu_seconds = gridfair_tasks(args.file, order, args.form)
                row.update(compare(tasks, authors, str(path), args.show),
                           gridfair_cpu_seconds=cpu_seconds)
            else:
                row["missing"] = True
            rows.append(row)
    except GridfairError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    load = os.getloadavg()
    run = {"file": args.file.name, "ratio": RATIO, "delta": DELTA, "allocation": STOP,
           "form": args.form}
    if args.json:
        print(json.dumps({**run, "orders": rows, "load_average": load}, indent=1))
        return 0
    print(f"{args.file.name}: r = {RATIO}, SDRF delta = {DELTA}, allocation = stop, "
          f"form = {args.form}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for row in rows:
        if row.get("missing"):
            print(f"{row['order']:<19} no {row['authors_file']} in {args.authors_dir}")
            continue
        print(f"{row['order']:<19} {row['tasks']} tasks: start times equal "
              f"{row['exact_percent']:.2f} %, within 1 s {row['within_1s_percent']:.2f} % "
              f"(gridfair {row['gridfair_cpu_seconds']:.2f} s CPU)")
        for gap in row["first_disagreements"]:
            print(f"    {gap['task']} of {gap['user'][:12]}: submitted {gap['submit_us']} us, "
                  f"started {gap['authors_start_us']} us there, {gap['gridfair_start_us']} us "
                  "in gridfair")
    return 0


if __name__ == "__main__":
    sys.exit(main())
