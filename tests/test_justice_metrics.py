"""Deadline metrics: Jain's index over 60 s windows and over the run, counts, utilization."""

from __future__ import annotations

import math
import random

import pytest

from gridfair.core.pool import DONE, DROPPED, KILLED, Node, Task
from gridfair.sim.deadline_metrics import WINDOW_SECONDS, _Stay, _windowed_jain, deadline_summary
from gridfair.sim.engine import SimulationResult


def job(job_id: str, submit: float, requested: int, cpus: int, deadline: float, state: int,
        start: float | None, end: float | None) -> Task:
    task = Task(job_id, "u", submit, cpus=cpus, duration=(end - start) if start is not None
                else 1.0, deadline=deadline)
    task.requested_cpus = requested
    task.state = state
    task.first_start = start
    task.start_time = start if start is not None else 0.0
    task.finish_time = end
    return task


def result_of(tasks: list[Task], capacity: int, makespan: float) -> SimulationResult:
    busy = sum(task.cpus * (task.finish_time - task.first_start) for task in tasks
               if task.first_start is not None)
    node = Node("cluster", None, float(capacity), cpus=float(capacity))
    return SimulationResult(tasks, [node], makespan, busy, 0, 0, 0, 0.0)


def test_hand_worked_windows_and_run():
    tasks = [
        job("X", 0, 4, 2, 200, DONE, 0, 120),   # F = 0.5 throughout
        job("Y", 0, 2, 2, 100, DONE, 60, 120),  # queued in window 0, F = 1 in window 1: late
        job("Z", 30, 1, 1, 40, DROPPED, None, 45),  # waits 15 s in window 0, then dropped
        job("D", 50, 1, 1, 60, DROPPED, None, 50),  # dropped on arrival: never counted
        job("K", 60, 1, 1, 90, KILLED, 60, 90),     # F = 1 for its 30 s in window 1
    ]
    summary = deadline_summary(result_of(tasks, capacity=4, makespan=120))
    # Window 0: X 0.5, Y 0, Z 0 -> 0.25 / (3 x 0.25) = 1/3.
    # Window 1: X 0.5, Y 1, K 1 -> 2.5^2 / (3 x 2.25) = 0.9259.
    assert summary.windows == 2
    assert summary.jain_index == pytest.approx((1 / 3 + 6.25 / 6.75) / 2)
    # Whole run: X 0.5, Y 1 x 60/120 = 0.5, Z 0, K 1 -> 2^2 / (4 x 1.5) = 2/3.
    assert summary.jain_index_run == pytest.approx(2 / 3)
    assert (summary.jobs, summary.deadlines_met, summary.deadlines_missed) == (5, 1, 1)
    assert (summary.jobs_dropped, summary.jobs_killed, summary.jobs_unfinished) == (2, 1, 0)
    assert summary.deadlines_met_fraction == pytest.approx(0.2)
    # Used: X 240 + Y 120 + K 30 = 390 of 4 x 120; useful: X only, 240.
    assert summary.utilization == pytest.approx(390 / 480)
    assert summary.useful_utilization == pytest.approx(240 / 480)


def test_windows_where_no_one_runs_are_left_out():
    waiting = job("W", 0, 1, 1, 2000, DONE, 600, 1200)  # queued for windows 0-9
    summary = deadline_summary(result_of([waiting], capacity=1, makespan=1200))
    assert summary.windows == 10 and summary.jain_index == 1.0


def brute_force(stays: list[_Stay], origin: float, end: float) -> tuple[float, int]:
    total, used = 0.0, 0
    for k in range(math.ceil((end - origin) / WINDOW_SECONDS)):
        low = origin + k * WINDOW_SECONDS
        values = [value for stay in stays
                  if (value := stay.fraction_in(low, low + WINDOW_SECONDS)) is not None]
        squares = sum(value * value for value in values)
        if values and squares > 1e-12:
            total += sum(values) ** 2 / (len(values) * squares)
            used += 1
    return total / used if used else math.nan, used


@pytest.mark.parametrize("seed", range(20))
def test_difference_arrays_agree_with_window_by_window(seed):
    rng = random.Random(seed)
    stays = []
    for _ in range(rng.randint(1, 30)):
        arrive = rng.choice([rng.uniform(0, 3000), float(rng.randrange(0, 3000, 60))])
        start = arrive + rng.choice([0.0, rng.uniform(0, 900), 60.0])
        leave = start + rng.choice([0.0, rng.uniform(1, 900), 120.0])
        stays.append(_Stay(arrive, start, leave, rng.choice([1.0, 0.5, rng.random()])))
    end = max(stay.leave for stay in stays)
    fast, fast_used = _windowed_jain(stays, 0.0, end, WINDOW_SECONDS)
    slow, slow_used = brute_force(stays, 0.0, end)
    assert fast_used == slow_used
    assert fast == pytest.approx(slow, nan_ok=True)
