"""Simulation results in SQLite (`simulate --db FILE`), so many runs can be compared later.

Three tables, through sqlite-utils (created on first use, columns added as they appear):
- `runs`: one row per run: what was run (grid, workload, policy, allocation rule, seed,
  options as JSON) and the run summary (makespan, utilization, Jain's index, vacates, events, ...);
- `users`: one row per user per run (`run_id` -> runs.id): the per-user metrics;
- `tasks`: one row per task per run: submit, first start, finish, state, preemptions, lost
  work (skipped with `tasks=False`; a million-task run writes a million rows).
Runs are appended, so a file holds every run ever written to it. A run's rows are written
as it goes (`RunWriter`): its `runs` row first, with the summary filled in at the end.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from gridfair.core.pool import STATE_NAMES, Task
from gridfair.errors import InputError
from gridfair.sim.metrics import RunSummary, UserMetrics
from gridfair.sim.task_stream import InOrder, arrival_key

BATCH = 10_000  # rows per INSERT batch


def _clean(value: Any) -> Any:
    """SQLite stores no NaN: unknown figures become NULL."""
    if isinstance(value, float) and value != value:
        return None
    return value


def _task_row(run_id: int, task: Task) -> dict[str, Any]:
    return {
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


class RunWriter:
    """One run being appended to the database at `path`: its `runs` row is written when it is
    opened (before the simulation: an unusable file is an error before any work is done), its
    task rows in batches as the run hands tasks on (`add`, any order; written in arrival
    order), its summary and per-user rows at `finish`. A run that fails is taken out again
    (`discard`); one killed part-way leaves its `runs` row with no summary (NULL makespan)."""

    def __init__(self, path: str | Path, description: Mapping[str, Any], *,
                 save_tasks: bool = True) -> None:
        self.path = path
        self.pending: list[dict[str, Any]] = []
        with self._writing():
            self.db = sqlite_utils.Database(path)
            runs = self.db.table("runs")
            runs.insert({key: (json.dumps(value, sort_keys=True)
                               if isinstance(value, Mapping | list | tuple) else value)
                         for key, value in description.items()}, pk="id", alter=True)
            self.run_id = int(runs.last_pk)
        self.order = InOrder(arrival_key, self._task_row) if save_tasks else None

    def add(self, task: Task) -> None:
        if self.order is not None:
            self.order.add(task)

    def finish(self, summary: RunSummary, users: Sequence[UserMetrics]) -> int:
        """Write what is still held, the summary and the per-user rows; returns the run id."""
        if self.order is not None:
            self.order.close()
        with self._writing():
            self._flush()
            self.db.table("runs").update(
                self.run_id, {key: _clean(value) for key, value in summary.as_dict().items()},
                alter=True)
            self.db.table("users").insert_all(
                ({"run_id": self.run_id, **{k: _clean(v) for k, v in user.as_dict().items()}}
                 for user in users),
                alter=True, batch_size=BATCH, foreign_keys=[("run_id", "runs", "id")])
        return self.run_id

    def discard(self) -> None:
        """Take the run's rows out again (the run failed)."""
        with self._writing():
            for table in ("tasks", "runs"):
                if self.db.table(table).exists():
                    column = "id" if table == "runs" else "run_id"
                    self.db.execute(f"delete from {table} where {column} = ?", [self.run_id])
            self.db.conn.commit()

    def _task_row(self, task: Task) -> None:
        self.pending.append(_task_row(self.run_id, task))
        if len(self.pending) >= BATCH:
            with self._writing():
                self._flush()

    def _flush(self) -> None:
        if self.pending:
            self.db.table("tasks").insert_all(self.pending, alter=True, batch_size=BATCH,
                                              foreign_keys=[("run_id", "runs", "id")])
            self.pending = []

    @contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.DatabaseError, OSError) as error:
            raise InputError(f"cannot write results: {error}", source=str(self.path)) from None


def save_run(
    path: str | Path,
    *,
    description: Mapping[str, Any],
    summary: RunSummary,
    users: Sequence[UserMetrics],
    tasks: Sequence[Task] = (),
    save_tasks: bool = True,
) -> int:
    """Append one run that kept its tasks to the database at `path`; returns its `runs.id`."""
    writer = RunWriter(path, description, save_tasks=save_tasks)
    for task in tasks:
        writer.add(task)
    return writer.finish(summary, users)
