"""Reader and writer of the 7-column task list of the SDRF authors' simulator, and the pool
their experiments (papers/003, section 7) build from it.

Format: no header, one task per line, `submit_us,start_us,finish_us,user,task_id,cpu,mem`
(times in microseconds, integers; cpu and mem normalised as in the Google trace), in submit
order; gzip (recognised by its magic bytes) or plain. A line with another number of columns,
a time or size that is not a number, a start before the submit or a finish before the start,
or a submit earlier than the line before is an `InputError` naming the line.

Rules implemented:
- each task runs for its trace duration, `finish_us - start_us` (seconds in the simulation);
  it is submitted at `submit_us`;
- the pool is one aggregate node whose capacity per resource is `r` times the trace's mean
  total usage, sum_i size_i x duration_i / (last finish - first start)
  (`capacity_ratio`, default 1);
- entitlements (the policies' `weights`): each user's mean usage, i.e. its share of the
  trace's cpu-seconds and memory-seconds averaged over the two resources; or with
  `equal_shares` 1/n for each of the trace's n users; or `weights` given per user (checked:
  >= 0, not all zero, naming only the trace's users);
- a task id that repeats (a task resubmitted in the trace) is made unique inside the
  simulator as `id#k`; `--tasks-out` writes the original id back.
"""

from __future__ import annotations

import gzip
import math
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from gridfair.classads.bounds import bounded_lines
from gridfair.core.native import mypyc_attr
from gridfair.core.pool import Node, Task
from gridfair.core.stages import STOP
from gridfair.errors import ConfigError, InputError, not_text
from gridfair.policies.drf import Entitlements
from gridfair.sim.engine import DeferredWorkload
from gridfair.sim.grid import Grid
from gridfair.sim.workloads.registry import (
    WORKLOAD_FORMATS,
    Scenario,
    TaskFile,
)

COLUMNS = ("submit_us", "start_us", "finish_us", "user", "task_id", "cpu", "mem")
MICROSECONDS = 1e6
_GZIP_MAGIC = b"\x1f\x8b"
# Marks a repeated task id made unique; trace ids are "job-index" and never contain it.
_REPEAT = "#"
#: The largest repeat filter (128 MB): about 20 bits a line up to 50M lines; past that the
#: candidates grow, and stay exact.
MAX_FILTER_BITS = 1 << 30
#: A task file of at most this many tasks is read once and its tasks held (about 100 bytes a
#: task, 6.5 MB at most); a longer one is read again as its tasks are taken (memory flat).
HELD_TASKS = 1 << 16


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as raw:
        return raw.read(2) == _GZIP_MAGIC


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if _is_gzip(path) else \
        open(path, encoding="utf-8")


@dataclass(frozen=True, slots=True)
class LargestTask:
    """The first task of the file that asks for the most of one resource."""

    line: int
    task_id: str
    cpus: float
    memory: float


@dataclass
class TaskTrace:
    """A task file: its tasks in file order, and the usage the trace itself recorded."""

    source: str
    #: The tasks: held from the one read of a short file (`HeldTasks`), read from the file
    #: again as they are taken (`TaskFileTasks`), or a list (`read_tasks`).
    tasks: list[Task] | HeldTasks | TaskFileTasks
    #: Mean total (cpu, memory) in use between the first start and the last finish.
    mean_usage: list[float]
    #: Each user's (cpu-seconds, memory-seconds) in the trace, users in order of appearance.
    user_usage: dict[str, list[float]] = field(default_factory=dict)
    #: Seconds from the first start to the last finish: the span `mean_usage` is taken over.
    span: float = 0.0
    #: The task asking for the most cpu, and the one asking for the most memory.
    largest: tuple[LargestTask, LargestTask] | None = None

    def resource_entitlements(self) -> dict[str, dict[str, float]]:
        """Each user's share of the trace's use of each resource: its mean use of r over the
        mean total use of r (the SDRF authors' per-resource weights, w_ir)."""
        totals = [math.fsum(usage[r] for usage in self.user_usage.values()) for r in range(2)]
        return {user: {name: usage[r] / totals[r] if totals[r] > 0 else 0.0
                       for r, name in enumerate(("cpus", "memory"))}
                for user, usage in self.user_usage.items()}

    def entitlements(self) -> dict[str, float]:
        """Each user's share of the trace's usage, averaged over cpu and memory."""
        return {user: math.fsum(shares.values()) / 2
                for user, shares in self.resource_entitlements().items()}


def scan_tasks(path: str | Path, hold_at_most: int = HELD_TASKS) -> TaskTrace:
    """Check every line of a 7-column task file (gzip or plain) and total its usage. A file of
    at most `hold_at_most` tasks is read this once: its tasks are held, parsed, in columns
    (`HeldTasks`); the trace's `tasks` of a longer one read the file again as they are taken
    (`TaskFileTasks`), so a simulation holds only the tasks queued and running.
    `Task.source_index` is the task's order."""
    path = Path(path)
    source = str(path)
    stamp = _stamp(path)  # before the read: a change made during it is caught too
    held: HeldTasks | None = HeldTasks() if hold_at_most > 0 else None
    with _reading(path) as lines:
        totals = _Totals(repeat_filter_bits(path))
        for row in _rows(bounded_lines(lines, source), source):
            totals.add(row)
            if held is not None:
                if totals.count > hold_at_most:
                    held = None  # too long to hold: read again as taken
                else:
                    held.add(row)
    if not totals.count:
        raise InputError("the task file has no tasks", source=source)
    span = (totals.last_finish - totals.first_start) / MICROSECONDS
    user_usage = totals.user_usage
    mean_usage = [math.fsum(usage[r] for usage in user_usage.values()) / span if span > 0 else 0.0
                  for r in range(2)]
    tasks: HeldTasks | TaskFileTasks
    if held is not None:
        held.maybe_repeated = totals.maybe_repeated
        tasks = held
    else:
        tasks = TaskFileTasks(path, totals.count, totals.maybe_repeated, stamp)
    return TaskTrace(source, tasks, mean_usage, user_usage, span, totals.largest)


def read_tasks(path: str | Path) -> TaskTrace:
    """`scan_tasks` with the tasks read into a list (a workload that is indexed, such as
    `repeat.RepeatedTasks`)."""
    trace = scan_tasks(path)
    trace.tasks = list(trace.tasks)
    return trace


def _unique_id(task_id: str, maybe_repeated: frozenset[str], seen: dict[str, int]) -> str:
    """The id made unique as `id#k` for its k-th repeat in `seen`'s pass: only the candidates
    the scan found (a superset of the repeating ids) are counted."""
    if task_id not in maybe_repeated:
        return task_id
    repeats = seen.get(task_id, 0)
    seen[task_id] = repeats + 1
    return f"{task_id}{_REPEAT}{repeats}" if repeats else task_id


@mypyc_attr(allow_interpreted_subclasses=True)
class HeldTasks(DeferredWorkload):
    """The tasks of a short task file, held parsed in columns from its one read (the file is
    not read again): each pass over them makes fresh Tasks, in file (= submit) order.

    A streamed run takes them deferred (`DeferredWorkload`): a task is made when it reaches
    its user's queue head, so a user's backlog of thousands is a queue of handles (its file
    index), not a heap of Tasks that every start pops from."""

    def __init__(self) -> None:
        self.submits = array("d")
        self.durations = array("d")
        self.cpus = array("d")
        self.memories = array("d")
        self.user_numbers = array("l")
        self.users: list[str] = []
        self._user_number: dict[str, int] = {}
        self.task_ids: list[str] = []
        self.maybe_repeated: frozenset[str] = frozenset()
        self._unique: list[str] | None = None

    def add(self, row: tuple) -> None:
        _, submit, start, finish, user, task_id, cpu, memory = row
        number = self._user_number.get(user)
        if number is None:
            number = self._user_number[user] = len(self.users)
            self.users.append(user)
        self.submits.append(submit / MICROSECONDS)
        self.durations.append((finish - start) / MICROSECONDS)
        self.cpus.append(cpu)
        self.memories.append(memory)
        self.user_numbers.append(number)
        self.task_ids.append(task_id)

    def __len__(self) -> int:
        return len(self.task_ids)

    def unique_ids(self) -> list[str]:
        """Each task's id in file order, repeats made unique (`_unique_id`): counted in file
        order once, as deferred tasks are made in their users' queue order instead."""
        if self._unique is None:
            maybe_repeated = self.maybe_repeated
            seen: dict[str, int] = {}
            self._unique = ([_unique_id(task_id, maybe_repeated, seen)
                             for task_id in self.task_ids] if maybe_repeated else self.task_ids)
        return self._unique

    def make_task(self, handle: int) -> Task:
        return Task(self.unique_ids()[handle], self.users[self.user_numbers[handle]],
                    self.submits[handle], cpus=self.cpus[handle], memory=self.memories[handle],
                    duration=self.durations[handle], source_index=handle)

    def arrivals(self) -> Iterator[tuple[float, str, int]]:
        users, user_numbers = self.users, self.user_numbers
        for index, submit in enumerate(self.submits):
            yield submit, users[user_numbers[index]], index

    def __iter__(self) -> Iterator[Task]:
        # map, not a generator expression: compiled (setup.py), that would be a list
        return map(self.make_task, range(len(self.task_ids)))


class TaskFileTasks:
    """The tasks of a scanned task file, read from it each time they are iterated over, in
    file (= submit) order, repeated ids made unique as the scan found them (`_unique_id`)."""

    def __init__(self, path: Path, count: int, maybe_repeated: frozenset[str],
                 stamp: tuple[int, int]) -> None:
        self.path, self.count, self.maybe_repeated, self.stamp = \
            path, count, maybe_repeated, stamp

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Task]:
        source = str(self.path)
        if _stamp(self.path) != self.stamp:
            raise InputError("the task file changed after it was checked", source=source)
        maybe_repeated = self.maybe_repeated
        seen: dict[str, int] = {}
        index = 0
        with _reading(self.path) as lines:
            for _, submit, start, finish, user, task_id, cpu, memory in _rows(
                    bounded_lines(lines, source), source):
                yield Task(_unique_id(task_id, maybe_repeated, seen), user,
                           submit / MICROSECONDS, cpus=cpu, memory=memory,
                           duration=(finish - start) / MICROSECONDS, source_index=index)
                index += 1
        if index != self.count:
            raise InputError("the task file changed after it was checked", source=source)


@contextmanager
def _reading(path: Path) -> Iterator[TextIO]:
    """The file's lines, gzip or plain; an unreadable file is an `InputError` naming it."""
    try:
        with _open_text(path) as lines:
            yield lines
    except UnicodeDecodeError as error:
        raise InputError(f"task file: {not_text(error, whole=False)}", source=str(path)
                         ) from None
    except (OSError, EOFError, zlib.error) as error:
        raise InputError(f"cannot read task file: {error}", source=str(path)) from None


def _stamp(path: Path) -> tuple[int, int]:
    try:
        status = path.stat()
    except OSError as error:
        raise InputError(f"cannot read task file: {error}", source=str(path)) from None
    return status.st_size, status.st_mtime_ns


def repeat_filter_bits(path: Path) -> int:
    """The size of a scan's repeat filter (`_Totals`), in bits: about 20 per line the file
    may have, guessed from its size (a line of 32 bytes, a gzip file's text 8 times its
    size), at most `MAX_FILTER_BITS`; a wrong guess costs memory, not truth."""
    size = _stamp(path)[0]
    expected_lines = (8 * size if _is_gzip(path) else size) // 32
    return min(1 << max(16, (20 * expected_lines).bit_length()), MAX_FILTER_BITS)


class _Totals:
    """What the scan adds up over the lines: each user's usage, the span, the count, the
    largest tasks, and the ids that may repeat.

    Repeats are found without keeping every id: each id sets two bits of a filter (its hash's
    low and high halves); an id whose two bits are both set already may have been seen before
    and is kept, exactly, in `maybe_repeated`. Every id that repeats is there (its second
    line finds its bits set); a few that do not are too (a few in a thousand, with the
    filter sized by `repeat_filter_bits`)."""

    def __init__(self, filter_bits: int) -> None:
        self.user_usage: dict[str, list[float]] = {}
        self.first_start, self.last_finish = math.inf, -math.inf
        self.count = 0
        self.most_cpu: LargestTask | None = None
        self.most_memory: LargestTask | None = None
        self._filter = bytearray(max(filter_bits // 8, 1))
        self._mask = 8 * len(self._filter) - 1
        self._maybe_repeated: set[str] = set()

    def add(self, row: tuple) -> None:
        number, _, start, finish, user, task_id, cpu, memory = row
        self.count += 1
        duration = (finish - start) / MICROSECONDS
        usage = self.user_usage.get(user)
        if usage is None:
            usage = self.user_usage[user] = [0.0, 0.0]
        usage[0] += cpu * duration
        usage[1] += memory * duration
        if start < self.first_start:
            self.first_start = start
        if finish > self.last_finish:
            self.last_finish = finish
        if self.most_cpu is None or cpu > self.most_cpu.cpus:
            self.most_cpu = LargestTask(number, task_id, cpu, memory)
        if self.most_memory is None or memory > self.most_memory.memory:
            self.most_memory = LargestTask(number, task_id, cpu, memory)
        hashed = hash(task_id)
        low, high = hashed & self._mask, (hashed >> 32) & self._mask
        bits = self._filter
        low_bit, high_bit = 1 << (low & 7), 1 << (high & 7)
        if bits[low >> 3] & low_bit and bits[high >> 3] & high_bit:
            self._maybe_repeated.add(task_id)
        else:
            bits[low >> 3] |= low_bit
            bits[high >> 3] |= high_bit

    @property
    def maybe_repeated(self) -> frozenset[str]:
        return frozenset(self._maybe_repeated)

    @property
    def largest(self) -> tuple[LargestTask, LargestTask] | None:
        if self.most_cpu is None or self.most_memory is None:
            return None
        return self.most_cpu, self.most_memory


def _number(text: str, column: int, source: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InputError(f"column {column + 1} ({COLUMNS[column]}) must be a number >= 0, "
                         f"not {text!r}", source=source, line=line)
    return value


def _explain_bad_line(fields: list[str], source: str, line: int) -> None:
    """Raise the first error of a line the fast check refused: a column that is not a number
    >= 0, then times out of order."""
    submit, start, finish = (_number(fields[column], column, source, line)
                             for column in range(3))
    for column in (5, 6):
        _number(fields[column], column, source, line)
    if not submit <= start <= finish:
        raise InputError(f"times out of order: submit {fields[0]}, start {fields[1]}, "
                         f"finish {fields[2]} (need submit <= start <= finish)",
                         source=source, line=line)


def _rows(lines: Iterable[str], source: str) -> Iterator[tuple]:
    """Each task line checked: (line number, submit, start, finish, user, task id, cpu,
    memory), times in microseconds; the first bad line is an `InputError` naming it."""
    last_submit = 0.0
    infinity = math.inf
    columns = len(COLUMNS)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.rstrip("\r\n").split(",")
        if len(fields) != columns:
            raise InputError(f"expected {columns} columns ({','.join(COLUMNS)}), got "
                             f"{len(fields)}", source=source, line=number)
        # One check for the common, valid line (NaN fails every comparison); a line it refuses
        # is explained column by column.
        try:
            submit, start, finish = float(fields[0]), float(fields[1]), float(fields[2])
            cpu, memory = float(fields[5]), float(fields[6])
        except ValueError:
            submit = math.nan
        if not (0.0 <= submit <= start <= finish < infinity and 0.0 <= cpu < infinity
                and 0.0 <= memory < infinity):
            _explain_bad_line(fields, source, number)
        if submit < last_submit:
            raise InputError(f"submit {fields[0]} is before the previous line's: the file must "
                             "be in submit order", source=source, line=number)
        last_submit = submit
        user, task_id = fields[3], fields[4]
        if not user or not task_id:
            raise InputError("empty user or task_id", source=source, line=number)
        yield number, submit, start, finish, user, task_id, cpu, memory


def trace_scenario(path: Path | None, grid: Grid | None,
                   options: Mapping[str, Any]) -> Scenario:
    """The SDRF experiments' set-up: one aggregate node of `capacity_ratio` x the trace's
    mean usage, entitlements from the users' mean usage (or equal), and the stop rule for
    every order, as the authors' simulator has it. No grid is needed."""
    assert path is not None  # a task list is read from its file
    capacity_ratio(options)  # a bad ratio is told before the file is read
    return trace_pool_scenario(scan_tasks(path), options)


def capacity_ratio(options: Mapping[str, Any]) -> float:
    """The `capacity_ratio` option (default 1), checked."""
    ratio = options.get("capacity_ratio")
    ratio = 1.0 if ratio is None else ratio
    if not isinstance(ratio, int | float) or not math.isfinite(ratio) or ratio <= 0:
        raise InputError(f"--capacity-ratio must be a number > 0, not {ratio!r}")
    return ratio


def trace_pool_scenario(trace: TaskTrace, options: Mapping[str, Any]) -> Scenario:
    """`trace_scenario` of a trace already read (its tasks may then be replaced by a longer
    workload with the same mean usage, as `gridfair.sim.workloads.repeat` does)."""
    ratio = capacity_ratio(options)
    cpus, memory = (ratio * usage for usage in trace.mean_usage)
    for task in trace.largest or ():
        if task.cpus > cpus or task.memory > memory:
            raise InputError(
                f"task {task.task_id} needs ({task.cpus:g} cpu, {task.memory:g} mem), more "
                f"than the pool's ({cpus:g}, {memory:g}) at --capacity-ratio {ratio:g}",
                source=trace.source, line=task.line)
    per_resource: dict[str, Any] = {}
    configured = options.get("weights")
    if configured is not None:
        if options.get("equal_shares"):
            raise ConfigError("give per-user weights or equal shares, not both")
        Entitlements(configured).check_known(trace.user_usage, "the task list")
        weights = dict(configured)
    elif options.get("equal_shares"):
        weights = dict.fromkeys(trace.user_usage, 1.0)
    else:
        weights = trace.entitlements()
        # The authors' form of weighted DRF and SDRF uses them per resource.
        per_resource["resource_weights"] = trace.resource_entitlements()
    # Power = cpus: one MFlop per cpu, so MFlops shares are cpu shares.
    node = Node("trace-pool", None, power=cpus, cpus=cpus, memory=memory)
    return Scenario([node], trace.tasks,
                    policy_options={"resources": ("cpus", "memory"), "weights": weights,
                                    **per_resource},
                    task_writer=tasks_trace, allocation=STOP)


def _microseconds(seconds: float | None) -> str:
    return "" if seconds is None else str(round(seconds * MICROSECONDS))


def _trace_lines(out: TextIO) -> Callable[[Task], None]:
    def line(task: Task) -> None:
        original_id = task.id.partition(_REPEAT)[0]
        out.write(f"{_microseconds(task.submit_time)},{_microseconds(task.first_start)},"
                  f"{_microseconds(task.finish_time)},{task.user},{original_id},"
                  f"{task.cpus!r},{task.memory!r}\n")

    return line


def tasks_trace(path: Path) -> TaskFile:
    """Every task in the input's 7-column format and order, with its simulated start and
    finish (empty for a task that never started or finished)."""
    return TaskFile(path, _trace_lines)


WORKLOAD_FORMATS["taskcsv"] = trace_scenario
