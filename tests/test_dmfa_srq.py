"""DMFA-SRQ: the paper's Fig. 1 example, and LP (4)'s optimum on random instances."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from test_drf import one_node_pool

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Task
from gridfair.errors import ConfigError
from gridfair.policies.dmfa_srq import DmfaSrq, DmfaSrqOrder


def test_fig1_three_users_arriving_in_turn() -> None:
    # d_1 = (1, 1/2), d_2 = d_3 = (1/2, 1), w = (1/4, 1/4, 1/2).
    allocation = DmfaSrq()
    allocation.arrive(0.25, (1.0, 0.5))
    assert allocation.allocations == pytest.approx([1 / 4])
    allocation.arrive(0.25, (0.5, 1.0))
    assert allocation.allocations == pytest.approx([1 / 3, 1 / 3])
    level = allocation.arrive(0.5, (0.5, 1.0))
    assert allocation.allocations == pytest.approx([1 / 3, 1 / 3, 1 / 2])
    assert level == pytest.approx(1.0)


def lp_optimum(weights, demands, previous) -> float:
    """LP (4) solved by scipy: variables x_1..x_k, M; maximise M."""
    k = len(weights)
    resources = len(demands[0])
    objective = [0.0] * k + [-1.0]
    rows, bounds = [], []
    for i in range(k):
        row = [0.0] * (k + 1)
        row[i], row[k] = -1.0, weights[i]  # M w_i - x_i <= 0
        rows.append(row)
        bounds.append(0.0)
    for j in range(resources):
        rows.append([demands[i][j] for i in range(k)] + [0.0])
        bounds.append(sum(weights))
    variable_bounds = [(x, None) for x in previous] + [(0.0, None), (0.0, None)]
    # HiGHS's default feasibility tolerance (1e-7) is the size of the differences checked.
    tight = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
    result = linprog(objective, A_ub=rows, b_ub=bounds, bounds=variable_bounds[:k + 1],
                     method="highs", options=tight)
    assert result.success, result.message
    return -result.fun


demand = st.lists(st.floats(0.01, 1.0), min_size=2, max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 1.0), demand), min_size=1, max_size=7),
       st.integers(2, 3))
def test_incremental_level_is_the_lp_optimum_at_every_arrival(users, resources) -> None:
    total = sum(weight for weight, _ in users)
    allocation = DmfaSrq()
    for weight, raw in users:
        raw = (raw * 3)[:resources]
        previous = list(allocation.allocations) + [0.0]
        level = allocation.arrive(weight / total, raw)
        optimum = lp_optimum(allocation.weights, allocation.demands, previous)
        assert level == pytest.approx(optimum, rel=1e-7, abs=1e-9)
        # Lemma 1's allocation is feasible for (4): monotone, fair, within the pool.
        for x, x_before, w in zip(allocation.allocations, previous, allocation.weights,
                                  strict=True):
            assert x >= x_before - 1e-12 and x >= level * w - 1e-12
        for j in range(resources):
            used = sum(x * d[j] for x, d in zip(allocation.allocations, allocation.demands,
                                                strict=True))
            assert used <= allocation.pool_share * (1 + 1e-9)


def test_bad_arrivals_are_refused() -> None:
    allocation = DmfaSrq()
    with pytest.raises(ConfigError, match="share must be a finite number >= 0"):
        allocation.arrive(-0.1, (1.0, 1.0))
    with pytest.raises(ConfigError, match="one of them > 0"):
        allocation.arrive(0.5, (0.0, 0.0))


def test_order_serves_the_user_furthest_below_its_target() -> None:
    # Weights 1:1 on a 4-cpu pool; A arrives first and takes everything, then B arrives.
    pool = one_node_pool(4, 0)
    negotiator = Negotiator(pool, DmfaSrqOrder(resources=("cpus",), weights={"A": 1, "B": 1}))
    for number in range(4):
        negotiator.submit(Task(f"A.{number}", "A", 0.0, duration=10), 0.0)
    negotiator.cycle(0.0)
    for number in range(4):
        negotiator.submit(Task(f"B.{number}", "B", 1.0, duration=10), 1.0)
        negotiator.submit(Task(f"A.{number + 4}", "A", 1.0, duration=10), 1.0)
    pool.finish(pool.tasks["A.0"], 2.0)
    decisions = negotiator.cycle(2.0)
    assert [decision.task.user for decision in decisions] == ["B"]
    assert "furthest below its DMFA-SRQ target, holding 0 of it" in decisions[0].reason
