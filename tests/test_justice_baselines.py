"""The Justice paper's baselines: Baseline FS, Reactive FS and the Oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from gridfair.core.pool import DONE, DROPPED, KILLED
from gridfair.core.stages import ALLOCATE
from gridfair.policies.deadline_baselines import oracle_minimum
from gridfair.policies.justice import DEADLINE_SLACK, job_work, met_deadline
from tests.test_justice import run_jobs, workloads


def test_baseline_fs_serves_the_user_holding_fewest_cpus():
    jobs = [
        ("A1", "a", 0, 1, 10, 1), ("A2", "a", 0, 1, 10, 1), ("A3", "a", 0, 1, 10, 1),
        ("B1", "b", 0, 1, 10, 1),
    ]
    _, tasks, decisions, _ = run_jobs("baseline-fs", jobs, capacity=2)
    started = [decision.task.id for decision in decisions if decision.kind == ALLOCATE]
    # a and b both hold nothing: a (seen first); then b holds less than a.
    assert started[:2] == ["A1", "B1"]
    assert tasks["A2"].first_start == 10 and tasks["A3"].first_start == 10
    assert all(task.state == DONE for task in tasks.values())


def test_baseline_fs_runs_every_job_whatever_its_deadline():
    jobs = [("big", "a", 0, 8, 10, 1), ("late", "b", 0, 2, 10, 1)]
    _, tasks, _, admit = run_jobs("baseline-fs", jobs, capacity=4)
    assert admit is None
    # Asks 8 of 4 slots: given 4, runs twice as long; the other waits for it.
    assert (tasks["big"].cpus, tasks["big"].finish_time) == (4, 20)
    assert tasks["late"].state == DONE and not met_deadline(tasks["late"])


def test_reactive_fs_kills_at_the_deadline_and_drops_expired_queued_jobs():
    jobs = [
        ("long", "a", 0, 2, 100, 1.5),  # runs 0-100, meets its deadline 150
        ("next", "b", 1, 2, 100, 1.5),  # starts 100, deadline 151: killed at 151
        ("gone", "c", 2, 2, 10, 2),     # deadline 22 passes while it waits: dropped
    ]
    _, tasks, _, _ = run_jobs("reactive-fs", jobs, capacity=2)
    assert tasks["long"].state == DONE
    assert (tasks["next"].state, tasks["next"].finish_time) == (KILLED, 151)
    assert (tasks["gone"].state, tasks["gone"].first_start) == (DROPPED, None)


def test_oracle_gives_the_minimum_and_queues_until_it_is_free():
    jobs = [
        ("tight", "a", 0, 4, 10, 1),  # needs all 4 now (deadline 10)
        ("loose", "b", 0, 4, 10, 3),  # needs ceil(40 / 30) = 2: fewer, so it goes first
        ("later", "c", 0, 2, 10, 4),  # needs ceil(20 / 40) = 1: goes first of all
    ]
    _, tasks, decisions, _ = run_jobs("oracle", jobs, capacity=4)
    started = [decision.task.id for decision in decisions if decision.kind == ALLOCATE]
    assert started == ["later", "loose"]
    assert (tasks["later"].cpus, tasks["later"].finish_time) == (1, 20)
    assert (tasks["loose"].cpus, tasks["loose"].finish_time) == (2, 20)
    # "tight" cannot have its 4 slots before its deadline is out of reach: dropped.
    assert tasks["tight"].state == DROPPED


def test_oracle_sizes_a_waiting_job_when_it_starts():
    jobs = [
        ("first", "a", 0, 4, 10, 2),   # needs ceil(40 / 20) = 2, runs 0-20
        ("second", "b", 0, 4, 10, 2),  # the same, started at 0 too
        ("third", "c", 1, 4, 10, 3),   # deadline 31; waits; at 20 needs ceil(40 / 11) = 4
    ]
    _, tasks, _, _ = run_jobs("oracle", jobs, capacity=4)
    assert (tasks["third"].first_start, tasks["third"].cpus, tasks["third"].finish_time) == (
        20, 4, 30)
    assert all(met_deadline(task) for task in tasks.values())


def test_oracle_drops_a_job_that_cannot_make_it_at_all():
    _, tasks, _, _ = run_jobs("oracle", [("huge", "a", 0, 40, 10, 2)], capacity=10)
    assert tasks["huge"].state == DROPPED and tasks["huge"].finish_time == 0


@settings(max_examples=60, deadline=None)
@given(workloads)
def test_oracle_never_gives_more_than_the_minimum(workload):
    capacity, jobs = workload
    _, tasks, _, _ = run_jobs("oracle", jobs, capacity)
    for task in tasks.values():
        if task.first_start is None:
            continue
        assert task.cpus == oracle_minimum(task, task.first_start, capacity)
        # One slot fewer would miss the deadline (or be no slot at all).
        fewer = task.cpus - 1
        assert fewer == 0 or (
            task.first_start + job_work(task) / fewer > task.deadline + DEADLINE_SLACK)
        assert met_deadline(task)


@settings(max_examples=60, deadline=None)
@given(workloads)
def test_reactive_fs_never_lets_a_job_run_past_its_deadline(workload):
    capacity, jobs = workload
    _, tasks, _, _ = run_jobs("reactive-fs", jobs, capacity)
    for task in tasks.values():
        if task.first_start is not None:
            assert task.first_start < task.deadline
            assert task.finish_time <= task.deadline + DEADLINE_SLACK
            assert task.state in (DONE, KILLED)


@pytest.mark.parametrize("policy", ["baseline-fs", "reactive-fs", "oracle", "justice"])
def test_no_policy_overfills_the_pool(policy):
    jobs = [(f"j{i}", f"u{i % 3}", i * 3.0, 1 + (i * 7) % 9, 20.0 + i, 1 + (i % 4))
            for i in range(60)]
    _, tasks, _, _ = run_jobs(policy, jobs, capacity=8)
    events = sorted((time, delta) for task in tasks.values() if task.first_start is not None
                    for time, delta in ((task.first_start, task.cpus),
                                        (task.finish_time, -task.cpus)))
    held = 0
    for _, delta in sorted(events, key=lambda event: (event[0], event[1])):
        held += delta
        assert held <= 8
