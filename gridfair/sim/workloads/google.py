"""Raw Google cluster trace (clusterdata-2011-2) `task_events` shards as a workload.

A shard is a gzip CSV without header, 13 columns (../shared/data/google/README.md): time (µs),
missing info, job id, task index, machine id, event type, user, scheduling class, priority,
CPU request, memory request, disk request, different-machines restriction.

Filter (the SDRF paper's, and the one that made the derived 7-column file): each SUBMIT opens
an episode of a task; the episode is kept when it goes SUBMIT -> SCHEDULE -> FINISH (with
`google_failed`, FAIL ends one too, as in the derived file) with positive CPU and memory
requests, and dropped when it ends in EVICT, KILL or LOST (or FAIL without that option). Rows
with missing info are ignored, and so are episodes submitted at time 0 (alive before the trace
began). A kept task runs for its traced duration (finish - schedule), with its SUBMIT row's
requests. On part 00000, this reproduces the derived file's rows that finish within the shard.

On a grid, a task asks for its CPU request x the largest machine's cpus (requests are
normalised to the largest machine) and no memory (grid models have none).
"""

from __future__ import annotations

import csv
import gzip
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridfair.classads.bounds import bounded_lines
from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.grid import Grid
from gridfair.sim.workloads.common import count, grid_scenario
from gridfair.sim.workloads.registry import WORKLOAD_FORMATS, Scenario

COLUMNS = 13
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST = range(7)
MICROSECONDS = 1_000_000


@dataclass(frozen=True, slots=True)
class GoogleTask:
    """One kept episode, as the derived file has it (times in µs, requests normalised)."""

    submit_us: int
    start_us: int
    finish_us: int
    user: str
    task_id: str  # job-index
    cpu: float
    memory: float


@dataclass
class TaskEvents:
    """What the shards gave: kept tasks in submit order, and counts."""

    tasks: list[GoogleTask]
    rows: int = 0
    users: set[str] = field(default_factory=set)
    jobs: set[str] = field(default_factory=set)
    skipped: dict[str, int] = field(default_factory=dict)


def shard_paths(path: Path) -> list[Path]:
    """A shard, or every `part-*.csv.gz` shard of a folder, in name order."""
    if path.is_dir():
        shards = sorted(path.glob("part-*.csv.gz"))
        if not shards:
            raise InputError("no part-*.csv.gz shard in the folder", source=str(path))
        return shards
    return [path]


def _rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as stream:
            yield from enumerate(csv.reader(bounded_lines(stream, str(path))), start=1)
    except FileNotFoundError:
        raise InputError("no such file", source=str(path)) from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error) as error:
        raise InputError(f"cannot read gzip shard: {error}", source=str(path)) from None


def _request(text: str) -> float:
    return float(text) if text else 0.0


def read_task_events(path: str | Path, *, keep_failed: bool = False) -> TaskEvents:
    """The kept tasks of a shard (or a folder of shards read in order)."""
    ends = {FINISH, FAIL} if keep_failed else {FINISH}
    result = TaskEvents(tasks=[])
    # (job, index) -> [submit µs, schedule µs or -1, user, cpu, memory] of the open episode
    open_episodes: dict[tuple[str, str], list[Any]] = {}
    for shard in shard_paths(Path(path)):
        source = str(shard)
        for number, row in _rows(shard):
            if len(row) != COLUMNS:
                raise InputError(f"expected {COLUMNS} columns of task_events, got {len(row)}",
                                 source=source, line=number)
            result.rows += 1
            result.users.add(row[6])
            result.jobs.add(row[2])
            if row[1]:
                count(result.skipped, "row with missing info")
                continue
            try:
                time = int(row[0])
                event = int(row[5])
                key = (row[2], row[3])
                if event == SUBMIT:
                    open_episodes[key] = [time, -1, row[6], _request(row[9]),
                                          _request(row[10])]
                    continue
            except ValueError as error:
                raise InputError(f"not a task_events row: {error}", source=source,
                                 line=number) from None
            episode = open_episodes.get(key)
            if episode is None:
                continue  # its SUBMIT came before the first shard read
            if event == SCHEDULE:
                if episode[1] < 0:
                    episode[1] = time
            elif event in ends:
                del open_episodes[key]
                submit, start, user, cpu, memory = episode
                if submit == 0:
                    count(result.skipped, "task episode submitted before the trace began")
                elif start < 0:
                    count(result.skipped, "task episode that ended without a SCHEDULE")
                elif cpu <= 0 or memory <= 0:
                    count(result.skipped, "task episode without positive CPU and memory "
                                          "requests")
                else:
                    result.tasks.append(GoogleTask(submit, start, time, user,
                                                   f"{row[2]}-{row[3]}", cpu, memory))
            elif event in (EVICT, FAIL, FINISH, KILL, LOST):
                del open_episodes[key]
                count(result.skipped, "task episode evicted, killed, lost"
                      + ("" if keep_failed else " or failed"))
    count(result.skipped, "task episode still open at the end of the shards",
          len(open_episodes))
    result.tasks.sort(key=lambda task: task.submit_us)  # stable: ties keep completion order
    return result


def google_scenario(path: Path, grid: Grid | None, options: Mapping[str, Any]) -> Scenario:
    """Raw task_events shards as tasks of fixed duration on the grid's machines."""
    if grid is None:
        raise InputError("raw Google shards run on a GRID here; for the SDRF setting (capacity "
                         "from the trace's mean usage) give the derived 7-column task CSV",
                         source=str(path))
    events = read_task_events(path, keep_failed=bool(options.get("google_failed")))
    kept = events.tasks
    limit = options.get("limit")
    if limit is not None:
        kept = kept[:limit]
    scale = max(machine.cpus for machine in grid.machines)

    def build(user_of: Mapping[str, str | None]) -> tuple[list[Task], list[float]]:
        tasks: list[Task] = []
        episodes: dict[str, int] = {}
        for record in kept:
            account = user_of[record.user]
            if account is None:
                continue
            # A task that failed and was resubmitted has one kept episode per run.
            episode = episodes.get(record.task_id, 0)
            episodes[record.task_id] = episode + 1
            task_id = record.task_id if episode == 0 else f"{record.task_id}#{episode}"
            tasks.append(Task(task_id, account, record.submit_us / MICROSECONDS,
                              cpus=record.cpu * scale,
                              duration=(record.finish_us - record.start_us) / MICROSECONDS,
                              source_index=len(tasks)))
        return tasks, [0.0] * len(tasks)

    return grid_scenario(path, grid, options, users=[task.user for task in kept], build=build,
                         skipped=events.skipped, default_user_map="busiest")


WORKLOAD_FORMATS["google"] = google_scenario
# clusterdata-2011-2 splits every table into 500 shards: part-NNNNN-of-00500.csv.gz
