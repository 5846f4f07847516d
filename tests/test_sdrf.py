"""SDRF: Eq. 6 commitments in closed form, DRF in the limit, memory of past use."""

from __future__ import annotations

import math

import pytest
from test_drf import classic_example, one_node_pool, submit_many

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Task
from gridfair.errors import ConfigError, InputError
from gridfair.policies.drf import DrfOrder
from gridfair.policies.sdrf import SdrfOrder

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
        "A (0.3162)")


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


def test_algorithm_1_stops_when_blocked_unless_backfilling() -> None:
    assert SdrfOrder().stop_when_blocked
    assert not SdrfOrder(backfill=True).stop_when_blocked
    with pytest.raises(ConfigError, match="unknown SDRF priority 'sum'"):
        SdrfOrder(priority="sum")
