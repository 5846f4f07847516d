"""HTCondor-style user priority: half-life decay, EUP order, pie shares, state."""

from __future__ import annotations

import pytest
from test_drf import one_node_pool, submit_many
from test_sdrf import seen_in_order, start_tasks

from gridfair.core.negotiator import Negotiator
from gridfair.errors import ConfigError
from gridfair.policies.condor_priority import CondorPriorityOrder

HALFLIFE = 3600.0


def test_real_priority_decays_with_the_half_life() -> None:
    order = CondorPriorityOrder(halflife=HALFLIFE)
    pool = one_node_pool(8, 0)
    negotiator = Negotiator(pool, order)
    tasks = start_tasks(negotiator, "A", 4, 1.0, 0.0, 0.0)
    user = pool.users["A"]
    # A new user starts at MinPriority 0.5; 4 cpus for one half-life:
    # RUP = beta RUP0 + (1 - beta) U with beta = 0.5 ^ (dt / halflife) = 1/2.
    assert order.real_priority(user, HALFLIFE) == pytest.approx(0.5 * 0.5 + 0.5 * 4)
    for task in tasks:
        pool.finish(task, HALFLIFE)
    # Then idle: halves every half-life, 2.25 -> 1.125 -> 0.5625 -> floor 0.5.
    assert order.real_priority(user, 2 * HALFLIFE) == pytest.approx(1.125)
    assert order.real_priority(user, 3 * HALFLIFE) == pytest.approx(0.5625)
    assert order.real_priority(user, 4 * HALFLIFE) == 0.5
    # EUP = RUP x factor (default 1000); a quarter half-life: beta = 2^-0.25.
    expected = 2.25 * 0.5 ** 1.25
    assert order.priority(user, 2.25 * HALFLIFE) == pytest.approx(1000 * expected)


def test_the_floor_applies_when_real_priority_is_committed() -> None:
    # Accountant.cpp floors RUP at MinPriority when it updates it, so a user idle long
    # enough to decay below 0.5 starts its next usage from 0.5, not from where it decayed.
    order = CondorPriorityOrder(halflife=HALFLIFE)
    pool = one_node_pool(8, 0)
    negotiator = Negotiator(pool, order)
    submit_many(negotiator, "A", 1, 1, 0, now=0.0)  # seen at 0, using nothing: RUP -> 0
    task = pool.tasks["A.0"]
    pool.start(task, pool.nodes[0], 10 * HALFLIFE)  # RUP would be 0.5 / 1024: floored, 0.5
    user = pool.users["A"]
    # One half-life on 1 cpu from the floor: RUP = 1 + (0.5 - 1) / 2.
    assert order.real_priority(user, 11 * HALFLIFE) == pytest.approx(0.75)
    assert order.priority(user, 11 * HALFLIFE) == pytest.approx(750.0)


def test_least_effective_priority_goes_first_and_the_pie_follows_1_over_eup() -> None:
    order = CondorPriorityOrder(halflife=HALFLIFE, factors={"C": 2000.0})
    pool = one_node_pool(8, 0)
    negotiator = Negotiator(pool, order)
    seen_in_order(pool, "A", "B", "C")
    for task in start_tasks(negotiator, "A", 6, 1.0, 0.0, 0.0):
        pool.finish(task, HALFLIFE)
    for name in "ABC":
        submit_many(negotiator, name, 1, 1, 0, now=HALFLIFE)
    # RUPs: A 0.25 + 3 = 3.25, B and C 0.5; EUPs: A 3250, B 500, C 1000.
    decisions = negotiator.cycle(HALFLIFE)
    assert [decision.task.user for decision in decisions] == ["B", "C", "A"]
    assert decisions[0].reason == (
        "free slot to B: least effective priority 500 (real priority 0.5 x factor 1000), "
        "500 below the next, C (1000); fastest placement chose node (MFlops a cpu 1)")
    for name in "ABC":
        submit_many(negotiator, name, 1, 1, 0, now=HALFLIFE)
    shares = order.pie_shares(HALFLIFE)
    assert shares["B"] / shares["C"] == pytest.approx(2.0)


def served_in_one_cycle(order, history: bool) -> dict[str, int]:
    """8 free slots, A and B with 8 jobs each; with `history`, B ran 6 cpus for a
    half-life first (RUP 3.25 against A's 0.5)."""
    pool = one_node_pool(8, 0)
    negotiator = Negotiator(pool, order)
    seen_in_order(pool, "A", "B")
    if history:
        for task in start_tasks(negotiator, "B", 6, 1.0, 0.0, 0.0):
            pool.finish(task, HALFLIFE)
    submit_many(negotiator, "A", 8, 1, 0, now=HALFLIFE)
    submit_many(negotiator, "B", 8, 1, 0, now=HALFLIFE)
    negotiator.cycle(HALFLIFE)
    return {name: user.running for name, user in pool.users.items()}


def test_pie_option_fills_slices_in_proportion_to_1_over_eup() -> None:
    # Equal EUPs: HTCondor's pie gives each half; EUP order alone lets A take all it can.
    assert served_in_one_cycle(CondorPriorityOrder(halflife=HALFLIFE), False) == \
        {"A": 8, "B": 0}
    assert served_in_one_cycle(CondorPriorityOrder(halflife=HALFLIFE, pie=True), False) == \
        {"A": 4, "B": 4}
    # EUPs 500 and 3250: slices 3250 : 500 of 8 slots, so about 7 : 1.
    assert served_in_one_cycle(CondorPriorityOrder(halflife=HALFLIFE, pie=True), True) == \
        {"A": 7, "B": 1}


def test_priorities_survive_export_and_import() -> None:
    order = CondorPriorityOrder(halflife=HALFLIFE)
    pool = one_node_pool(8, 0)
    negotiator = Negotiator(pool, order)
    for task in start_tasks(negotiator, "A", 4, 1.0, 0.0, 0.0):
        pool.finish(task, HALFLIFE)
    state = order.export_state(HALFLIFE)
    assert state["priorities"] == {"A": [pytest.approx(2.25)]}
    restored = CondorPriorityOrder(halflife=HALFLIFE)
    restored_pool = one_node_pool(8, 0)
    Negotiator(restored_pool, restored)
    restored.import_state(state)
    restored_pool.user("A")
    restored.user_changed(restored_pool.users["A"], HALFLIFE)
    assert restored.real_priority(restored_pool.users["A"], 2 * HALFLIFE) == pytest.approx(1.125)


@pytest.mark.parametrize("halflife", [0, -1.0, float("nan")])
def test_half_life_must_be_positive(halflife) -> None:
    with pytest.raises(ConfigError, match="PRIORITY_HALFLIFE must be a number > 0"):
        CondorPriorityOrder(halflife=halflife)
