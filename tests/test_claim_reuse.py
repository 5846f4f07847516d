"""HTCondor's claim reuse in the simulator (`--claim-worklife`), and the curve of shares and
share error a history's runs are compared by."""

from __future__ import annotations

import pytest

from gridfair.core.pool import Node, Task
from gridfair.core.shares import share_error
from gridfair.sim.engine_options import EngineOptions
from gridfair.sim.scenario import simulation_of
from gridfair.sim.share_curve import ShareCurve
from gridfair.sim.workloads.registry import Scenario


def one_slot_run(worklife: float | None) -> dict[str, float]:
    """A's job holds the one slot; B's job and then A's second wait. HTCondor's priority
    would give the slot to B (A has used it); a reused claim keeps it with A."""
    tasks = [Task("a1", "A", 0.0, duration=10.0), Task("b1", "B", 1.0, duration=10.0),
             Task("a2", "A", 2.0, duration=10.0)]
    scenario = Scenario([Node("slot1", "A", 100.0)], tasks)
    simulation = simulation_of(scenario, policy="condor",
                               keep_decisions=True, engine=EngineOptions(claim_worklife=worklife))
    result = simulation.run()
    if worklife is not None and worklife < 0 or (worklife or 0) > 10:
        reused, = [d for d in result.decisions if d.policy == "claim-reuse"]
        assert reused.task.id == "a2" and "claim of a1" in reused.reason
    return {task.id: task.first_start for task in result.tasks}


def test_a_claim_is_reused_for_the_user_next_job():
    assert one_slot_run(None) == {"a1": 0.0, "b1": 10.0, "a2": 20.0}
    assert one_slot_run(1200.0) == {"a1": 0.0, "b1": 20.0, "a2": 10.0}
    assert one_slot_run(-1.0) == {"a1": 0.0, "b1": 20.0, "a2": 10.0}  # forever


def test_an_old_claim_goes_back_to_the_negotiator():
    assert one_slot_run(5.0) == {"a1": 0.0, "b1": 10.0, "a2": 20.0}


def test_a_bigger_job_does_not_take_a_smaller_claim():
    tasks = [Task("a1", "A", 0.0, duration=10.0), Task("a2", "A", 1.0, cpus=2.0,
                                                        duration=10.0)]
    scenario = Scenario([Node("n", "A", 100.0, cpus=2.0)], tasks)
    result = simulation_of(scenario, policy="condor",
                           keep_decisions=True, engine=EngineOptions(claim_worklife=-1.0)).run()
    assert not [d for d in result.decisions if d.policy == "claim-reuse"]
    assert {task.id: task.first_start for task in result.tasks} == {"a1": 0.0, "a2": 10.0}


def test_share_error_counts_what_waiting_owners_lack():
    """Owner A provides 300 of 400 MFlops and holds 100 with two 1-cpu jobs waiting (100
    MFlops per cpu): owed min(300 - 100, 2 x 100) = 200; B, above its share, owes nothing;
    C provides nothing. 200 / 400."""
    users = [(300.0, 100.0, 2.0), (100.0, 300.0, 5.0), (0.0, 0.0, 3.0)]
    assert share_error(users, 100.0, 400.0) == 0.5
    assert share_error([(300.0, 100.0, 1.0)], 100.0, 400.0) == 0.25  # what it could use
    assert share_error([(300.0, 100.0, 0.0)], 100.0, 400.0) == 0.0  # nothing waiting


def test_the_curve_integrates_runs_and_waits_into_bins():
    nodes = [Node("a", "A", 300.0), Node("b", "B", 100.0)]
    curve = ShareCurve(nodes, 10.0)
    curve.add_run("B", 0.0, 20.0, 300.0)  # B holds A's node for 20 s
    curve.add_wait("A", 0.0, 15.0, 1.0)  # while A's job waits 15 s
    series = curve.series(20.0)
    assert series["times"] == [0.0, 10.0]
    assert series["shares"]["B"] == [0.75, 0.75]
    # Bin 1: A lacks 300 and waits 1 cpu (200 MFlops per cpu): owed 200; bin 2, half as long.
    assert series["share_error"] == pytest.approx([0.5, 0.25])
    assert series["mean_share_error"] == pytest.approx(0.375)
