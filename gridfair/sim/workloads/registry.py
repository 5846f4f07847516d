"""The scenario a workload reader builds, and the registries readers add themselves to.

A reader module imports this one and registers under a format name (`WORKLOAD_FORMATS`) or a
grid workload `kind` (`GRID_WORKLOADS`). Which module reads a format (`READER_MODULES`) and
the file endings that select a format (`FORMAT_BY_SUFFIX`) are listed here, so that a run
imports only the reader of its input (`reader`; start-up, issue 50). `gridfair.sim.scenario`
looks the readers up here, so the dependency runs one way: scenario -> readers -> registry.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, TextIO

from gridfair.core.pool import STATE_NAMES, Node, Task
from gridfair.errors import InputError
from gridfair.sim.grid import Grid
from gridfair.sim.task_stream import InOrder, input_key

#: Seconds `task`'s input needs to reach `node` before it can run there.
TransferDelay = Callable[[Task, Node], float]
#: Starts a `--tasks-out` file on its open stream (its header) and returns what writes one
#: task's line there.
LineWriter = Callable[[TextIO], Callable[[Task], None]]


class TaskFile:
    """A `--tasks-out` file open for a run: tasks come as they end, in any order, and are
    written in the input's order (`task_stream.InOrder` on `input_key`), a line each. Opened
    before the run, so an unwritable path is an error before any work is done."""

    def __init__(self, path: Path, start: LineWriter) -> None:
        self.path = path
        try:
            self.out = open(path, "w", newline="", encoding="utf-8")  # noqa: SIM115 (close())
        except OSError as error:
            raise InputError(f"cannot write the task records: {error.strerror}",
                             source=str(path)) from None
        self.order = InOrder(input_key, start(self.out))
        self.write = self.order.add

    def close(self) -> None:
        self.order.close()
        self.out.close()

    def discard(self) -> None:
        """A run that did not finish (interrupted, failed): its partial file is removed."""
        self.out.close()
        self.path.unlink(missing_ok=True)


#: Opens `--tasks-out` for a run, in the workload's own format (a trace format keeps its own).
TaskWriter = Callable[[Path], TaskFile]


def write_tasks(writer: TaskWriter, tasks: Iterable[Task], path: Path) -> None:
    """Every task of a finished run that kept them, through `writer`."""
    task_file = writer(path)
    for task in tasks:
        task_file.write(task)
    task_file.close()


def _csv_lines(out: TextIO) -> Callable[[Task], None]:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["task_id", "user", "state", "submit", "first_start", "finish", "cpus",
                     "work", "duration", "preemptions", "lost_work"])

    def line(task: Task) -> None:
        writer.writerow([task.id, task.user, STATE_NAMES[task.state], task.submit_time,
                         task.first_start, task.finish_time, task.cpus, task.work,
                         task.duration, task.preemptions, task.lost_work])

    return line


def tasks_csv(path: Path) -> TaskFile:
    """The generic per-task record: one CSV row per task, in the workload's input order."""
    return TaskFile(path, _csv_lines)


@dataclass
class Scenario:
    nodes: list[Node]
    #: A list, or an iterable in submit order that the simulator streams (see `engine`):
    #: an iterator, or a sized one read again on each pass (`taskcsv.TaskFileTasks`).
    tasks: list[Task] | Iterable[Task]
    #: Options the scenario supplies to the policies (e.g. entitlements from the trace).
    policy_options: dict[str, Any] = field(default_factory=dict)
    #: How `--tasks-out` writes this workload's tasks (a trace format keeps its own).
    task_writer: TaskWriter = tasks_csv
    #: Input items the reader left out, by reason (reported, never fatal).
    skipped: dict[str, int] = field(default_factory=dict)
    #: Seconds a task's input takes to reach a node before it runs (iSPD links), or None.
    transfer_delay: TransferDelay | None = None
    #: The allocation rule the workload's own papers use for every order, or None for the
    #: order's paper rule (see `gridfair.core.stages.ALLOCATION_RULES`).
    allocation: str | None = None
    #: Input items used with a caveat, by what it is (reported, never fatal).
    notes: dict[str, int] = field(default_factory=dict)
    #: Whether a task fits a node beyond cpus and memory (`Pool(matcher=...)`); a
    #: `PoolListener` also listens to the pool (to count what its tasks hold).
    matcher: Callable[[Task, Node], bool] | None = None
    #: The workload as it happened, for a recorded workload (a pool's history): its tasks
    #: with their recorded times, the run's totals and its curve of shares.
    recorded: Callable[[], tuple[list[Task], Any, Any]] | None = None
    #: Seconds per bin of the curve of shares a run of this workload keeps (None: none).
    curve_width: float | None = None


#: Builds a scenario from a workload file: (path, grid or None, options) -> Scenario; a
#: reader of a live source takes None for the path.
WorkloadReader = Callable[[Path | None, Grid | None, Mapping[str, Any]], Scenario]

#: Workload formats by name, the file endings that select them, and the tests that tell a
#: format from a file's content (for files whose name says nothing, e.g. `history`).
WORKLOAD_FORMATS: dict[str, WorkloadReader] = {}
FORMAT_BY_SUFFIX: dict[str, str] = {
    ".csv": "taskcsv", ".csv.gz": "taskcsv",
    "-of-00500.csv.gz": "google", "task_events": "google",
    ".wmsx": "wmsx",
    ".swf": "swf", ".swf.gz": "swf",
}
FORMAT_SNIFFERS: dict[str, Callable[[Path], bool]] = {}

#: Builds a scenario from a workload a grid defines: (grid, name, options) -> Scenario, by the
#: workload's `kind` (the HOSEP paper's synthetic sets; an iSPD model's own load).
GridWorkload = Callable[[Grid, str, Mapping[str, Any]], Scenario]
GRID_WORKLOADS: dict[str, GridWorkload] = {}


#: The module that registers each format's reader in `WORKLOAD_FORMATS` when imported (a
#: pool's history, `condor_history`, registers itself: `gridfair.sim.scenario` imports it).
READER_MODULES: dict[str, str] = {
    "taskcsv": "gridfair.sim.workloads.taskcsv",
    "google": "gridfair.sim.workloads.google",
    "wmsx": "gridfair.sim.workloads.ispd_trace",
    "swf": "gridfair.sim.workloads.swf_justice",
    "swf-grid": "gridfair.sim.workloads.swf_grid",
}


def reader(format_name: str) -> WorkloadReader:
    """The reader of `format_name` (a known format), its module imported on first use."""
    if format_name not in WORKLOAD_FORMATS:
        import_module(READER_MODULES[format_name])
    return WORKLOAD_FORMATS[format_name]
