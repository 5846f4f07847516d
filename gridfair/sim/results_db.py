"""Simulation results in SQLite (`simulate --db FILE`), so many runs can be compared later.

Three tables, through sqlite-utils (created on first use, columns added as they appear):
- `runs`: one row per run: what was run (grid, workload, policy, allocation rule, seed,
  options as JSON) and the run summary (makespan, utilization, Jain's index, vacates, events, ...);
- `users`: one row per user per run (`run_id` -> runs.id): the per-user metrics;
- `tasks`: one row per task per run: submit, first start, finish, state, preemptions, lost
  work (skipped with `tasks=False`; a million-task run writes a million rows).
Rows are appended; nothing is updated, so a file holds every run ever written to it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlite_utils

from gridfair.core.pool import STATE_NAMES, Task
from gridfair.errors import InputError
from gridfair.sim.metrics import RunSummary, UserMetrics

BATCH = 10_000  # rows per INSERT batch


def _clean(value: Any) -> Any:
    """SQLite stores no NaN: unknown figures become NULL."""
    if isinstance(value, float) and value != value:
        return None
    return value


def _task_rows(run_id: int, tasks: Sequence[Task]) -> Iterator[dict[str, Any]]:
    for task in tasks:
        yield {
            "run_id": run_id,
            "task": task.id,
            "user": task.user,
            "state": STATE_NAMES[task.state],
            "submit": task.submit_time,
            "first_start": task.first_start,
            "finish": task.finish_time,
            "cpus": task.cpus,
            "work": task.work,
            "duration": task.duration,
            "preemptions": task.preemptions,
            "lost_work": task.lost_work,
        }


def save_run(
    path: str | Path,
    *,
    description: Mapping[str, Any],
    summary: RunSummary,
    users: Sequence[UserMetrics],
    tasks: Sequence[Task] = (),
    save_tasks: bool = True,
) -> int:
    """Append one run to the database at `path`; returns its `runs.id`."""
    try:
        db = sqlite_utils.Database(path)
        with db.conn:
            runs = db.table("runs")
            row = {key: (json.dumps(value, sort_keys=True)
                         if isinstance(value, Mapping | list | tuple) else value)
                   for key, value in description.items()}
            row.update({key: _clean(value) for key, value in summary.as_dict().items()})
            runs.insert(row, pk="id", alter=True)
            run_id = runs.last_pk
            db.table("users").insert_all(
                ({"run_id": run_id, **{k: _clean(v) for k, v in user.as_dict().items()}}
                 for user in users),
                alter=True, batch_size=BATCH,
                foreign_keys=[("run_id", "runs", "id")],
            )
            if save_tasks and tasks:
                db.table("tasks").insert_all(
                    _task_rows(run_id, tasks), alter=True, batch_size=BATCH,
                    foreign_keys=[("run_id", "runs", "id")],
                )
    except (sqlite3.DatabaseError, OSError) as error:
        raise InputError(f"cannot write results: {error}", source=str(path)) from None
    return int(run_id)
