"""Conservation, checked from the run's records: every submitted task is done, still queued,
dropped or killed; no node ever runs more cpus than it has; busy time adds up. Over real
workloads and over random small pools, with every engine option."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gridfair.core.pool import DONE, DROPPED, KILLED, QUEUED, Node, Task
from gridfair.sim.engine_options import EngineOptions
from gridfair.sim.grid_loader import embedded_grids
from gridfair.sim.records import RunRecorder, check_conservation, owner_share_violations
from gridfair.sim.scenario import Scenario, build_scenario, run_scenario
from tests.conftest import TEST_DATA

MODEL = str(embedded_grids()["multi-owner-hosep"])
KTH_SLICE = str(TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf")


def _run(scenario: Scenario, **options):
    recorder = RunRecorder()
    result, _ = run_scenario(scenario, recorder=recorder, **options)
    return result, recorder


def test_model_load_with_every_engine_option_conserves():
    result, recorder = _run(build_scenario(MODEL, "node", options={"transfer": True}),
                            policy="hosep", checkpointing=True,
                            engine=EngineOptions(interval=30.0, vacate_delay=5.0))
    assert all(task.state == DONE for task in result.tasks)
    assert check_conservation(result, recorder) == []


def test_tasks_that_fit_nowhere_stay_queued_and_are_accounted_for():
    nodes = [Node("a", "ana", 100.0), Node("b", "bo", 50.0)]
    tasks = [Task("t1", "bo", 0.0, work=100.0), Task("t2", "ana", 0.0, work=100.0),
             Task("big", "ana", 1.0, cpus=2, work=100.0)]
    result, recorder = _run(Scenario(nodes, tasks), policy="hosep")
    states = {task.id: task.state for task in result.tasks}
    assert states == {"big": QUEUED, "t1": DONE, "t2": DONE}
    assert check_conservation(result, recorder) == []


def test_justice_drops_and_kills_are_accounted_for():
    scenario = build_scenario(None, KTH_SLICE, options={"deadlines": "Fixed1x", "capacity": 64})
    result, recorder = _run(scenario, policy="justice")
    states = {task.state for task in result.tasks}
    assert DROPPED in states or KILLED in states
    assert check_conservation(result, recorder) == []


def test_the_check_sees_a_node_overcommitted():
    nodes = [Node("a", "ana", 100.0)]
    tasks = [Task("t1", "ana", 0.0, work=100.0), Task("t2", "ana", 0.0, work=100.0)]
    result, recorder = _run(Scenario(nodes, tasks), policy="hosep")
    assert check_conservation(result, recorder) == []
    first = recorder.runs[0]
    recorder.runs.append(first._replace(task="ghost"))  # a second run on the same cpu
    result.busy_cpu_seconds += first.end - first.start
    problems = check_conservation(result, recorder)
    assert problems[0] == f"a runs 2 cpus of 1 at {first.start}"
    assert "exceed capacity" in problems[1]


@st.composite
def pools(draw, *, cores: int = 3):
    owners = [f"u{i}" for i in range(draw(st.integers(1, 3)))]
    nodes = [Node(f"n{i}", draw(st.sampled_from(owners + [None])),
                  float(draw(st.sampled_from([10, 20, 40]))),
                  cpus=float(draw(st.integers(1, cores))))
             for i in range(draw(st.integers(1, 5)))]
    largest = max(int(node.cpus) for node in nodes)
    users = owners + ["guest"]
    # Every task fits some node: a task that fits none stays at the head of its user's queue
    # and holds the user's later tasks back (the negotiator serves each user's head only).
    tasks = [Task(f"t{i}", draw(st.sampled_from(users)), float(draw(st.integers(0, 50))),
                  cpus=float(draw(st.integers(1, min(largest, 2)))),
                  work=float(draw(st.integers(1, 400))), source_index=i)
             for i in range(draw(st.integers(1, 25)))]
    return Scenario(nodes, tasks)


ENGINE_OPTIONS = {
    "checkpointing": st.booleans(),
    "interval": st.sampled_from([None, 7.0]),
    "vacate_delay": st.sampled_from([0.0, 3.0]),
}


@settings(max_examples=150, deadline=None)
@given(scenario=pools(), policy=st.sampled_from(["osep", "hosep", "drf", "drf-fair", "sdrf-fair"]),
       **ENGINE_OPTIONS)
def test_random_pools_conserve(scenario, policy, checkpointing, interval, vacate_delay):
    result, recorder = _run(scenario, policy=policy, checkpointing=checkpointing,
                            engine=EngineOptions(interval=interval, vacate_delay=vacate_delay))
    assert check_conservation(result, recorder) == []
    assert all(task.state == DONE for task in result.tasks)


@settings(max_examples=150, deadline=None)
@given(scenario=pools(cores=1), policy=st.sampled_from(["osep", "hosep"]), **ENGINE_OPTIONS)
def test_random_single_core_pools_keep_their_rule(scenario, policy, checkpointing, interval,
                                                  vacate_delay):
    # One task per machine, as in iSPD models: any vacated slot fits the receiver's task, which
    # is what the rule check assumes (with bigger tasks a preemption may find no room).
    result, recorder = _run(scenario, policy=policy, checkpointing=checkpointing,
                            engine=EngineOptions(interval=interval, vacate_delay=vacate_delay))
    assert owner_share_violations(recorder, policy) == []
