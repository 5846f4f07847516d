"""SDRF: Eq. 6 commitments in closed form, DRF in the limit, memory of past use."""

from __future__ import annotations

import gzip
import math
import re
from pathlib import Path

import pytest
from conftest import shared_file
from test_drf import classic_example, one_node_pool, submit_many

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Task
from gridfair.errors import ConfigError, InputError
from gridfair.policies.drf import DrfOrder
from gridfair.policies.registry import build_stages
from gridfair.policies.sdrf import SdrfOrder
from gridfair.sim.scenario import run_scenario
from gridfair.sim.workloads.registry import write_tasks
from gridfair.sim.workloads.taskcsv import trace_scenario

CPU_MEMORY = ("cpus", "memory")


def seen_in_order(pool, *names: str) -> None:
    """Make the users known in this order (the tie-break), before any of them submits."""
    for name in names:
        pool.user(name)


def start_tasks(negotiator: Negotiator, user: str, count: int, cpus: float, memory: float,
                now: float) -> list[Task]:
    """Submit and start `count` tasks of `user` at `now` (bypassing the order)."""
    pool = negotiator.pool
    tasks = []
    for _ in range(count):
        task = Task(f"{user}.{len(pool.tasks)}", user, now, cpus=cpus, memory=memory,
                    duration=1.0)
        negotiator.submit(task, now)
        pool.start(task, pool.nodes[0], now)
        tasks.append(task)
    return tasks


def test_commitments_follow_eq6_in_closed_form() -> None:
    delta = 0.999
    tau = -1.0 / math.log(delta)
    order = SdrfOrder(delta=delta, resources=CPU_MEMORY, weights={"A": 1, "B": 1})
    pool = one_node_pool(10, 10)
    negotiator = Negotiator(pool, order)
    seen_in_order(pool, "A", "B")
    # t = 0: A holds (0.8, 0.4) of (cpus, memory): obar = (0.3, 0), entitlement 1/2.
    tasks = start_tasks(negotiator, "A", 8, 1.0, 0.5, 0.0)
    user = pool.users["A"]
    t1, t2 = 700.0, 1900.0
    expected_t1 = (1 - math.exp(-t1 / tau)) * 0.3
    assert order.commitments(user, t1) == pytest.approx([expected_t1, 0.0], rel=1e-12)
    # t1: down to (0.4, 0.2): obar = 0, the commitment decays from c(t1).
    for task in tasks[:4]:
        pool.finish(task, t1)
    expected_t2 = math.exp(-(t2 - t1) / tau) * expected_t1
    assert order.commitments(user, t2) == pytest.approx([expected_t2, 0.0], rel=1e-12)
    # Eq. 5 priority: dominant share + dominant commitment.
    assert order.priority(user, t2) == pytest.approx(0.4 + expected_t2, rel=1e-12)


def test_algorithm_1_priority_is_max_of_share_plus_commitment() -> None:
    order = SdrfOrder(delta=0.999, resources=CPU_MEMORY, weights={"A": 1, "B": 1},
                      priority="alg1")
    pool = one_node_pool(10, 10)
    negotiator = Negotiator(pool, order)
    seen_in_order(pool, "A", "B")
    tasks = start_tasks(negotiator, "A", 8, 1.0, 0.5, 0.0)  # (0.8, 0.4), obar (0.3, 0)
    for task in tasks[:6]:
        pool.finish(task, 1e5)  # commitment (0.3, 0) by now; holds (0.2, 0.1)
    c = order.commitments(pool.users["A"], 1e5)[0]
    assert c == pytest.approx(0.3, rel=1e-6)
    assert order.priority(pool.users["A"], 1e5) == pytest.approx(max(0.2 + c, 0.1))


def decisions_of(order, phases) -> list[tuple[float, str]]:
    """Run the classic example, then finish each phase's users' tasks and negotiate again."""
    pool, negotiator = classic_example(order)
    made = [(0.0, task.id) for task in pool.tasks.values() if task.first_start is not None]
    for now, finishing in phases:
        for task in list(pool.tasks.values()):
            if task.user in finishing and task.node is not None:
                pool.finish(task, now)
        made += [(now, decision.task.id) for decision in negotiator.cycle(now)]
    return made


def test_with_tiny_delta_sdrf_allocates_like_drf() -> None:
    tiny = {"delta": 1e-12, "resources": CPU_MEMORY, "equal_shares": True}
    phases = [(100.0, {"B"}), (200.0, {"A"}), (300.0, {"A", "B"}), (400.0, {"B"})]
    drf = decisions_of(DrfOrder(resources=CPU_MEMORY), phases)
    assert decisions_of(SdrfOrder(**tiny), phases) == drf
    assert len(drf) > 10
    # tau = 0.036 s: 100 s later A's burst is forgotten to the last bit (e^-2763 = 0), so
    # the tie goes to A as in DRF (after 1 s, e^-27.6 > 0 would still put B first).
    assert served_after_a_burst(SdrfOrder(**tiny), pause=100.0) == served_after_a_burst(
        DrfOrder(), pause=100.0)


def served_after_a_burst(order, pause: float = 1.0) -> list[str]:
    """A alone holds the whole 4-cpu pool for 1000 s, twice its entitled half, while B is
    idle; `pause` seconds later both want 4 slots: who gets them, in order."""
    pool = one_node_pool(4, 0)
    negotiator = Negotiator(pool, order)
    seen_in_order(pool, "A", "B")
    for task in start_tasks(negotiator, "A", 4, 1.0, 0.0, 0.0):
        pool.finish(task, 1000.0)
    later = 1000.0 + pause
    submit_many(negotiator, "A", 4, 1, 0, now=later)
    submit_many(negotiator, "B", 4, 1, 0, now=later)
    return [decision.task.user for decision in negotiator.cycle(later)]


def test_idle_user_gets_ahead_of_one_that_used_more_than_its_share() -> None:
    # tau ~ 1000 s: A's cpu commitment is about (1 - 1/e) x 1/2 = 0.316 when both want slots,
    # so B goes first, and again while its share is below 0.316.
    sdrf = SdrfOrder(delta=0.999, resources=("cpus",), weights={"A": 1, "B": 1})
    assert served_after_a_burst(sdrf) == ["B", "B", "A", "B"]
    # DRF forgets: both hold nothing, and the tie goes to A, seen first.
    assert served_after_a_burst(DrfOrder(resources=("cpus",))) == ["A", "B", "A", "B"]


def test_why_names_share_commitment_and_margin() -> None:
    order = SdrfOrder(delta=0.999, resources=("cpus",), weights={"A": 1, "B": 1})
    pool = one_node_pool(4, 0)
    negotiator = Negotiator(pool, order)
    seen_in_order(pool, "A", "B")
    for task in start_tasks(negotiator, "A", 4, 1.0, 0.0, 0.0):
        pool.finish(task, 1000.0)
    submit_many(negotiator, "A", 1, 1, 0, now=1000.0)
    submit_many(negotiator, "B", 1, 1, 0, now=1000.0)
    decision = negotiator.cycle(1000.0)[0]
    assert decision.reason == (
        "free slot to B: least SDRF priority 0 (dominant share + dominant commitment; "
        "dominant share 0 of cpus, dominant commitment 0 on cpus), 0.3162 below the next, "
        "A (0.3162); fastest placement chose node (MFlops a cpu 1)")


def test_commitments_survive_export_and_import() -> None:
    def pool_with_history():
        order = SdrfOrder(delta=0.999, resources=CPU_MEMORY, weights={"A": 1, "B": 1})
        pool = one_node_pool(10, 10)
        negotiator = Negotiator(pool, order)
        seen_in_order(pool, "A", "B")
        return order, pool, negotiator

    order, pool, negotiator = pool_with_history()
    for task in start_tasks(negotiator, "A", 8, 1.0, 0.5, 0.0):
        pool.finish(task, 500.0)
    state = order.export_state(600.0)
    assert state["commitments"]["A"][0] > 0
    restored, restored_pool, _ = pool_with_history()
    restored.import_state(state)
    restored_pool.user("A")
    restored.user_changed(restored_pool.users["A"], 600.0)
    assert restored.commitments(restored_pool.users["A"], 900.0) == pytest.approx(
        order.commitments(pool.users["A"], 900.0), rel=1e-12)
    with pytest.raises(InputError, match="state is for policy 'condor'"):
        restored.import_state({**state, "policy": "condor"})
    with pytest.raises(InputError, match="commitments of user 'A' must be 2 finite numbers"):
        restored.import_state({**state, "commitments": {"A": [0.1]}})


@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -0.1])
def test_delta_outside_the_open_unit_interval_is_refused(delta) -> None:
    with pytest.raises(ConfigError, match=r"delta must be in \(0, 1\)"):
        SdrfOrder(delta=delta)


def test_unknown_priority_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown SDRF priority 'sum'"):
        SdrfOrder(priority="sum")


# ------------------------------------------------- the paper's experiment (section 7)
def users_mean_wait(tasks) -> float:
    """The paper's figure: the mean over users of each user's mean waiting time."""
    waits: dict[str, list[float]] = {}
    for task in tasks:
        waits.setdefault(task.user, []).append(task.first_start - task.submit_time)
    return sum(sum(w) / len(w) for w in waits.values()) / len(waits)


def test_on_the_google_sample_sdrf_waits_less_than_weighted_drf() -> None:
    path = shared_file("google/derived/tasks_parts00000-00001.csv.gz")
    scenario = trace_scenario(path, None, {"capacity_ratio": 0.9})
    sdrf, _ = run_scenario(scenario, policy="sdrf", policy_options={"delta": 0.9999})
    scenario = trace_scenario(path, None, {"capacity_ratio": 0.9})
    wdrf, _ = run_scenario(scenario, policy="wdrf")
    assert all(task.finish_time is not None for task in sdrf.tasks + wdrf.tasks)
    assert users_mean_wait(sdrf.tasks) < users_mean_wait(wdrf.tasks)


# ------------------------------------------------------ the 7-column task list
def write(tmp_path: Path, text: str, name: str = "tasks.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = "1000000,2000000,5000000,u1,7-0,0.5,0.25\n3000000,3000000,4000000,u2,8-0,0.25,0.5\n"


def test_task_list_pool_entitlements_and_tasks_out(tmp_path: Path) -> None:
    gzipped = tmp_path / "tasks.csv.gz"
    gzipped.write_bytes(gzip.compress(GOOD.encode()))
    scenario = trace_scenario(gzipped, None, {"capacity_ratio": 2.0})
    # Mean usage over [2 s, 5 s]: cpu (0.5 x 3 + 0.25 x 1) / 3, memory (0.25 x 3 + 0.5) / 3.
    (node,) = scenario.nodes
    assert node.cpus == pytest.approx(2 * 1.75 / 3)
    assert node.memory == pytest.approx(2 * 1.25 / 3)
    weights = scenario.policy_options["weights"]
    assert weights["u1"] == pytest.approx((1.5 / 1.75 + 0.75 / 1.25) / 2)
    assert [task.duration for task in scenario.tasks] == [3.0, 1.0]
    result, _ = run_scenario(scenario, policy="sdrf")
    out = tmp_path / "out.csv"
    write_tasks(scenario.task_writer, result.tasks, out)
    assert out.read_text() == ("1000000,1000000,4000000,u1,7-0,0.5,0.25\n"
                               "3000000,3000000,4000000,u2,8-0,0.25,0.5\n")
    equal = trace_scenario(write(tmp_path, GOOD), None,
                           {"equal_shares": True, "capacity_ratio": 2.0})
    assert equal.policy_options["weights"] == {"u1": 1.0, "u2": 1.0}


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"u1": 1, "ghost": 1}, "weights name users the task list does not have: 'ghost'"),
        ({"u1": -2}, "weight of user 'u1' is -2: weights must be >= 0"),
        ({"u1": 0, "u2": 0}, "every weight is zero"),
    ],
)
def test_configured_weights_are_checked_against_the_trace(tmp_path: Path, weights,
                                                          message) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        trace_scenario(write(tmp_path, GOOD), None, {"weights": weights, "capacity_ratio": 2})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1,2,3,u,t,0.5\n", "tasks.csv:1: expected 7 columns"),
        (GOOD + "4000000,x,5000000,u,9-0,0.1,0.1\n", "tasks.csv:3: column 2 (start_us) must "
                                                     "be a number"),
        ("5000000,4000000,6000000,u,t,0.1,0.1\n", "tasks.csv:1: times out of order"),
        ("nan,4000000,6000000,u,t,0.1,0.1\n", "tasks.csv:1: column 1 (submit_us) must be"),
        ("1,2,3,u,t,-0.1,0.1\n", "tasks.csv:1: column 6 (cpu) must be a number >= 0"),
        ("1,2,3,u,t,0.1,inf\n", "tasks.csv:1: column 7 (mem) must be a number >= 0"),
        ("1,2,inf,u,t,0.1,0.1\n", "tasks.csv:1: column 3 (finish_us) must be a number"),
        (GOOD + "2000000,2000000,6000000,u,t,0.1,0.1\n", "tasks.csv:3: submit 2000000 is "
                                                         "before the previous line's"),
    ],
)
def test_bad_task_lists_are_refused_naming_the_line(tmp_path: Path, text, message) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        trace_scenario(write(tmp_path, text), None, {})


def test_registry_composes_sdrf_with_owner_share_preemption() -> None:
    stages = build_stages(order="sdrf", preempt="hosep",
                          options={"delta": 0.5, "sdrf_priority": "alg1"})
    assert (stages.order.name, stages.preempt.name) == ("sdrf", "hosep")
    assert stages.order.delta == 0.5 and stages.order.priority_rule == "alg1"
    for policy in ("sdrf", "dmfa-srq", "condor", "drf", "wdrf"):
        assert build_stages(policy).order.name == policy


def test_a_node_joining_renormalises_shares_and_targets() -> None:
    order = SdrfOrder(delta=0.999, resources=("cpus",), equal_shares=True)
    pool = one_node_pool(4, 0)
    negotiator = Negotiator(pool, order)
    seen_in_order(pool, "A", "B")
    start_tasks(negotiator, "A", 4, 1.0, 0.0, 0.0)  # all 4 cpus: obar = 1 - 1/2
    submit_many(negotiator, "A", 1, 1, 0, now=0.0)
    user = pool.users["A"]
    assert order.key_figures(user, 0.0)["dominant_share"] == 1.0
    pool.add_node(Node("second", None, power=4.0, cpus=4.0))  # now 4 of 8: obar = 0
    order.user_changed(user, 100.0)
    assert order.key_figures(user, 100.0)["dominant_share"] == 0.5
    # The commitment grew towards 1/2 for 100 s, then decays towards 0 from there.
    tau = -1.0 / math.log(0.999)
    at_100 = 0.5 * (1 - math.exp(-100 / tau))
    assert order.commitments(user, 200.0)[0] == pytest.approx(at_100 * math.exp(-100 / tau))
