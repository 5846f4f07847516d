"""Streaming simulation (issue 13): a workload pulled lazily in submit order, tasks leaving
memory as they end, per-user waits accumulated online, and a trace repeated end to end."""

from __future__ import annotations

import dataclasses
import gzip
import math
from pathlib import Path

import pytest

from gridfair.core.negotiator import PARK_LOOKS
from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.engine_options import EngineOptions
from gridfair.sim.grid_loader import embedded_grids
from gridfair.sim.metrics import user_metrics
from gridfair.sim.scenario import build_scenario, run_scenario
from gridfair.sim.workloads.registry import Scenario
from gridfair.sim.workloads.repeat import DAY, RepeatedTasks, repeated_trace_scenario
from gridfair.sim.workloads.taskcsv import read_tasks
from tests.conftest import TEST_DATA
from tests.harness.waits import UserWaits

TABLE1 = str(embedded_grids()["hosep-table1"])
MODEL = str(embedded_grids()["multi-owner-hosep"])
GOOGLE_SLICE = str(TEST_DATA / "google" / "rows420001-426000.part-00000-of-00500.csv.gz")


def outcome(task) -> tuple:
    return (task.id, task.state, task.first_start, task.finish_time, task.preemptions)


@pytest.mark.parametrize("grid, workload, policy", [
    (TABLE1, "high", "hosep"),  # preemption: vacated tasks come back to the queue
    (MODEL, GOOGLE_SLICE, "sdrf"),
])
def test_streamed_run_ends_every_task_as_the_list_run_does(grid, workload, policy):
    listed, _ = run_scenario(build_scenario(grid, workload), policy=policy)
    scenario = build_scenario(grid, workload)
    in_order = sorted(scenario.tasks, key=lambda task: task.submit_time)
    ended = []
    waits = UserWaits()

    def task_done(task):
        ended.append(task)
        waits.add(task)

    streamed, negotiator = run_scenario(
        Scenario(scenario.nodes, iter(in_order), scenario.policy_options), policy=policy,
        keep_tasks=False, on_task_done=task_done)
    assert streamed.tasks == [] and streamed.submitted == len(listed.tasks)
    assert negotiator.pool.tasks == {}  # every task ended and was forgotten by the pool
    assert sorted(map(outcome, ended)) == sorted(map(outcome, listed.tasks))
    assert (streamed.makespan, streamed.vacates, streamed.events) == (
        listed.makespan, listed.vacates, listed.events)
    for row in user_metrics(listed):
        if row.submitted:
            assert math.isclose(waits.mean_wait(row.user), row.mean_wait, rel_tol=1e-9)
    assert waits.tasks == len(listed.tasks)


def test_a_stream_out_of_submit_order_is_an_input_error():
    scenario = build_scenario(TABLE1, "low")
    tasks = sorted(scenario.tasks, key=lambda task: task.submit_time)
    tasks[3], tasks[-1] = tasks[-1], tasks[3]
    with pytest.raises(InputError, match="not in submit order: task .* is submitted at"):
        run_scenario(Scenario(scenario.nodes, iter(tasks)), policy="hosep", keep_tasks=False)


def test_sequential_arrivals_need_the_workload_as_a_list():
    scenario = build_scenario(TABLE1, "low")
    with pytest.raises(InputError, match="sequential arrivals take the workload as a list"):
        run_scenario(Scenario(scenario.nodes, iter(scenario.tasks)), policy="hosep",
                     engine=EngineOptions(arrivals="sequential"))


def test_repeated_trace_shifts_copies_by_the_period_and_keeps_users(tmp_path: Path):
    path = tmp_path / "tasks.csv.gz"
    path.write_bytes(gzip.compress(b"1000000,2000000,5000000,u1,7-0,0.5,0.25\n"
                                   b"3000000,3000000,4000000,u2,8-0,0.25,0.5\n"))
    trace = read_tasks(path)
    assert trace.span == 3.0  # first start 2 s, last finish 5 s
    copies = list(RepeatedTasks(trace.tasks, trace.span, horizon=7.5))
    assert [(task.id, task.user, task.submit_time, task.duration) for task in copies] == [
        ("7-0", "u1", 1.0, 3.0), ("8-0", "u2", 3.0, 1.0),
        ("7-0@1", "u1", 4.0, 3.0), ("8-0@1", "u2", 6.0, 1.0),
        ("7-0@2", "u1", 7.0, 3.0)]  # 8-0@2 would be submitted at 9 s, past 1 + 7.5 s
    scenario = repeated_trace_scenario(path, days=1, options={"capacity_ratio": 2.0})
    waits = UserWaits()
    result, _ = run_scenario(scenario, policy="sdrf", keep_tasks=False, on_task_done=waits.add)
    assert result.submitted == waits.tasks == waits.completed == 2 * 28_800


class _CountedCopies(RepeatedTasks):
    """Repeated copies that count the Tasks made and not yet ended."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.alive = self.peak = 0

    def make_task(self, handle: int) -> Task:
        self.alive += 1
        self.peak = max(self.peak, self.alive)
        return super().make_task(handle)

    def ended(self, task: Task) -> None:
        self.alive -= 1


@pytest.mark.parametrize("policy, allocation", [
    ("sdrf", "stop"),
    ("wdrf", "backfill"),  # heads that do not fit are parked: later tasks come up meanwhile
])
def test_a_backlog_waits_as_handles_and_ends_as_task_arrivals_do(tmp_path: Path, policy,
                                                                 allocation):
    # Three users on a pool of half their mean usage: the queues grow all day. Streamed as
    # Tasks, every queued copy is a Task; as handles, only the queues' heads and the running.
    lines = [f"{2_000_000 * i},{2_000_000 * i},{2_000_000 * i + 15_000_000 + 1_000_000 * (i % 7)},"
             f"u{i % 3},{i}-0,{0.1 + 0.05 * (i % 4)},{0.05 + 0.1 * (i % 3)}\n" for i in range(30)]
    path = _write(tmp_path, "".join(lines))
    trace = read_tasks(path)
    scenario = repeated_trace_scenario(path, days=0.1, options={"capacity_ratio": 0.5})
    runs = {}
    for deferred in (False, True):
        copies = _CountedCopies(trace.tasks, trace.span, 0.1 * DAY)
        ended = []

        def task_done(task, copies=copies, ended=ended):
            copies.ended(task)
            ended.append(outcome(task))

        result, _ = run_scenario(
            dataclasses.replace(scenario, tasks=copies if deferred else iter(copies)),
            policy=policy, allocation=allocation, keep_tasks=False, on_task_done=task_done)
        runs[deferred] = ended, copies.peak, (result.makespan, result.events)
    assert runs[True][0] == runs[False][0]  # the same outcomes, handed over in the same order
    assert runs[True][2] == runs[False][2]
    assert len(runs[True][0]) == 115 * 30 + 8  # copies 0-114, and copy 115 until 0.1 day
    assert runs[False][1] > 1000  # the backlog, as Tasks
    # The three queue heads (and up to PARK_LOOKS parked tasks a user) and the tasks running.
    assert runs[True][1] < 3 * (PARK_LOOKS + 1) + 10


def test_a_trace_longer_than_its_period_cannot_repeat(tmp_path: Path):
    trace = read_tasks(_write(tmp_path, "1000000,1000000,2000000,u1,1-0,0.5,0.5\n"
                                        "9000000,9000000,9500000,u1,2-0,0.5,0.5\n"))
    with pytest.raises(InputError, match="copies would overlap"):
        RepeatedTasks(trace.tasks, 5.0, horizon=100.0)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tasks.csv"
    path.write_text(text)
    return path
