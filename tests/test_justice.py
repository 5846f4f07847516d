"""Justice: TRACK_JOB and the fraction update by hand, sizing bounds, drops, kills, queue order."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridfair.core.pool import DONE, DROPPED, KILLED, Node, Task
from gridfair.core.stages import ALLOCATE, DROP, KILL, RESIZE, Decision
from gridfair.errors import ConfigError, InputError
from gridfair.policies.justice import (
    DEADLINE_SLACK,
    JusticeAdmit,
    JusticeEstimator,
    fewer_tasks_latest_deadline,
    whole_cpus,
)
from gridfair.sim.deadlines import deadline_job
from gridfair.sim.engine import SimulationResult
from gridfair.sim.scenario import Scenario, run_scenario

#: (id, user, submit, requested slots, run time with all of them, deadline factor x)
JobSpec = tuple[str, str, float, int, float, float]


def run_jobs(policy: str, jobs: Sequence[JobSpec], capacity: int,
             options: Mapping[str, Any] | None = None
             ) -> tuple[SimulationResult, dict[str, Task], list[Decision], Any]:
    """Simulate `jobs` on one node of `capacity` slots; returns the result, the tasks by id,
    every decision, and the admission stage (None without one)."""
    tasks = [deadline_job(job_id, user, submit, requested, run_time, factor, capacity,
                          source_index=index)
             for index, (job_id, user, submit, requested, run_time, factor) in enumerate(jobs)]
    node = Node("cluster", owner=None, power=float(capacity), cpus=float(capacity))
    result, negotiator = run_scenario(Scenario([node], tasks), policy=policy,
                                      policy_options=options, keep_decisions=True)
    return result, {task.id: task for task in result.tasks}, result.decisions, negotiator.admit


def random_jobs(draw, capacity: int) -> list[JobSpec]:
    """A random workload for property tests: bursts of arrivals, sizes up to 3x capacity."""
    count = draw(st.integers(1, 40))
    jobs = []
    submit = 0.0
    for index in range(count):
        submit += draw(st.sampled_from([0.0, 0.0, 1.0, 5.0, 30.0]))
        jobs.append((f"j{index}", f"u{draw(st.integers(0, 3))}", submit,
                     draw(st.integers(1, 3 * capacity)), float(draw(st.integers(1, 100))),
                     draw(st.sampled_from([1.0, 1.5, 2.0, 4.0]))))
    return jobs


workloads = st.integers(1, 16).flatmap(
    lambda capacity: st.tuples(st.just(capacity), st.composite(
        lambda draw: random_jobs(draw, capacity))()))


# ------------------------------------------------------------------ TRACK_JOB


def test_track_job_and_fraction_by_hand():
    """Four finished jobs on a 10-slot pool, each update worked out by hand."""
    equal = JusticeEstimator("equal")
    smoothed = JusticeEstimator("exponential", smoothing=0.5)
    assert equal.bootstrapping and equal.fraction() == 1.0

    # A: 4 tasks, work 400, deadline 200 s, given 4, met. minReqRate = 400/200/4 = 0.5.
    for estimator in (equal, smoothed):
        estimator.track_job(400, 4, 200, 4, True, 10)
    assert (equal.min_frac, equal.max_frac, equal.last_frac) == (0.5, 0.5, 1.0)
    assert equal.mean_error == smoothed.mean_error == -0.5  # 0.5 - 1
    # (1 + 0.5) / 2 - 0.5 = 0.25, clamped up to MinCPUFrac.
    assert equal.fraction() == smoothed.fraction() == 0.5

    # B: 20 tasks, work 1000, deadline 60 s, given 10 (the capacity), late. deadlineCPUs
    # 16.7 over maxCPUs 10 is 1.67, capped at 1. LastCPUFrac 10/10 = 1, error 0.
    for estimator in (equal, smoothed):
        estimator.track_job(1000, 20, 60, 10, False, 10)
    assert (equal.min_frac, equal.max_frac, equal.last_frac) == (0.5, 1.0, 1.0)
    assert not equal.last_success
    assert equal.mean_error == smoothed.mean_error == -0.25
    # Late: toward MaxCPUFrac. (1 + 1) / 2 - 0.25 = 0.75.
    assert equal.fraction() == 0.75
    assert equal.cpus_for(6, 10) == 5  # ceil(4.5)
    assert equal.cpus_for(40, 10) == 10  # ceil(30), at most the capacity

    # C: 8 tasks, work 240, deadline 90 s, given 6, met. minReqRate 240/90/8 = 1/3.
    for estimator in (equal, smoothed):
        estimator.track_job(240, 8, 90, 6, True, 10)
    assert equal.min_frac == pytest.approx(1 / 3) and equal.last_frac == 0.75
    error_c = 1 / 3 - 0.75
    assert equal.mean_error == pytest.approx((-0.5 + 0 + error_c) / 3)
    assert smoothed.mean_error == pytest.approx(-0.25 + 0.5 * (error_c + 0.25))
    # (0.75 + 1/3) / 2 - 0.3056 = 0.236 and - 0.3333 = 0.208: both clamped to 1/3.
    assert equal.fraction() == smoothed.fraction() == pytest.approx(1 / 3)
    assert equal.cpus_for(7, 10) == 3  # ceil(2.33)

    # D: 2 tasks, work 200, deadline 100 s, given 2, met. minReqRate 1, error 0.
    for estimator in (equal, smoothed):
        estimator.track_job(200, 2, 100, 2, True, 10)
    assert equal.mean_error == pytest.approx((-0.5 + 0 + error_c + 0) / 4)
    assert smoothed.mean_error == pytest.approx(-1 / 6)
    # (1 + 1/3) / 2 = 2/3, corrected: equal -0.229 -> 0.4375; smoothed -0.1667 -> 0.5.
    assert equal.fraction() == pytest.approx(0.4375)
    assert smoothed.fraction() == pytest.approx(0.5)
    assert (equal.cpus_for(16, 10), smoothed.cpus_for(16, 10)) == (7, 8)
    assert equal.tracked == 4


def test_fraction_is_clamped_to_one():
    estimator = JusticeEstimator()
    # Needed everything and got less: a positive error pushes the estimate above 1.
    estimator.track_job(1000, 10, 100, 5, False, 10)
    assert estimator.mean_error == 0.5 and estimator.fraction() == 1.0


def test_whole_cpus_ignores_rounding_noise():
    assert whole_cpus(7.000000000001) == 7
    assert whole_cpus(7.01) == 8
    assert whole_cpus(0.5) == 1


def test_bad_estimator_options():
    with pytest.raises(ConfigError, match="error weighting"):
        JusticeEstimator("median")
    with pytest.raises(ConfigError, match="smoothing"):
        JusticeEstimator("exponential", smoothing=0.0)
    with pytest.raises(ConfigError, match="kill threshold"):
        JusticeAdmit(kill_above=-1)


# ------------------------------------------------ Justice through the simulator


def test_sizing_sequence_through_the_simulator():
    """TRACK_JOB fed by real runs on a 10-slot pool, every allocation worked out by hand."""
    jobs = [
        ("J1", "u1", 0, 4, 100, 2),    # bootstrap: all 4; ends 100, deadline 200: met
        ("J2", "u2", 150, 6, 10, 2),   # fraction 0.5: 3 cpus, runs 20 s, ends at its deadline
        ("J3", "u1", 200, 3, 10, 1),   # 0.5 -> 2 cpus, runs 15 s > 10 s to deadline: dropped
        ("J4", "u2", 300, 20, 10, 2),  # 0.5 -> 10 cpus (capacity), runs 20 s: met exactly
        ("J5", "u1", 400, 12, 10, 2),  # J4 had minReqRate 1: (1 + 0.5)/2 - 1/6 -> 7 cpus
    ]
    result, tasks, decisions, admit = run_jobs("justice", jobs, capacity=10)
    assert {job: tasks[job].cpus for job in tasks} == {
        "J1": 4, "J2": 3, "J3": 2, "J4": 10, "J5": 7}
    assert [tasks[job].state for job in ("J1", "J2", "J3", "J4", "J5")] == [
        DONE, DONE, DROPPED, DONE, DONE]
    assert tasks["J2"].finish_time == 170 == tasks["J2"].deadline
    assert tasks["J4"].finish_time == pytest.approx(320)
    assert tasks["J5"].duration == pytest.approx(120 / 7)
    estimator = admit.estimator
    assert estimator.tracked == 4 and estimator.last_success
    assert (estimator.min_frac, estimator.max_frac) == (0.5, 1.0)
    kinds = [(decision.kind, decision.task.id) for decision in decisions
             if decision.kind in (RESIZE, DROP)]
    assert kinds == [(RESIZE, "J1"), (RESIZE, "J2"), (DROP, "J3"), (RESIZE, "J4"),
                     (RESIZE, "J5")]
    drop = next(decision for decision in decisions if decision.kind == DROP)
    assert "J3 dropped: with 2 of 3 cpus" in drop.reason


def test_queue_order_fewer_tasks_then_latest_deadline():
    jobs = [
        ("J0", "u0", 0, 4, 10, 100),  # holds the whole pool until 10
        ("A", "u1", 1, 2, 10, 50),    # 2 tasks
        ("B", "u2", 2, 1, 10, 20),    # 1 task, deadline 202
        ("C", "u3", 3, 1, 10, 40),    # 1 task, deadline 403: longest time to deadline
    ]
    _, tasks, decisions, _ = run_jobs("justice", jobs, capacity=4)
    started = [decision.task.id for decision in decisions if decision.kind == ALLOCATE]
    assert started == ["J0", "C", "B", "A"]
    assert all(tasks[job].first_start == 10 for job in "ABC")
    assert fewer_tasks_latest_deadline(tasks["C"]) < fewer_tasks_latest_deadline(tasks["B"])


@pytest.mark.parametrize(("kill_above", "state"), [(1, KILLED), (2, DONE)])
def test_late_jobs_above_the_threshold_are_terminated(kill_above, state):
    jobs = [
        ("J0", "u0", 0, 2, 100, 1.5),  # bootstrap, runs 0-100
        ("J1", "u1", 1, 2, 100, 1.5),  # bootstrap, waits; starts 100, deadline 151
    ]
    _, tasks, decisions, admit = run_jobs("justice", jobs, capacity=2,
                                          options={"justice_kill_above": kill_above})
    late = tasks["J1"]
    assert late.first_start == 100 and late.state == state
    if state == KILLED:
        assert late.finish_time == 151
        assert admit.estimator.tracked == 1  # a killed job is not tracked
        kill = next(decision for decision in decisions if decision.kind == KILL)
        assert "2 tasks, above the threshold of 1" in kill.reason
    else:
        assert late.finish_time == 200
        assert admit.estimator.tracked == 2 and not admit.estimator.last_success


def test_bootstrap_job_whose_deadline_passes_in_the_queue_is_dropped():
    jobs = [("J0", "u0", 0, 2, 100, 1), ("J1", "u1", 1, 2, 50, 1)]  # J1's deadline: 51
    _, tasks, _, _ = run_jobs("justice", jobs, capacity=2)
    assert tasks["J1"].state == DROPPED and tasks["J1"].finish_time == 100


def test_jobs_without_deadlines_are_a_clear_error():
    node = Node("cluster", owner=None, power=4.0, cpus=4.0)
    task = Task("j", "u", 0.0, cpus=1, duration=5.0)
    with pytest.raises(InputError, match="policy justice needs jobs with a deadline"):
        run_scenario(Scenario([node], [task]), policy="justice")


@settings(max_examples=60, deadline=None)
@given(workloads)
def test_justice_allocates_between_one_slot_and_the_capacity(workload):
    capacity, jobs = workload
    result, tasks, _, _ = run_jobs("justice", jobs, capacity)
    for task in tasks.values():
        assert 1 <= task.cpus <= capacity and task.cpus == int(task.cpus)
        assert math.isclose(task.cpus * task.duration,
                            task.requested_cpus * next(job[4] for job in jobs if job[0] == task.id))
        if task.first_start is not None:
            assert task.finish_time >= task.first_start
    # Sized jobs that finished met their deadline: only bootstrap jobs can be late.
    for task in tasks.values():
        if task.state == DONE and task.finish_time > task.deadline + DEADLINE_SLACK:
            assert task.submit_time < min(
                other.finish_time for other in tasks.values() if other.state == DONE)
