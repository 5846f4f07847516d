"""The 7-column task list read as a stream (issue 13): checked and totalled in one pass that
keeps no task, its tasks read again as the simulation takes them; a short file read once, its
tasks held in columns (issue 50)."""

from __future__ import annotations

import dataclasses
import gc
import os
import tracemalloc
from pathlib import Path

import pytest

from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.engine_options import EngineOptions
from gridfair.sim.scenario import build_scenario, run_scenario
from gridfair.sim.workloads import taskcsv
from gridfair.sim.workloads.taskcsv import HeldTasks, TaskFileTasks, read_tasks, scan_tasks


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "tasks.csv"
    path.write_text("".join(lines))
    return path


def task_line(index: int, task_id: str | None = None) -> str:
    submit = 1_000_000 * index
    return (f"{submit},{submit + 500_000},{submit + 4_000_000 + 100_000 * (index % 9)},"
            f"u{index % 5},{task_id or f'{index}-0'},{0.01 + 0.001 * (index % 7)},0.02\n")


def fields(task: Task) -> tuple:
    return (task.id, task.user, task.submit_time, task.cpus, task.memory, task.duration,
            task.source_index)


def test_a_scanned_trace_holds_no_task_and_reads_the_same_tasks_on_every_pass(tmp_path):
    path = write(tmp_path, [task_line(index) for index in range(50)])
    trace = scan_tasks(path, hold_at_most=49)
    assert isinstance(trace.tasks, TaskFileTasks) and len(trace.tasks) == 50
    first, second = list(map(fields, trace.tasks)), list(map(fields, trace.tasks))
    assert first == second
    assert first[7] == ("7-0", "u2", 7.0, 0.01, 0.02, 4.2, 7)  # 7 mod 7: 0.01 cpu


def test_a_short_file_is_read_once_and_its_held_tasks_are_the_streamed_ones(tmp_path):
    ids = ["a", "b", "a"] + [f"{index}-0" for index in range(3, 50)]
    path = write(tmp_path, [task_line(index, task_id) for index, task_id in enumerate(ids)])
    held = scan_tasks(path, hold_at_most=50)
    assert isinstance(held.tasks, HeldTasks) and len(held.tasks) == 50
    path.unlink()  # held: the file is not read again
    first, second = list(held.tasks), list(held.tasks)
    assert first[0] is not second[0]  # each pass makes fresh tasks (a run changes them)
    path = write(tmp_path, [task_line(index, task_id) for index, task_id in enumerate(ids)])
    streamed = list(map(fields, scan_tasks(path, hold_at_most=0).tasks))
    assert list(map(fields, first)) == list(map(fields, second)) == streamed
    assert [task.id for task in first][:3] == ["a", "b", "a#1"]


@pytest.mark.parametrize("filter_bits", [None, 8])
def test_repeated_ids_are_made_unique_exactly_whatever_the_filter_guesses(
        tmp_path, monkeypatch, filter_bits):
    # With an 8-bit filter nearly every id is a "may repeat" candidate: only true repeats
    # may be renamed all the same.
    if filter_bits:
        monkeypatch.setattr(taskcsv, "repeat_filter_bits", lambda path: filter_bits)
    ids = ["a", "b", "a", "c", "d", "a", "b"] + [f"x{index}" for index in range(40)]
    path = write(tmp_path, [task_line(index, task_id) for index, task_id in enumerate(ids)])
    trace = scan_tasks(path, hold_at_most=0)
    assert [task.id for task in trace.tasks][:7] == ["a", "b", "a#1", "c", "d", "a#2", "b#1"]
    assert [task.id for task in trace.tasks][7:] == ids[7:]
    if filter_bits == 8:
        assert len(trace.tasks.maybe_repeated) > 10  # the candidates were many
    assert [task.id for task in read_tasks(path).tasks] == [task.id for task in trace.tasks]


def test_a_file_changed_after_its_scan_is_refused_when_read_again(tmp_path):
    path = write(tmp_path, [task_line(index) for index in range(5)])
    trace = scan_tasks(path, hold_at_most=0)
    path.write_text("".join(task_line(index) for index in range(6)))
    os.utime(path, ns=(1, 1))  # a new stamp even within the file system's time resolution
    with pytest.raises(InputError, match="tasks.csv: the task file changed after it was "
                                         "checked"):
        list(trace.tasks)


def test_a_task_larger_than_the_pool_is_named_with_its_line(tmp_path):
    lines = [task_line(index) for index in range(20)]
    lines[12] = "12000000,12000000,13000000,u1,big-0,5.0,0.02\n"
    with pytest.raises(InputError, match=r"tasks.csv:13: task big-0 needs \(5 cpu, 0.02 mem\)"):
        build_scenario(None, str(write(tmp_path, lines)))


def test_a_task_file_still_runs_with_sequential_arrivals(tmp_path):
    path = str(write(tmp_path, [task_line(index) for index in range(30)]))
    sequential, _ = run_scenario(build_scenario(None, path), policy="sdrf",
                                 engine=EngineOptions(arrivals="sequential"))
    assert len(sequential.tasks) == 30 and all(task.finish_time for task in sequential.tasks)


def test_reading_a_task_file_as_taken_keeps_memory_flat(tmp_path):
    # 100k tasks: as a list they take tens of MB; taken one by one and let go, under 2 MB.
    path = write(tmp_path, [task_line(index) for index in range(100_000)])
    trace = scan_tasks(path)
    assert isinstance(trace.tasks, TaskFileTasks)  # longer than taskcsv.HELD_TASKS
    gc.collect()
    tracemalloc.start()
    try:
        taken = sum(1 for _ in trace.tasks)
        _, streamed_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        listed = list(trace.tasks)
        _, listed_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert taken == len(listed) == 100_000
    assert streamed_peak < 2_000_000 < 20_000_000 < listed_peak


def test_the_repeat_filter_grows_with_the_file_up_to_its_cap(tmp_path):
    small = write(tmp_path, [task_line(index) for index in range(10)])
    assert taskcsv.repeat_filter_bits(small) == 1 << 16
    huge = tmp_path / "huge.csv"
    with open(huge, "wb") as out:
        out.truncate(100 * 2**30)  # 100 GB, sparse: nothing written
    assert taskcsv.repeat_filter_bits(huge) == taskcsv.MAX_FILTER_BITS
    middle = tmp_path / "middle.csv"
    with open(middle, "wb") as out:
        out.truncate(320 * 2**20)  # ~10M lines of 32 bytes: 20 bits a line
    assert 20 * 10_000_000 <= taskcsv.repeat_filter_bits(middle) < 2 * 20 * 10_500_000


def test_a_task_file_that_cannot_be_opened_is_an_input_error(tmp_path):
    folder = tmp_path / "tasks.csv"
    folder.mkdir()  # a directory with a task file's name
    with pytest.raises(InputError, match="tasks.csv: cannot read task file"):
        scan_tasks(folder)


class _CountedHeld(HeldTasks):
    """A held file's tasks that count the Tasks made and not yet ended."""

    def __init__(self, held: HeldTasks) -> None:
        super().__init__()
        for name in ("submits", "durations", "cpus", "memories", "user_numbers", "users",
                     "task_ids", "maybe_repeated"):
            setattr(self, name, getattr(held, name))
        self.alive = self.peak = 0

    def make_task(self, handle: int) -> Task:
        self.alive += 1
        self.peak = max(self.peak, self.alive)
        return super().make_task(handle)


def test_a_held_file_runs_deferred_its_backlog_as_handles_with_the_same_outcomes(tmp_path):
    # Three users on a pool of a third of their mean usage: their queues grow. Deferred, a
    # task is made at its user's queue head (ids repeated in the file stay numbered in file
    # order); as Tasks, the whole backlog is.
    ids = ["a", "b", "a"] + [f"{index}-0" for index in range(3, 300)]
    path = write(tmp_path, [f"{100_000 * index},{100_000 * index},"
                            f"{100_000 * index + 5_000_000 + 100_000 * (index % 7)},"
                            f"u{index % 3},{task_id},0.1,0.05\n"
                            for index, task_id in enumerate(ids)])
    scenario = build_scenario(None, path, options={"capacity_ratio": 0.3})
    assert isinstance(scenario.tasks, HeldTasks)
    runs = {}
    for deferred in (False, True):
        counted = _CountedHeld(scenario.tasks)
        ended = []

        def task_done(task, counted=counted, ended=ended):
            counted.alive -= 1
            ended.append((task.id, task.first_start, task.finish_time))

        result, _ = run_scenario(dataclasses.replace(
            scenario, tasks=counted if deferred else iter(counted)), policy="sdrf",
            keep_tasks=False, on_task_done=task_done)
        runs[deferred] = ended, counted.peak, (result.makespan, result.events)
    assert runs[True][0] == runs[False][0] and runs[True][2] == runs[False][2]
    assert len(runs[True][0]) == 300
    assert {"a", "a#1", "b"} <= {task_id for task_id, _, _ in runs[True][0]}
    assert runs[False][1] > 100  # the backlog, as Tasks
    assert runs[True][1] < runs[False][1] / 4
