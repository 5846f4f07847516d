"""Weighted DRF and SDRF as the papers print them (`paper`) and as the SDRF authors' simulator
computes them (`authors`), on hand-made pools where the two forms pick different users."""

from __future__ import annotations

import pytest
from test_drf import one_node_pool
from test_sdrf import seen_in_order, start_tasks

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Task
from gridfair.core.stages import OrderPolicy
from gridfair.errors import ConfigError
from gridfair.policies.drf import DrfOrder
from gridfair.policies.sdrf import SdrfOrder

CPU_MEMORY = ("cpus", "memory")
EQUAL = {"A": 1, "B": 1}


def served(order: OrderPolicy, cpus_in_pool: float, seen: tuple[str, str], running: dict[str, int],
           now: float, cpus: float) -> list[str]:
    """On one node of `cpus_in_pool` cpus and 10 mem, users known in the order `seen`, with
    `running` one-cpu tasks started at t = 0, both A and B submit one task of `cpus` cpus at
    `now`: the users whose task started."""
    negotiator = Negotiator(one_node_pool(cpus_in_pool, 10), order)
    seen_in_order(negotiator.pool, *seen)
    for user, count in running.items():
        start_tasks(negotiator, user, count, 1.0, 0.0, 0.0)
    for user in ("A", "B"):
        negotiator.submit(Task(f"{user}.new", user, now, cpus=cpus, memory=0.0, duration=1.0),
                          now)
    negotiator.cycle(now)
    return [user for user in ("A", "B")
            if negotiator.pool.tasks[f"{user}.new"].first_start == now]


# Weighted DRF on one node of (8 cpus, 10 mem). A runs 4 one-cpu tasks, B runs 3: shares of
# cpus A 4/8 = 0.5, B 3/8 = 0.375, no memory. One cpu is free; both want one more.
# paper (w_A = w_B = 1/2):        A 0.5 / 0.5 = 1,       B 0.375 / 0.5 = 0.75  -> B.
# authors (w_A = (.8, .2), w_B = (.2, .8)):
#                                 A max(0.5/.8, 0) = 0.625, B max(0.375/.2, 0) = 1.875 -> A.
@pytest.mark.parametrize("form, expected", [("paper", ["B"]), ("authors", ["A"])])
def test_per_resource_weights_change_weighted_drfs_choice(form, expected) -> None:
    order = DrfOrder(weighted=True, resources=CPU_MEMORY, weights=EQUAL, form=form,
                     resource_weights={"A": {"cpus": 0.8, "memory": 0.2},
                                       "B": {"cpus": 0.2, "memory": 0.8}})
    assert served(order, 8, ("A", "B"), {"A": 4, "B": 3}, 0.0, cpus=1.0) == expected


# SDRF on one node of (10 cpus, 10 mem), n = 2, delta = 1e-9 (tau = 0.05 s: by t = 100 every
# commitment has reached its target). B is seen first. At t = 0 A starts 6 one-cpu tasks and B
# one; at t = 100 both want a 3-cpu task, and 3 cpus are free, so one of them gets it (stop).
# paper (w_i = 1/2): share terms A 0.6, B 0.1; targets A max(0.6 - 0.5, 0) = 0.1, B 0;
#   priorities A 0.7, B 0.1 -> B.
# authors (e_A = (.8, .5), e_B = (.2, .5)): share terms, signed,
#   A max(0.6 - 0.8, 0 - 0.5) = -0.2, B max(0.1 - 0.2, 0 - 0.5) = -0.1;
#   targets max(share - e - 1/2, 0) = 0 for both; priorities A -0.2, B -0.1 -> A.
#   (A share term clipped at 0 would tie the two at 0, and B, seen first, would win: the sign
#   is what serves A.)
@pytest.mark.parametrize("form, expected", [("paper", ["B"]), ("authors", ["A"])])
def test_the_signed_share_term_changes_sdrfs_choice(form, expected) -> None:
    order = SdrfOrder(delta=1e-9, resources=CPU_MEMORY, weights=EQUAL, form=form,
                      resource_weights={"A": {"cpus": 0.8, "memory": 0.5},
                                        "B": {"cpus": 0.2, "memory": 0.5}})
    assert served(order, 10, ("B", "A"), {"A": 6, "B": 1}, 100.0, cpus=3.0) == expected


def test_an_unknown_form_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown form 'exact'"):
        SdrfOrder(form="exact")
    with pytest.raises(ConfigError, match="unknown form 'exact'"):
        DrfOrder(weighted=True, form="exact")
